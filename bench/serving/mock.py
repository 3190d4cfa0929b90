"""Stand-ins for the replayed systems that need no torch and no GPU, so that the whole replay
(orchestrator, worker processes, timing loop, stall detection, results, report) runs on any
machine: serving_replay.py run --mock. Not a measurement: each mock sleeps a thousandth of
the layer time of bench/serving/estimate.py, and a new specialization (triton_exact: a new T;
the others: a new bucket) sleeps STALL_S and counts as compiled, except where the system
warmed up (triton_bucketed: its warmup buckets; moejit_sealed / moejit_pack: prewarm).
MOEJIT_SERVING_MOCK_FAIL=system makes that system raise after its setup (a failing process);
MOEJIT_SERVING_MOCK_HANG=system makes it sleep there for an hour (a process past its limit).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List, Optional, Tuple

from . import estimate

STALL_S = 0.03
SCALE = 1e-3
KERNELS = 3  # kernels a new moejit bucket compiles (route+gate_up, down, combine)


class MockInputs:
    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows


class MockSystem:
    def __init__(self, name: str, layers: int, tp: int, rank: int, max_num_tokens: int = 8192,
                 pack: Optional[str] = None) -> None:
        self.name, self.layers, self.tp, self.rank = name, layers, tp, rank
        self.max_num_tokens = max_num_tokens
        self.pack = pack
        self.pads = name == "triton_bucketed"
        self.compiled = self.loaded = 0
        self.seen = set()
        self.sealed = False
        self.misses_after_seal = 0
        self.shape = f"mock gpt-oss-120b layer ({name})"

    def rows(self, T: int) -> int:
        return estimate._round_up(T) if self.pads else T

    def _key(self, T: int) -> int:
        return T if self.name == "triton_exact" else estimate._round_up(T)

    def _meet(self, T: int) -> None:
        k = self._key(T)
        if k in self.seen:
            return
        self.seen.add(k)
        n = 1 if self.name.startswith("triton") else KERNELS
        if self.sealed:
            self.misses_after_seal += n
        time.sleep(STALL_S)
        self.compiled += n
        self.loaded += 0 if self.name.startswith("triton") else n

    def counters(self) -> Tuple[int, int]:
        return self.compiled, self.loaded

    def step(self, inputs: MockInputs, T: int) -> int:
        n = self.rows(T)
        self._meet(n)
        time.sleep(self.layers * estimate.layer_s(self.name, n)[0] * SCALE)
        return n

    def check_output(self, inputs: MockInputs, T: int) -> bool:
        return True

    def setup(self, max_num_tokens: int, inputs: MockInputs, buckets_to_warm: Optional[List[int]] = None) -> dict:
        bs = buckets_to_warm if buckets_to_warm is not None else estimate.bucket_set(max_num_tokens)
        c0 = self.compiled
        for b in bs:
            self._meet(b)
        return {"what": f"one layer call at each of {len(bs)} buckets (mock)", "compiled": self.compiled - c0,
                "loaded": 0, "buckets": len(bs)}

    def prewarm_and_seal(self, group_barrier=None) -> dict:
        t0 = time.perf_counter()
        bs = estimate.bucket_set(self.max_num_tokens)
        for b in bs:
            self.seen.add(self._key(b))
        n = 4 * KERNELS
        if not self.pack:
            time.sleep(STALL_S)
        self.compiled += 0 if self.pack else n
        self.loaded += n
        return {"seconds": time.perf_counter() - t0, "compiled": 0 if self.pack else n, "loaded": n,
                "distinct_kernels": n, "keys": 4 * len(bs), "pack_hits": n if self.pack else 0, "disk_hits": 0,
                "what": "prewarm (mock)" + (f" from the AOT pack {os.path.basename(self.pack)}" if self.pack else "")}

    def seal(self) -> None:
        self.sealed = True

    def new_cell(self, work_dir: Path) -> None:
        if self.name == "moejit_cold":
            self.seen = set()

    def info(self) -> dict:
        d = {"mock": True}
        if self.name.startswith("moejit"):
            d.update({"sealed": self.sealed, "misses_after_seal": self.misses_after_seal, "pack": self.pack,
                      "stats": {"compiles": self.compiled, "module_loads": self.loaded,
                                "pack_hits": 4 * KERNELS if self.pack else 0}})
        return d


def make_system(name: str, layers: int, tp: int, rank: int, max_num_tokens: int = 8192,
                pack: Optional[str] = None) -> MockSystem:
    from .names import SYSTEMS
    if name not in SYSTEMS:
        raise ValueError(f"system: expected one of {', '.join(SYSTEMS)}, got {name!r}")
    if name == "moejit_pack" and not pack:
        raise ValueError("moejit_pack: no AOT pack given (--pack)")
    return MockSystem(name, layers, tp, rank, max_num_tokens, pack if name == "moejit_pack" else None)


def maybe_fail(name: str) -> None:
    if os.environ.get("MOEJIT_SERVING_MOCK_FAIL") == name:
        raise RuntimeError(f"{name}: failure injected by MOEJIT_SERVING_MOCK_FAIL")
    if os.environ.get("MOEJIT_SERVING_MOCK_HANG") == name:
        time.sleep(3600)
