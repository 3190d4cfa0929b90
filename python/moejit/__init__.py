"""moejit: run-time compiled CUDA mixture-of-experts kernels, a persistent disk
cache, and prewarm of every specialization a server can launch.

Planning, keys, prewarm, seal and the cache need no GPU::

    import moejit
    plan = moejit.plan(moejit.embedded_model("gpt-oss-120b"), max_num_tokens=20000)
    report = moejit.prewarm(plan, jobs=8)   # compiles into $MOEJIT_CACHE_DIR
    moejit.runtime().seal()

Running a layer takes CUDA arrays through DLPack (torch, cupy, jax ...) and
the caller's stream as an integer; ``moejit.torch`` wraps it as torch.library
custom ops (CUDA-graph capturable, traceable by torch.compile).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Union

from . import _moejit
from ._moejit import (
    CompileError,
    DriverError,
    Error,
    GroupedGemm,
    InvalidArgument,
    ModelSpec,
    MoeLayer,
    MoeLayerShape,
    MoeWgrad,
    Plan,
    PrewarmFailure,
    PrewarmReport,
    Runtime,
    SealedMiss,
    SpecKey,
    bucket_set,
    dequantize_mxfp4,
    device,
    embedded_model,
    embedded_model_names,
    key_diff,
    layer_keys,
    load_hf_config,
    log_level,
    nvrtc_error,
    nvrtc_version,
    parse_hf_config,
    parse_key,
    plan,
    prewarm_set,
    quantize_fp8_gpu,
    quantize_fp8_per_token,
    quantize_mxfp4,
    quantize_mxfp4_gpu,
    quantize_mxfp8,
    round_up_tokens,
    set_log_level,
    stat_ids,
)

__version__: str = _moejit.__version__

PathLike = Union[str, "os.PathLike[str]"]


def runtime() -> Runtime:
    """The process-wide Runtime, built from the environment on first use
    (MOEJIT_CACHE_DIR, MOEJIT_STRICT, MOEJIT_CACHE_PACK, MOEJIT_CACHE_MAX_BYTES, ...)."""
    return Runtime.global_runtime()


def prewarm(
    plan: Plan,
    runtime: Optional[Runtime] = None,
    jobs: int = 0,
    load_on_gpu: bool = False,
    on_progress: Optional[Callable[[int, int], None]] = None,
) -> PrewarmReport:
    """Compiles (or loads from the disk cache) every kernel `plan` can launch.

    jobs: compile threads (0 = all cores). load_on_gpu: also load each kernel
    in the current CUDA context. on_progress(done, total) is called after each
    distinct kernel (from a worker thread); an exception it raises is raised
    once every kernel is done. Failures are collected in the report, never
    raised; InvalidArgument only for an invalid plan or jobs < 0; TypeError
    when plan is not a Plan (before the global runtime, and its cache
    directory, is made).
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"plan: expected a moejit.Plan (moejit.plan(model, ...)), got {type(plan).__name__}")
    rt = runtime if runtime is not None else Runtime.global_runtime()
    return rt.prewarm(plan, jobs=jobs, load_on_gpu=load_on_gpu, on_progress=on_progress)


def seal(runtime: Optional[Runtime] = None) -> None:
    """Seals the runtime: a kernel not yet in memory is then a counted, logged
    miss (MOEJIT_STRICT=1 / seal_policy='strict': SealedMiss)."""
    (runtime if runtime is not None else Runtime.global_runtime()).seal()


def stats(runtime: Optional[Runtime] = None) -> dict:
    """The runtime's counters by their stable ids (stat_ids(): memory_hits, disk_hits, pack_hits,
    compiles, misses_after_seal, ...), plus compile_ms_total."""
    return (runtime if runtime is not None else Runtime.global_runtime()).stats()


def write_pack(plan: Plan, path: PathLike, runtime: Optional[Runtime] = None) -> int:
    """Writes the plan's kernels as one immutable AOT pack file (what
    ``moejit-prewarm --pack`` writes; mount it with MOEJIT_CACHE_PACK).
    Compiles what is missing first. Returns the number of keys."""
    rt = runtime if runtime is not None else Runtime.global_runtime()
    return rt.write_pack(plan, os.fspath(path))


def info() -> dict[str, Any]:
    """Versions and environment: library, NVRTC, driver, GPUs, cache directory.
    Never raises for a missing driver or NVRTC (the fields say why)."""
    status = device.driver_status()
    gpus = []
    if status["loaded"]:
        for i in range(status["device_count"]):
            try:
                gpus.append(device.device_info(i))
            except DriverError as e:  # pragma: no cover - driver trouble
                gpus.append({"index": i, "error": str(e)})
    # The directory the global runtime uses, without creating it (as building
    # the runtime would).
    cache_dir = os.path.abspath(_moejit.default_cache_dir())
    return {
        "moejit": __version__,
        "nvrtc": nvrtc_version() or None,
        "nvrtc_error": nvrtc_error() or None,
        "driver": status,
        "gpus": gpus,
        "cache_dir": cache_dir,
    }


__all__ = [
    "CompileError", "DriverError", "Error", "GroupedGemm", "InvalidArgument", "ModelSpec", "MoeLayer", "MoeLayerShape", "MoeWgrad",
    "Plan", "PrewarmFailure", "PrewarmReport", "Runtime", "SealedMiss", "SpecKey", "bucket_set",
    "dequantize_mxfp4", "device", "embedded_model", "embedded_model_names", "info", "key_diff",
    "layer_keys", "load_hf_config", "log_level", "nvrtc_error", "nvrtc_version", "parse_hf_config", "parse_key", "plan",
    "prewarm", "prewarm_set", "quantize_fp8_gpu", "quantize_fp8_per_token", "quantize_mxfp4",
    "quantize_mxfp4_gpu", "quantize_mxfp8", "round_up_tokens", "runtime", "seal", "set_log_level", "stat_ids", "stats", "write_pack",
    "__version__",
]
