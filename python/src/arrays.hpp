#pragma once
// Checks of DLPack arrays at the Python boundary: device, dtype, shape and
// strides, with errors that name the argument ("x: expected dtype bfloat16,
// got float32"). Raised as moejit.InvalidArgument.
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "moejit/types.hpp"

namespace moejit::python {

namespace nb = nanobind;
using AnyArray = nb::ndarray<>;

enum class Where : std::uint8_t { cpu, cuda };

// "bfloat16", "uint8", ...
std::string dtype_name(nb::dlpack::dtype dt);
// The moejit DType of a DLPack dtype (e4m3 also from float8_e4m3fn); DType::none when none fits.
DType to_dtype(nb::dlpack::dtype dt);
nb::dlpack::dtype to_dlpack(DType d);

// "[4, 2880]"
std::string shape_text(const AnyArray& a);

// Throws InvalidArgument naming `name` unless `a` lives on `where`, has one of
// the dtypes (DType::u8 also accepts float8_e4m3fn for e4m3 data and vice versa),
// has exactly `shape` (-1: any extent) and is C-contiguous (when `contiguous`).
void check_array(const AnyArray& a, const char* name, Where where, std::initializer_list<DType> dtypes,
                 std::initializer_list<std::int64_t> shape, bool contiguous = true);
// The same for any rank: device, dtype, C-contiguity.
void check_array_any_rank(const AnyArray& a, const char* name, Where where, std::initializer_list<DType> dtypes);
// Row stride in elements of a 2-D array whose rows are contiguous.
std::int64_t row_stride(const AnyArray& a, const char* name);

inline DevicePtr device_ptr(const AnyArray& a) {
  return static_cast<DevicePtr>(reinterpret_cast<std::uintptr_t>(a.data()));
}
inline CUstream to_stream(std::uintptr_t s) { return reinterpret_cast<CUstream>(s); }

}  // namespace moejit::python
