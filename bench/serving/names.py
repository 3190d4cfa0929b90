"""The replayed systems and the parts of a run, by name (no torch)."""
from __future__ import annotations

SYSTEMS = ("triton_exact", "triton_bucketed", "moejit_cold", "moejit_sealed", "moejit_pack")
TRITON_SYSTEMS = ("triton_exact", "triton_bucketed")
COLD_SYSTEMS = ("triton_exact", "moejit_cold")  # a clean state per cell
# Launch order of a one-GPU run: the prewarmed moejit first, then what it is compared with.
SINGLE_ORDER = ("moejit_sealed", "triton_exact", "moejit_cold", "triton_bucketed", "moejit_pack")
# A run in parts, each short enough for a time-limited run on the GPU machine (estimate.py):
#   single-1: (a) Triton on exact T against (d) moejit prewarmed and sealed
#   single-2: (b) Triton padded to buckets after its warmup, (c) moejit cold, (d') moejit from an AOT pack
PARTS = {
    "single": SINGLE_ORDER,
    "single-1": ("moejit_sealed", "triton_exact"),
    "single-2": ("moejit_cold", "triton_bucketed", "moejit_pack"),
    "tp": (),
    "all": SINGLE_ORDER,
}
