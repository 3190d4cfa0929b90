"""One system's replay in one process (one rank of a tensor-parallel group):
  python -m serving.worker --system moejit_sealed --traces traces.json --out r.json [--cells ...]
Each step: the counters (kernels compiled / loaded), L layers launched on the step's T,
the GPU synchronized, the wall time; a step that compiled or loaded (on any rank) is run
again at once, and that time is its steady-state time (bench/serving/stats.py).
TP: RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in the environment (serving_replay.py sets them).
Writes one JSON file: every cell's step records, summaries, setup cost and versions; on a
failure the file holds the error and the process exits 1.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

from . import stats, trace


def _now() -> float:
    return time.perf_counter()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--system", required=True)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--cells", default="", help="comma-separated cell names (ISL/OSL/C); default all in the file")
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--max-steps", type=int, default=0, help="replay only the first N steps of each trace")
    ap.add_argument("--reruns", type=int, default=1, help="runs of a stalled step for its steady-state time (min)")
    ap.add_argument("--max-num-tokens", type=int, default=8192)
    ap.add_argument("--work-dir", required=True, help="fresh folder: moejit caches of this process")
    ap.add_argument("--pack", default="", help="AOT pack for moejit_pack")
    ap.add_argument("--backend", default="nccl", help="torch.distributed backend when WORLD_SIZE > 1")
    ap.add_argument("--device-index", type=int, default=-1, help="CUDA device (default: the rank)")
    ap.add_argument("--check-tp", action="store_true", help="TP: check the sharded layer against the full one")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    result = {"system": a.system, "tp": world, "rank": rank, "layers": a.layers, "pid": os.getpid(),
              "cells": [], "argv": sys.argv[1:]}
    t_start = _now()
    try:
        import torch
        dev_index = a.device_index if a.device_index >= 0 else rank
        torch.cuda.set_device(dev_index)
        device = torch.device("cuda", dev_index)
        torch.zeros(1, device=device)
        group = None
        if world > 1:
            import torch.distributed as dist
            kw = {"device_id": device} if a.backend == "nccl" else {}
            dist.init_process_group(a.backend, rank=rank, world_size=world, **kw)
            group = dist.group.WORLD
        result["env"] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(device), "device": dev_index,
                         "backend": a.backend if world > 1 else None,
                         "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
                         "TORCH_SYMM_MEM_DISABLE_MULTICAST": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST")}

        def barrier():
            if world > 1:
                import torch.distributed as dist
                dist.barrier()
                torch.cuda.synchronize(device)

        from . import systems
        traces = trace.select(trace.load(a.traces), [c for c in a.cells.split(",") if c])
        work = Path(a.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        max_rows = max(systems.buckets(a.max_num_tokens)[-1], a.max_num_tokens)
        t0 = _now()
        sysm = systems.make_system(a.system, a.layers, world, rank, device, group, cache_dir=work / "moejit-cache",
                                   pack=a.pack or None, max_num_tokens=a.max_num_tokens)
        shape = sysm.shape
        inputs = systems.Inputs(max_rows, shape.hidden, shape.experts, device)
        torch.cuda.synchronize(device)
        result["weights_s"] = _now() - t0
        result["shape"] = str(shape)

        setup = None
        if a.system in ("moejit_sealed", "moejit_pack"):
            setup = sysm.prewarm_and_seal(barrier)
            if a.check_tp and world > 1:
                result["tp_check"] = systems.check_tp(sysm, inputs)
            sysm.seal()
        elif a.system == "triton_bucketed":
            barrier()
            t0 = _now()
            setup = sysm.setup(a.max_num_tokens, inputs)
            setup["seconds"] = _now() - t0
        elif a.check_tp and world > 1 and a.system == "moejit_cold":
            result["tp_check"] = systems.check_tp(sysm, inputs)
        if setup is not None:
            setup["cells"] = ", ".join(t.cell.name for t in traces)
            setup["process"] = os.getpid()
            result["setup"] = setup
            print(f"[{a.system} r{rank}] setup: {setup}", flush=True)

        for tr in traces:
            steps = tr.tokens[:a.max_steps] if a.max_steps > 0 else tr.tokens
            sysm.new_cell(work / f"moejit-cache-{tr.cell.slug}")
            barrier()
            recs = []
            t_cell = _now()
            for i, T in enumerate(steps):
                c0, l0 = sysm.counters()
                t0 = _now()
                rows = sysm.step(inputs, T)
                torch.cuda.synchronize(device)
                wall = _now() - t0
                c1, l1 = sysm.counters()
                flag = [c1 - c0, l1 - l0]
                if world > 1:  # a compile on any rank stalls every rank (the all-reduce waits)
                    import torch.distributed as dist
                    f = torch.tensor(flag, dtype=torch.int64, device=device if a.backend == "nccl" else "cpu")
                    dist.all_reduce(f, op=dist.ReduceOp.MAX, group=group)
                    any_flag = f.tolist()
                else:
                    any_flag = flag
                rec = {"T": T, "padded_T": rows, "wall_s": wall, "compiles": flag[0], "loads": flag[1],
                       "steady_s": None}
                rec["first_call"] = any_flag[0] > 0 or any_flag[1] > 0
                if rec["first_call"]:
                    if world > 1:
                        rec["group_max"] = any_flag  # this rank may have waited for another rank's compile
                    best = None
                    for _ in range(max(1, a.reruns)):
                        barrier()
                        t0 = _now()
                        sysm.step(inputs, T)
                        torch.cuda.synchronize(device)
                        dt = _now() - t0
                        best = dt if best is None else min(best, dt)
                    rec["steady_s"] = best
                    barrier()
                recs.append(rec)
            summary = stats.summarize(recs)
            summary["replay_wall_s"] = _now() - t_cell
            cell_res = {"cell": tr.cell.name, "steps": recs, "summary": summary, "info": sysm.info()}
            result["cells"].append(cell_res)
            print(f"[{a.system} r{rank}] {tr.cell.name}: {summary['steps']} steps, wall {summary['total_wall_s']:.2f} s, "
                  f"stall {summary['stall_s']:.2f} s ({100 * summary['stall_share']:.1f} %), compiles "
                  f"{summary['compiles']} ({summary['compiles_after_first_step']} after step 1), p99 "
                  f"{1e3 * summary['step_p99_s']:.1f} ms", flush=True)
            Path(a.out).write_text(json.dumps(result) + "\n")  # partial results survive a later timeout
        result["info"] = sysm.info()
        result["process_s"] = _now() - t_start
        Path(a.out).write_text(json.dumps(result) + "\n")
        if world > 1:
            import torch.distributed as dist
            dist.destroy_process_group()
        return 0
    except Exception as e:  # the orchestrator reports the failure in the table and goes on
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()[-4000:]
        result["process_s"] = _now() - t_start
        Path(a.out).write_text(json.dumps(result) + "\n")
        print(result["traceback"], file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
