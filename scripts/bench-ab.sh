#!/usr/bin/env bash
# Same-session A/B of two dynamic modules with ../shared/bench/run.sh, which takes one module per run:
# the two builds run alternately (pass 1: new then baseline, pass 2: baseline then new, ...), each a
# whole run.sh against the plain listener of its own run; then every KEY line, and per pass the
# new/baseline quotient of each ratio (1.0 = the same cost).
# usage: bench-ab.sh RUN_SH ENVOY NEW_SO BASELINE_SO PASSES OUT_DIR [run.sh options...]
set -euo pipefail
run_sh=$1 envoy=$2 new=$3 base=$4 passes=$5 out=$6
shift 6
mkdir -p "$out"
for p in $(seq 1 "$passes"); do
  order="new base"
  [ $((p % 2)) -eq 0 ] && order="base new"
  for which in $order; do
    so=$new
    [ "$which" = base ] && so=$base
    echo "== pass $p: $which ($so)"
    "$run_sh" --wasm "$so" --envoy "$envoy" --label "$which" --out "$out/$which-$p.json" "$@" | tee "$out/$which-$p.log"
  done
done
python3 - "$out" "$passes" <<'PY'
import json, sys
out, passes = sys.argv[1], int(sys.argv[2])
keys = ["cpu_ratio_c16", "lat_ratio_c1_p50", "thr_ratio_c16", "rss_mib", "cold_start_s"]
print("\n== A/B, same session (run.sh takes one module: the builds ran alternately)")
for p in range(1, passes + 1):
    k = {w: json.load(open(f"{out}/{w}-{p}.json"))["key"] for w in ("new", "base")}
    for w in ("new", "base"):
        print("KEY " + " ".join(f"{a}={b}" for a, b in k[w].items()))
    q = " ".join(f"{x}={k['new'][x] / k['base'][x]:.3f}" for x in keys if k["new"].get(x) and k["base"].get(x))
    print(f"AB pass={p} new/base: {q}")
PY
