#!/usr/bin/env python3
"""Repository checks that need no GPU (run by ctest, so by scripts/test.sh and CI).

  python3 scripts/check_repo.py links              every relative link in README.md and docs/ resolves
  python3 scripts/check_repo.py wording            no development-process wording in tracked files
  python3 scripts/check_repo.py includes           tools/ and bench/ include nothing from tests/; tests/ nothing from bench/;
                                                    tools/ nothing from src/ beyond TOOLS_INTERNAL
  python3 scripts/check_repo.py flags BUILD_DIR    every flag the docs name exists in the tool's --help

Each prints one line per finding and exits 1 if there is any, 0 otherwise.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THIS = os.path.relpath(os.path.abspath(__file__), ROOT)


def tracked_files():
    """Tracked files (git ls-files), or every file outside build folders without git."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True, capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
        if files:
            return [f for f in files if os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build")) and x != "__pycache__"]
        files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return files


def read_text(rel):
    try:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


def markdown_files():
    return [f for f in tracked_files() if f.endswith(".md")]


# ---------------------------------------------------------------- links ----
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def anchors_of(text):
    out = set()
    for line in text.splitlines():
        m = re.match(r"#+\s+(.*)", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


def check_links():
    bad = []
    for md in markdown_files():
        text = read_text(md)
        if text is None:
            continue
        in_code = False
        for n, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                continue
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"[a-z]+:", target) or target.startswith("mailto:"):
                    continue
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(ROOT, os.path.dirname(md), path)) if path else os.path.join(ROOT, md)
                if not os.path.exists(full):
                    bad.append(f"{md}:{n}: link to missing file '{target}'")
                elif anchor and full.endswith(".md"):
                    if anchor not in anchors_of(read_text(os.path.relpath(full, ROOT)) or ""):
                        bad.append(f"{md}:{n}: link to missing heading '{target}'")
    return bad


# -------------------------------------------------------------- wording ----
# Each pattern is written so that it does not match its own source text.
WORDING = [
    (re.compile(r"\bsess[i]ons?\b", re.I), "a work period ('session')"),
    (re.compile(r"\bv(?:1[1-9]|[2-9][0-9])\b"), "a version tag of an experiment (v11 ...)"),
    (re.compile(r"\bfin[a]l[0-9]+\b", re.I), "a step name (final3 ...)"),
    (re.compile(r"\biss[u]es?[ -]?#?[0-9]+", re.I), "an issue number"),
    (re.compile(r"\bag[e]nts?\b", re.I), "the tooling used to develop it"),
    (re.compile(r"\bhel[p]ers?\b", re.I), "the tooling used to develop it"),
    (re.compile(r"\bdevi[c]e tool\b", re.I), "the tooling used to develop it"),
    (re.compile(r"\bwork peri[o]ds?\b", re.I), "a work period"),
    (re.compile(r"\bREADY-FO[R]-GPU|GPU-PAC[K]-CHECK"), "a process note"),
    (re.compile(r"(?:REFEREN[C]E|KERNE[L]S|STY[L]E)\.md|/work/shar[e]d"), "a file outside the project"),
]
# Catch2's runner class is named Session; it is no work period.
ALLOWED = re.compile(r"Catch::Session")
NAME = re.compile(r"(?:^|[-_/])(?:s[0-9]+|v1[0-9]|v[2-9][0-9]|fin[a]l[0-9]*)(?:[-_.]|$)|20[0-9]{2}-[0-9]{2}-[0-9]{2}")
SKIP_TEXT = ("docs/results-data/", "tests/fuzz/corpus/")


def check_wording():
    bad = []
    for f in tracked_files():
        if NAME.search(os.path.basename(f)) or any(NAME.search(p) for p in f.split("/")[:-1]):
            bad.append(f"{f}: file name names a development step or date")
        if f == THIS or f.startswith(SKIP_TEXT):
            continue
        text = read_text(f)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            scrubbed = ALLOWED.sub("", line)
            for pat, what in WORDING:
                if pat.search(scrubbed):
                    bad.append(f"{f}:{n}: {what}: {line.strip()[:120]}")
    return bad


# ------------------------------------------------------------- includes ----
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def include_targets(rel, text, search_dirs):
    """Paths (relative to ROOT) that the file's quoted includes can resolve to."""
    out = []
    for inc in INCLUDE.findall(text):
        for base in [os.path.dirname(rel)] + search_dirs:
            cand = os.path.normpath(os.path.join(base, inc))
            if os.path.isfile(os.path.join(ROOT, cand)):
                out.append((inc, cand))
    return out


# The library's internal headers (src/) a tool may include, per file, where the
# public API (include/moejit) has no equivalent: none (the tools use only the
# public API). Any include of src/ from tools/ not listed here is a finding; an
# entry that is no longer used is one too.
TOOLS_INTERNAL: dict = {}


def check_tool_includes():
    bad = []
    search = ["include", "src", "tests", "bench", "tools", "."]
    used = {}
    for f in tracked_files():
        if not f.startswith("tools/") or not f.endswith((".cpp", ".hpp", ".h")):
            continue
        for inc, target in include_targets(f, read_text(f) or "", search):
            if not target.startswith("src/"):
                continue
            header = target[len("src/"):]
            used.setdefault(f, set()).add(header)
            if header not in TOOLS_INTERNAL.get(f, set()):
                bad.append(f"{f}: includes \"{inc}\" from src/ (tools use include/moejit and tools/common)")
    for f, headers in TOOLS_INTERNAL.items():
        for h in sorted(headers - used.get(f, set())):
            bad.append(f"scripts/check_repo.py: TOOLS_INTERNAL lists {h} for {f}, which no longer includes it")
    return bad


def check_includes():
    bad = check_tool_includes()
    rules = [("tools/", ("tests/",)), ("bench/", ("tests/",)), ("tests/", ("bench/",))]
    # Every include directory any target of the project could add.
    search = ["include", "src", "tests", "bench", "tools", "."]
    for f in tracked_files():
        if not f.endswith((".cpp", ".hpp", ".h", ".cuh")):
            continue
        for prefix, banned in rules:
            if not f.startswith(prefix):
                continue
            text = read_text(f) or ""
            for inc, target in include_targets(f, text, search):
                if target.startswith(banned) and not target.startswith(prefix):
                    bad.append(f"{f}: includes \"{inc}\" from {target.split('/')[0]}/")
    # And no include path into the banned trees in the CMake files of the higher layers.
    for cm, banned in (("tools/CMakeLists.txt", "tests"), ("bench/CMakeLists.txt", "tests"),
                       ("tests/CMakeLists.txt", "bench")):
        text = read_text(cm) or ""
        if re.search(r"\$\{(?:CMAKE|PROJECT)_SOURCE_DIR\}/" + banned + r"\b", text):
            bad.append(f"{cm}: adds {banned}/ to an include path")
    return bad


# ---------------------------------------------------------------- flags ----
TOOLS = ("moejit-prewarm", "moejit-cache", "moejit-run")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")


def tool_help(build, tool):
    exe = os.path.join(build, "tools", tool)
    if not os.path.exists(exe):
        return None
    texts = []
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    texts.append(r.stdout + r.stderr)
    # Subcommands (CLI11 lists them under SUBCOMMANDS:): their --help too.
    m = re.search(r"(?i)SUBCOMMANDS:\n((?:[ \t]+\S.*\n?)+)", texts[0])
    if m:
        for line in m.group(1).splitlines():
            sub = line.split()[0] if line.split() else ""
            if sub:
                r = subprocess.run([exe, sub, "--help"], capture_output=True, text=True, timeout=60)
                texts.append(r.stdout + r.stderr)
    return "\n".join(texts)


def documented_flags():
    """(file, line, tool, flag): flag tables under a heading naming a tool, and
    command lines of code blocks that start with a tool's name."""
    out = []
    for md in markdown_files():
        text = read_text(md) or ""
        section_tool = None
        in_code = False
        for n, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            h = re.match(r"#+\s+(.*)", line)
            if h and not in_code:
                named = [t for t in TOOLS if t in h.group(1)]
                section_tool = named[0] if named else None
                continue
            stripped = line.strip()
            cmd = next((t for t in TOOLS if re.match(r"(?:\S*/)?" + re.escape(t) + r"(?=\s|$)", stripped)), None)
            if cmd and (in_code or line.startswith("    ")):
                for fl in FLAG.findall(stripped.split("#")[0]):
                    out.append((md, n, cmd, fl))
            elif section_tool and stripped.startswith("| `-"):
                first_cell = stripped.split("|")[1]
                for fl in FLAG.findall(first_cell):
                    out.append((md, n, section_tool, fl))
    return out


def check_flags(build):
    bad = []
    helps = {}
    for md, n, tool, fl in documented_flags():
        if tool not in helps:
            helps[tool] = tool_help(build, tool)
        h = helps[tool]
        if h is None:
            if tool != "moejit-run":  # moejit-run is built only where the GPU suite is wanted
                bad.append(f"{md}:{n}: {tool} not built in {build}, cannot check {fl}")
            continue
        if not re.search(r"(?<![\w-])" + re.escape(fl) + r"(?![\w-])", h):
            bad.append(f"{md}:{n}: {tool} has no flag {fl} (not in its --help)")
    return bad


def main(argv):
    if len(argv) < 2 or argv[1] not in ("links", "wording", "includes", "flags"):
        print(__doc__, file=sys.stderr)
        return 2
    what = argv[1]
    if what == "flags":
        if len(argv) < 3:
            print("check_repo.py flags BUILD_DIR", file=sys.stderr)
            return 2
        bad = check_flags(argv[2])
    else:
        bad = {"links": check_links, "wording": check_wording, "includes": check_includes}[what]()
    for b in bad:
        print(b)
    print(f"check_repo.py {what}: {len(bad)} finding(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
