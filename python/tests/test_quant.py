"""The CPU quantizers through DLPack (numpy arrays) against an independent
numpy statement of the MX block rule (docs/formats.md)."""
from __future__ import annotations

import numpy as np
import pytest

import moejit

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def mxfp4_reference(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest s with amax <= 6 * 2^s (clamped to [-127, 127]); elements RNE to
    e2m1 (ties to the even code), sign kept; NaN/Inf blocks: scale 0xFF, codes 0."""
    rows, cols = w.shape
    blocks = w.astype(np.float64).reshape(rows, cols // 32, 32)
    codes = np.zeros(blocks.shape, dtype=np.uint8)
    scales = np.zeros(blocks.shape[:2], dtype=np.uint8)
    for r in range(rows):
        for b in range(cols // 32):
            x = blocks[r, b]
            if not np.all(np.isfinite(x)):
                scales[r, b] = 0xFF
                continue
            amax = np.abs(x).max()
            s = -127
            if amax > 0:
                s = int(np.ceil(np.log2(amax / 6.0)))  # then made exact: log2 rounds
                while amax > 6.0 * 2.0 ** s:
                    s += 1
                while amax <= 6.0 * 2.0 ** (s - 1):
                    s -= 1
                s = int(np.clip(s, -127, 127))
            scales[r, b] = s + 127
            y = np.abs(x) / 2.0 ** s
            d = np.abs(y[:, None] - E2M1[None, :])
            best = d.min(axis=1, keepdims=True)
            ties = np.isclose(d, best, rtol=0, atol=0)
            idx = np.array([np.flatnonzero(t)[0] if t.sum() == 1 else
                            [i for i in np.flatnonzero(t) if i % 2 == 0][0] for t in ties])
            codes[r, b] = idx | np.where(np.signbit(x), 8, 0).astype(np.uint8)
    packed = (codes.reshape(rows, cols)[:, 0::2] | (codes.reshape(rows, cols)[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales


def test_mxfp4_matches_the_block_rule_bit_for_bit():
    rng = np.random.default_rng()
    w = (rng.standard_normal((24, 128)) * np.exp(rng.uniform(-6, 6, size=(24, 1)))).astype(np.float32)
    w[0, :32] = 0.0
    w[1, :32] = -0.0
    w[2, 5] = 6.0 * 2.0 ** 3  # exactly at a binade edge
    w[3, :32] = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0] * 4 + [6.0] * 4, dtype=np.float32)  # ties
    w[4, 40] = np.nan
    w[5, 100] = np.inf
    data, scales = moejit.quantize_mxfp4(w)
    want_data, want_scales = mxfp4_reference(w)
    assert data.shape == (24, 64) and scales.shape == (24, 4)
    np.testing.assert_array_equal(scales, want_scales)
    np.testing.assert_array_equal(data, want_data)


def test_mxfp4_dequantize_is_exact_and_nan_blocks_stay_nan():
    rng = np.random.default_rng()
    w = rng.standard_normal((3, 8, 64)).astype(np.float32)
    w[1, 2, 33] = np.nan
    data, scales = moejit.quantize_mxfp4(w)
    assert data.shape == (3, 8, 32) and scales.shape == (3, 8, 2)
    back = moejit.dequantize_mxfp4(data, scales)
    assert back.shape == w.shape and back.dtype == np.float32
    assert np.all(np.isnan(back[1, 2, 32:])) and not np.any(np.isnan(back[1, 2, :32]))
    ok = np.isfinite(w)
    ok[1, 2, 32:] = False
    # Half the widest e2m1 step in reach: (4, 6] -> 1 * 2^s with amax >= 4 * 2^s.
    rel = np.abs(back[ok] - w[ok]) / np.repeat(np.abs(w).reshape(-1, 32).max(axis=1), 32)[ok.reshape(-1)]
    assert rel.max() <= 0.25 + 1e-7


def test_fp8_quantizers_shapes_and_scales():
    rng = np.random.default_rng()
    x = rng.standard_normal((5, 96)).astype(np.float32)
    codes, scales = moejit.quantize_fp8_per_token(x)
    assert codes.shape == (5, 96) and codes.dtype == np.uint8 and scales.shape == (5,)
    np.testing.assert_allclose(scales, np.abs(x).max(axis=1) / 448.0, rtol=1e-6)
    codes8, scales8 = moejit.quantize_mxfp8(x)
    assert codes8.shape == (5, 96) and scales8.shape == (5, 3)


@pytest.mark.parametrize("call, words", [
    (lambda: moejit.quantize_mxfp4(np.zeros((2, 48), np.float32)), ["w", "multiple of 32", "48"]),
    (lambda: moejit.quantize_mxfp4(np.zeros((2, 64), np.float64)), ["w", "float64"]),
    (lambda: moejit.quantize_mxfp4(np.zeros((64, 2), np.float32).T), ["w", "contiguous"]),
    (lambda: moejit.dequantize_mxfp4(np.zeros((2, 32), np.uint8), np.zeros((2, 3), np.uint8)), ["scales"]),
])
def test_quantizer_errors_name_the_argument(call, words):
    with pytest.raises(moejit.InvalidArgument) as e:
        call()
    for w in words:
        assert w in str(e.value), str(e.value)
