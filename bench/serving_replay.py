#!/usr/bin/env python3
"""Serving-trace replay of a gpt-oss-120b MoE layer stack on the GPU: compile stalls of
the Triton MoE backend (triton_kernels matmul_ogs) against moejit, on the same steps.

  serving_replay.py run --out DIR [--smoke | --quick] [--part single|single-1|single-2|tp|all]
                        [--triton-path DIR] [--pack-dir DIR] [--deadline-s S] [--mock]
      checks the machine first (preflight: moejit, torch + CUDA, triton_kernels, the AOT pack),
      then runs every system in its own process(es) from a clean state on the steps of the
      traces; writes DIR/NAME.json, DIR/NAME.md (NAME: results, or smoke with --smoke) and
      appends to DIR/log.txt
  serving_replay.py estimate [--part ...] [--quick | --smoke]
      the expected duration of a run on one H200 (bench/serving/estimate.py), no GPU
  serving_replay.py report --results A.json [--results B.json ...] [--md FILE]
      the Markdown tables again from results files (the parts of one run are merged)
  serving_replay.py pick-wheel 'build/serving/moejit-*.whl'
      the wheel of the pattern that this interpreter can install (exit 3 and why, if none)
  serving_replay.py check-pack --pack-dir DIR [--tp 1,2]
      the AOT packs serve every kernel of the replayed layer (compile only, no GPU)
  serving_replay.py traces --out traces.json [--cells 1024/1024/64,...] [--steps 300]
      the per-step token counts of each cell (bench/serving/trace.py), one JSON file
  serving_replay.py prewarm-ranks --work-dir DIR [--plan JSON] [--ranks 2]
      several processes prewarming one cache directory at once (no GPU needed)

Systems (bench/serving/systems.py): (a) triton_exact, (b) triton_bucketed (+ warmup over the
buckets), (c) moejit_cold, (d) moejit_sealed (prewarm + seal), (d') moejit_pack (AOT pack + seal).
A clean state: an empty TRITON_CACHE_DIR (set in the process's environment before it starts,
so before triton is imported) and an empty moejit cache directory per process; the cold
systems start from a clean state for each cell (triton_exact: one process per cell;
moejit_cold: a fresh Runtime on an empty cache directory per cell), the warmed systems warm
up once per process and then replay every cell, as a server does.
Parts (bench/serving/names.py): single = all five systems; single-1 = (a) + (d), single-2 =
(b) + (c) + (d'), each short enough for one 9-minute call (serving_replay.py estimate).
--smoke: every system on the first 10 steps of the 8k/1k C=64 cell with 2 layers, the
processes at the same time (a functional check, not a timing), triton_bucketed warming only
the buckets of those steps; prints PASS / FAIL per stage and the full run's expected duration.
TP (--part tp): the 8k/1k C=16 cell over 2 ranks (one process per GPU, NCCL, NVLink multicast
off), triton_exact against moejit_sealed (with the TP layer checked against the single-GPU
layer), plus the 2-rank concurrent prewarm of one cache against one rank alone;
--ranks-on-one-gpu puts both ranks on GPU 0 (gloo: NCCL refuses two ranks on one GPU).
--mock: the systems of bench/serving/mock.py (no torch, no GPU): the whole path on any machine.

Timing per step: L layers launched on the step's T tokens, then torch.cuda.synchronize();
wall clock. Stall, stall share, tokens/s, percentiles: bench/serving/stats.py.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
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

from serving import estimate, names, report, trace  # noqa: E402

QUICK = {"steps": 100, "layers": 12, "tp_steps": 100}
FULL = {"steps": 300, "layers": 36, "tp_steps": 300}
SMOKE = {"steps": 10, "layers": 2, "tp_steps": 10, "cells": "8192/1024/64"}
TP_CELL = trace.Cell(8192, 1024, 16)
MODEL = "gpt-oss-120b"
# Multicast over NVLink stays off (it can take a shared host's GPUs out of service).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
# The triton_kernels names systems.TritonOgs uses, and matmul_ogs's keyword arguments.
TRITON_CHECK = r"""
import inspect, json, sys
import triton
import triton_kernels, triton_kernels.swiglu
from triton_kernels.matmul_ogs import FlexCtx, FnSpecs, FusedActivation, PrecisionConfig, matmul_ogs
from triton_kernels.matmul_ogs_details import opt_flags
from triton_kernels.numerics import InFlexData
from triton_kernels.numerics_details.mxfp import downcast_to_mxfp
from triton_kernels.routing import routing
from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
from triton_kernels.tensor_details import layout
want = {"gather_indx", "scatter_indx", "precision_config", "gammas", "fused_activation"}
missing = sorted(want - set(inspect.signature(matmul_ogs).parameters))
for f in (layout.make_default_matmul_mxfp4_w_layout, layout.make_default_matmul_mxfp4_w_scale_layout,
          opt_flags.update_opt_flags_constraints, triton_kernels.swiglu.swiglu_fn):
    assert callable(f), f
print(json.dumps({"triton": triton.__version__, "triton_kernels": triton_kernels.__file__, "missing": missing}))
"""
TORCH_CHECK = r"""
import json, sys, torch
d = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.cuda.is_available()}
if d["cuda"]:
    d["gpus"] = torch.cuda.device_count()
    d["gpu"] = torch.cuda.get_device_name(0)
    d["capability"] = list(torch.cuda.get_device_capability(0))
    free, total = torch.cuda.mem_get_info(0)
    d["free_gb"], d["total_gb"] = round(free / 2**30, 1), round(total / 2**30, 1)
try:
    import triton
    d["triton"] = triton.__version__
except Exception as e:
    d["triton"] = f"not importable: {e}"
print(json.dumps(d))
"""


class Log:
    def __init__(self, path: Path) -> None:
        self.f = open(path, "a")
        self.t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        line = f"[serving_replay {time.monotonic() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()

    def raw(self, line: str) -> None:
        print(line, flush=True)
        self.f.write(line + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cells_of(text: str) -> List[trace.Cell]:
    return [trace.Cell.parse(c) for c in text.split(",")] if text else list(trace.DEFAULT_CELLS)


def mode_of(a) -> dict:
    return SMOKE if getattr(a, "smoke", False) else QUICK if getattr(a, "quick", False) else FULL


# ------------------------------------------------------------- wheels ---

def wheel_ok(path: str, version=None, machine: Optional[str] = None) -> Optional[str]:
    """None when this interpreter (or `version` (major, minor) on `machine`) can install the
    wheel, else the reason. Tags: cpXY (that version), cpXY-abi3 (XY and later)."""
    version = version or sys.version_info[:2]
    machine = machine or platform.machine()
    parts = os.path.basename(path)[:-len(".whl")].split("-")
    if not path.endswith(".whl") or len(parts) < 5:
        return f"{os.path.basename(path)}: not a wheel file name"
    py, abi, plat = parts[-3], parts[-2], parts[-1]
    ours = f"cp{version[0]}{version[1]}"
    if machine not in plat and plat != "any":
        return f"{os.path.basename(path)}: built for {plat}, this machine is {machine}"
    if py == ours:
        return None
    if abi == "abi3" and py.startswith("cp3") and int(py[3:]) <= version[1] and version[0] == 3:
        return None
    return f"{os.path.basename(path)}: built for {py}, this python is {version[0]}.{version[1]} ({ours})"


def cmd_pick_wheel(a) -> int:
    found = sorted({p for pat in a.patterns for p in glob.glob(pat)})
    if not found:
        print(f"pick-wheel: no file matches {' '.join(a.patterns)}", file=sys.stderr)
        return 3
    reasons = []
    for p in sorted(found, reverse=True):
        why = wheel_ok(p)
        if why is None:
            print(os.path.abspath(p))
            return 0
        reasons.append(why)
    v = sys.version_info
    print(f"pick-wheel: no wheel for this python {v.major}.{v.minor} ({sys.executable}): " + "; ".join(reasons)
          + f". Build one on the development machine: PYTHONS={v.major}.{v.minor} bash bench/serving-prepare.sh"
          " build/serving (a python of that version must be installed there).", file=sys.stderr)
    return 3


# ---------------------------------------------------------- preflight ---

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


def layer_plan(tp: int, max_num_tokens: int):
    """The plan MoeLayer.prewarm() runs for the replayed layer (moejit.torch.MoeLayer.plan())."""
    import moejit
    p = moejit.plan(moejit.embedded_model(MODEL), max_num_tokens=max_num_tokens, tp=tp, target="sm_90a")
    return moejit.Plan([p.layers[0]], [p.quant_modes[0]], max_num_tokens=max_num_tokens, model_name=MODEL,
                       target="sm_90a")


def pack_path(pack_dir: str, tp: int) -> Path:
    return Path(pack_dir) / f"{MODEL}-tp{tp}-sm_90a.pack"


def check_pack(path: Path, tp: int, max_num_tokens: int, work: Path) -> dict:
    """Does the AOT pack serve every kernel of the replayed layer's plan? Compile only (no GPU):
    a fresh Runtime reading the pack, prewarm without loading; a kernel the pack lacks is compiled."""
    import moejit
    if not path.is_file():
        return {"ok": False, "detail": f"{path}: no such file"}
    rt = moejit.Runtime(cache_dir=str(work / f"pack-check-tp{tp}"), pack=str(path))
    t0 = time.perf_counter()
    rep = rt.prewarm(layer_plan(tp, max_num_tokens), jobs=0, load_on_gpu=False)
    st = rt.stats()
    ok = rep.failed == 0 and rep.compiled == 0 and st["pack_hits"] > 0
    return {"ok": ok, "compiled": rep.compiled, "failed": rep.failed, "pack_hits": st["pack_hits"],
            "distinct_kernels": rep.distinct_kernels, "seconds": round(time.perf_counter() - t0, 2),
            "detail": f"{path.name}: {st['pack_hits']} pack hits, {rep.compiled} compiled, {rep.failed} failed "
                      f"of {rep.distinct_kernels} kernels" + ("" if ok else " (the pack does not serve this plan: "
                                                              "its NVRTC version or options differ; moejit_pack "
                                                              "then compiles what is missing)")}


def _probe(code: str, env: dict, timeout: float = 120) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout,
                       cwd=str(HERE))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise RuntimeError(" | ".join(tail) or f"exit {r.returncode}")
    return json.loads(lines[-1])


def preflight(a, log: Log, work_root: Path, systems: List[str], need_tp_pack: bool) -> dict:
    """Checks before any replay process starts; each stage PASS, WARN or FAIL with its reason.
    Returns {"stages": [...], "info": versions, "blocked": {system: reason}}."""
    stages, info, blocked = [], {"python": sys.version.split()[0]}, {}

    def put(name: str, status: str, detail: str) -> None:
        stages.append({"stage": name, "status": status, "detail": detail})
        log(f"preflight {status:<4} {name}: {detail}")

    try:
        import moejit
        info["moejit"] = moejit.__version__
        nv = moejit.nvrtc_version()
        put("moejit", "PASS" if nv else "FAIL", f"moejit {moejit.__version__} from "
            f"{os.path.dirname(moejit.__file__)}, NVRTC {nv or 'not found: ' + moejit.nvrtc_error()}")
        if not nv and not a.mock:
            for s in systems:
                if s.startswith("moejit"):
                    blocked[s] = "preflight: NVRTC not found"
    except Exception as e:  # noqa: BLE001
        put("moejit", "FAIL", f"not importable: {e!r}")
        for s in systems:
            if s.startswith("moejit"):
                blocked[s] = f"preflight: moejit not importable: {e!r}"
    if a.mock:
        put("torch + CUDA", "SKIP", "mock systems: no torch, no GPU")
        info.update({"gpu": "mock (no GPU)", "torch": "-", "triton": "-", "gpus": 1})
    else:
        env = _env(os.environ, Path(tempfile.mkdtemp(prefix="probe-", dir=work_root)), a.triton_path)
        try:
            d = _probe(TORCH_CHECK, env)
            info.update({k: d.get(k) for k in ("torch", "triton", "gpu", "gpus")})
            if not d["cuda"]:
                put("torch + CUDA", "FAIL", f"python {d['python']}, torch {d['torch']}: CUDA not available")
                blocked.update({s: "preflight: CUDA not available" for s in systems})
            else:
                cap = tuple(d["capability"])
                st = "PASS" if cap == (9, 0) and d["free_gb"] > 20 else "WARN"
                put("torch + CUDA", st, f"python {d['python']}, torch {d['torch']}, {d['gpus']} GPU(s): {d['gpu']} "
                    f"sm_{cap[0]}{cap[1]}, {d['free_gb']} of {d['total_gb']} GB free, triton {d['triton']}"
                    + ("" if cap == (9, 0) else " (moejit's kernels need sm_90a)"))
        except Exception as e:  # noqa: BLE001
            put("torch + CUDA", "FAIL", f"{e}")
            blocked.update({s: f"preflight: torch/CUDA: {e}" for s in systems})
        if any(s.startswith("triton") for s in systems):
            try:
                d = _probe(TRITON_CHECK, env)
                if d["missing"]:
                    raise RuntimeError(f"matmul_ogs has no parameter(s) {d['missing']}")
                put("triton_kernels", "PASS", f"triton {d['triton']}, {d['triton_kernels']} (every name "
                    "systems.TritonOgs uses)")
            except Exception as e:  # noqa: BLE001
                put("triton_kernels", "FAIL", f"--triton-path '{a.triton_path}': {e}")
                for s in systems:
                    if s.startswith("triton") and s not in blocked:
                        blocked[s] = f"preflight: triton_kernels: {e}"
        leftover = [p for p in Path(env["TRITON_CACHE_DIR"]).iterdir()]
        if leftover:  # importing must compile nothing, or the replays would not start cold
            put("triton cache", "WARN", f"the import check left {len(leftover)} entries in its TRITON_CACHE_DIR")
    packs = ([1] if "moejit_pack" in systems else []) + ([2] if need_tp_pack else [])
    for tp in packs:
        if a.mock:
            put(f"AOT pack tp{tp}", "SKIP", "mock systems")
            continue
        if not a.pack_dir:
            put(f"AOT pack tp{tp}", "FAIL", "no --pack-dir")
            blocked["moejit_pack"] = "preflight: no --pack-dir"
            continue
        try:
            r = check_pack(pack_path(a.pack_dir, tp), tp, a.max_num_tokens, work_root)
            put(f"AOT pack tp{tp}", "PASS" if r["ok"] else ("FAIL" if "no such file" in r["detail"] else "WARN"),
                r["detail"] + f" ({r.get('seconds', 0)} s)")
            if "no such file" in r["detail"] and tp == 1:
                blocked["moejit_pack"] = f"preflight: {r['detail']}"
        except Exception as e:  # noqa: BLE001
            put(f"AOT pack tp{tp}", "FAIL", repr(e))
            if tp == 1:
                blocked["moejit_pack"] = f"preflight: pack: {e!r}"
    return {"stages": stages, "info": info, "blocked": blocked}


# ---------------------------------------------------------- processes ---

class Group:
    """The process(es) of one system: one, or one per rank of a TP group."""

    def __init__(self, name: str, system: str, cells: List[str], tp: int) -> None:
        self.name, self.system, self.cells, self.tp = name, system, cells, tp
        self.procs = []  # (rank, out, log, Popen)
        self.t0 = time.monotonic()
        self.limit = 0.0
        self.timed_out = False
        self.skipped: Optional[str] = None


def start(log: Log, name: str, system: str, traces_path: Path, cells: List[str], work_root: Path, a,
          deadline: float, tp: int = 1, steps: int = 0, check_tp: bool = False, warmup: str = "all") -> Group:
    g = Group(name, system, cells, tp)
    remaining = deadline - time.monotonic()
    min_s = 3 if a.mock else 30
    if remaining < min_s:
        g.skipped = f"skipped: {remaining:.0f} s of the deadline left"
        log(f"skip {name}: {remaining:.0f} s of the deadline left")
        return g
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work_root))
    out_dir = work_root / "processes"  # one JSON per process; the results file gathers them
    out_dir.mkdir(exist_ok=True)
    port = free_port()
    for rank in range(tp):
        out = out_dir / f"{name}{'-r' + str(rank) if tp > 1 else ''}.json"
        if out.exists():
            out.unlink()
        cmd = [sys.executable, "-m", "serving.worker", "--system", system, "--traces", str(traces_path),
               "--layers", str(a.layers), "--max-steps", str(steps or a.steps), "--reruns", str(a.reruns),
               "--max-num-tokens", str(a.max_num_tokens), "--work-dir", str(work), "--out", str(out),
               "--warmup", warmup]
        if cells:
            cmd += ["--cells", ",".join(cells)]
        if system == "moejit_pack":
            cmd += ["--pack", str(pack_path(a.pack_dir or "none", tp))]
        if check_tp:
            cmd += ["--check-tp"]
        if a.mock:
            cmd += ["--mock"]
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
            g.procs.append((rank, out, plog, subprocess.Popen(cmd, env=env, stdout=lf, stderr=subprocess.STDOUT,
                                                              text=True, cwd=str(HERE))))
    g.limit = max(1.0, min(a.process_timeout_s, remaining - (1 if a.mock else 10)))
    log(f"start {name}: {system}, cells {cells or 'all'}, tp {tp}, limit {g.limit:.0f} s")
    return g


def poll(g: Group) -> bool:
    """True when the group is finished (done, failed, or stopped at its limit)."""
    procs = [p for _, _, _, p in g.procs]
    if all(p.poll() is not None for p in procs):
        return True
    failed = any(p.poll() not in (None, 0) for p in procs)
    over = time.monotonic() - g.t0 > g.limit
    if failed or over:  # a rank alone would wait in its next collective
        g.timed_out = over and not failed
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()
        return True
    return False


def collect(log: Log, g: Group, a) -> List[dict]:
    base = {"system": g.system, "tp": g.tp, "layers": a.layers, "cell": ", ".join(g.cells) or "all",
            "process_name": g.name}
    if g.skipped:
        return [dict(base, error=g.skipped)]
    results = []
    for rank, out, plog, p in g.procs:
        rc = "timeout" if g.timed_out and p.returncode != 0 else p.returncode
        for line in plog.read_text(errors="replace").splitlines():
            log.raw(f"  {g.name} r{rank}| {line}")
        res = dict(base, rank=rank)
        try:
            res = json.loads(out.read_text()) if out.exists() else res
        except ValueError as e:  # a rank killed while writing
            res["error"] = f"unreadable result {out.name}: {e}"
        res["cell"], res["process_name"] = base["cell"], g.name
        if rc != 0 and not res.get("error"):
            res["error"] = (f"process exit {rc}" + (f" after {g.limit:.0f} s" if rc == "timeout" else "")
                            + (" (partial: the cells done are kept)" if res.get("cells") else ""))
        results.append(res)
    log(f"end {g.name}: {time.monotonic() - g.t0:.1f} s, rc {[p.returncode for _, _, _, p in g.procs]}")
    log.f.flush()
    return results


def wait_all(groups: List[Group]) -> None:
    pending = [g for g in groups if not g.skipped]
    while pending:
        pending = [g for g in pending if not poll(g)]
        if pending:
            time.sleep(0.2)


# ---------------------------------------------------------------- run ---

def smoke_verdict(results: dict, expected_steps: int) -> List[str]:
    """PASS / WARN / FAIL per system of a smoke run; the last line is the verdict."""
    lines, failed = [], False
    by = {p["system"]: p for p in results["processes"]}
    for s in names.SINGLE_ORDER:
        p = by.get(s)
        if p is None:
            continue
        cells = p.get("cells", [])
        c = cells[0] if cells else {}
        summ = c.get("summary", {})
        status, notes = "PASS", []
        if p.get("error"):
            status, notes = "FAIL", [p["error"][:300]]
        elif summ.get("steps") != expected_steps:
            status, notes = "FAIL", [f"{summ.get('steps')} steps replayed, expected {expected_steps}"]
        elif not c.get("finite", False):
            status, notes = "FAIL", ["non-finite layer output"]
        else:
            su = p.get("setup") or {}
            info = p.get("info") or {}
            if s == "triton_exact" and summ["compiles"] == 0:
                status = "WARN"
                notes.append("no Triton compile counted in a fresh TRITON_CACHE_DIR (is it honoured?)")
            if s == "triton_bucketed":
                if not su.get("compiled"):
                    status = "WARN"
                    notes.append("the warmup compiled nothing")
                if summ["compiles"]:
                    status = "WARN"
                    notes.append(f"{summ['compiles']} compiles after the warmup")
            if s == "moejit_cold" and summ["compiles"] == 0:
                status = "WARN"
                notes.append("the cold cache compiled nothing")
            if s in ("moejit_sealed", "moejit_pack"):
                if summ["compiles"] or summ["loads"] or info.get("misses_after_seal"):
                    status = "FAIL"
                    notes.append(f"after prewarm + seal: {summ['compiles']} compiles, {summ['loads']} loads, "
                                 f"{info.get('misses_after_seal')} misses after seal")
                if s == "moejit_pack" and (su.get("compiled") or not su.get("pack_hits")):
                    status = "WARN" if status == "PASS" else status
                    notes.append(f"the pack served {su.get('pack_hits')} kernels, {su.get('compiled')} compiled")
            notes.insert(0, f"{summ['steps']} steps, {summ['compiles']} compiles in the replay, setup "
                         f"{su.get('seconds', 0):.1f} s ({su.get('compiled', '-')} compiled), peak "
                         f"{p.get('peak_gb', '?')} GB, process {p.get('process_s', 0):.0f} s")
        failed |= status == "FAIL"
        lines.append(f"smoke {status:<4} {s}: " + "; ".join(notes))
    for st in results.get("preflight", []):
        failed |= st["status"] == "FAIL"
    lines.append("SMOKE FAILED: see the FAIL lines above (log.txt has each process's output)" if failed else
                 "SMOKE PASSED: every system ran on the GPU path")
    return lines


def part_estimate(part: str, mode: dict, a, steps_of: dict, warmup: str = "all", parallel: bool = False,
                  cells: Optional[List[trace.Cell]] = None) -> dict:
    cells = cells if cells is not None else list(trace.DEFAULT_CELLS)
    systems = [s for s in names.PARTS[part] if s in a.systems.split(",")]
    procs = estimate.plan_processes(systems, cells)
    if part in ("tp", "all"):
        procs += [(f"tp2-{s}", s, [TP_CELL.name]) for s in ("moejit_sealed", "triton_exact")]
    return estimate.estimate(procs, steps_of, mode["layers"], a.max_num_tokens, warmup, parallel, a.mock)


def cmd_run(a) -> int:
    t_run = time.monotonic()
    mode = mode_of(a)
    a.steps = a.steps or mode["steps"]
    a.layers = a.layers or mode["layers"]
    tp_steps = a.tp_steps or mode["tp_steps"]
    name = "smoke" if a.smoke else a.name
    out_dir = Path(a.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    log = Log(out_dir / "log.txt")
    deadline = time.monotonic() + a.deadline_s
    work_root = Path(tempfile.mkdtemp(prefix="moejit-serving-", dir=a.work_dir))
    if a.triton_path:
        a.triton_path = str(Path(a.triton_path).resolve())
    if a.pack_dir:
        a.pack_dir = str(Path(a.pack_dir).resolve())
    part = "single" if a.smoke else a.part
    cells = cells_of(a.cells or (SMOKE["cells"] if a.smoke else ""))
    traces_path = Path(a.traces).resolve() if a.traces else work_root / "traces.json"
    if not a.traces:
        opts = trace.TraceOptions(max_num_tokens=a.max_num_tokens, max_steps=max(a.steps, tp_steps), seed=a.seed)
        trace.save([trace.make_trace(c, opts) for c in cells + [TP_CELL]], traces_path)
    loaded = {t.cell.name: t.tokens for t in trace.load(traces_path)}
    steps_of = {n: tok[:a.steps] for n, tok in loaded.items()}
    steps_of[TP_CELL.name] = loaded.get(TP_CELL.name, [])[:tp_steps]
    log(f"{name}: part {part}, cells {[c.name for c in cells]}, steps {a.steps}, layers {a.layers}, deadline "
        f"{a.deadline_s:.0f} s{', mock systems' if a.mock else ''}; output {out_dir}/{name}.json, {name}.md")

    systems = [s for s in names.PARTS[part] if s in a.systems.split(",")]
    need_tp = part in ("tp", "all")
    pf = preflight(a, log, work_root, systems, need_tp and "moejit_pack" in a.tp_systems.split(","))
    info = pf["info"]
    est = part_estimate(part, mode, a, steps_of, "trace" if a.smoke else "all", a.smoke, cells)
    for line in estimate.text(est, f"expected duration of this {name} run").splitlines():
        log(line)
    if est["low_s"] > a.deadline_s:
        log(f"WARNING: even the low estimate ({est['low_s']:.0f} s) exceeds the deadline ({a.deadline_s:.0f} s): "
            "the processes past it are skipped or stopped (split the run with --part single-1 / single-2)")

    results = {"format": report.FORMAT, "version": 1, "name": name, "part": part,
               "command": os.environ.get("MOEJIT_SERVING_COMMAND") or " ".join(["bench/serving_replay.py"] + a.argv),
               "replay_argv": a.argv, "steps": a.steps, "layers": a.layers,
               "tp_steps": tp_steps, "max_num_tokens": a.max_num_tokens, "seed": a.seed, "mock": a.mock,
               "processes": [], "preflight": pf["stages"], "estimate": est, "traces": steps_of,
               "tp_mode": "both ranks on GPU 0 (gloo all-reduce)" if a.ranks_on_one_gpu else "2 GPUs, NCCL", **info}

    def save():
        results["wall_s"] = time.monotonic() - t_run
        tmp = out_dir / f"{name}.json.tmp"
        tmp.write_text(json.dumps(results) + "\n")
        tmp.replace(out_dir / f"{name}.json")
        report.write([results], out_dir / f"{name}.md")

    def blocked(g_name: str, s: str, cells_: List[str], tp: int = 1) -> Optional[dict]:
        why = pf["blocked"].get(s)
        if why:
            log(f"skip {g_name}: {why}")
            return {"system": s, "tp": tp, "rank": 0, "layers": a.layers, "cell": ", ".join(cells_),
                    "process_name": g_name, "error": why}
        return None

    planned = estimate.plan_processes(systems, cells)
    save()
    if part in ("single", "single-1", "single-2", "all"):
        if a.smoke:  # every process at once: a functional check, not a timing
            groups = []
            for g_name, s, cs in planned:
                b = blocked(g_name, s, cs)
                if b:
                    results["processes"].append(b)
                    continue
                groups.append(start(log, g_name, s, traces_path, cs, work_root, a, deadline, warmup="trace"))
            wait_all(groups)
            for g in groups:
                results["processes"] += collect(log, g, a)
            save()
        else:
            for g_name, s, cs in planned:
                b = blocked(g_name, s, cs)
                if b:
                    results["processes"].append(b)
                else:
                    g = start(log, g_name, s, traces_path, cs, work_root, a, deadline)
                    wait_all([g])
                    results["processes"] += collect(log, g, a)
                save()
    if need_tp:
        if not a.ranks_on_one_gpu and (info.get("gpus") or 0) < 2:
            log(f"TP: {info.get('gpus', 0)} GPU(s) visible; use --ranks-on-one-gpu on a single-GPU machine")
            results["processes"].append({"system": "moejit_sealed", "tp": 2, "rank": 0, "layers": a.layers,
                                         "cell": TP_CELL.name, "error": f"TP: {info.get('gpus', 0)} GPU(s) visible"})
        else:
            from serving import prewarm_ranks
            try:
                log("prewarm-ranks: the TP2 plan, one rank alone, then 2 ranks on one cache (compile only)")
                results["prewarm_ranks"] = prewarm_ranks.compare(
                    {"model": MODEL, "tp": 2, "max_num_tokens": a.max_num_tokens, "target": "sm_90a"},
                    Path(tempfile.mkdtemp(prefix="prewarm-ranks-", dir=work_root)), ranks=2)
                pw = results["prewarm_ranks"]
                log(f"prewarm-ranks: solo {pw['solo']['wall_s']:.2f} s, together {pw['together']['wall_s']:.2f} s, "
                    f"compiled {[r['compiled'] for r in pw['together']['ranks']]}")
            except Exception as e:  # noqa: BLE001
                results["prewarm_ranks_error"] = repr(e)
                log(f"prewarm-ranks failed: {e!r}")
            save()
            for s in [x for x in ("moejit_sealed", "triton_exact") if x in a.tp_systems.split(",")]:
                g_name = f"tp2-{s}"
                b = blocked(g_name, s, [TP_CELL.name], 2)
                if b:
                    results["processes"].append(b)
                else:
                    g = start(log, g_name, s, traces_path, [TP_CELL.name], work_root, a, deadline, tp=2,
                              steps=tp_steps, check_tp=(s == "moejit_sealed"))
                    wait_all([g])
                    results["processes"] += collect(log, g, a)
                save()
    save()
    if not a.keep_work:
        shutil.rmtree(work_root, ignore_errors=True)
    log.raw((out_dir / f"{name}.md").read_text())
    failed = [r for r in results["processes"] if r.get("error")]
    log(f"done in {time.monotonic() - t_run:.0f} s (estimate {est['low_s']:.0f}-{est['high_s']:.0f} s): "
        f"{len(results['processes'])} processes, {len(failed)} with errors; {out_dir}/{name}.md")
    if a.smoke:
        for line in smoke_verdict(results, a.steps):
            log(line)
        full = dict(FULL)
        tr_full = {c.name: trace.make_trace(c, trace.TraceOptions(max_num_tokens=a.max_num_tokens,
                                                                   max_steps=FULL["steps"], seed=a.seed)).tokens
                   for c in trace.DEFAULT_CELLS}
        for p in ("single-1", "single-2", "single"):
            e = part_estimate(p, full, a, tr_full)
            log(f"full run (300 steps x 36 layers), --part {p}: expected {e['low_s']:.0f}-{e['high_s']:.0f} s")
        return 1 if any(line.startswith("SMOKE FAILED") for line in smoke_verdict(results, a.steps)) else 0
    return 0 if not failed else 1


def cmd_estimate(a) -> int:
    mode = mode_of(a)
    a.steps = a.steps or mode["steps"]
    cells = cells_of(a.cells or (SMOKE["cells"] if a.smoke else ""))
    steps = {c.name: trace.make_trace(c, trace.TraceOptions(max_num_tokens=a.max_num_tokens, max_steps=a.steps,
                                                            seed=a.seed)).tokens for c in cells + [TP_CELL]}
    parts = [a.part] if a.part else ["single", "single-1", "single-2"]
    out = {}
    for p in parts:
        e = part_estimate("single" if a.smoke else p, mode, a, steps, "trace" if a.smoke else "all", a.smoke, cells)
        out[p] = e
        print(estimate.text(e, f"--part {p}{' --smoke' if a.smoke else ''} ({a.steps} steps x {mode['layers']} layers)"))
    if a.json:
        Path(a.json).write_text(json.dumps(out) + "\n")
    return 0


def cmd_traces(a) -> int:
    cells = cells_of(a.cells)
    opts = trace.TraceOptions(max_num_tokens=a.max_num_tokens, max_steps=a.steps, seed=a.seed,
                              cold_start=a.cold_start)
    traces = [trace.make_trace(c, opts) for c in cells]
    trace.save(traces, a.out)
    for t in traces:
        print(f"{t.cell.name}: {len(t.tokens)} steps, {sum(t.tokens)} tokens, distinct T {len(set(t.tokens))}, "
              f"T in [{min(t.tokens)}, {max(t.tokens)}], {len(t.prompts)} prefills completed")
    return 0


def cmd_check_pack(a) -> int:
    """Each pack of --pack-dir serves the replayed layer's plan (compile only, no GPU)."""
    work = Path(tempfile.mkdtemp(prefix="pack-check-"))
    ok = True
    try:
        for tp in (int(t) for t in a.tp.split(",")):
            r = check_pack(pack_path(a.pack_dir, tp), tp, a.max_num_tokens, work)
            print(f"check-pack {'PASS' if r['ok'] else 'FAIL'} tp{tp}: {r['detail']}")
            ok &= r["ok"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def cmd_report(a) -> int:
    runs = [report.load(p) for p in a.results]
    md = Path(a.md) if a.md else Path(a.results[0]).with_suffix(".md")
    print(report.write(runs, md))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p) -> None:
        p.add_argument("--quick", action="store_true", help=f"{QUICK['steps']} steps, {QUICK['layers']} layers "
                       f"(default {FULL['steps']} steps, {FULL['layers']} layers)")
        p.add_argument("--smoke", action="store_true", help=f"{SMOKE['steps']} steps, {SMOKE['layers']} layers, cell "
                       f"{SMOKE['cells']}, every system at once: the GPU path checked in about a minute")
        p.add_argument("--cells", default="", help="ISL/OSL/C,... (default 1024/1024/64,1024/1024/4,8192/1024/64)")
        p.add_argument("--systems", default=",".join(names.SINGLE_ORDER))
        p.add_argument("--steps", type=int, default=0)
        p.add_argument("--max-num-tokens", type=int, default=8192)
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--mock", action="store_true", help="the mock systems (no torch, no GPU; not a measurement)")

    t = sub.add_parser("traces", help="write the cells' step token counts as JSON")
    t.add_argument("--out", required=True)
    t.add_argument("--cells", default="", help="ISL/OSL/C,... (default 1024/1024/64,1024/1024/4,8192/1024/64)")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--max-num-tokens", type=int, default=8192)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--cold-start", action="store_true")
    r = sub.add_parser("run", help="replay every system of a part (GPU)")
    common(r)
    r.add_argument("--out", required=True, help="folder for NAME.json, NAME.md, log.txt")
    r.add_argument("--name", default="results", help="base name of the output files (--smoke: smoke)")
    r.add_argument("--part", choices=tuple(names.PARTS), default="single")
    r.add_argument("--traces", default="", help="replay these traces (default: generated from the seed)")
    r.add_argument("--tp-systems", default="moejit_sealed,triton_exact")
    r.add_argument("--tp-steps", type=int, default=0)
    r.add_argument("--layers", type=int, default=0)
    r.add_argument("--reruns", type=int, default=1)
    r.add_argument("--triton-path", default="", help="folder holding triton_kernels/ (added to PYTHONPATH)")
    r.add_argument("--pack-dir", default="", help="folder with gpt-oss-120b-tp{1,2}-sm_90a.pack (moejit_pack)")
    r.add_argument("--ranks-on-one-gpu", action="store_true", help="TP: both ranks on GPU 0 (gloo)")
    r.add_argument("--deadline-s", type=float, default=500,
                   help="the run ends within this many seconds: no process starts after it, running ones stop")
    r.add_argument("--process-timeout-s", type=float, default=480)
    r.add_argument("--work-dir", default=None, help="where the temporary caches go (default: TMPDIR)")
    r.add_argument("--keep-work", action="store_true", help="keep the caches and per-process JSON files")
    e = sub.add_parser("estimate", help="expected duration of a run on one H200 (no GPU)")
    common(e)
    e.add_argument("--part", choices=tuple(names.PARTS), default="")
    e.add_argument("--json", default="", help="also write the estimates as JSON here")
    p = sub.add_parser("report", help="the Markdown tables from results files (parts merged)")
    p.add_argument("--results", action="append", required=True)
    p.add_argument("--md", default="")
    c = sub.add_parser("check-pack", help="the AOT packs serve the replayed layer's plan (no GPU)")
    c.add_argument("--pack-dir", required=True)
    c.add_argument("--tp", default="1,2")
    c.add_argument("--max-num-tokens", type=int, default=8192)
    k = sub.add_parser("pick-wheel", help="the wheel this interpreter can install")
    k.add_argument("patterns", nargs="+")
    w = sub.add_parser("prewarm-ranks", help="several processes prewarming one cache at once", add_help=False)
    w.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    a.argv = argv
    if a.cmd == "traces":
        return cmd_traces(a)
    if a.cmd == "run":
        return cmd_run(a)
    if a.cmd == "estimate":
        a.layers = 0
        return cmd_estimate(a)
    if a.cmd == "report":
        return cmd_report(a)
    if a.cmd == "pick-wheel":
        return cmd_pick_wheel(a)
    if a.cmd == "check-pack":
        return cmd_check_pack(a)
    from serving import prewarm_ranks
    return prewarm_ranks.main(a.rest)


if __name__ == "__main__":
    sys.exit(main())
