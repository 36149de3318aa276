#!/usr/bin/env python3
"""Instructions per agent request, counted by callgrind: not disturbed by other load on the machine.

For each module given, one Envoy (`--concurrency 1`) runs under `valgrind --tool=callgrind` with the
bench's configuration (`../shared/bench/bench.py`: listener A = the module, listener B = the same
routes without it, the Rust fake as LLM and tool). After a warm-up, the counters are zeroed, N agent
requests go through A (c=1), the counters are dumped; then N plain triples (the three exchanges one
agent request makes, captured at the fake) through B. It prints instructions per agent request, per
plain triple, their ratio, and the agent request's instructions by object (Envoy, the module, libc, ...).

usage: benches/instr.py [--requests N] [--envoy BIN] LABEL=path/to/libapi_agent.so ...
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("SHARED", os.path.join(HERE, "..", "..", "shared"))
sys.path.insert(0, os.path.join(SHARED, "bench"))
import bench  # noqa: E402  (the shared bench's configuration, steps and process helpers)

LOADGEN = "/tmp/bench/target/release/loadgen"
FAKE = "/tmp/bench/target/release/fakeserver"


def envoy_binary(given):
    """The Envoy executable itself (valgrind cannot follow the venv's Python wrapper)."""
    if given:
        return given
    found = glob.glob(os.path.join(HERE, "..", ".venv", "lib", "python3*", "site-packages", "envoy", "_bin", "envoy"))
    if not found:
        sys.exit("no Envoy binary: pass --envoy")
    return os.path.abspath(found[0])


def loadgen(port, steps, n):
    """n iterations of `steps` at c=1; fails on any error."""
    cmd = [LOADGEN, "--target", f"127.0.0.1:{port}", "--steps", steps, "--concurrency", "1", "--warmup", "0",
           "--duration", "600", "--max-iters", str(n), "--timeout-ms", "60000"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0 or not r.stdout.strip():
        raise RuntimeError(f"loadgen failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    out = json.loads(r.stdout[r.stdout.index("{"):])["scenarios"]["main"]
    if r.returncode != 0 or out["total_errors"] or out["total_iterations"] < n:
        raise RuntimeError(f"loadgen: {out['total_errors']} errors, {out['total_iterations']} of {n}: {r.stderr}")


def control(pid, *args):
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True, timeout=600)


def totals(path):
    """Total Ir of a dump, and Ir by object (self cost)."""
    names, by_obj, obj, total = {}, {}, "?", 0
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("ob="):
                m = re.match(r"ob=\((\d+)\)(?: (.*))?", line.strip())
                if m:
                    if m.group(2):
                        names[m.group(1)] = os.path.basename(m.group(2))
                    obj = names.get(m.group(1), "?")
                else:
                    obj = os.path.basename(line[3:].strip())
            elif line.startswith(("cob=", "cfi=", "cfn=", "calls=")):
                if line.startswith("cob="):
                    m = re.match(r"cob=\((\d+)\)(?: (.*))?", line.strip())
                    if m and m.group(2):
                        names[m.group(1)] = os.path.basename(m.group(2))
                if line.startswith("calls="):
                    next(f, None)  # the call's inclusive cost line: not self cost
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    by_obj[obj] = by_obj.get(obj, 0) + int(parts[1])
            elif line.startswith("summary:") or line.startswith("totals:"):
                total = int(line.split()[1])
    return total, by_obj


def measure(label, module, envoy, n, port_base, work):
    P = {"agent": port_base, "fake": port_base + 1, "base": port_base + 2, "admin": port_base + 9}
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = os.path.dirname(os.path.abspath(module))
    cfg = os.path.join(work, f"envoy-{label}.json")
    with open(cfg, "w") as f:
        json.dump(bench.envoy_config(P, [bench.listener("agent", P["agent"], os.path.abspath(module), 1),
                                         bench.listener("baseline", P["base"])]), f)
    fake = bench.start([FAKE, "--listen", f"127.0.0.1:{P['fake']}", "--syntax", "classic", "--marker", bench.MARKER,
                        "--tool-name", bench.TOOL_NAME, "--answer", bench.ANSWER, "--max-seconds", "7200"],
                       os.path.join(work, f"fake-{label}.log"))
    out = os.path.join(work, f"callgrind-{label}.out")
    envoy_p = bench.start(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", envoy, "-c", cfg,
                           "--concurrency", "1", "-l", "warning", "--disable-hot-restart"],
                          os.path.join(work, f"envoy-{label}.log"))
    try:
        steps_agent = os.path.join(work, "steps-agent.json")
        with open(steps_agent, "w") as f:
            json.dump([bench.agent_step()], f)
        if not (bench.wait_port(P["fake"], fake, 10) and bench.wait_port(P["agent"], envoy_p, 600)):
            raise RuntimeError(f"Envoy or the fake did not start: see {work}")
        loadgen(P["agent"], steps_agent, 1)
        last = bench.http_json(P["fake"], "/__last")
        steps_base = os.path.join(work, f"steps-baseline-{label}.json")
        with open(steps_base, "w") as f:
            json.dump(bench.baseline_steps(last), f)
        loadgen(P["agent"], steps_agent, max(20, n // 10))
        loadgen(P["base"], steps_base, max(20, n // 10))
        control(envoy_p.pid, "--zero")
        loadgen(P["agent"], steps_agent, n)
        control(envoy_p.pid, "--dump=agent")
        loadgen(P["base"], steps_base, n)
        control(envoy_p.pid, "--dump=plain")
    finally:
        bench.stop(envoy_p, 30)
        bench.stop(fake)
    dumps = sorted(glob.glob(out + ".*"), key=os.path.getmtime)
    agent_total, by_obj = totals(dumps[-2])
    plain_total, _ = totals(dumps[-1])
    return agent_total / n, plain_total / n, {k: v / n for k, v in by_obj.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="+", help="LABEL=path/to/libapi_agent.so")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--envoy", default=None)
    ap.add_argument("--port-base", type=int, default=27500)
    a = ap.parse_args()
    envoy = envoy_binary(a.envoy)
    work = tempfile.mkdtemp(prefix="instr-")
    print(f"{a.requests} requests each; work directory {work}", flush=True)
    rows = []
    for spec in a.modules:
        label, _, module = spec.partition("=")
        agent, plain, by_obj = measure(label, module, envoy, a.requests, a.port_base, work)
        top = sorted(by_obj.items(), key=lambda kv: -kv[1])[:5]
        objs = ", ".join(f"{k} {v:,.0f}" for k, v in top)
        rows.append((label, agent, plain))
        print(f"INSTR label={label} agent_ir={agent:,.0f} plain_ir={plain:,.0f} ratio={agent / plain:.4f}  [{objs}]",
              flush=True)
    if len(rows) > 1:
        ref = rows[0]
        for label, agent, _ in rows[1:]:
            print(f"  {label} / {ref[0]}: {agent / ref[1]:.4f} per agent request ({agent - ref[1]:+,.0f})")


if __name__ == "__main__":
    main()
