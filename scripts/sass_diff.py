#!/usr/bin/env python3
"""Compare the SASS of the kernels two cache directories hold for the same keys.

    python3 scripts/sass_diff.py CACHE_A CACHE_B [--tool build/tools/moejit-cache] [--disasm nvdisasm]

For a change that must not alter the generated code (a generator, or the way
kernels are instantiated): prewarm the same plans with the builds without and
with it into two directories, then run this. Entries are matched by the key
each entry records (the first key that compiled it: prewarm both directories
from empty, with the same plans). Each matched pair is compared by its cubin's
disassembly (`nvdisasm -c`, or `cuobjdump -sass`), symbol names (the kernel's
mangled name, which carries its template arguments) left out:

  identical             the same instructions in the same order
  same but registers    the same instructions in the same order once register
                        names and operand-reuse flags are left out (ptxas
                        allocates from the PTX's virtual register numbers)
  same but order        the same multiset of instructions, registers left out
                        (operands, immediates and offsets compared)
  different             anything else

Keys found in only one directory are listed. Exit 0 when every key is in both
and none is "different", 1 otherwise, 2 on bad arguments or a tool failure.
Needs the CUDA toolkit's nvdisasm or cuobjdump (not moejit's dependencies).
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
LABEL = re.compile(r"\s*(\.L_x_\d+):")
SYMBOL = re.compile(r"_Z\w+")
REGISTER = re.compile(r"\b(U?R|U?P)(\d+|Z|T)\b")
REUSE = re.compile(r"\.reuse\b")
VERDICTS = ("identical", "same but registers", "same but order", "different")


class Failure(Exception):
    pass


def run(cmd):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise Failure(f"cannot run '{cmd[0]}'")
    except subprocess.CalledProcessError as e:
        raise Failure(f"'{' '.join(cmd)}' exited {e.returncode}: {(e.stderr or '').strip()}")


def entries(tool, cache):
    """key -> entry id of the directory's valid entries; a key recorded twice is an error."""
    out = {}
    for e in json.loads(run([tool, "ls", "--json", "--cache-dir", cache])):
        if not e.get("ok", False):
            continue
        if e["key"] in out:
            raise Failure(f"{cache}: entries {out[e['key']]} and {e['id']} record the same key {e['key']}")
        out[e["key"]] = e["id"]
    return out


def parse_sass(text):
    """The instructions (symbols as SYM) and labels of a disassembly, in order."""
    lines = []
    for line in text.splitlines():
        m = INSTRUCTION.match(line)
        if m:
            lines.append(" ".join(SYMBOL.sub("SYM", m.group(1)).split()))
        elif LABEL.match(line):
            lines.append(LABEL.match(line).group(1))
    return lines


def verdict(a, b):
    if a == b:
        return VERDICTS[0]
    ra = [REUSE.sub("", REGISTER.sub(r"\1", x)) for x in a]
    rb = [REUSE.sub("", REGISTER.sub(r"\1", x)) for x in b]
    if ra == rb:
        return VERDICTS[1]
    if collections.Counter(ra) == collections.Counter(rb):
        return VERDICTS[2]
    return VERDICTS[3]


def sass(tool, disasm, cache, entry_id, scratch):
    cubin = os.path.join(scratch, entry_id + ".cubin")
    run([tool, "cubin", entry_id, cubin, "--cache-dir", cache])
    cmd = [disasm, "-sass", cubin] if os.path.basename(disasm).startswith("cuobjdump") else [disasm, "-c", cubin]
    lines = parse_sass(run(cmd))
    if not any(not x.startswith(".L_x_") for x in lines):
        raise Failure(f"no instructions parsed from '{' '.join(cmd)}' (entry {entry_id} of {cache})")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache_a")
    ap.add_argument("cache_b")
    ap.add_argument("--tool", default=os.path.join(ROOT, "build", "tools", "moejit-cache"), help="moejit-cache binary")
    ap.add_argument("--disasm", default=shutil.which("nvdisasm") or shutil.which("cuobjdump") or "nvdisasm",
                    help="nvdisasm or cuobjdump")
    a = ap.parse_args()
    try:
        for what, path in (("--tool", a.tool), ("--disasm", a.disasm)):
            if not shutil.which(path) and not os.access(path, os.X_OK):
                raise Failure(f"{what} '{path}' is not an executable")
        ea, eb = entries(a.tool, a.cache_a), entries(a.tool, a.cache_b)
        keys = sorted(set(ea) & set(eb))
        only = [(a.cache_a, k) for k in sorted(set(ea) - set(eb))] + [(a.cache_b, k) for k in sorted(set(eb) - set(ea))]
        for cache, key in only:
            print(f"only in {cache}: {key}")
        print(f"valid entries: {len(ea)} in {a.cache_a}, {len(eb)} in {a.cache_b}; {len(keys)} keys in both")
        counts = collections.Counter()
        with tempfile.TemporaryDirectory() as scratch:
            for key in keys:
                v = verdict(sass(a.tool, a.disasm, a.cache_a, ea[key], scratch),
                            sass(a.tool, a.disasm, a.cache_b, eb[key], scratch))
                if v != VERDICTS[0]:
                    print(f"{v}: {ea[key]} {eb[key]} {key}")
                counts[v] += 1
    except Failure as e:
        print(f"sass_diff: error: {e}", file=sys.stderr)
        return 2
    print(", ".join(f"{counts[v]} {v}" for v in VERDICTS))
    return 1 if counts[VERDICTS[3]] or only else 0


if __name__ == "__main__":
    sys.exit(main())
