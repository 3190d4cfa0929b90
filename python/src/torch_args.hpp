#pragma once
// The checks on MoeLayer.run's fast path (moejit.torch), made in C++: each
// tensor is read in one C call through the DLPack exchange API when its type
// publishes one (dlpack_exchange.hpp; torch >= 2.10), else through its Python
// attributes (dtype, shape, stride() or is_contiguous(), get_device(),
// data_ptr()) with the CPython API. Either way the extension needs no torch
// headers and works with any torch. One call replaces about twenty
// Python-level reads and the conversion of ten integer arguments.
#include <Python.h>

#include <cstdint>

namespace moejit::python {

// What the layer call takes, read from four tensors.
struct TorchLayerArgs {
  std::int64_t tokens = 0;                 // T
  std::int64_t x_row_stride = 0;           // elements
  std::int64_t out_row_stride = 0;         // elements (D when out is None)
  std::uintptr_t x = 0, topk_ids = 0, topk_weights = 0, out = 0;  // device addresses (out: 0 when None)
};

// The dtype objects the checks compare against by identity (torch.bfloat16,
// torch.int32, torch.float32). Set once by moejit.torch at import; until then
// read_layer_args() accepts nothing.
void set_torch_dtypes(PyObject* bf16, PyObject* i32, PyObject* f32);

enum class ReadResult { ok, mismatch, error };

// ok and `a` filled when x is bfloat16 [T, D] with unit column stride and
// rows that do not overlap (row stride >= D when T > 1; a one-token batch's
// stride is passed as D), 1 <= T <= max_tokens, topk_ids int32 and
// topk_weights float32 [T, top_k] contiguous, out None (Py_None) or bfloat16
// [T, D] laid out as x, and every tensor's get_device() == device. mismatch
// otherwise, also when an object is not a tensor or a read raises
// AttributeError, TypeError, ValueError, IndexError, OverflowError or
// RuntimeError (cleared): the caller then runs the checks that name the
// argument. error: a read raised anything else, which stays set for the
// caller to raise. Needs the GIL.
ReadResult read_layer_args(PyObject* x, PyObject* topk_ids, PyObject* topk_weights, PyObject* out, std::int64_t D,
                           std::int64_t top_k, std::int64_t max_tokens, long device, TorchLayerArgs& a) noexcept;

}  // namespace moejit::python
