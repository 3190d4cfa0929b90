"""Several processes (the ranks of one server) prewarm one cache directory at
the same moment, as engines start one process per GPU: with the cache's
cross-process single flight each distinct kernel is compiled once across the
ranks, the others read it from disk. No GPU needed (compile only) unless
load=True.

  run_ranks(plan_args, cache_dir, ranks=2)  -> {"ranks": [...], "wall_s", "compiled_sum", ...}
  run_solo(plan_args, cache_dir)            -> the same for one process alone (the baseline)

plan_args: {"model": "gpt-oss-120b", "tp": 2, "max_num_tokens": 8192, "target": "sm_90a"} or
{"shape": [D, I, E, top_k], "quant": "bf16", "max_num_tokens": 64, "target": "sm_90a"};
"jobs": compile threads per rank (0: all cores).
Each rank runs in its own interpreter (python -m serving.prewarm_ranks --child ...), imports
moejit and builds its plan, reports ready, and starts its prewarm when the parent says go.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

HERE = Path(__file__).resolve().parent


def make_plan(plan_args: dict):
    import moejit
    mnt = int(plan_args.get("max_num_tokens", 8192))
    target = plan_args.get("target", "sm_90a")
    if "shape" in plan_args:
        d, i, e, k = (int(v) for v in plan_args["shape"])
        shape = moejit.MoeLayerShape(hidden=d, intermediate=i, experts=e, top_k=k)
        return moejit.Plan([shape], [plan_args.get("quant", "bf16")], max_num_tokens=mnt, model_name="shape",
                           target=target)
    spec = moejit.embedded_model(plan_args.get("model", "gpt-oss-120b"))
    return moejit.plan(spec, max_num_tokens=mnt, quant=plan_args.get("quant"), tp=int(plan_args.get("tp", 1)),
                       target=target)


def _child(args: argparse.Namespace) -> int:
    import moejit
    plan_args = json.loads(args.plan)
    plan = make_plan(plan_args)
    rt = moejit.Runtime(cache_dir=args.cache_dir)
    print(json.dumps({"ready": True}), flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    t0 = time.perf_counter()
    rep = rt.prewarm(plan, jobs=int(plan_args.get("jobs", 0)), load_on_gpu=bool(plan_args.get("load", False)))
    wall = time.perf_counter() - t0
    print(json.dumps({"rank": args.rank, "pid": os.getpid(), "wall_s": wall, "keys": rep.keys,
                      "distinct_kernels": rep.distinct_kernels, "compiled": rep.compiled,
                      "disk_hits": rep.disk_hits, "failed": rep.failed,
                      "failures": [f"{f.kind} {f.key_text}: {f.message}" for f in rep.failures][:3],
                      "stats": rt.stats()}), flush=True)
    return 0 if rep.failed == 0 else 1


def run_ranks(plan_args: dict, cache_dir: "os.PathLike[str] | str", ranks: int = 2, env: Optional[dict] = None,
              timeout_s: float = 1800) -> dict:
    """Starts `ranks` processes on one cache directory, lets them prewarm at the same moment,
    and returns their reports, the wall time from go to the last one done, and the totals."""
    if ranks < 1:
        raise ValueError(f"ranks: must be >= 1, got {ranks}")
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = str(HERE.parent) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs: List[subprocess.Popen] = []
    try:
        for r in range(ranks):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "serving.prewarm_ranks", "--child", "--rank", str(r), "--cache-dir",
                 os.fspath(cache_dir), "--plan", json.dumps(plan_args)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        for p in procs:  # every rank has imported moejit and built its plan
            line = p.stdout.readline()
            if not line or not json.loads(line).get("ready"):
                raise RuntimeError(f"prewarm rank (pid {p.pid}) did not start: {p.stderr.read()[-2000:]}")
        t0 = time.perf_counter()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        reports = []
        for p in procs:
            out, err = p.communicate(timeout=timeout_s)
            wall_done = time.perf_counter() - t0
            lines = [ln for ln in out.splitlines() if ln.startswith("{")]
            if p.returncode not in (0, 1) or not lines:
                raise RuntimeError(f"prewarm rank (pid {p.pid}) exited {p.returncode}: {err[-2000:]}")
            rep = json.loads(lines[-1])
            rep["done_after_s"] = wall_done
            reports.append(rep)
        wall = time.perf_counter() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return {
        "ranks": reports, "wall_s": wall, "cache_dir": os.fspath(cache_dir),
        "distinct_kernels": reports[0]["distinct_kernels"],
        "compiled_sum": sum(r["compiled"] for r in reports),
        "disk_hits_sum": sum(r["disk_hits"] for r in reports),
        "failed_sum": sum(r["failed"] for r in reports),
    }


def run_solo(plan_args: dict, cache_dir: "os.PathLike[str] | str", env: Optional[dict] = None) -> dict:
    return run_ranks(plan_args, cache_dir, ranks=1, env=env)


def compare(plan_args: dict, work_dir: "os.PathLike[str] | str", ranks: int = 2) -> dict:
    """One rank alone on a fresh cache, then `ranks` ranks together on another fresh cache."""
    work = Path(work_dir)
    solo = run_solo(plan_args, work / "cache-solo")
    together = run_ranks(plan_args, work / "cache-shared", ranks=ranks)
    return {"plan": plan_args, "solo": solo, "together": together,
            "wall_ratio": together["wall_s"] / solo["wall_s"] if solo["wall_s"] > 0 else None,
            "each_kernel_compiled_once": together["compiled_sum"] == together["distinct_kernels"]
            and together["failed_sum"] == 0}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="prewarm one cache directory from several processes at once")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--plan", default='{"model": "gpt-oss-120b", "tp": 2, "max_num_tokens": 8192}',
                    help="plan as JSON (module docstring)")
    ap.add_argument("--cache-dir", help="(child) the shared cache directory")
    ap.add_argument("--work-dir", help="fresh folder for the two caches (solo, shared)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--json", help="write the comparison as JSON here")
    a = ap.parse_args(argv)
    if a.child:
        return _child(a)
    if not a.work_dir:
        ap.error("--work-dir is required")
    res = compare(json.loads(a.plan), a.work_dir, ranks=a.ranks)
    text = json.dumps(res, indent=1)
    if a.json:
        Path(a.json).write_text(text + "\n")
    s, t = res["solo"], res["together"]
    print(f"prewarm: one rank alone {s['wall_s']:.2f} s ({s['compiled_sum']} compiled); {a.ranks} ranks on one cache "
          f"{t['wall_s']:.2f} s, compiled per rank {[r['compiled'] for r in t['ranks']]}, disk hits "
          f"{[r['disk_hits'] for r in t['ranks']]}, {t['distinct_kernels']} distinct kernels: "
          f"{'each compiled once' if res['each_kernel_compiled_once'] else 'NOT each compiled once'}")
    return 0 if res["each_kernel_compiled_once"] else 1


if __name__ == "__main__":
    sys.exit(main())
