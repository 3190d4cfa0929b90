"""Shared fixtures. Every test gets a private cache directory: the suite must
neither read nor pollute the user's ~/.cache/moejit."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    d = tmp_path / "moejit-cache"
    monkeypatch.setenv("MOEJIT_CACHE_DIR", str(d))
    monkeypatch.setenv("MOEJIT_LOG_LEVEL", os.environ.get("MOEJIT_LOG_LEVEL", "warn"))
    return d


def tool(name: str) -> list[str]:
    """The console script of a packaged tool (next to this Python), else python -m moejit."""
    exe = Path(sys.executable).parent / name
    if exe.exists():
        return [str(exe)]
    found = shutil.which(name)
    if found:
        return [found]
    return [sys.executable, "-m", "moejit", name.removeprefix("moejit-")]


def run_tool(name: str, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(tool(name) + list(args), capture_output=True, text=True, env=env, timeout=600)


def nvrtc_present() -> bool:
    import moejit

    return bool(moejit.nvrtc_version())


needs_nvrtc = pytest.mark.skipif(not nvrtc_present(), reason="libnvrtc not found: compiling kernels needs NVRTC")
