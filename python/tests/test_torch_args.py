"""The C++ check on MoeLayer.run's fast path (moejit._moejit._torch_layer_args, also what
TorchLayerCall runs before it launches), on stand-in tensors: objects with torch.Tensor's
attributes (dtype, shape, stride(), is_contiguous(), get_device(), data_ptr()). No torch needed; with torch,
test_torch_checks.py runs the same check on real tensors."""
from __future__ import annotations

import sys

import pytest

from moejit import _moejit

D, K, MAX, DEV = 64, 2, 16, 0


class Dtype:
    def __init__(self, name):
        self.name = name


BF16, I32, F32 = Dtype("bf16"), Dtype("i32"), Dtype("f32")


class Fake:
    """A 2-D tensor's Python surface, as torch.Tensor presents it."""

    def __init__(self, dtype, shape, stride=None, device=DEV, ptr=0x10000):
        self.dtype, self.shape = dtype, tuple(shape)
        self._stride = tuple(stride) if stride is not None else (self.shape[-1], 1)[-len(self.shape):]
        self._device, self._ptr = device, ptr

    def stride(self):
        return self._stride

    def is_contiguous(self):
        # torch's rule: the stride of a dimension of size <= 1 does not count
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self._stride)):
            if size > 1 and stride != expected:
                return False
            expected *= size
        return True

    def get_device(self):
        return self._device

    def data_ptr(self):
        return self._ptr


class Raises(Fake):
    def get_device(self):
        raise RuntimeError("not readable")


class ContiguousNotABool(Fake):
    def is_contiguous(self):
        return 1  # truthy, but not what torch returns: refused


class Interrupted(Fake):
    def get_device(self):
        raise KeyboardInterrupt


@pytest.fixture(autouse=True)
def stand_in_dtypes():
    _moejit._set_torch_dtypes(BF16, I32, F32)
    yield
    if "moejit.torch" in sys.modules:  # give the real dtypes back to the torch integration
        import torch
        _moejit._set_torch_dtypes(torch.bfloat16, torch.int32, torch.float32)


def tensors(T=5):
    return (Fake(BF16, (T, D), ptr=0x1000), Fake(I32, (T, K), ptr=0x2000), Fake(F32, (T, K), ptr=0x3000),
            Fake(BF16, (T, D), ptr=0x4000))


def check(x, i, w, o, dev=DEV):
    """(T, x row stride, out row stride) after checking the addresses read with them."""
    got = _moejit._torch_layer_args(x, i, w, o, D, K, MAX, dev)
    if got is not None:
        assert got[3:] == (x.data_ptr(), i.data_ptr(), w.data_ptr(), o.data_ptr() if o is not None else 0)
        got = got[:3]
    return got


def test_accepts_what_the_layer_takes():
    x, i, w, o = tensors()
    assert check(x, i, w, o) == (5, D, D)
    assert check(x, i, w, None) == (5, D, D)
    # row strides of x and out are passed on; a one-token batch's ids and weights may have any row stride
    assert check(Fake(BF16, (5, D), (3 * D, 1)), i, w, Fake(BF16, (5, D), (2 * D, 1))) == (5, 3 * D, 2 * D)
    assert check(Fake(BF16, (1, D)), Fake(I32, (1, K), (99, 1)), Fake(F32, (1, K), (7, 1)), None) == (1, D, D)
    # a one-token batch's row strides mean nothing: passed on as D
    assert check(Fake(BF16, (1, D), (1, 1)), Fake(I32, (1, K)), Fake(F32, (1, K)), Fake(BF16, (1, D), (5, 1))) == (1, D, D)
    assert check(*tensors(MAX)) == (MAX, D, D)


@pytest.mark.parametrize("case", [
    "x dtype", "x cols", "x 3-D", "x 1-D", "x cols strided", "x no tokens", "x too many tokens", "x not a tensor",
    "ids dtype", "ids shape", "ids rows strided", "ids cols strided", "weights dtype", "weights rows",
    "out dtype", "out shape", "out cols strided", "x device", "ids device", "weights device", "out device",
    "read raises", "contiguous not a bool", "dtypes of another torch", "x rows broadcast", "x rows overlap", "out rows broadcast",
])
def test_refuses_every_mismatch(case):
    x, i, w, o = tensors()
    dev = DEV
    if case == "x dtype":
        x = Fake(F32, (5, D))
    elif case == "x cols":
        x = Fake(BF16, (5, D + 2))
    elif case == "x 3-D":
        x = Fake(BF16, (5, 1, D), (D, D, 1))
    elif case == "x 1-D":
        x = Fake(BF16, (5 * D,), (1,))
    elif case == "x cols strided":
        x = Fake(BF16, (5, D), (2 * D, 2))
    elif case == "x no tokens":
        x, i, w, o = tensors(0)
    elif case == "x too many tokens":
        x, i, w, o = tensors(MAX + 1)
    elif case == "x not a tensor":
        x = [[0.0] * D] * 5
    elif case == "ids dtype":
        i = Fake(F32, (5, K))
    elif case == "ids shape":
        i = Fake(I32, (5, K + 1))
    elif case == "ids rows strided":
        i = Fake(I32, (5, K), (K + 1, 1))
    elif case == "ids cols strided":
        i = Fake(I32, (5, K), (1, 5))
    elif case == "weights dtype":
        w = Fake(BF16, (5, K))
    elif case == "weights rows":
        w = Fake(F32, (4, K))
    elif case == "out dtype":
        o = Fake(F32, (5, D))
    elif case == "out shape":
        o = Fake(BF16, (6, D))
    elif case == "out cols strided":
        o = Fake(BF16, (5, D), (2 * D, 2))
    elif case == "x device":
        dev = 1
    elif case == "ids device":
        i = Fake(I32, (5, K), device=3)
    elif case == "weights device":
        w = Fake(F32, (5, K), device=-1)
    elif case == "out device":
        o = Fake(BF16, (5, D), device=3)
    elif case == "read raises":
        w = Raises(F32, (5, K))
    elif case == "contiguous not a bool":
        i = ContiguousNotABool(I32, (5, K))
    elif case == "x rows broadcast":
        x = Fake(BF16, (5, D), (0, 1))  # one row seen five times: the kernels would read past it
    elif case == "x rows overlap":
        x = Fake(BF16, (5, D), (D - 8, 1))
    elif case == "out rows broadcast":
        o = Fake(BF16, (5, D), (0, 1))
    elif case == "dtypes of another torch":
        x = Fake(Dtype("bf16"), (5, D))  # equal name, other object: dtypes compare by identity
    assert check(x, i, w, o, dev) is None, case
    assert _moejit.round_up_tokens(3) == 3  # no Python error left pending


def test_an_exception_that_is_no_mismatch_propagates():
    x, i, w, o = tensors()
    with pytest.raises(KeyboardInterrupt):
        check(x, Interrupted(I32, (5, K)), w, o)
