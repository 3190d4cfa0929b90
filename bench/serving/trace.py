"""Token counts of the steps of a continuous-batching serving engine with
chunked prefill: the same model as bench/trace_gen.hpp (the C++ replay).

C requests are in flight (closed loop: a finished request is replaced at once
by a new arrival); prompt lengths are uniform in [ceil(0.8 ISL), ISL]; each
request generates OSL tokens. Each step: every running request past its
prefill decodes one token, then prefill chunks, oldest request first, fill the
rest of the max_num_tokens budget; a request whose prefill completes emits its
first token in that step. Steady-state start (default): the C initial requests
are at uniformly random points of their decode; cold start: all C arrive at
step 0 with their whole prompt.

The random stream is Python's (random.Random), not the C++ mt19937_64: the
model is the same, the drawn prompt lengths differ from the C++ generator's.
Every system replays the steps saved in one JSON file (save/load below), so
they all see the same token counts.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import random
from typing import Iterable, List, Optional, Sequence

FORMAT = "moejit-serving-trace"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Cell:
    """One serving workload: input sequence length, output sequence length, concurrency."""
    isl: int = 1024
    osl: int = 1024
    concurrency: int = 64

    def __post_init__(self) -> None:
        for f in ("isl", "osl", "concurrency"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{f}: must be an integer >= 1, got {v!r}")

    @property
    def name(self) -> str:
        def k(v: int) -> str:
            return f"{v // 1024}k" if v % 1024 == 0 else str(v)
        return f"{k(self.isl)}/{k(self.osl)} C={self.concurrency}"

    @property
    def slug(self) -> str:
        """File-name form: 1024-1024-c64."""
        return f"{self.isl}-{self.osl}-c{self.concurrency}"

    @staticmethod
    def parse(text: str) -> "Cell":
        """'ISL/OSL/C', e.g. '1024/1024/64' or '8k/1k/64'."""
        parts = text.strip().split("/")
        if len(parts) != 3:
            raise ValueError(f"cell: expected ISL/OSL/C (e.g. 1024/1024/64), got {text!r}")

        def num(p: str) -> int:
            p = p.strip().lower()
            try:
                return int(p[:-1]) * 1024 if p.endswith("k") else int(p)
            except ValueError:
                raise ValueError(f"cell: {p!r} in {text!r} is not a number") from None
        return Cell(num(parts[0]), num(parts[1]), num(parts[2]))


# The cells of the published gpt-oss-120b measurement (1k/1k at C=64 and C=4, 8k/1k at C=64).
DEFAULT_CELLS = (Cell(1024, 1024, 64), Cell(1024, 1024, 4), Cell(8192, 1024, 64))


@dataclasses.dataclass(frozen=True)
class TraceOptions:
    max_num_tokens: int = 8192
    max_steps: int = 300
    seed: int = 1
    cold_start: bool = False

    def __post_init__(self) -> None:
        if self.max_num_tokens < 1:
            raise ValueError(f"max_num_tokens: must be >= 1, got {self.max_num_tokens}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps: must be >= 1, got {self.max_steps}")


@dataclasses.dataclass
class Trace:
    """The steps of one cell: tokens[i] = decode[i] + prefill[i] (tokens of step i);
    arrivals[i]: requests that started their prefill in step i;
    prompts: the prompt length of every request that completed its prefill, in order."""
    cell: Cell
    options: TraceOptions
    tokens: List[int]
    decode: List[int]
    prefill: List[int]
    arrivals: List[int]
    prompts: List[int]

    def to_json(self) -> dict:
        return {
            "format": FORMAT, "version": FORMAT_VERSION,
            "cell": dataclasses.asdict(self.cell), "cell_name": self.cell.name,
            "options": dataclasses.asdict(self.options),
            "generator": "bench/serving/trace.py (model of bench/trace_gen.hpp, Python random stream)",
            "steps": len(self.tokens), "total_tokens": sum(self.tokens),
            "tokens": self.tokens, "decode": self.decode, "prefill": self.prefill,
            "arrivals": self.arrivals, "prompts": self.prompts,
        }

    @staticmethod
    def from_json(d: dict) -> "Trace":
        if d.get("format") != FORMAT:
            raise ValueError(f"trace: not a {FORMAT} file (format={d.get('format')!r})")
        if d.get("version") != FORMAT_VERSION:
            raise ValueError(f"trace: version {d.get('version')!r}, this reader knows {FORMAT_VERSION}")
        t = Trace(Cell(**d["cell"]), TraceOptions(**d["options"]), list(d["tokens"]), list(d["decode"]),
                  list(d["prefill"]), list(d["arrivals"]), list(d["prompts"]))
        n = len(t.tokens)
        if not (len(t.decode) == len(t.prefill) == len(t.arrivals) == n):
            raise ValueError("trace: tokens, decode, prefill and arrivals differ in length")
        for i, (T, a, b) in enumerate(zip(t.tokens, t.decode, t.prefill)):
            if T != a + b or T < 1 or T > t.options.max_num_tokens:
                raise ValueError(f"trace: step {i}: tokens={T}, decode={a}, prefill={b}, "
                                 f"max_num_tokens={t.options.max_num_tokens}")
        return t


def _seed(cell: Cell, seed: int) -> int:
    # The C++ generator's mix of the seed and the cell (bench/trace_gen.hpp).
    return (seed * 1000003 + cell.isl * 31 + cell.osl * 7 + cell.concurrency) % (1 << 64)


def make_trace(cell: Cell, options: TraceOptions = TraceOptions()) -> Trace:
    rng = random.Random(_seed(cell, options.seed))
    lo = max(1, math.ceil(0.8 * cell.isl))
    hi = max(lo, cell.isl)

    def new_request() -> list:
        return [rng.randint(lo, hi), 0, 0]  # prompt, prefilled, generated

    running = []
    for _ in range(cell.concurrency):
        r = new_request()
        if not options.cold_start:
            r[1] = r[0]
            r[2] = min(1 + rng.randrange(cell.osl), cell.osl)
        running.append(r)

    tokens, decode, prefill, arrivals, prompts = [], [], [], [], []
    while len(tokens) < options.max_steps:
        budget = options.max_num_tokens
        d = p = a = 0
        for r in running:  # decode: one token per request past its prefill, not finished
            if budget == 0:
                break
            if r[1] == r[0] and r[2] < cell.osl:
                r[2] += 1
                budget -= 1
                d += 1
        for r in running:  # prefill chunks, oldest request first
            if budget == 0:
                break
            if r[1] < r[0]:
                if r[1] == 0:
                    a += 1
                chunk = min(budget, r[0] - r[1])
                r[1] += chunk
                budget -= chunk
                p += chunk
                if r[1] == r[0]:
                    r[2] = 1  # the first token comes from the prefill step
                    prompts.append(r[0])
        if d + p == 0:
            break
        tokens.append(d + p)
        decode.append(d)
        prefill.append(p)
        arrivals.append(a)
        for i, r in enumerate(running):  # closed loop: finished requests are replaced
            if r[1] == r[0] and r[2] >= cell.osl:
                running[i] = new_request()
    return Trace(cell, options, tokens, decode, prefill, arrivals, prompts)


def save(traces: Sequence[Trace], path: "os.PathLike[str] | str") -> None:
    """All cells' traces in one JSON file (so that every system replays the same steps)."""
    with open(path, "w") as f:
        json.dump({"format": FORMAT + "-set", "version": FORMAT_VERSION,
                   "traces": [t.to_json() for t in traces]}, f)
        f.write("\n")


def load(path: "os.PathLike[str] | str") -> List[Trace]:
    with open(path) as f:
        d = json.load(f)
    if d.get("format") != FORMAT + "-set":
        raise ValueError(f"{path}: not a {FORMAT}-set file (format={d.get('format')!r})")
    return [Trace.from_json(t) for t in d["traces"]]


def select(traces: Iterable[Trace], names: Optional[Sequence[str]]) -> List[Trace]:
    """The traces whose cell is named (Cell.parse form or Cell.name); all when names is None."""
    traces = list(traces)
    if not names:
        return traces
    want = [Cell.parse(n) if "/" in n and "C=" not in n else n for n in names]
    out = []
    for w in want:
        hit = [t for t in traces if t.cell == w or t.cell.name == w]
        if not hit:
            raise ValueError(f"cell {w}: not in the trace file (has {[t.cell.name for t in traces]})")
        out.extend(hit)
    return out
