#pragma once
// torch tensors read through the DLPack C exchange API: a table of C function
// pointers that a tensor library publishes on its tensor type (torch >= 2.10:
// torch.Tensor.__dlpack_c_exchange_api__, a PyCapsule named
// "dlpack_exchange_api"; the earlier spelling __c_dlpack_exchange_api__, an
// integer address, is accepted too). Its dltensor_from_py_object_no_sync fills
// a non-owning DLTensor (data, device, dtype, shape, strides) of a tensor in one
// C call, where the Python attributes take one call each. Source: DLPack
// (github.com/dmlc/dlpack) include/dlpack/dlpack.h, "DLPackExchangeAPI",
// version 1; the structs below mirror it (no torch or DLPack headers needed).
#include <Python.h>

#include <cstddef>
#include <cstdint>

namespace moejit::python {

// DLTensor (dlpack.h): the layout is stable across DLPack versions.
struct DlTensor {
  void* data;
  std::int32_t device_type;  // 1 kDLCPU, 2 kDLCUDA
  std::int32_t device_id;
  std::int32_t ndim;
  std::uint8_t code;         // 0 kDLInt, 1 kDLUInt, 2 kDLFloat, 4 kDLBfloat
  std::uint8_t bits;
  std::uint16_t lanes;
  const std::int64_t* shape;    // [ndim]
  const std::int64_t* strides;  // [ndim] in elements, or null: compact row-major
  std::uint64_t byte_offset;
};
static_assert(sizeof(DlTensor) == 48 && offsetof(DlTensor, shape) == 24 && offsetof(DlTensor, byte_offset) == 40,
              "DLTensor layout");

enum : std::int32_t { kDlCpu = 1, kDlCuda = 2 };
enum : std::uint8_t { kDlInt = 0, kDlFloat = 2, kDlBfloat = 4 };

// The tensor type whose exchange API the reads use (torch.Tensor, set by
// moejit.torch at import). True when that type publishes a version-1 API with
// dltensor_from_py_object_no_sync; otherwise every read returns false (the
// caller reads the Python attributes). Needs the GIL.
bool set_exchange_tensor_type(PyObject* type);
bool exchange_available();

// Fills `out` when `t`'s type is exactly the registered tensor type and the
// library describes it (out is valid while `t` is alive and unchanged). False
// otherwise, with no Python error left set. Needs the GIL.
bool exchange_read(PyObject* t, DlTensor& out) noexcept;

}  // namespace moejit::python
