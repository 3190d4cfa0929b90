"""Markdown of serving replays from their results.json files (one per run or part of a run),
for the run's own results.md and for the results page (bench/report.py). No torch.

A results file (serving_replay.py run): {"format": "moejit-serving-results", "name", "part",
"command", "steps", "layers", "max_num_tokens", "seed", "gpu", "torch", "triton", "moejit",
"python", "mock", "processes": [one worker JSON each], "prewarm_ranks", "estimate", "preflight", "wall_s"}.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, List, Mapping, Sequence

from . import stats

FORMAT = "moejit-serving-results"


def load(path) -> dict:
    d = json.loads(Path(path).read_text())
    if d.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} file (format={d.get('format')!r})")
    return d


def rows_of(res: Mapping) -> List[dict]:
    """Table rows (one per cell) of one process's result, and one for its error."""
    rows = []
    for c in res.get("cells", []):
        rows.append({"system": res["system"], "cell": c["cell"], "layers": res.get("layers"), "tp": res.get("tp", 1),
                     "rank": res.get("rank"), "summary": c["summary"], "setup": res.get("setup")})
    if res.get("error"):
        rows.append({"system": res["system"], "cell": res.get("cell", "-"), "layers": res.get("layers"),
                     "tp": res.get("tp", 1), "rank": res.get("rank"), "error": res["error"]})
    return rows


def _order(rows: List[dict]) -> List[dict]:
    from .names import SYSTEMS
    cells: List[str] = []
    for r in rows:
        if r["cell"] not in cells:
            cells.append(r["cell"])
    return sorted(rows, key=lambda r: (cells.index(r["cell"]), SYSTEMS.index(r["system"]) if r["system"] in SYSTEMS
                                       else 99, r.get("rank") or 0))


def tables(runs: Sequence[Mapping], heading: str = "###") -> List[str]:
    """The tables of one or more runs (the parts of one measurement), merged."""
    procs = [p for run in runs for p in run["processes"]]
    rows = _order([r for p in procs for r in rows_of(p)])
    single = [r for r in rows if r.get("tp", 1) == 1]
    multi = [r for r in rows if r.get("tp", 1) > 1]
    gpu = next((r.get("gpu") for r in runs if r.get("gpu")), "?")
    md: List[str] = []
    if single:
        md.append(stats.markdown(single, f"gpt-oss-120b MoE layer stack, one GPU ({gpu})").replace("### ", heading + " ", 1))
    if multi:
        mode = next((r.get("tp_mode") for r in runs if r.get("tp_mode") and any(p.get("tp", 1) > 1 for p in r["processes"])),
                    "2 GPUs")
        md.append(stats.markdown(multi, f"Tensor parallel 2 ({mode})").replace("### ", heading + " ", 1))
    for res in procs:
        chk = res.get("tp_check")
        if chk and chk.get("rows") and res.get("rank", 0) == 0:
            md.append("TP layer against the single-GPU layer (rank 0, relative error): " + ", ".join(
                f"T={r['T']}: {r['rel_err']:.2e}{'' if r['ok'] else ' FAILED'}" for r in chk["rows"]) + "\n")
    sealed = [res for res in procs if res.get("system") in ("moejit_sealed", "moejit_pack")
              and isinstance(res.get("info"), dict) and "misses_after_seal" in res["info"]]
    if sealed:
        md.append("moejit after seal, kernels requested that prewarm had not produced (misses after seal): " + ", ".join(
            f"{res['system']}{' r' + str(res['rank']) if res.get('tp', 1) > 1 else ''}: "
            f"{res['info']['misses_after_seal']}" for res in sealed) + "\n")
    bad = [f"{res['system']} ({res.get('cell', '')}): {res['error'][:200]}" for res in procs if res.get("error")]
    if bad:
        md.append("Processes that failed: " + "; ".join(bad) + "\n")
    for run in runs:
        pw = run.get("prewarm_ranks")
        if pw:
            s, t = pw["solo"], pw["together"]
            md.append(f"Prewarm of the TP2 plan ({t['distinct_kernels']} kernels, no GPU): one rank alone "
                      f"{s['wall_s']:.2f} s; 2 ranks on one cache at once {t['wall_s']:.2f} s, compiled per rank "
                      f"{[r['compiled'] for r in t['ranks']]} (sum {t['compiled_sum']}), disk hits "
                      f"{[r['disk_hits'] for r in t['ranks']]}: "
                      f"{'each kernel compiled once' if pw['each_kernel_compiled_once'] else 'NOT each kernel once'}.\n")
    return md


def method(runs: Sequence[Mapping]) -> str:
    def values(k: str) -> str:
        return " / ".join(str(v) for v in sorted({r[k] for r in runs}))
    return ("Trace: continuous batching with chunked prefill, max_num_tokens "
            f"{values('max_num_tokens')}, prompt lengths uniform in [0.8 ISL, ISL], steady-state start, "
            f"first {values('steps')} steps, seed {values('seed')}; per step L = {values('layers')} MoE layers "
            "(one layer's weights for every layer) launched, then the GPU synchronized (wall clock). Stall: a "
            "step's wall time minus the same step's time run again at once, for the steps that compiled or loaded "
            "a kernel. Stall share at L=36: the measured stall over the stall plus the steady time scaled to 36 "
            "layers. Padding: rows computed beyond T. Each system runs in its own process from an empty Triton "
            "cache and an empty moejit cache directory. Every layer is launched eagerly from Python (no CUDA "
            "graph), so the steady step times include each system's host work per layer call: for triton_kernels "
            "matmul_ogs about 1-2 ms, most of its step time at small T; the kernels alone, replayed from CUDA "
            "graphs, are compared in the triton_kernels section above.")


def versions(run: Mapping) -> str:
    return (f"GPU: {run.get('gpu', '?')}; python {run.get('python', '?')}, torch {run.get('torch', '?')}, triton "
            f"{run.get('triton', '?')}, moejit {run.get('moejit', '?')}.")


def write(runs: Sequence[Mapping], md_path: Path) -> str:
    """results.md of a run (or of several parts)."""
    md: List[str] = []
    for run in runs:
        md.append(f"Command: `{run['command']}`" + (f" (part {run['part']})" if run.get("part") else "")
                  + (f", {run['wall_s']:.0f} s" if run.get("wall_s") else ""))
        md.append("")
    if any(r.get("mock") for r in runs):
        md += ["MOCK RUN (bench/serving/mock.py): no GPU, no torch; the times are not measurements.", ""]
    md += [versions(runs[0]), "", method(runs), ""]
    md += tables(runs)
    text = "\n".join(md)
    Path(md_path).write_text(text)
    return text


def page_section(paths: Iterable, data_dir_text: str = "docs/results-data/serving") -> List[str]:
    """The results page's section (bench/report.py) from the results files kept beside it."""
    runs = [load(p) for p in sorted(paths, key=str)]
    if not runs:
        return []
    L = ["## Serving-trace replay on the GPU: Triton matmul_ogs against moejit", ""]
    if any(r.get("mock") for r in runs):
        L += ["**Mock run (bench/serving/mock.py): no GPU; these times are not measurements.**", ""]
    L.append(f"From {len(runs)} call(s) of `bench/run-serving.sh` on one machine; the results files are in "
             f"{data_dir_text}/ ({', '.join(Path(str(p)).name for p in sorted(paths, key=str))}). " + versions(runs[0]))
    L.append("")
    L.append("Commands: " + "; ".join(f"`{r['command']}`" for r in runs) + ".")
    L.append("")
    L.append(method(runs))
    L.append("")
    L += tables(runs)
    return L
