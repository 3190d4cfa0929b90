"""Console scripts: moejit-prewarm, moejit-cache and moejit-run are the C++
tools shipped inside the package (moejit/_bin); these entry points exec them
with the same arguments, so they behave exactly as the installed tools."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn, Sequence

TOOLS = ("moejit-prewarm", "moejit-cache", "moejit-run")


def tool_path(name: str) -> Path:
    """The packaged executable of tool `name`; FileNotFoundError when the
    package was built without the tools."""
    if name not in TOOLS:
        raise ValueError(f"tool: expected one of {', '.join(TOOLS)}, got {name!r}")
    p = Path(__file__).resolve().parent / "_bin" / name
    if not p.is_file():
        raise FileNotFoundError(f"{name}: not in this moejit package ({p}); build it with MOEJIT_BUILD_TOOLS=ON")
    return p


def exec_tool(name: str, args: Sequence[str]) -> NoReturn:
    path = tool_path(name)
    os.execv(str(path), [name, *args])


def prewarm() -> NoReturn:
    exec_tool("moejit-prewarm", sys.argv[1:])


def cache() -> NoReturn:
    exec_tool("moejit-cache", sys.argv[1:])


def run() -> NoReturn:
    exec_tool("moejit-run", sys.argv[1:])
