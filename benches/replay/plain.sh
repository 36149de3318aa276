#!/bin/bash
# usage: plain.sh RUN_DIR SO_DIR -- Envoy CPU/it: agent 1 op, agent 200 ops, and plain replays of each's 3 exchanges
set -u
D=$1; SO=$2; PB=${PB:-2750}; H=$(dirname $0)
W=/tmp/e-plain; rm -rf $W; mkdir -p $W
sed "s/2740\([0-9]\)/${PB}\1/g" $D/envoy-many.json > $W/m.json
python3 $H/mkplain.py $W/m.json $W/envoy.json
B=/tmp/bench/target/release
E=${ENVOY_BIN:?the envoy binary (not the venv wrapper)}
setsid $B/fakeserver --listen 127.0.0.1:${PB}1 --syntax classic --marker OBS7F3A9 --tool-name get_weather --answer "It is sunny, 22C in Jinan." --max-seconds 600 </dev/null >$W/fake.log 2>&1 &
FP=$!
ENVOY_DYNAMIC_MODULES_SEARCH_PATH=$SO setsid $E -c $W/envoy.json --concurrency 1 -l warning --disable-hot-restart --base-id 7 </dev/null >$W/envoy.log 2>&1 &
EP=$!
sleep 1.5
$B/loadgen --target 127.0.0.1:${PB}0 --steps $D/steps-agent.json --once >/dev/null 2>&1; python3 $H/laststeps.py ${PB}1 $W/steps1.json
$B/loadgen --target 127.0.0.1:${PB}3 --steps $D/steps-agent.json --once >/dev/null 2>&1; python3 $H/laststeps.py ${PB}1 $W/steps200.json
run() { # name port steps
  $B/loadgen --target 127.0.0.1:$2 --steps $3 --concurrency 1 --warmup 1 --duration 1 >/dev/null 2>&1
  s0=$(awk '{print $14+$15}' /proc/$EP/stat)
  $B/loadgen --target 127.0.0.1:$2 --steps $3 --concurrency 1 --warmup 0 --duration ${DUR:-3} > $W/load-$1.txt 2>&1
  s1=$(awk '{print $14+$15}' /proc/$EP/stat)
  python3 - $W/load-$1.txt $((s1-s0)) $1 <<'PY'
import json,sys
t=open(sys.argv[1]).read(); j=json.loads(t[t.index('{'):])
m=j['scenarios']['main']; n=m['iterations']
print(f"{sys.argv[3]:>10}: iters {n} errors {m['errors']} p50 {m['latency_ms'].get('p50')} envoy us/it {int(sys.argv[2])*10000/max(n,1):.1f} others {m['cpu']['others_cores']}")
PY
}
for r in 1 2; do
run agent1 ${PB}0 $D/steps-agent.json
run plain1 ${PB}4 $W/steps1.json
run agent200 ${PB}3 $D/steps-agent.json
run plain200 ${PB}4 $W/steps200.json
done
kill $EP $FP
