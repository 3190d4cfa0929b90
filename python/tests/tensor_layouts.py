"""Tensors of every layout the launch path's check meets, and the comparison of its
two reads (the DLPack exchange API and the Python attributes) over them; used by
test_torch_checks.py (CPU) and test_torch_gpu.py (CUDA)."""
from __future__ import annotations

import torch

import moejit
import moejit.torch as mt


def layouts(device: torch.device, D: int, K: int, MAX: int):
    """The layer's own layout, views with row and column strides, storage offsets,
    size-1 dimensions with any stride, broadcast rows, transposes, wrong dtypes and
    ranks, a subclass."""
    z = lambda *shape, dtype=torch.bfloat16: torch.zeros(shape, dtype=dtype, device=device)
    base = z(40, 4 * D)
    xs = [z(T, D) for T in (1, 5, MAX)]
    xs += [base[:5, D:2 * D], base[3:8, :D], base[:5, ::4][:, :D], base[:1, :D].as_strided((1, D), (7, 1)),
           z(1, D).expand(5, D), z(D, 5).t(), z(5, D, dtype=torch.float32), z(5, 1, D),
           torch.nn.Parameter(xs[1].clone(), False)]
    i32 = torch.int32
    ids = [z(T, K, dtype=i32) for T in (1, 5, MAX)]
    ids += [z(5, 2 * K, dtype=i32)[:, :K], z(K, 5, dtype=i32).t(), z(1, K, dtype=i32).as_strided((1, K), (99, 1)),
            z(5, 1, dtype=i32).expand(5, K), z(5, K, dtype=torch.int64)]
    ws = [i.to(torch.float32) if i.is_contiguous() else i.float().t().contiguous().t() for i in ids]
    return xs, ids, ws


def assert_both_reads_agree(device: torch.device, dev_index: int, D: int, K: int, MAX: int) -> None:
    """moejit.torch._fast_args gives the same answer through the DLPack exchange API as
    through the attribute reads, for every combination of layouts, checked against the
    device index dev_index (the tensors' own, and another)."""
    xs, ids, ws = layouts(device, D, K, MAX)
    cases = [(x, i, w, o) for x in xs for i in ids[:4] for w in ws[:2] for o in (None, xs[1], xs[4])]
    cases += [(xs[1], i, w, None) for i in ids for w in ws]
    devs = (dev_index, dev_index + 1)
    got = [[mt._fast_args(*c, D, K, MAX, d) for c in cases] for d in devs]
    assert any(g is not None for g in got[0]) and any(g is None for g in got[0])
    assert all(g is None for g in got[1])  # every tensor is on another device than the one asked for
    try:
        assert moejit._moejit._set_torch_tensor_type(None) is False  # attribute reads only
        assert not moejit._moejit._torch_dlpack_exchange()
        want = [[mt._fast_args(*c, D, K, MAX, d) for c in cases] for d in devs]
    finally:
        assert moejit._moejit._set_torch_tensor_type(torch.Tensor) is True
    for gd, wd in zip(got, want):
        for c, g, e in zip(cases, gd, wd):
            assert g == e, [(tuple(t.shape), t.stride(), t.dtype) if t is not None else None for t in c]
