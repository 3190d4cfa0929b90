"""One system's replay in one process (one rank of a tensor-parallel group):
  python -m serving.worker --system moejit_sealed --traces traces.json --out r.json [--cells ...]
Each step: the counters (kernels compiled / loaded), L layers launched on the step's T,
the GPU synchronized, the wall time; a step that compiled or loaded (on any rank) is run
again at once, and that time is its steady-state time (bench/serving/stats.py). After each
cell, one more layer call (not timed) checks that the output is finite.
TP: RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in the environment (serving_replay.py sets them).
--mock: the systems of bench/serving/mock.py (no torch, no GPU).
Writes one JSON file: every cell's steps (as columns), summaries, setup cost and versions,
rewritten after each cell (a later timeout keeps the cells done); on a failure the file holds
the error and the process exits 1. Progress lines go to stdout as 'stage: ...'.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, List, Sequence

from . import stats, trace


def _now() -> float:
    return time.perf_counter()


class TorchBackend:
    """CUDA device, synchronization and (TP) the process group."""

    def __init__(self, rank: int, world: int, device_index: int, backend: str) -> None:
        import torch
        self.torch = torch
        self.rank, self.world, self.backend = rank, world, backend
        dev_index = device_index if device_index >= 0 else rank
        torch.cuda.set_device(dev_index)
        self.device = torch.device("cuda", dev_index)
        torch.zeros(1, device=self.device)
        self.group = None
        if world > 1:
            import torch.distributed as dist
            kw = {"device_id": self.device} if backend == "nccl" else {}
            dist.init_process_group(backend, rank=rank, world_size=world, **kw)
            self.group = dist.group.WORLD
        free, total = torch.cuda.mem_get_info(self.device)
        self.env = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(self.device), "device": dev_index,
                    "backend": backend if world > 1 else None, "gpu_free_gb": round(free / 2**30, 1),
                    "gpu_total_gb": round(total / 2**30, 1),
                    "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
                    "TORCH_SYMM_MEM_DISABLE_MULTICAST": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST"),
                    "TRITON_CACHE_DIR": os.environ.get("TRITON_CACHE_DIR")}

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist
            dist.barrier()
            self.sync()

    def group_max(self, flag: List[int]) -> List[int]:
        """Elementwise max over the ranks (a compile on any rank stalls every rank)."""
        if self.world == 1:
            return flag
        import torch.distributed as dist
        f = self.torch.tensor(flag, dtype=self.torch.int64, device=self.device if self.backend == "nccl" else "cpu")
        dist.all_reduce(f, op=dist.ReduceOp.MAX, group=self.group)
        return f.tolist()

    def peak_gb(self) -> float:
        return round(self.torch.cuda.max_memory_allocated(self.device) / 2**30, 2)

    def make_system(self, a, cache_dir: Path):
        from . import systems
        return systems.make_system(a.system, a.layers, self.world, self.rank, self.device, self.group,
                                   cache_dir=cache_dir, pack=a.pack or None, max_num_tokens=a.max_num_tokens)

    def make_inputs(self, sysm, max_rows: int):
        from . import systems
        return systems.Inputs(max_rows, sysm.shape.hidden, sysm.shape.experts, self.device)

    def check_tp(self, sysm, inputs):
        from . import systems
        return systems.check_tp(sysm, inputs)

    def close(self) -> None:
        if self.world > 1:
            import torch.distributed as dist
            dist.destroy_process_group()


class MockBackend:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.env = {"mock": True, "gpu": "mock (no GPU)", "TRITON_CACHE_DIR": os.environ.get("TRITON_CACHE_DIR")}

    def sync(self) -> None:
        pass

    def barrier(self) -> None:
        pass

    def group_max(self, flag: List[int]) -> List[int]:
        return flag

    def peak_gb(self) -> float:
        return 0.0

    def make_system(self, a, cache_dir: Path):
        from . import mock
        return mock.make_system(a.system, a.layers, self.world, self.rank, a.max_num_tokens, a.pack or None)

    def make_inputs(self, sysm, max_rows: int):
        from . import mock
        return mock.MockInputs(max_rows)

    def check_tp(self, sysm, inputs):
        return {}

    def close(self) -> None:
        pass


def replay(sysm, inputs, steps: Sequence[int], sync: Callable[[], None], barrier: Callable[[], None],
           group_max: Callable[[List[int]], List[int]], reruns: int = 1, tp: int = 1) -> List[dict]:
    """The timed steps of one cell: one record per step (bench/serving/stats.py)."""
    recs = []
    for T in steps:
        c0, l0 = sysm.counters()
        t0 = _now()
        rows = sysm.step(inputs, T)
        sync()
        wall = _now() - t0
        c1, l1 = sysm.counters()
        flag = [c1 - c0, l1 - l0]
        any_flag = group_max(flag)
        rec = {"T": T, "padded_T": rows, "wall_s": wall, "compiles": flag[0], "loads": flag[1], "steady_s": None,
               "first_call": any_flag[0] > 0 or any_flag[1] > 0}
        if rec["first_call"]:
            if tp > 1:
                rec["group_max"] = any_flag  # this rank may have waited for another rank's compile
            best = None
            for _ in range(max(1, reruns)):
                barrier()
                t0 = _now()
                sysm.step(inputs, T)
                sync()
                dt = _now() - t0
                best = dt if best is None else min(best, dt)
            rec["steady_s"] = best
            barrier()
        recs.append(rec)
    return recs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--system", required=True)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--cells", default="", help="comma-separated cell names (ISL/OSL/C); default all in the file")
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--max-steps", type=int, default=0, help="replay only the first N steps of each trace")
    ap.add_argument("--reruns", type=int, default=1, help="runs of a stalled step for its steady-state time (min)")
    ap.add_argument("--max-num-tokens", type=int, default=8192)
    ap.add_argument("--warmup", choices=("all", "trace"), default="all",
                    help="triton_bucketed: warm every bucket <= max-num-tokens, or only those the steps use")
    ap.add_argument("--work-dir", required=True, help="fresh folder: moejit caches of this process")
    ap.add_argument("--pack", default="", help="AOT pack for moejit_pack")
    ap.add_argument("--backend", default="nccl", help="torch.distributed backend when WORLD_SIZE > 1")
    ap.add_argument("--device-index", type=int, default=-1, help="CUDA device (default: the rank)")
    ap.add_argument("--check-tp", action="store_true", help="TP: check the sharded layer against the full one")
    ap.add_argument("--mock", action="store_true", help="the mock systems (no torch, no GPU)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    result = {"system": a.system, "tp": world, "rank": rank, "layers": a.layers, "pid": os.getpid(),
              "mock": a.mock, "cells": [], "argv": sys.argv[1:], "stage": "start"}
    t_start = _now()
    tag = f"[{a.system} r{rank}]"

    def stage(name: str, detail: str = "") -> None:
        result["stage"] = name
        print(f"{tag} stage: {name}{' ' + detail if detail else ''} ({_now() - t_start:.1f} s)", flush=True)

    def write() -> None:
        tmp = Path(a.out + ".tmp")
        tmp.write_text(json.dumps(result) + "\n")
        tmp.replace(a.out)

    be = None
    try:
        be = MockBackend(rank, world) if a.mock else TorchBackend(rank, world, a.device_index, a.backend)
        result["env"] = be.env
        stage("device", json.dumps(be.env))
        traces = trace.select(trace.load(a.traces), [c for c in a.cells.split(",") if c])
        work = Path(a.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        from .estimate import bucket_set
        max_rows = max(bucket_set(a.max_num_tokens)[-1], a.max_num_tokens)
        t0 = _now()
        sysm = be.make_system(a, work / "moejit-cache")
        inputs = be.make_inputs(sysm, max_rows)
        be.sync()
        result["weights_s"] = _now() - t0
        result["shape"] = str(sysm.shape)
        stage("weights", f"{result['weights_s']:.1f} s, peak {be.peak_gb()} GB allocated")

        replayed = [tr.tokens[:a.max_steps] if a.max_steps > 0 else tr.tokens for tr in traces]
        setup = None
        if a.system in ("moejit_sealed", "moejit_pack"):
            setup = sysm.prewarm_and_seal(be.barrier)
            if a.check_tp and world > 1:
                result["tp_check"] = be.check_tp(sysm, inputs)
            sysm.seal()
        elif a.system == "triton_bucketed":
            be.barrier()
            t0 = _now()
            warm = None if a.warmup == "all" else sorted({sysm.rows(T) for steps in replayed for T in steps})
            setup = sysm.setup(a.max_num_tokens, inputs, warm)
            setup["seconds"] = _now() - t0
        elif a.check_tp and world > 1 and a.system == "moejit_cold":
            result["tp_check"] = be.check_tp(sysm, inputs)
        if setup is not None:
            setup["cells"] = ", ".join(t.cell.name for t in traces)
            setup["process"] = os.getpid()
            result["setup"] = setup
            stage("setup", json.dumps(setup))
        if a.mock:
            from . import mock
            mock.maybe_fail(a.system)

        for tr, steps in zip(traces, replayed):
            sysm.new_cell(work / f"moejit-cache-{tr.cell.slug}")
            be.barrier()
            t_cell = _now()
            recs = replay(sysm, inputs, steps, be.sync, be.barrier, be.group_max, a.reruns, world)
            summary = stats.summarize(recs)
            summary["replay_wall_s"] = _now() - t_cell
            finite = sysm.check_output(inputs, steps[-1])
            be.sync()
            cell_res = {"cell": tr.cell.name, "steps": stats.to_columns(recs), "summary": summary,
                        "finite": finite, "info": sysm.info()}
            result["cells"].append(cell_res)
            write()  # partial results survive a later timeout
            stage(f"cell {tr.cell.name}", f"{summary['steps']} steps, wall {summary['total_wall_s']:.2f} s, stall "
                  f"{summary['stall_s']:.2f} s ({100 * summary['stall_share']:.1f} %), compiles {summary['compiles']} "
                  f"({summary['compiles_after_first_step']} after step 1), p99 {1e3 * summary['step_p99_s']:.1f} ms, "
                  f"output {'finite' if finite else 'NOT FINITE'}")
            if not finite:
                raise RuntimeError(f"{tr.cell.name}: the layer output has non-finite values")
        result["info"] = sysm.info()
        result["peak_gb"] = be.peak_gb()
        result["process_s"] = _now() - t_start
        stage("done", f"{result['process_s']:.1f} s")
        write()
        be.close()
        return 0
    except Exception as e:  # the orchestrator reports the failure in the table and goes on
        result["error"] = f"{type(e).__name__}: {e} (at stage {result['stage']})"
        result["traceback"] = traceback.format_exc()[-4000:]
        result["process_s"] = _now() - t_start
        write()
        print(result["traceback"], file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
