"""How many src/ files one request goes through (issue 32: a newcomer follows one request).

Builds tests/host_layer.rs (debug) and runs its test `response_loop_on_a_host_that_holds_the_head`
(native mode, one OpenAPI tool, one tool call, then the answer) under callgrind, collecting only
inside `StreamRun` (the host layer's entry to the answer), and lists every src/ file with code that
ran, then the count. Needs valgrind. `make files-per-request`; docs/architecture.md has the list.

Usage: python3 scripts/files_per_request.py [ROOT]   (ROOT: the repository, default: this one)
"""

import collections
import os
import re
import subprocess
import sys
import tempfile

TEST = "response_loop_on_a_host_that_holds_the_head"


def test_binary(root):
    out = subprocess.run(
        ["cargo", "test", "--no-run", "--test", "host_layer"], cwd=root, capture_output=True, text=True, check=True
    )
    found = re.findall(r"\((target/debug/deps/host_layer-[0-9a-f]+)\)", out.stderr)
    if not found:
        sys.exit("files_per_request: no host_layer test binary in cargo's output:\n" + out.stderr)
    return os.path.join(root, found[-1])


def files_with_cost(callgrind_out, root):
    """The src/ files (relative to root) that callgrind saw code run in (cost on a line > 0; needs
    absolute positions, `--compress-pos=no`)."""
    names, cost = {}, collections.Counter()
    fl = fi = None
    skip = False
    with open(callgrind_out, errors="replace") as f:
        for line in f:
            if skip:  # the cost line after `calls=` is the callee's inclusive cost, not this file's
                skip = False
                continue
            m = re.match(r"(fl|fi|fe|fn|cfi|cfl|cob|ob|cfn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                kind, i, name = m.groups()
                if kind in ("fl", "fi", "fe", "cfi", "cfl"):
                    if name:
                        names[i] = name
                    if kind == "fl":
                        fl, fi = names.get(i), None
                    elif kind in ("fi", "fe"):
                        fi = names.get(i)
                continue
            if line.startswith("calls="):
                skip = True
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                file = fi or fl
                # Line 0 is code the compiler made (inlined generics, drop glue) with no line of
                # ours: a reader follows no file for it.
                if len(parts) >= 2 and file and parts[0] != "0" and parts[1].isdigit():
                    cost[file] += int(parts[1])
    src = os.path.join(root, "src") + "/"
    return sorted(f[len(root) + 1 :] for f, c in cost.items() if c > 0 and f.startswith(src))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    binary = test_binary(root)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--compress-pos=no",
             "--toggle-collect=*StreamRun*",
             binary, "--exact", TEST, "--test-threads", "1"],
            cwd=root, capture_output=True, check=True,
        )
        files = files_with_cost(out, root)
    for f in files:
        lines = sum(1 for _ in open(os.path.join(root, f)))
        print(f"{f} {lines}")
    print(f"{len(files)} files")


if __name__ == "__main__":
    main()
