#!/usr/bin/env python3
"""Two dynamic modules in one Envoy, measured slice by slice: the same-process A/B, over several loads.

`make bench-dm BASELINE=...` runs the shared bench once per module, each in its own Envoy; between two
such runs the CPU ratio to the plain listener moved by up to 7% for the same module (BENCHMARKS.md),
more than the differences a change makes. Here both modules load into one Envoy (the bench's
configuration, routes and fake server; one listener per loaded copy), and the shared bench's load
client alternates between the listeners every `--slice` seconds, measuring Envoy's CPU per request in
each slice. Whatever the machine does meanwhile falls on both alike.

A module's place matters too: two byte-identical copies of one module, loaded side by side, read up
to 6% apart in one Envoy, and six listeners with one loaded file behind them all read up to ±3% apart
in a round, some of it the same from round to round (BENCHMARKS.md, "Where the code lands"). So each
module is loaded `--copies` times (each copy its own file, so its own load), its figure is the mean
over its copies, and the whole A/B runs in `--envoys` Envoy processes one after the other, each
loading everything afresh and turning which module holds which listener.

Per round: c=16 (Envoy on CPU 0, the fake and the client on the last CPU, as the bench pins them) for
Envoy CPU per request, then c=1 for the latency; the listeners' order turns every round. It prints
each round's new/base quotients, each Envoy's medians and the median over every round of every Envoy.

Further modules (`NAME=path.so`) join the same Envoys and are reported against BASE alike: one run
then compares several local variants (a feature switched off each) under the same conditions. A
`.wasm` in place of every `.so` gives the same A/B of the Proxy-Wasm build (`--copies 1` then: the
bench names every VM `agent`, and Envoy shares one VM between listeners with the same code).

usage: benches/ab_dm.py [--rounds N] [--copies K] [--envoys E] [--duration S] NEW.so BASE.so [NAME=X.so ...]
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
    """One sliced run over every listener; per listener (cpu ms per request, p50 ms, errors)."""
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
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=4 * (a.warmup + a.duration * len(order)) + 120,
                           preexec_fn=(lambda: os.sched_setaffinity(0, last)) if conc > 1 else None)
    finally:
        every = set(range(os.cpu_count()))
        bench.set_affinity(envoy_pid, every)
        bench.set_affinity(fake_pid, every)
    if r.returncode != 0:
        raise RuntimeError(f"loadgen failed: {r.stderr.strip()[-2000:]}")
    out = json.loads(r.stdout)["scenarios"]
    # Envoy's CPU seconds over the iterations, not loadgen's `ms_per_iter`: that one is rounded to
    # 0.001 ms, ~0.4% of a request here, as coarse as the differences measured.
    return {m: (1000 * out[m]["cpu"]["envoy"]["s"] / max(out[m]["iterations"], 1), out[m]["latency_ms"]["p50"],
                out[m]["errors"]) for m in order}


def copy_name(path, listener):
    """A loaded copy's file name: a dynamic module is found by its name (`lib<name>.so`); a .wasm by path."""
    return f"libapi_agent_{listener}.so" if path.endswith(".so") else f"api_agent_{listener}.wasm"


def per_module(run, modules, copies):
    """Each module's (cpu, p50): the mean over its copies."""
    return {m: tuple(statistics.mean(run[f"{m}{k}"][i] for k in range(copies)) for i in (0, 1)) for m in modules}


def one_envoy(a, e, steps, modules, rows):
    """Every round of one Envoy process; appends each module's (cpu, p50) quotients to `rows[module]`."""
    work = tempfile.mkdtemp(prefix=f"ab-dm-{e}-")
    # Listeners differ by a few percent even with one loaded file behind them all (BENCHMARKS.md): each
    # Envoy turns which module holds which listener, so no module keeps the same places.
    names = list(modules)
    names = names[e % len(names):] + names[:e % len(names)]
    listeners = [f"{m}{k}" for k in range(a.copies) for m in names]
    files = {}
    for m, path in modules.items():
        for k in range(a.copies):
            files[f"{m}{k}"] = os.path.join(work, copy_name(path, f"{m}{k}"))
            shutil.copy(path, files[f"{m}{k}"])
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = work
    base_port = a.port_base + 20 * e
    P = {name: base_port + i for i, name in enumerate(listeners)}
    P.update(fake=base_port + 18, admin=base_port + 19)
    cfg = os.path.join(work, "envoy.json")
    with open(cfg, "w") as f:
        json.dump(bench.envoy_config(P, [bench.listener(n, P[n], files[n], 1)
                                         for n in listeners]), f)
    fake = bench.start([os.path.join(BIN, "fakeserver"), "--listen", f"127.0.0.1:{P['fake']}", "--syntax", "classic",
                        "--marker", bench.MARKER, "--tool-name", bench.TOOL_NAME, "--answer", bench.ANSWER,
                        "--max-seconds", "7200"], os.path.join(work, "fake.log"))
    envoy = bench.start([a.envoy, "-c", cfg, "--concurrency", "1", "-l", "warning", "--disable-hot-restart"],
                        os.path.join(work, "envoy.log"))
    spinners = bench.start_spinners(os.cpu_count(), 3600, os.path.join(work, "spin.log"))
    mine = {m: [] for m in modules if m != "base"}
    try:
        if not all(bench.wait_port(P[n], envoy, 60) for n in listeners) or not bench.wait_port(P["fake"], fake, 10):
            raise RuntimeError(f"Envoy or the fake did not start: see {work}")
        for rnd in range(a.rounds):
            turn = rnd % len(listeners)
            order = listeners[turn:] + listeners[:turn]
            c16 = loadgen(steps, P, 16, a, envoy.pid, fake.pid, order)
            c1 = loadgen(steps, P, 1, a, envoy.pid, fake.pid, order)
            errors = sum(v[2] for v in (*c16.values(), *c1.values()))
            cpu16, lat1 = per_module(c16, modules, a.copies), per_module(c1, modules, a.copies)
            copies = " ".join(f"{n} {c16[n][0]:.4f}" for n in listeners)
            for m in mine:
                cpu = cpu16[m][0] / cpu16["base"][0]
                p50 = lat1[m][1] / lat1["base"][1]
                mine[m].append((cpu, p50))
                print(f"envoy {e + 1} round {rnd + 1}: cpu ms/request c=16 {m} {cpu16[m][0]:.4f} "
                      f"base {cpu16['base'][0]:.4f} -> {cpu:.3f}; p50 c=1 {m} {lat1[m][1]:.3f} "
                      f"base {lat1['base'][1]:.3f} -> {p50:.3f}", flush=True)
            print(f"envoy {e + 1} round {rnd + 1} copies: {copies}{f'  ERRORS {errors}' if errors else ''}", flush=True)
        for m, got in mine.items():
            print(f"envoy {e + 1} median {m}/base: cpu_c16={statistics.median(r[0] for r in got):.3f} "
                  f"p50_c1={statistics.median(r[1] for r in got):.3f}", flush=True)
            rows[m].extend(got)
    finally:
        for p in (envoy, fake, *spinners):
            bench.stop(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("new")
    ap.add_argument("base")
    ap.add_argument("more", nargs="*", metavar="NAME=X.so", help="further modules, each against BASE")
    ap.add_argument("--rounds", type=int, default=4, help="rounds per Envoy")
    ap.add_argument("--copies", type=int, default=2, help="loads of each module per Envoy")
    ap.add_argument("--envoys", type=int, default=2, help="Envoy processes, one after the other")
    ap.add_argument("--duration", type=float, default=16.0, help="measured seconds of each loaded copy per run")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--slice", type=float, default=1.0)
    ap.add_argument("--envoy", default=os.environ.get("ENVOY", "envoy"))
    ap.add_argument("--port-base", type=int, default=27600)
    a = ap.parse_args()
    modules = {"new": a.new, "base": a.base}
    for spec in a.more:
        name, _, path = spec.partition("=")
        if not name.isidentifier() or name in modules or not path:
            sys.exit(f"a further module is NAME=path.so with a new NAME of letters, digits and _: {spec!r}")
        modules[name] = path
    if not 1 <= a.copies <= 8 or a.envoys < 1 or a.rounds < 1 or a.copies * len(modules) > 16:
        sys.exit("--copies must be 1 to 8 (16 listeners at most), --envoys and --rounds at least 1")
    steps_dir = tempfile.mkdtemp(prefix="ab-dm-steps-")
    steps = os.path.join(steps_dir, "steps.json")
    with open(steps, "w") as f:
        json.dump([bench.agent_step()], f)
    for m, path in modules.items():
        print(f"{m} {path}")
    print(f"{a.envoys} Envoy(s) x {a.rounds} rounds, {a.copies} copies of each module", flush=True)
    rows = {m: [] for m in modules if m != "base"}
    for e in range(a.envoys):
        one_envoy(a, e, steps, modules, rows)
    for m, got in rows.items():
        cpu_m = statistics.median(r[0] for r in got)
        p50_m = statistics.median(r[1] for r in got)
        print(f"ABDM {m}/base median of {len(got)} rounds in {a.envoys} Envoy(s), {a.copies} copies each: "
              f"cpu_c16={cpu_m:.3f} p50_c1={p50_m:.3f} "
              f"(cpu range {min(r[0] for r in got):.3f}-{max(r[0] for r in got):.3f}, "
              f"p50 range {min(r[1] for r in got):.3f}-{max(r[1] for r in got):.3f})")


if __name__ == "__main__":
    main()
