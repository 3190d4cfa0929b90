"""MoeLayer argument checks that need no GPU: host arrays are refused with the
argument's name, weights before run, layouts per quant mode."""
from __future__ import annotations

import numpy as np
import pytest

import moejit

GPT_OSS_SMALL = moejit.MoeLayerShape(hidden=256, intermediate=128, experts=4, top_k=2, act="swiglu_oai",
                                     alpha=1.702, limit=7.0, gate_up_bias="bf16", down_bias="bf16")


def layer(quant: str = "w4a16_mxfp4") -> moejit.MoeLayer:
    return moejit.MoeLayer(moejit.Runtime(use_disk_cache=False), GPT_OSS_SMALL, quant)


def test_layer_properties():
    l = layer()
    assert l.quant == "w4a16_mxfp4" and l.weight_scale == "e8m0_block32" and l.target == "sm_90a"
    assert l.shape == GPT_OSS_SMALL and not l.has_weights


def test_host_arrays_are_refused_with_the_argument_name():
    l = layer()
    E, N1, D, I = 4, 256, 256, 128
    with pytest.raises(moejit.InvalidArgument, match=r"^w1: expected a CUDA array"):
        l.set_weights(np.zeros((E, N1, D // 2), np.uint8), None, None, np.zeros((E, D, I // 2), np.uint8), None, None)


def test_run_before_set_weights():
    l = layer()
    a = np.zeros((1, 256), np.float32)
    with pytest.raises(moejit.InvalidArgument, match="set_weights"):
        l.run(a, a, a, a, a, 0)
    with pytest.raises(moejit.InvalidArgument, match="set_weights"):
        l.run_ptr(1, 0, 0, 0, 0, 0, 0, 0, 0, 0)


def test_host_time_us_names_an_unknown_wait_before_anything_else():
    # The wait kind is checked first: no weights, no GPU needed to see the error.
    with pytest.raises(moejit.InvalidArgument, match="wait: expected 'stream' or 'context', got 'device'"):
        layer().host_time_us(1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, wait="device")
    with pytest.raises(moejit.InvalidArgument, match="set_weights"):
        layer().host_time_us(1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, wait="context")


def test_run_step_names_unknown_steps():
    with pytest.raises(moejit.InvalidArgument, match="step.*'shuffle'"):
        layer().run_step("shuffle", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


def test_weight_scale_must_fit_the_quant_mode():
    with pytest.raises(moejit.InvalidArgument, match="per_channel|wscale|weight"):
        moejit.MoeLayer(moejit.Runtime(use_disk_cache=False), GPT_OSS_SMALL, "bf16", weight_scale="per_channel")


def test_weight_gradient_shape_checks():
    rt = moejit.Runtime(use_disk_cache=False)
    w = moejit.MoeWgrad(rt, experts=8, top_k=2, n=512, k=256)
    assert (w.experts, w.n, w.k, w.out_dtype) == (8, 512, 256, "f32")
    assert w.key(300).op == "wgrad" and w.key(300).token_bucket == moejit.round_up_tokens(300)
    with pytest.raises(moejit.InvalidArgument, match="100"):
        moejit.MoeWgrad(rt, experts=8, top_k=2, n=100, k=256)
    with pytest.raises(moejit.InvalidArgument, match="gather.*'sideways'"):
        w.run_ptr(1, 0, 0, 0, 0, "sideways", 0, 0, 0, 0, 0)
