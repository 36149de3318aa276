#!/bin/bash
# which.sh RUN_DIR SO_DIR: prompt bytes the fake receives from one request on each listener of envoy-many.json
D=$1; SO=$2; PB=2760; W=/tmp/e-which; rm -rf $W; mkdir -p $W
sed "s/2740\([0-9]\)/${PB}\1/g" $D/envoy-many.json > $W/envoy.json
B=/tmp/bench/target/release; E=${ENVOY_BIN:?the envoy binary (not the venv wrapper)}
setsid $B/fakeserver --listen 127.0.0.1:${PB}1 --syntax classic --marker OBS7F3A9 --tool-name get_weather --answer "It is sunny, 22C in Jinan." --max-seconds 60 </dev/null >$W/fake.log 2>&1 & FP=$!
ENVOY_DYNAMIC_MODULES_SEARCH_PATH=$SO setsid $E -c $W/envoy.json --concurrency 1 -l warning --disable-hot-restart --base-id 9 </dev/null >$W/envoy.log 2>&1 & EP=$!
for i in $(seq 30); do curl -s -o /dev/null 127.0.0.1:${PB}0 && break; sleep 0.2; done
for p in 0 3 0; do $B/loadgen --target 127.0.0.1:${PB}$p --steps $D/steps-agent.json --once >/dev/null 2>&1
 echo "listener $p: prompt bytes $(curl -s 127.0.0.1:${PB}1/__last | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["llm_first"]["body"]))')"; done
kill $EP $FP
