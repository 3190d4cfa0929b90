#!/usr/bin/env python3
"""Serving-trace replay of a gpt-oss-120b MoE layer stack on the GPU: compile stalls of
the Triton MoE backend (triton_kernels matmul_ogs) against moejit, on the same steps.

  serving_replay.py traces --out traces.json [--cells 1024/1024/64,...] [--steps 300]
      the per-step token counts of each cell (bench/serving/trace.py), one JSON file
  serving_replay.py run --out DIR [--quick] [--part single|tp|all] [--triton-path DIR] [--pack-dir DIR]
      every system in its own process(es) from a clean state, on the steps of traces.json;
      writes DIR/results.json, DIR/results.md, DIR/log.txt (and each process's JSON)
  serving_replay.py report --results DIR/results.json [--md FILE]
      the Markdown tables again from results.json
  serving_replay.py prewarm-ranks --work-dir DIR [--plan JSON] [--ranks 2]
      several processes prewarming one cache directory at once (no GPU needed)

Systems (bench/serving/systems.py): (a) triton_exact, (b) triton_bucketed (+ warmup over the
buckets), (c) moejit_cold, (d) moejit_sealed (prewarm + seal), (d') moejit_pack (AOT pack + seal).
A clean state: an empty TRITON_CACHE_DIR and moejit cache directory per process; the cold
systems start from a clean state for each cell (triton_exact: one process per cell;
moejit_cold: a fresh Runtime on an empty cache directory per cell), the warmed systems warm
up once per process and then replay every cell, as a server does.
TP (--part tp): the 8k/1k C=16 cell over 2 ranks (one process per GPU, NCCL, NVLink multicast
off), triton_exact against moejit_sealed (with the TP layer checked against the single-GPU
layer), plus the 2-rank concurrent prewarm of one cache against one rank alone;
--ranks-on-one-gpu puts both ranks on GPU 0 (gloo: NCCL refuses two ranks on one GPU).

Timing per step: L layers launched on the step's T tokens, then torch.cuda.synchronize();
wall clock. Stall, stall share, tokens/s, percentiles: bench/serving/stats.py.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from serving import stats, trace  # noqa: E402

QUICK = {"steps": 100, "layers": 12, "tp_steps": 100}
FULL = {"steps": 300, "layers": 36, "tp_steps": 300}
TP_CELL = trace.Cell(8192, 1024, 16)
SINGLE_ORDER = ("moejit_sealed", "triton_exact", "moejit_cold", "triton_bucketed", "moejit_pack")
# Multicast over NVLink stays off (it can take a shared host's GPUs out of service).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class Log:
    def __init__(self, path: Path) -> None:
        self.f = open(path, "a")
        self.t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        line = f"[serving_replay {time.monotonic() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd_traces(a) -> int:
    cells = [trace.Cell.parse(c) for c in a.cells.split(",")] if a.cells else list(trace.DEFAULT_CELLS)
    opts = trace.TraceOptions(max_num_tokens=a.max_num_tokens, max_steps=a.steps, seed=a.seed,
                              cold_start=a.cold_start)
    traces = [trace.make_trace(c, opts) for c in cells]
    trace.save(traces, a.out)
    for t in traces:
        print(f"{t.cell.name}: {len(t.tokens)} steps, {sum(t.tokens)} tokens, distinct T {len(set(t.tokens))}, "
              f"T in [{min(t.tokens)}, {max(t.tokens)}], {len(t.prompts)} prefills completed")
    return 0


def _env(base: dict, work: Path, triton_path: Optional[str]) -> dict:
    env = dict(base)
    env.update(SAFE_ENV)
    env["PYTHONUNBUFFERED"] = "1"
    paths = [str(HERE)] + ([triton_path] if triton_path else []) + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    tc = work / "triton-cache"
    tc.mkdir(parents=True, exist_ok=True)
    env["TRITON_CACHE_DIR"] = str(tc)  # empty: Triton compiles what it meets
    env["MOEJIT_CACHE_DIR"] = str(work / "moejit-default-cache")
    env.setdefault("MOEJIT_LOG_LEVEL", "warn")
    return env


def launch(log: Log, name: str, system: str, traces_path: Path, cells: List[str], work_root: Path,
           a, deadline: float, tp: int = 1, steps: int = 0, check_tp: bool = False) -> List[dict]:
    """Runs one system in its own process (tp processes for TP); returns their result dicts."""
    remaining = deadline - time.monotonic()
    if remaining < 20:
        log(f"skip {name}: {remaining:.0f} s of the budget left")
        return [{"system": system, "cell": ", ".join(cells) or "all", "tp": tp, "layers": a.layers,
                 "error": "skipped: time budget spent"}]
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work_root))
    out_dir = work_root / "processes"  # one JSON per process; results.json gathers them
    out_dir.mkdir(exist_ok=True)
    port = free_port()
    procs = []
    for rank in range(tp):
        out = out_dir / f"{name}{'-r' + str(rank) if tp > 1 else ''}.json"
        if out.exists():
            out.unlink()
        cmd = [sys.executable, "-m", "serving.worker", "--system", system, "--traces", str(traces_path),
               "--layers", str(a.layers), "--max-steps", str(steps or a.steps), "--reruns", str(a.reruns),
               "--max-num-tokens", str(a.max_num_tokens), "--work-dir", str(work), "--out", str(out)]
        if cells:
            cmd += ["--cells", ",".join(cells)]
        if system == "moejit_pack":
            cmd += ["--pack", str(Path(a.pack_dir) / f"gpt-oss-120b-tp{tp}-sm_90a.pack")]
        if check_tp:
            cmd += ["--check-tp"]
        # Each rank gets its own empty Triton cache (a compile is then counted on the rank that made it);
        # the moejit ranks share one cache directory (work), as the engine's processes do.
        env = _env(os.environ, work / (f"rank{rank}" if tp > 1 else "."), a.triton_path)
        if tp > 1:
            env.update({"RANK": str(rank), "WORLD_SIZE": str(tp), "LOCAL_RANK": str(rank),
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
            if a.ranks_on_one_gpu:
                cmd += ["--device-index", "0", "--backend", "gloo"]
        plog = work / f"process-r{rank}.log"
        with open(plog, "w") as lf:
            procs.append((rank, out, plog, subprocess.Popen(cmd, env=env, stdout=lf, stderr=subprocess.STDOUT,
                                                            text=True, cwd=str(HERE))))
    limit = min(a.process_timeout_s, remaining)
    log(f"start {name}: {system}, cells {cells or 'all'}, tp {tp}, limit {limit:.0f} s")
    t0 = time.monotonic()
    timed_out = False
    # Wait for all; when a rank fails or the limit passes, stop the others (a rank alone
    # would wait in its next collective).
    while any(p.poll() is None for _, _, _, p in procs):
        failed = any(p.poll() not in (None, 0) for _, _, _, p in procs)
        if failed or time.monotonic() - t0 > limit:
            timed_out = not failed
            for _, _, _, p in procs:
                if p.poll() is None:
                    p.kill()
            for _, _, _, p in procs:
                p.wait()
            break
        time.sleep(0.2)
    results = []
    for rank, out, plog, p in procs:
        rc = "timeout" if timed_out and p.returncode not in (0,) else p.returncode
        for line in plog.read_text(errors="replace").splitlines():
            print(f"  {name} r{rank}| {line}", flush=True)
            log.f.write(f"  {name} r{rank}| {line}\n")
        log.f.flush()
        res = {"system": system, "tp": tp, "rank": rank, "layers": a.layers}
        try:
            res = json.loads(out.read_text()) if out.exists() else res
        except ValueError as e:  # a rank killed while writing
            res["error"] = f"unreadable result {out.name}: {e}"
        res["cell"] = ", ".join(cells) or "all"
        res["process_name"] = name
        if rc != 0 and not res.get("error"):
            res["error"] = f"process exit {rc}" + (" (partial: the cells done are kept)" if res.get("cells") else "")
        results.append(res)
    log(f"end {name}: {time.monotonic() - t0:.1f} s, rc {[p.returncode for _, _, _, p in procs]}")
    return results


def rows_of(res: dict) -> List[dict]:
    """Table rows (one per cell) of one process's result."""
    rows = []
    for c in res.get("cells", []):
        rows.append({"system": res["system"], "cell": c["cell"], "layers": res.get("layers"), "tp": res.get("tp", 1),
                     "rank": res.get("rank"), "summary": c["summary"], "setup": res.get("setup")})
    if res.get("error"):
        rows.append({"system": res["system"], "cell": res.get("cell", "-"), "layers": res.get("layers"),
                     "tp": res.get("tp", 1), "rank": res.get("rank"), "error": res["error"]})
    return rows


def write_report(results: dict, out_dir: Path, md_path: Optional[Path] = None) -> str:
    rows = [r for res in results["processes"] for r in rows_of(res)]
    single = [r for r in rows if r.get("tp", 1) == 1]
    multi = [r for r in rows if r.get("tp", 1) > 1]
    md = [f"Command: `{results['command']}`", "",
          f"GPU: {results.get('gpu', '?')}; torch {results.get('torch', '?')}, triton {results.get('triton', '?')}, "
          f"moejit {results.get('moejit', '?')}.", "",
          "Trace: continuous batching with chunked prefill, max_num_tokens "
          f"{results['max_num_tokens']}, prompt lengths uniform in [0.8 ISL, ISL], steady-state start, "
          f"first {results['steps']} steps, seed {results['seed']}; per step L = {results['layers']} MoE layers "
          "(the same weights) launched and synchronized. Stall: a step's wall time minus the same step's time "
          "run again at once, for the steps that compiled or loaded a kernel. Stall share at L=36: the measured "
          "stall over the stall plus the steady time scaled to 36 layers. Padding: rows computed beyond T.", ""]
    if single:
        md.append(stats.markdown(single, f"gpt-oss-120b MoE layer stack, one GPU ({results.get('gpu', '?')})"))
    if multi:
        md.append(stats.markdown(multi, f"Tensor parallel 2 ({results.get('tp_mode', '2 GPUs')})"))
    for res in results["processes"]:
        chk = res.get("tp_check")
        if chk and chk.get("rows") and res.get("rank", 0) == 0:
            md.append("TP layer against the single-GPU layer (rank 0, relative error): " + ", ".join(
                f"T={r['T']}: {r['rel_err']:.2e}{'' if r['ok'] else ' FAILED'}" for r in chk["rows"]) + "\n")
    sealed = [res for res in results["processes"] if res.get("system") in ("moejit_sealed", "moejit_pack")
              and isinstance(res.get("info"), dict) and "misses_after_seal" in res["info"]]
    if sealed:
        md.append("moejit after seal, kernels requested that prewarm had not produced (misses after seal): " + ", ".join(
            f"{res['system']}{' r' + str(res['rank']) if res.get('tp', 1) > 1 else ''}: "
            f"{res['info']['misses_after_seal']}" for res in sealed) + "\n")
    pw = results.get("prewarm_ranks")
    if pw:
        s, t = pw["solo"], pw["together"]
        md.append(f"Prewarm of the TP2 plan ({t['distinct_kernels']} kernels, no GPU): one rank alone "
                  f"{s['wall_s']:.2f} s; 2 ranks on one cache at once {t['wall_s']:.2f} s, compiled per rank "
                  f"{[r['compiled'] for r in t['ranks']]} (sum {t['compiled_sum']}), disk hits "
                  f"{[r['disk_hits'] for r in t['ranks']]}: "
                  f"{'each kernel compiled once' if pw['each_kernel_compiled_once'] else 'NOT each kernel once'}.\n")
    text = "\n".join(md)
    (md_path or out_dir / "results.md").write_text(text)
    return text


def cmd_run(a) -> int:
    mode = QUICK if a.quick else FULL
    a.steps = a.steps or mode["steps"]
    a.layers = a.layers or mode["layers"]
    tp_steps = a.tp_steps or mode["tp_steps"]
    out_dir = Path(a.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "log.txt").write_text("")
    log = Log(out_dir / "log.txt")
    deadline = time.monotonic() + a.budget_s
    work_root = Path(tempfile.mkdtemp(prefix="moejit-serving-", dir=a.work_dir))
    if a.triton_path:
        a.triton_path = str(Path(a.triton_path).resolve())
    if a.pack_dir:
        a.pack_dir = str(Path(a.pack_dir).resolve())

    cells = [trace.Cell.parse(c) for c in a.cells.split(",")] if a.cells else list(trace.DEFAULT_CELLS)
    traces_path = Path(a.traces).resolve() if a.traces else out_dir / "traces.json"
    if not a.traces:
        opts = trace.TraceOptions(max_num_tokens=a.max_num_tokens, max_steps=max(a.steps, tp_steps), seed=a.seed)
        trace.save([trace.make_trace(c, opts) for c in cells + [TP_CELL]], traces_path)
    log(f"traces {traces_path}; steps {a.steps}, layers {a.layers}, budget {a.budget_s} s, part {a.part}")

    info = {}
    try:
        import moejit
        info["moejit"] = moejit.__version__
    except Exception as e:  # noqa: BLE001
        info["moejit"] = f"not importable: {e}"
    try:
        r = subprocess.run([sys.executable, "-c", "import torch, triton; print(torch.__version__); "
                            "print(triton.__version__); print(torch.cuda.get_device_name(0)); "
                            "print(torch.cuda.device_count())"], capture_output=True, text=True, timeout=120)
        v = r.stdout.split("\n")
        info.update({"torch": v[0], "triton": v[1], "gpu": v[2], "gpus": int(v[3])})
    except Exception as e:  # noqa: BLE001
        info["gpu"] = f"unknown ({e})"
    log(f"versions: {info}")

    results = {"command": " ".join(["bench/serving_replay.py"] + a.argv), "steps": a.steps, "layers": a.layers,
               "max_num_tokens": a.max_num_tokens, "seed": a.seed, "traces": str(traces_path), "processes": [],
               "tp_mode": "both ranks on GPU 0 (gloo all-reduce)" if a.ranks_on_one_gpu else "2 GPUs, NCCL", **info}
    systems = [s for s in SINGLE_ORDER if s in a.systems.split(",")]
    if "moejit_pack" in systems and not a.pack_dir:
        log("moejit_pack: no --pack-dir, skipped")
        systems.remove("moejit_pack")
    names = [c.name for c in cells]
    slugs = {c.name: c.slug for c in cells}

    def save():
        (out_dir / "results.json").write_text(json.dumps(results) + "\n")
        write_report(results, out_dir)

    if a.part in ("single", "all"):
        for s in systems:
            if s == "triton_exact":  # a clean state per cell: one process per cell
                for c in names:
                    results["processes"] += launch(log, f"{s}-{slugs[c]}", s, traces_path, [c], work_root, a,
                                                   deadline)
                    save()
            else:
                results["processes"] += launch(log, s, s, traces_path, names, work_root, a, deadline)
                save()
    if a.part in ("tp", "all"):
        if not a.ranks_on_one_gpu and info.get("gpus", 0) < 2:
            log(f"TP: {info.get('gpus', 0)} GPU(s) visible; use --ranks-on-one-gpu on a single-GPU machine")
        else:
            from serving import prewarm_ranks
            try:
                log("prewarm-ranks: the TP2 plan, one rank alone, then 2 ranks on one cache (compile only)")
                results["prewarm_ranks"] = prewarm_ranks.compare(
                    {"model": "gpt-oss-120b", "tp": 2, "max_num_tokens": a.max_num_tokens, "target": "sm_90a"},
                    Path(tempfile.mkdtemp(prefix="prewarm-ranks-", dir=work_root)), ranks=2)
                pw = results["prewarm_ranks"]
                log(f"prewarm-ranks: solo {pw['solo']['wall_s']:.2f} s, together {pw['together']['wall_s']:.2f} s, "
                    f"compiled {[r['compiled'] for r in pw['together']['ranks']]}")
            except Exception as e:  # noqa: BLE001
                results["prewarm_ranks_error"] = repr(e)
                log(f"prewarm-ranks failed: {e!r}")
            save()
            for s in [x for x in ("moejit_sealed", "triton_exact") if x in a.tp_systems.split(",")]:
                results["processes"] += launch(log, f"tp2-{s}", s, traces_path, [TP_CELL.name], work_root, a,
                                               deadline, tp=2, steps=tp_steps, check_tp=(s == "moejit_sealed"))
                save()
    save()
    if not a.keep_work:
        shutil.rmtree(work_root, ignore_errors=True)
    print((out_dir / "results.md").read_text())
    failed = [r for r in results["processes"] if r.get("error")]
    log(f"done: {len(results['processes'])} processes, {len(failed)} with errors; {out_dir}/results.md")
    return 0 if not failed else 1


def cmd_report(a) -> int:
    results = json.loads(Path(a.results).read_text())
    print(write_report(results, Path(a.results).parent, Path(a.md) if a.md else None))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("traces", help="write the cells' step token counts as JSON")
    t.add_argument("--out", required=True)
    t.add_argument("--cells", default="", help="ISL/OSL/C,... (default 1024/1024/64,1024/1024/4,8192/1024/64)")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--max-num-tokens", type=int, default=8192)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--cold-start", action="store_true")
    r = sub.add_parser("run", help="replay every system (GPU)")
    r.add_argument("--out", required=True, help="folder for results.json, results.md, log.txt")
    r.add_argument("--quick", action="store_true", help=f"{QUICK['steps']} steps, {QUICK['layers']} layers "
                   f"(default {FULL['steps']} steps, {FULL['layers']} layers)")
    r.add_argument("--part", choices=("single", "tp", "all"), default="single")
    r.add_argument("--traces", default="", help="replay these traces (default: generate into OUT/traces.json)")
    r.add_argument("--cells", default="")
    r.add_argument("--systems", default=",".join(SINGLE_ORDER))
    r.add_argument("--tp-systems", default="moejit_sealed,triton_exact")
    r.add_argument("--steps", type=int, default=0)
    r.add_argument("--tp-steps", type=int, default=0)
    r.add_argument("--layers", type=int, default=0)
    r.add_argument("--reruns", type=int, default=1)
    r.add_argument("--max-num-tokens", type=int, default=8192)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--triton-path", default="", help="folder holding triton_kernels/ (added to PYTHONPATH)")
    r.add_argument("--pack-dir", default="", help="folder with gpt-oss-120b-tp{1,2}-sm_90a.pack (moejit_pack)")
    r.add_argument("--ranks-on-one-gpu", action="store_true", help="TP: both ranks on GPU 0 (gloo)")
    r.add_argument("--budget-s", type=float, default=540, help="no new process after this many seconds")
    r.add_argument("--process-timeout-s", type=float, default=300)
    r.add_argument("--work-dir", default=None, help="where the temporary caches go (default: TMPDIR)")
    r.add_argument("--keep-work", action="store_true", help="keep the caches and per-process JSON files")
    p = sub.add_parser("report", help="the Markdown tables from results.json")
    p.add_argument("--results", required=True)
    p.add_argument("--md", default="")
    w = sub.add_parser("prewarm-ranks", help="several processes prewarming one cache at once", add_help=False)
    w.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    a.argv = argv
    if a.cmd == "traces":
        return cmd_traces(a)
    if a.cmd == "run":
        return cmd_run(a)
    if a.cmd == "report":
        return cmd_report(a)
    from serving import prewarm_ranks
    return prewarm_ranks.main(a.rest)


if __name__ == "__main__":
    sys.exit(main())
