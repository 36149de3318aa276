#!/usr/bin/env python3
"""Converts the cel-spec conformance cases (tests/simple/testdata/*.textproto of github.com/google/cel-spec)
that the call rules' CEL subset can run into tests/data/cel_conformance.json, once:

    python3 scripts/cel_conformance.py /path/to/cel-spec COMMIT > tests/data/cel_conformance.json

A case is kept when it needs no bindings, types, containers or extensions and expects a plain value
(int, uint, double, string, bool, null, or a list of them) or an evaluation error; the others are
counted per reason in `skipped`. tests/cel_conformance.rs runs the kept ones."""
import json
import os
import re
import sys

FILES = ["basic", "comparisons", "conversions", "fp_math", "integer_math", "lists", "logic", "macros",
         "parse", "plumbing", "string"]
TOKEN = re.compile(r'\s*(?:(#[^\n]*)|("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|([{}:\[\],])|([^\s{}:\[\],"\']+))')


def tokens(text):
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
        if m.group(1):
            continue
        yield m.group(2) or m.group(3) or m.group(4)


def unquote(s):
    # textproto strings: C escapes, octal and \x bytes; the bytes are UTF-8.
    body = s[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = body[i + 1]
        simple = {"n": 10, "t": 9, "r": 13, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8, "f": 12, "v": 11, "?": 63}
        if n in simple:
            out.append(simple[n]); i += 2
        elif n == "x":
            j = i + 2
            while j < len(body) and j < i + 4 and body[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(body[i + 2:j], 16)); i = j
        elif n in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1:j], 8)); i = j
        elif n in "uU":
            k = 4 if n == "u" else 8
            out += chr(int(body[i + 2:i + 2 + k], 16)).encode(); i += 2 + k
        else:
            raise ValueError(f"escape {n}")
    return out.decode("utf-8", errors="surrogateescape")


def parse_message(it):
    msg = {}
    for tok in it:
        if tok == "}":
            return msg
        key = tok
        nxt = next(it)
        if nxt == ":":
            nxt = next(it)
        if nxt == "{":
            val = parse_message(it)
        elif nxt == "[":
            val = []
            for t in it:
                if t == "]":
                    break
                if t == ",":
                    continue
                val.append(parse_message(it) if t == "{" else t)
        else:
            val = nxt
            # adjacent string literals concatenate
        msg.setdefault(key, []).append(val)
    return msg


def scalar(tok):
    if tok.startswith(('"', "'")):
        return unquote(tok)
    return tok


def value(v):
    """A plain expected value as JSON, or None when the subset's test cannot state it."""
    (k, [x]), = v.items() if len(v) == 1 else ((None, [None]),)
    if k == "int64_value":
        return {"int": int(x)}
    if k == "uint64_value":
        return {"uint": int(x)}
    if k == "double_value":
        f = float(scalar(x))
        special = "nan" if f != f else ("inf" if f > 0 else "-inf") if f in (float("inf"), float("-inf")) else None
        return {"double": special or f}
    if k == "string_value":
        return {"string": scalar(x)}
    if k == "bool_value":
        return {"bool": x == "true"}
    if k == "null_value":
        return {"null": True}
    if k == "list_value":
        items = [value(i) for i in (x.get("values", []) if isinstance(x, dict) else [])]
        return None if any(i is None for i in items) else {"list": items}
    return None


def main(root, commit):
    cases, skipped = [], {}
    skip = lambda why: skipped.__setitem__(why, skipped.get(why, 0) + 1)
    for name in FILES:
        with open(os.path.join(root, "tests/simple/testdata", name + ".textproto"), encoding="utf-8") as f:
            top = parse_message(iter(list(tokens(f.read())) + ["}"]))
        for section in top.get("section", []):
            sname = scalar(section["name"][0])
            for t in section.get("test", []):
                tname = scalar(t["name"][0])
                expr = "".join(scalar(e) for e in t["expr"])
                if any(k in t for k in ("bindings", "type_env", "container", "check_only", "typed_result")):
                    skip("bindings, types or containers"); continue
                if "eval_error" in t or "any_eval_errors" in t:
                    want = "error"
                elif "value" in t:
                    want = value(t["value"][0])
                    if want is None:
                        skip("expects bytes, a map, a type or a message"); continue
                else:
                    want = {"bool": True}
                cases.append({"file": name, "section": sname, "name": tname, "expr": expr, "want": want})
    json.dump({"source": f"github.com/google/cel-spec {commit} tests/simple/testdata", "files": FILES,
               "skipped": skipped, "cases": cases}, sys.stdout, indent=0, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
