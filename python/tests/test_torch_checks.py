"""MoeLayer.run's argument checks on CPU tensors (torch without a GPU): the fast path accepts
exactly the tensors the layer takes and hands the right addresses and strides to the C++
call; every mismatch goes to the checks that raise, and nothing is launched. Skipped
without torch; test_torch_gpu.py checks each named error on the GPU."""
from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")
import moejit  # noqa: E402
import moejit.torch as mt  # noqa: E402
from tensor_layouts import assert_both_reads_agree  # noqa: E402

D, K, MAX = 64, 2, 16


def tensors(T=5):
    return (torch.zeros((T, D), dtype=torch.bfloat16), torch.zeros((T, K), dtype=torch.int32),
            torch.zeros((T, K), dtype=torch.float32), torch.zeros((T, D), dtype=torch.bfloat16))


def test_fast_path_accepts_what_the_layer_takes():
    x, i, w, o = tensors()
    ptrs = (x.data_ptr(), i.data_ptr(), w.data_ptr())
    assert mt._fast_args(x, i, w, o, D, K, MAX, -1) == (5, D, D) + ptrs + (o.data_ptr(),)
    assert mt._fast_args(x, i, w, None, D, K, MAX, -1) == (5, D, D) + ptrs + (0,)
    wide = torch.zeros((5, 3 * D), dtype=torch.bfloat16)
    x2, o2 = wide[:, D:2 * D], wide[:, :D]
    assert mt._fast_args(x2, i, w, o2, D, K, MAX, -1) == (5, 3 * D, 3 * D, x2.data_ptr()) + ptrs[1:] + (o2.data_ptr(),)


def test_dlpack_exchange_and_attribute_reads_accept_the_same_tensors():
    if not mt.dlpack_exchange:
        pytest.skip(f"torch {torch.__version__} publishes no DLPack exchange API")
    assert_both_reads_agree(torch.device("cpu"), -1, D, K, MAX)


class OnDevice3(torch.Tensor):
    """A tensor that says it is on CUDA device 3 (the index comparison, per tensor)."""

    def get_device(self):
        return 3


@pytest.mark.parametrize("case", [
    "x dtype", "x cols", "x 3-D", "x rows strided", "x too many tokens", "x not a tensor", "ids dtype", "ids shape",
    "ids not contiguous", "weights dtype", "weights rows", "out dtype", "out shape", "out cols strided",
    "device", "ids device", "weights device", "out device",
])
def test_fast_path_refuses_every_mismatch(case):
    x, i, w, o = tensors()
    if case == "x dtype":
        x = x.float()
    elif case == "x cols":
        x = torch.zeros((5, D + 2), dtype=torch.bfloat16)
    elif case == "x 3-D":
        x = x.view(5, 1, D)
    elif case == "x rows strided":
        x = torch.zeros((5, 2 * D), dtype=torch.bfloat16)[:, ::2]
    elif case == "x too many tokens":
        x, i, w, o = tensors(MAX + 1)
    elif case == "x not a tensor":
        x = [[0.0] * D] * 5
    elif case == "ids dtype":
        i = i.long()
    elif case == "ids shape":
        i = torch.zeros((5, K + 1), dtype=torch.int32)
    elif case == "ids not contiguous":
        i = torch.zeros((K, 5), dtype=torch.int32).t()
    elif case == "weights dtype":
        w = w.half()
    elif case == "weights rows":
        w = torch.zeros((4, K), dtype=torch.float32)
    elif case == "out dtype":
        o = o.float()
    elif case == "out shape":
        o = torch.zeros((6, D), dtype=torch.bfloat16)
    elif case == "out cols strided":
        o = torch.zeros((5, 2 * D), dtype=torch.bfloat16)[:, ::2]
    elif case == "ids device":
        i = i.as_subclass(OnDevice3)
    elif case == "weights device":
        w = w.as_subclass(OnDevice3)
    elif case == "out device":
        o = o.as_subclass(OnDevice3)
    dev = 0 if case == "device" else -1  # CPU tensors report -1: a layer on cuda:0 refuses them
    assert mt._fast_args(x, i, w, o, D, K, MAX, dev) is None, case


def fake_layer(device_index=-1):
    """A MoeLayer's attributes without a GPU: the C++ call (check, then launch) recorded
    instead of launched."""
    shape = moejit.MoeLayerShape(hidden=D, intermediate=32, experts=4, top_k=K)
    calls = []
    layer = types.SimpleNamespace(_device_index=device_index, _hidden=D, _top_k=K, max_num_tokens=MAX,
                                  device=torch.device("cuda", 0) if device_index >= 0 else torch.device("cpu"),
                                  shape=shape, _ws_ptr=4096, _ws_bytes=1 << 20, calls=calls)

    def call(x, i, w, o, stream):  # TorchLayerCall: False (nothing launched) when the check refuses
        a = mt._fast_args(x, i, w, o, D, K, MAX, device_index)
        if a is None:
            return False
        calls.append(a + (stream,))
        return True
    layer._call = call
    layer.core = types.SimpleNamespace(run_ptr=lambda *a: calls.append(a))
    layer._check_inputs = lambda *a: mt.MoeLayer._check_inputs(layer, *a)
    return layer


def test_run_hands_addresses_and_strides_to_the_cpp_call(monkeypatch):
    monkeypatch.setattr(mt, "_stream_of", lambda index: 77)
    layer = fake_layer()
    wide = torch.zeros((5, 2 * D), dtype=torch.bfloat16)
    x = wide[:, D:]
    _, i, w, o = tensors()
    got = mt.MoeLayer.run(layer, x, i, w, out=o)
    assert got is o
    assert layer.calls == [(5, 2 * D, D, x.data_ptr(), i.data_ptr(), w.data_ptr(), o.data_ptr(), 77)]
    got = mt.MoeLayer.run(layer, x, i, w)  # out allocated: [T, D] bfloat16 on the layer's device
    assert got.shape == (5, D) and got.dtype == torch.bfloat16 and layer.calls[-1][6] == got.data_ptr()


@pytest.mark.parametrize("bad", [
    lambda x, i, w, o: (x.float(), i, w, o),
    lambda x, i, w, o: (x, i.long(), w, o),
    lambda x, i, w, o: (x, i, w[:4], o),
    lambda x, i, w, o: (x, torch.zeros((K, 5), dtype=torch.int32).t(), w, o),
    lambda x, i, w, o: (x, i, w, o[:, :D - 2]),
    lambda x, i, w, o: (torch.zeros((MAX + 1, D), dtype=torch.bfloat16), torch.zeros((MAX + 1, K), dtype=torch.int32),
                        torch.zeros((MAX + 1, K)), None),
])
def test_a_mismatch_raises_and_launches_nothing(monkeypatch, bad):
    monkeypatch.setattr(mt, "_stream_of", lambda index: 0)
    layer = fake_layer()
    x, i, w, o = bad(*tensors())
    with pytest.raises(moejit.InvalidArgument):  # on CPU the first finding is the host tensor itself
        mt.MoeLayer.run(layer, x, i, w, out=o)
    assert layer.calls == []


def test_a_layer_on_a_gpu_refuses_host_tensors(monkeypatch):
    monkeypatch.setattr(mt, "_stream_of", lambda index: 0)
    layer = fake_layer(device_index=0)
    x, i, w, o = tensors()
    with pytest.raises(moejit.InvalidArgument, match="x: expected a CUDA tensor"):
        mt.MoeLayer.run(layer, x, i, w, out=o)
    assert layer.calls == []
