"""Prewarm into a temporary cache, the disk hits of a second runtime, seal,
statistics and the AOT pack (NVRTC needed for compiling; no GPU)."""
from __future__ import annotations

import json

import pytest

import moejit
from conftest import needs_nvrtc, run_tool

SHAPE = moejit.MoeLayerShape(hidden=256, intermediate=128, experts=8, top_k=2)


def small_plan() -> moejit.Plan:
    return moejit.Plan([SHAPE], ["bf16"], max_num_tokens=2, model_name="toy")


@needs_nvrtc
def test_an_exception_in_on_progress_is_raised_after_prewarm(private_cache):
    # The callback runs on prewarm's worker threads: its exception must reach the
    # caller (after the kernels are done), not end the process.
    plan = small_plan()
    rt = moejit.Runtime(cache_dir=private_cache)
    calls = []

    def fails(done, total):
        calls.append(done)
        raise ZeroDivisionError("from on_progress")
    with pytest.raises(ZeroDivisionError, match="from on_progress"):
        rt.prewarm(plan, jobs=2, on_progress=fails)
    assert len(calls) == 1  # no calls after the first exception
    # The kernels were still compiled: a second prewarm finds them on disk.
    again = moejit.prewarm(plan, runtime=moejit.Runtime(cache_dir=private_cache))
    assert again.failed == 0 and again.compiled == 0 and again.disk_hits == again.distinct_kernels
    with pytest.raises(TypeError):  # a callable that does not take (done, total)
        moejit.Runtime(cache_dir=private_cache).prewarm(plan, on_progress=lambda done: None)


@needs_nvrtc
def test_prewarm_then_disk_hits_then_seal(private_cache):
    plan = small_plan()
    rt = moejit.Runtime(cache_dir=private_cache)
    progress = []
    report = rt.prewarm(plan, jobs=2, on_progress=lambda done, total: progress.append((done, total)))
    assert report.failed == 0, report.failures
    assert report.keys == plan.num_keys
    assert report.compiled == report.distinct_kernels > 0
    assert progress[-1] == (report.distinct_kernels, report.distinct_kernels)
    assert json.loads(report.to_json())["compiled"] == report.compiled
    assert rt.stats()["compiles"] == report.compiled

    again = moejit.Runtime(cache_dir=private_cache)
    r2 = moejit.prewarm(plan, runtime=again)
    assert (r2.compiled, r2.disk_hits) == (0, report.distinct_kernels)
    again.seal()
    assert again.sealed
    for key in plan.keys():
        assert again.compiled(key)["origin"] == "memory"
    assert again.stats()["misses_after_seal"] == 0

    other = moejit.Plan([SHAPE], ["bf16"], max_num_tokens=64)
    strict = moejit.Runtime(cache_dir=private_cache, seal_policy="strict")
    strict.seal()
    with pytest.raises(moejit.SealedMiss) as e:
        strict.compiled(other.keys()[-1])
    assert "tokens=64" in str(e.value)

    r = run_tool("moejit-cache", "--cache-dir", str(private_cache), "verify")
    assert r.returncode == 0, r.stdout + r.stderr


@needs_nvrtc
def test_aot_pack_serves_a_fresh_cache(private_cache, tmp_path):
    plan = small_plan()
    rt = moejit.Runtime(cache_dir=private_cache)
    pack = tmp_path / "toy.pack"
    assert moejit.write_pack(plan, pack, runtime=rt) == plan.num_keys
    assert pack.stat().st_mode & 0o222 == 0  # immutable
    fresh = moejit.Runtime(cache_dir=tmp_path / "empty-cache", pack=pack)
    found = [fresh.compiled(key) for key in plan.keys()]
    # Keys sharing a kernel: the first is read from the pack, the others are memory hits.
    assert {k["origin"] for k in found} <= {"disk", "memory"} and found[0]["origin"] == "disk"
    st = fresh.stats()
    assert st["compiles"] == 0 and st["pack_hits"] == len({k["content_hash"] for k in found})
    r = run_tool("moejit-cache", "verify", "--pack", str(pack))
    assert r.returncode == 0, r.stdout + r.stderr


def test_prewarm_of_a_model_name_is_a_type_error_that_creates_nothing(tmp_path, monkeypatch):
    cache = tmp_path / "global-cache"
    monkeypatch.setenv("MOEJIT_CACHE_DIR", str(cache))
    with pytest.raises(TypeError, match="plan: expected a moejit.Plan"):
        moejit.prewarm("gpt-oss-120b")
    assert not cache.exists()


def test_prewarm_rejects_a_bad_plan():
    with pytest.raises(moejit.InvalidArgument, match="max_num_tokens=0"):  # refused when the plan is made
        moejit.Plan([SHAPE], ["bf16"], max_num_tokens=0)
    with pytest.raises(moejit.InvalidArgument, match="jobs"):
        moejit.Runtime(use_disk_cache=False).prewarm(small_plan(), jobs=-1)


def test_without_nvrtc_prewarm_reports_driver_failures(monkeypatch):
    if moejit.nvrtc_version():
        pytest.skip("NVRTC present: the missing-NVRTC path is covered by the C++ suite")
    report = moejit.Runtime(use_disk_cache=False).prewarm(small_plan())
    assert report.failed == report.distinct_kernels
    assert all(f.kind == "driver" for f in report.failures)
