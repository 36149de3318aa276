#!/bin/sh
# Large catalogs (issue 31), measured as BENCHMARKS.md reports them: fetches the Berkeley Function
# Calling Leaderboard's data (the PyPI wheel bfcl-eval, with pip) and runs examples/catalog_bench.rs:
# recall of the first turn and of find_tools, first-turn bytes, index build time and size.
# Not part of `make test`: it downloads from PyPI. Usage: scripts/catalog_recall.sh [WORKDIR]
set -eu
work=${1:-/tmp/bfcl}
root=$(cd "$(dirname "$0")/.." && pwd)
pip=$root/.venv/bin/pip
[ -x "$pip" ] || pip=pip
mkdir -p "$work"
ls "$work"/bfcl_eval-*.whl >/dev/null 2>&1 || "$pip" download --no-deps -d "$work" bfcl-eval
wheel=$(ls "$work"/bfcl_eval-*.whl | tail -1)
rm -rf "$work/x" && mkdir -p "$work/x"
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$wheel" "$work/x"
echo "corpus: $(basename "$wheel")"
cd "$root"
cargo build --release --example catalog_bench
bench=target/release/examples/catalog_bench
$bench recall "$work/x/bfcl_eval/data"
$bench bytes
$bench build
$bench build "$work/x/bfcl_eval/data"
