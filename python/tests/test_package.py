"""Import, versions, `python -m moejit`, the console scripts (no GPU needed)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import moejit
import pytest
from conftest import run_tool


def test_version_is_the_library_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", moejit.__version__)
    assert moejit._moejit.version() == moejit.__version__


def test_python_m_moejit_version():
    r = subprocess.run([sys.executable, "-m", "moejit", "--version"], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == f"moejit {moejit.__version__}"


def test_python_m_moejit_info_reports_every_component(private_cache):
    r = subprocess.run([sys.executable, "-m", "moejit", "info"], capture_output=True, text=True, check=True)
    for field in ("moejit ", "nvrtc ", "driver ", "cache dir "):
        assert field in r.stdout, r.stdout
    assert str(private_cache) in r.stdout
    j = subprocess.run([sys.executable, "-m", "moejit", "info", "--json"], capture_output=True, text=True, check=True)
    info = json.loads(j.stdout)
    assert info["moejit"] == moejit.__version__
    assert set(info["driver"]) == {"loaded", "library", "driver_version", "device_count", "error"}
    if not info["driver"]["loaded"]:
        assert "libcuda" in info["driver"]["error"] or "cuInit" in info["driver"]["error"]
        assert info["gpus"] == []
    else:
        assert len(info["gpus"]) == info["driver"]["device_count"]


def test_python_m_moejit_info_creates_nothing(tmp_path):
    d = tmp_path / "not-yet"
    env = {k: v for k, v in os.environ.items() if k != "MOEJIT_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(d)
    r = subprocess.run([sys.executable, "-m", "moejit", "info"], capture_output=True, text=True, check=True, env=env)
    assert str(d / "moejit") in r.stdout
    assert not d.exists()


def test_info_nvrtc_fields_are_consistent():
    info = moejit.info()
    assert (info["nvrtc"] is None) == (info["nvrtc_error"] is not None)
    if info["nvrtc"]:
        assert re.fullmatch(r"\d+\.\d+", info["nvrtc"])


def test_console_scripts_run_the_cpp_tools():
    r = run_tool("moejit-prewarm", "--help")
    assert r.returncode == 0 and "--max-num-tokens" in r.stdout
    r = run_tool("moejit-cache", "--help")
    assert r.returncode == 0 and "verify" in r.stdout
    r = run_tool("moejit-run", "--help")
    assert r.returncode == 0 and "--tokens" in r.stdout


def test_exceptions_form_one_hierarchy():
    assert issubclass(moejit.InvalidArgument, moejit.Error)
    assert issubclass(moejit.InvalidArgument, ValueError)
    for e in (moejit.CompileError, moejit.DriverError, moejit.SealedMiss):
        assert issubclass(e, moejit.Error) and issubclass(e, RuntimeError)


def test_device_helpers_without_or_with_a_driver():
    status = moejit.device.driver_status()
    assert moejit.device.available() == (status["loaded"] and status["device_count"] > 0)
    if not status["loaded"]:
        try:
            moejit.device.Buffer(256)
        except moejit.DriverError as e:
            assert "libcuda" in str(e) or "cuInit" in str(e)
        else:
            raise AssertionError("Buffer without a driver must raise DriverError")


def test_log_level_round_trips_and_rejects_unknown_names():
    before = moejit.log_level()
    try:
        for level in ("trace", "debug", "info", "warn", "error", "critical", "off"):
            moejit.set_log_level(level)
            assert moejit.log_level() == level
        with pytest.raises(moejit.InvalidArgument, match="level='loud'"):
            moejit.set_log_level("loud")
        assert moejit.log_level() == "off"  # a rejected name changes nothing
    finally:
        moejit.set_log_level(before)


def test_call_stamps_read_the_clock_of_perf_counter_ns():
    # bench/python_overhead.py subtracts the C++ call's stamps from a Python call
    # timed with time.perf_counter_ns: both must read one clock.
    import time
    from moejit import _moejit
    for _ in range(50):
        a = time.perf_counter_ns()
        b = _moejit._steady_clock_ns()
        c = time.perf_counter_ns()
        assert a <= b <= c
    # Stamps are per thread: a fresh thread, which launched nothing, reads zeros.
    import threading
    seen = []
    t = threading.Thread(target=lambda: seen.append(_moejit._last_layer_call_ns()))
    t.start()
    t.join()
    assert seen == [(0, 0, 0, 0)]
