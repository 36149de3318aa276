#!/usr/bin/env python3
"""Two dynamic modules in ONE Envoy, measured slice by slice: the same-process A/B.

`make bench-dm BASELINE=...` runs the shared bench once per module, each in its own Envoy; between two
such runs the CPU ratio to the plain listener moved by up to 7% for the same module (BENCHMARKS.md),
more than the differences a change makes. Here both modules load into one Envoy (`libapi_agent_new.so`
and `libapi_agent_base.so`, one listener each, the bench's configuration, routes and fake server), and
the shared bench's load client alternates between the two listeners every `--slice` seconds, measuring
Envoy's CPU per request in each slice. Whatever the machine does meanwhile falls on both alike.

Per round: c=16 (Envoy on CPU 0, the fake and the client on the last CPU, as the bench pins them) for
Envoy CPU per request, then c=1 for the latency; the order of the two modules flips every round. It
prints each round's new/base quotients and their medians.

usage: benches/ab_dm.py [--rounds N] [--duration S] NEW.so BASE.so
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("SHARED", os.path.join(HERE, "..", "..", "shared"))
sys.path.insert(0, os.path.join(SHARED, "bench"))
import bench  # noqa: E402  (the shared bench's configuration, steps and process helpers)

BIN = "/tmp/bench/target/release"


def loadgen(steps, ports, conc, a, envoy_pid, fake_pid, order):
    """One sliced run over both listeners; per module (cpu ms per request, p50 ms, errors)."""
    cmd = [os.path.join(BIN, "loadgen"), "--concurrency", str(conc), "--warmup", str(a.warmup),
           "--duration", str(a.duration), "--slice", str(a.slice), "--timeout-ms", "20000",
           "--cpu-pid", f"envoy={envoy_pid}", "--cpu-pid", f"fake={fake_pid}"]
    for name in order:
        cmd += ["--scenario", f"{name}=127.0.0.1:{ports[name]}={steps}"]
    last = {os.cpu_count() - 1}
    if conc > 1:
        bench.set_affinity(envoy_pid, {0})
        bench.set_affinity(fake_pid, last)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=4 * (a.warmup + a.duration) + 120,
                           preexec_fn=(lambda: os.sched_setaffinity(0, last)) if conc > 1 else None)
    finally:
        every = set(range(os.cpu_count()))
        bench.set_affinity(envoy_pid, every)
        bench.set_affinity(fake_pid, every)
    if r.returncode != 0:
        raise RuntimeError(f"loadgen failed: {r.stderr.strip()[-2000:]}")
    out = json.loads(r.stdout)["scenarios"]
    return {m: (out[m]["cpu"]["envoy"]["ms_per_iter"], out[m]["latency_ms"]["p50"], out[m]["errors"]) for m in order}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("new")
    ap.add_argument("base")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=float, default=8.0, help="measured seconds per run (both modules)")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--slice", type=float, default=1.0)
    ap.add_argument("--envoy", default=os.environ.get("ENVOY", "envoy"))
    ap.add_argument("--port-base", type=int, default=27600)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ab-dm-")
    for name, src in (("new", a.new), ("base", a.base)):
        shutil.copy(src, os.path.join(work, f"libapi_agent_{name}.so"))
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = work
    P = {"new": a.port_base, "base": a.port_base + 1, "fake": a.port_base + 2, "admin": a.port_base + 9}
    cfg = os.path.join(work, "envoy.json")
    with open(cfg, "w") as f:
        json.dump(bench.envoy_config(P, [bench.listener(m, P[m], os.path.join(work, f"libapi_agent_{m}.so"), 1)
                                         for m in ("new", "base")]), f)
    steps = os.path.join(work, "steps.json")
    with open(steps, "w") as f:
        json.dump([bench.agent_step()], f)
    print(f"new {a.new}\nbase {a.base}\none Envoy, {a.rounds} rounds; work directory {work}", flush=True)
    fake = bench.start([os.path.join(BIN, "fakeserver"), "--listen", f"127.0.0.1:{P['fake']}", "--syntax", "classic",
                        "--marker", bench.MARKER, "--tool-name", bench.TOOL_NAME, "--answer", bench.ANSWER,
                        "--max-seconds", "7200"], os.path.join(work, "fake.log"))
    envoy = bench.start([a.envoy, "-c", cfg, "--concurrency", "1", "-l", "warning", "--disable-hot-restart"],
                        os.path.join(work, "envoy.log"))
    spinners = bench.start_spinners(os.cpu_count(), 3600, os.path.join(work, "spin.log"))
    try:
        if not all(bench.wait_port(P[m], envoy, 60) for m in ("new", "base")) or not bench.wait_port(P["fake"], fake, 10):
            raise RuntimeError(f"Envoy or the fake did not start: see {work}")
        rows = []
        for rnd in range(a.rounds):
            order = ("new", "base") if rnd % 2 == 0 else ("base", "new")
            c16 = loadgen(steps, P, 16, a, envoy.pid, fake.pid, order)
            c1 = loadgen(steps, P, 1, a, envoy.pid, fake.pid, order)
            errors = sum(v[2] for v in (*c16.values(), *c1.values()))
            cpu = c16["new"][0] / c16["base"][0]
            p50 = c1["new"][1] / c1["base"][1]
            rows.append((cpu, p50))
            print(f"round {rnd + 1}: cpu ms/request c=16 new {c16['new'][0]:.4f} base {c16['base'][0]:.4f} "
                  f"-> {cpu:.3f}; p50 c=1 new {c1['new'][1]:.3f} base {c1['base'][1]:.3f} -> {p50:.3f}"
                  f"{f'  ERRORS {errors}' if errors else ''}", flush=True)
        cpu_m = statistics.median(r[0] for r in rows)
        p50_m = statistics.median(r[1] for r in rows)
        print(f"ABDM new/base median of {len(rows)} rounds: cpu_c16={cpu_m:.3f} p50_c1={p50_m:.3f} "
              f"(cpu range {min(r[0] for r in rows):.3f}-{max(r[0] for r in rows):.3f}, "
              f"p50 range {min(r[1] for r in rows):.3f}-{max(r[1] for r in rows):.3f})")
    finally:
        for p in (envoy, fake, *spinners):
            bench.stop(p)


if __name__ == "__main__":
    main()
