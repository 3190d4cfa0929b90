"""python -m moejit --version | info [--json] | prewarm|cache|run ARGS (the C++ tools)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence


def _print_info(as_json: bool) -> int:
    import moejit

    info = moejit.info()
    if as_json:
        print(json.dumps(info, indent=2))
        return 0
    drv = info["driver"]
    print(f"moejit     {info['moejit']}")
    print(f"nvrtc      {info['nvrtc'] or 'not available: ' + (info['nvrtc_error'] or '')}")
    if drv["loaded"]:
        v = drv["driver_version"]
        print(f"driver     {drv['library']} (CUDA {v // 1000}.{v % 1000 // 10}), {drv['device_count']} device(s)")
    else:
        print(f"driver     not available: {drv['error']}")
    for g in info["gpus"]:
        if "error" in g:
            print(f"gpu {g['index']}      error: {g['error']}")
        else:
            cc = g["compute_capability"]
            print(f"gpu {g['index']}      {g['name']}, sm_{cc}, {g['multiprocessors']} SMs, "
                  f"{g['total_bytes'] / 2**30:.1f} GiB")
    print(f"cache dir  {info['cache_dir']}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("prewarm", "cache", "run"):
        from ._cli import exec_tool

        exec_tool("moejit-" + argv[0], argv[1:])
    p = argparse.ArgumentParser(prog="python -m moejit", description="moejit: MoE kernel JIT and disk cache")
    p.add_argument("--version", action="store_true", help="print the library version")
    sub = p.add_subparsers(dest="command")
    pi = sub.add_parser("info", help="versions of the library, NVRTC, driver, GPUs; the cache directory")
    pi.add_argument("--json", action="store_true", help="one JSON object")
    for name in ("prewarm", "cache", "run"):
        sub.add_parser(name, help=f"the moejit-{name} tool (arguments passed through)", add_help=False)
    a = p.parse_args(argv)
    if a.version:
        import moejit

        print(f"moejit {moejit.__version__}")
        return 0
    if a.command == "info":
        return _print_info(a.json)
    p.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
