#include "arrays.hpp"

#include <algorithm>

#include "moejit/error.hpp"

namespace moejit::python {

using code = nb::dlpack::dtype_code;

std::string dtype_name(nb::dlpack::dtype dt) {
  std::string base;
  switch (static_cast<code>(dt.code)) {
    case code::Int: base = "int"; break;
    case code::UInt: base = "uint"; break;
    case code::Float: base = "float"; break;
    case code::Bfloat: base = "bfloat"; break;
    case code::Bool: return "bool";
    case code::Float8_E4M3FN: return "float8_e4m3fn";
    case code::Float8_E5M2: return "float8_e5m2";
    case code::Float8_E8M0FNU: return "float8_e8m0fnu";
    default: base = "dlpack_code" + std::to_string(dt.code) + "_"; break;
  }
  std::string s = base + std::to_string(dt.bits);
  if (dt.lanes != 1) s += "x" + std::to_string(dt.lanes);
  return s;
}

DType to_dtype(nb::dlpack::dtype dt) {
  if (dt.lanes != 1) return DType::none;
  switch (static_cast<code>(dt.code)) {
    case code::Float: return dt.bits == 32 ? DType::f32 : dt.bits == 16 ? DType::f16 : DType::none;
    case code::Bfloat: return dt.bits == 16 ? DType::bf16 : DType::none;
    case code::UInt: return dt.bits == 8 ? DType::u8 : DType::none;
    case code::Int: return dt.bits == 32 ? DType::i32 : DType::none;
    case code::Float8_E4M3FN: return dt.bits == 8 ? DType::e4m3 : DType::none;
    default: return DType::none;
  }
}

nb::dlpack::dtype to_dlpack(DType d) {
  switch (d) {
    case DType::f32: return nb::dtype<float>();
    case DType::bf16: return {static_cast<std::uint8_t>(code::Bfloat), 16, 1};
    case DType::f16: return {static_cast<std::uint8_t>(code::Float), 16, 1};
    case DType::e4m3: return {static_cast<std::uint8_t>(code::Float8_E4M3FN), 8, 1};
    case DType::u8: return nb::dtype<std::uint8_t>();
    case DType::i32: return nb::dtype<std::int32_t>();
    default: return {};
  }
}

namespace {
std::string torch_like(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::e4m3: return "float8_e4m3fn";
    case DType::u8: return "uint8";
    case DType::i32: return "int32";
    default: return "none";
  }
}
bool same_bytes(DType want, DType got) {
  // e4m3 codes may come as uint8 or float8_e4m3fn, and uint8 scale/code bytes as float8.
  if (want == got) return true;
  return (want == DType::u8 && got == DType::e4m3) || (want == DType::e4m3 && got == DType::u8);
}
}  // namespace

std::string shape_text(const AnyArray& a) {
  std::string s = "[";
  for (std::size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

void check_array(const AnyArray& a, const char* name, Where where, std::initializer_list<DType> dtypes,
                 std::initializer_list<std::int64_t> shape, bool contiguous) {
  const std::string n(name);
  const bool cuda = a.device_type() == nb::device::cuda::value || a.device_type() == nb::device::cuda_managed::value;
  const bool cpu = a.device_type() == nb::device::cpu::value || a.device_type() == nb::device::cuda_host::value;
  if (where == Where::cuda && !cuda)
    throw InvalidArgument(n + ": expected a CUDA array (device memory), got one on DLPack device type " +
                          std::to_string(a.device_type()) + (cpu ? " (cpu)" : ""));
  if (where == Where::cpu && !cpu)
    throw InvalidArgument(n + ": expected a CPU array, got one on DLPack device type " +
                          std::to_string(a.device_type()));
  const DType got = to_dtype(a.dtype());
  if (std::none_of(dtypes.begin(), dtypes.end(), [&](DType d) { return same_bytes(d, got); })) {
    std::string want;
    for (DType d : dtypes) want += (want.empty() ? "" : " or ") + torch_like(d);
    throw InvalidArgument(n + ": expected dtype " + want + ", got " + dtype_name(a.dtype()));
  }
  bool ok = a.ndim() == shape.size();
  std::size_t i = 0;
  std::string want = "[";
  for (std::int64_t s : shape) {
    want += (i ? ", " : "") + (s < 0 ? std::string("*") : std::to_string(s));
    if (ok && s >= 0 && static_cast<std::int64_t>(a.shape(i)) != s) ok = false;
    ++i;
  }
  want += "]";
  if (!ok) throw InvalidArgument(n + ": expected shape " + want + ", got " + shape_text(a));
  if (contiguous && a.ndim() > 0 && a.stride_ptr()) {
    std::int64_t expect = 1;
    for (std::size_t d = a.ndim(); d-- > 0;) {
      if (a.shape(d) != 1 && a.stride(d) != expect)
        throw InvalidArgument(n + ": expected a C-contiguous array, got shape " + shape_text(a) +
                              " with stride " + std::to_string(a.stride(d)) + " in dimension " + std::to_string(d));
      expect *= static_cast<std::int64_t>(a.shape(d));
    }
  }
}

void check_array_any_rank(const AnyArray& a, const char* name, Where where, std::initializer_list<DType> dtypes) {
  const std::string n(name);
  const bool cuda = a.device_type() == nb::device::cuda::value || a.device_type() == nb::device::cuda_managed::value;
  const bool cpu = a.device_type() == nb::device::cpu::value || a.device_type() == nb::device::cuda_host::value;
  if ((where == Where::cuda && !cuda) || (where == Where::cpu && !cpu))
    throw InvalidArgument(n + ": expected a " + (where == Where::cuda ? "CUDA" : "CPU") +
                          " array, got one on DLPack device type " + std::to_string(a.device_type()));
  const DType got = to_dtype(a.dtype());
  if (std::none_of(dtypes.begin(), dtypes.end(), [&](DType d) { return same_bytes(d, got); })) {
    std::string want;
    for (DType d : dtypes) want += (want.empty() ? "" : " or ") + torch_like(d);
    throw InvalidArgument(n + ": expected dtype " + want + ", got " + dtype_name(a.dtype()));
  }
  if (a.stride_ptr()) {
    std::int64_t expect = 1;
    for (std::size_t d = a.ndim(); d-- > 0;) {
      if (a.shape(d) != 1 && a.stride(d) != expect)
        throw InvalidArgument(n + ": expected a C-contiguous array, got shape " + shape_text(a) + " with stride " +
                              std::to_string(a.stride(d)) + " in dimension " + std::to_string(d));
      expect *= static_cast<std::int64_t>(a.shape(d));
    }
  }
}

std::int64_t row_stride(const AnyArray& a, const char* name) {
  if (a.ndim() != 2) throw InvalidArgument(std::string(name) + ": expected 2 dimensions, got " + shape_text(a));
  if (a.shape(1) > 1 && a.stride_ptr() && a.stride(1) != 1)
    throw InvalidArgument(std::string(name) + ": rows must be contiguous (stride 1 along dimension 1), got stride " +
                          std::to_string(a.stride(1)));
  if (!a.stride_ptr()) return static_cast<std::int64_t>(a.shape(1));
  return a.shape(0) <= 1 ? static_cast<std::int64_t>(a.shape(1)) : a.stride(0);
}

}  // namespace moejit::python
