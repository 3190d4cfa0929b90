#!/usr/bin/env python3
"""Compare the SASS of the kernels two cache directories hold for the same keys.

    python3 scripts/sass_diff.py CACHE_A CACHE_B [--tool build/tools/moejit-cache] [--disasm nvdisasm]

For a change that must not alter the generated code (in the generators, or
in how the kernels take their template arguments): prewarm the same plans
with the builds without and with it into two directories, then run this. Each key
found in both is compared by its cubin's disassembly (`nvdisasm -c`, or
`cuobjdump -sass`), with symbol names (the kernel's mangled name, which
carries its template arguments) and comments left out:

  identical         the same instructions in the same order
  same opcodes      the same multiset of opcodes, other registers or order
                    (ptxas allocates from the PTX's virtual register numbers)
  different         anything else

Exit 0 when no key is "different", 1 otherwise, 2 on bad arguments. Needs the
CUDA toolkit's nvdisasm or cuobjdump (not moejit's dependencies).
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

INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
LABEL = re.compile(r"\s*(\.L_x_\d+):")
SYMBOL = re.compile(r"_Z\w+")


def entries(tool, cache):
    out = subprocess.run([tool, "ls", "--json", "--cache-dir", cache], check=True, capture_output=True, text=True)
    return {e["key"]: e["id"] for e in json.loads(out.stdout) if e.get("ok", True)}


def sass(tool, disasm, cache, entry_id, scratch):
    cubin = os.path.join(scratch, entry_id + ".cubin")
    subprocess.run([tool, "cubin", entry_id, cubin, "--cache-dir", cache], check=True, capture_output=True)
    cmd = [disasm, "-c", cubin] if os.path.basename(disasm).startswith("nvdisasm") else [disasm, "-sass", cubin]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = []
    for line in text.splitlines():
        m = INSTRUCTION.match(line)
        if m:
            lines.append(SYMBOL.sub("SYM", m.group(1)))
        elif LABEL.match(line):
            lines.append(LABEL.match(line).group(1))
    return lines


def opcodes(lines):
    ops = collections.Counter()
    for line in lines:
        if line.startswith(".L_x_"):
            continue
        words = line.split()
        ops[words[1] if words[0].startswith("@") and len(words) > 1 else words[0]] += 1
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache_a")
    ap.add_argument("cache_b")
    ap.add_argument("--tool", default="build/tools/moejit-cache", help="moejit-cache binary")
    ap.add_argument("--disasm", default=shutil.which("nvdisasm") or shutil.which("cuobjdump") or "nvdisasm",
                    help="nvdisasm or cuobjdump")
    a = ap.parse_args()
    if not shutil.which(a.disasm) and not os.path.isfile(a.disasm):
        print(f"sass_diff: error: no disassembler '{a.disasm}' (--disasm: nvdisasm or cuobjdump)", file=sys.stderr)
        return 2
    ea, eb = entries(a.tool, a.cache_a), entries(a.tool, a.cache_b)
    keys = sorted(set(ea) & set(eb))
    print(f"{len(ea)} entries in {a.cache_a}, {len(eb)} in {a.cache_b}, {len(keys)} keys in both")
    verdicts = collections.Counter()
    seen = {}
    with tempfile.TemporaryDirectory() as scratch:
        for key in keys:
            pair = (ea[key], eb[key])
            if pair not in seen:  # many keys share one entry
                sa = sass(a.tool, a.disasm, a.cache_a, pair[0], scratch)
                sb = sass(a.tool, a.disasm, a.cache_b, pair[1], scratch)
                seen[pair] = ("identical" if sa == sb and sa else
                              "same opcodes" if opcodes(sa) == opcodes(sb) else "different")
                if seen[pair] != "identical":
                    print(f"{seen[pair]}: {pair[0]} {pair[1]} {key}")
            verdicts[seen[pair]] += 1
    kernels = collections.Counter(seen.values())
    print("kernels: " + ", ".join(f"{kernels[v]} {v}" for v in ("identical", "same opcodes", "different")))
    print("keys:    " + ", ".join(f"{verdicts[v]} {v}" for v in ("identical", "same opcodes", "different")))
    return 1 if verdicts["different"] else 0


if __name__ == "__main__":
    sys.exit(main())
