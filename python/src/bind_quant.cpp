// Quantizers: CPU ones over host arrays (numpy or CPU tensors through DLPack),
// GPU ones over CUDA arrays on the caller's stream.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "moejit/error.hpp"
#include "moejit/quant.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {
namespace {

template <class T>
using NpArray = nb::ndarray<nb::numpy, T>;

// A new numpy array of `shape` owning its storage.
template <class T>
NpArray<T> new_array(std::vector<std::size_t> shape) {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  auto* v = new std::vector<T>(n);
  nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return NpArray<T>(v->data(), shape.size(), shape.data(), owner);
}

// rows x cols of a C-contiguous host array (cols = last dimension).
std::pair<std::uint64_t, std::uint32_t> rows_cols(const AnyArray& a, const char* name) {
  if (a.ndim() < 1) throw InvalidArgument(std::string(name) + ": expected at least 1 dimension");
  std::uint64_t rows = 1;
  for (std::size_t i = 0; i + 1 < a.ndim(); ++i) rows *= a.shape(i);
  return {rows, static_cast<std::uint32_t>(a.shape(a.ndim() - 1))};
}

std::vector<std::size_t> with_last(const AnyArray& a, std::size_t last) {
  std::vector<std::size_t> s;
  for (std::size_t i = 0; i + 1 < a.ndim(); ++i) s.push_back(a.shape(i));
  s.push_back(last);
  return s;
}


template <class F32, class BF16>
auto dispatch_in(const AnyArray& w, F32 f32, BF16 bf16) {
  if (to_dtype(w.dtype()) == DType::f32) return f32(static_cast<const float*>(w.data()));
  return bf16(static_cast<const std::uint16_t*>(w.data()));
}

void check_cols32(std::uint32_t cols, const char* name) {
  if (cols % kMxBlockSize != 0)
    throw InvalidArgument(std::string(name) + ": the last dimension (cols) must be a multiple of 32, got " +
                          std::to_string(cols));
}

}  // namespace

void bind_quant(nb::module_& m) {
  m.def(
      "quantize_mxfp4",
      [](const AnyArray& w) {
        check_array_any_rank(w, "w", Where::cpu, {DType::f32, DType::bf16});
        const auto [rows, cols] = rows_cols(w, "w");
        check_cols32(cols, "w");
        auto data = new_array<std::uint8_t>(with_last(w, cols / 2));
        auto scales = new_array<std::uint8_t>(with_last(w, cols / 32));
        {
          nb::gil_scoped_release release;
          dispatch_in(
              w, [&](const float* p) { quantize_mxfp4_cpu(p, rows, cols, data.data(), scales.data()); return 0; },
              [&](const std::uint16_t* p) { quantize_mxfp4_cpu(p, rows, cols, data.data(), scales.data()); return 0; });
        }
        return std::make_tuple(data, scales);
      },
      "w"_a,
      "MXFP4 on the CPU: w float32 or bfloat16 [..., cols] (cols % 32 == 0, C-contiguous, host memory)\n"
      "-> (data uint8 [..., cols/2] (element 2i in the low nibble), scales uint8 [..., cols/32] E8M0).\n"
      "Bit-identical to the GPU quantizer.");
  m.def(
      "dequantize_mxfp4",
      [](const AnyArray& data, const AnyArray& scales) {
        check_array_any_rank(data, "data", Where::cpu, {DType::u8});
        check_array_any_rank(scales, "scales", Where::cpu, {DType::u8});
        const auto [rows, half] = rows_cols(data, "data");
        const std::uint32_t cols = half * 2;
        const auto [srows, scols] = rows_cols(scales, "scales");
        if (srows != rows || scols * 32 != cols)
          throw InvalidArgument("scales: expected shape [..., " + std::to_string(cols / 32) + "] with " +
                                std::to_string(rows) + " rows for data " + shape_text(data) + ", got " +
                                shape_text(scales));
        auto out = new_array<float>(with_last(data, cols));
        nb::gil_scoped_release release;
        dequantize_mxfp4_cpu(static_cast<const std::uint8_t*>(data.data()),
                             static_cast<const std::uint8_t*>(scales.data()), rows, cols, out.data());
        return out;
      },
      "data"_a, "scales"_a, "MXFP4 data [..., cols/2] + scales [..., cols/32] -> float32 [..., cols] (host).");
  m.def(
      "quantize_mxfp8",
      [](const AnyArray& w) {
        check_array_any_rank(w, "w", Where::cpu, {DType::f32, DType::bf16});
        const auto [rows, cols] = rows_cols(w, "w");
        check_cols32(cols, "w");
        auto data = new_array<std::uint8_t>(with_last(w, cols));
        auto scales = new_array<std::uint8_t>(with_last(w, cols / 32));
        {
          nb::gil_scoped_release release;
          dispatch_in(
              w, [&](const float* p) { quantize_mxfp8_cpu(p, rows, cols, data.data(), scales.data()); return 0; },
              [&](const std::uint16_t* p) { quantize_mxfp8_cpu(p, rows, cols, data.data(), scales.data()); return 0; });
        }
        return std::make_tuple(data, scales);
      },
      "w"_a, "MXFP8 on the CPU: w [..., cols] -> (e4m3 codes uint8 [..., cols], scales uint8 [..., cols/32]).");
  m.def(
      "quantize_fp8_per_token",
      [](const AnyArray& x) {
        check_array_any_rank(x, "x", Where::cpu, {DType::f32, DType::bf16});
        const auto [rows, cols] = rows_cols(x, "x");
        auto data = new_array<std::uint8_t>(with_last(x, cols));
        std::vector<std::size_t> sshape = with_last(x, 1);
        sshape.pop_back();
        auto scales = new_array<float>(sshape);
        {
          nb::gil_scoped_release release;
          dispatch_in(
              x, [&](const float* p) { quantize_fp8_per_token_cpu(p, rows, cols, data.data(), scales.data()); return 0; },
              [&](const std::uint16_t* p) {
                quantize_fp8_per_token_cpu(p, rows, cols, data.data(), scales.data());
                return 0;
              });
        }
        return std::make_tuple(data, scales);
      },
      "x"_a, "Per-row FP8 on the CPU: x [..., cols] -> (e4m3 codes uint8 [..., cols], scales float32 [...]).");

  m.def(
      "quantize_mxfp4_gpu",
      [](Runtime& rt, const AnyArray& x, const AnyArray& data, const AnyArray& scales, std::uintptr_t stream,
         const std::string& target) {
        check_array_any_rank(x, "x", Where::cuda, {DType::f32, DType::bf16});
        check_array_any_rank(data, "data", Where::cuda, {DType::u8});
        check_array_any_rank(scales, "scales", Where::cuda, {DType::u8});
        const auto [rows, cols] = rows_cols(x, "x");
        check_cols32(cols, "x");
        if (data.size() != rows * (cols / 2))
          throw InvalidArgument("data: expected " + std::to_string(rows * (cols / 2)) + " bytes ([..., cols/2]), got " +
                                shape_text(data));
        if (scales.size() != rows * (cols / 32))
          throw InvalidArgument("scales: expected " + std::to_string(rows * (cols / 32)) +
                                " bytes ([..., cols/32]), got " + shape_text(scales));
        const DType in = to_dtype(x.dtype());
        const Target t = parse_target(target);
        nb::gil_scoped_release release;
        quantize_mxfp4_gpu(rt, device_ptr(x), in, rows, cols, device_ptr(data), device_ptr(scales), to_stream(stream), t);
      },
      "runtime"_a, "x"_a, "data"_a, "scales"_a, "stream"_a = 0, "target"_a = "sm_90a",
      "MXFP4 on the GPU, enqueued on `stream`: x float32/bfloat16 [..., cols] -> data uint8 [..., cols/2],\n"
      "scales uint8 [..., cols/32] (CUDA arrays, C-contiguous). Bit-identical to quantize_mxfp4().");
  m.def(
      "quantize_mxfp4_gpu_ptr",
      [](Runtime& rt, std::uintptr_t x, const std::string& in_dtype, std::uint64_t rows, std::uint32_t cols,
         std::uintptr_t data, std::uintptr_t scales, std::uintptr_t stream, const std::string& target) {
        const DType in = parse_dtype(in_dtype);
        const Target t = parse_target(target);
        nb::gil_scoped_release release;
        quantize_mxfp4_gpu(rt, x, in, rows, cols, data, scales, to_stream(stream), t);
      },
      "runtime"_a, "x"_a, "in_dtype"_a, "rows"_a, "cols"_a, "data"_a, "scales"_a, "stream"_a, "target"_a = "sm_90a",
      "quantize_mxfp4_gpu() with device addresses ('f32' or 'bf16' input, C-contiguous [rows, cols]).");
  m.def(
      "quantize_fp8_gpu_ptr",
      [](Runtime& rt, const std::string& mode, std::uintptr_t x, std::int64_t x_row_stride, std::uint64_t rows,
         std::uint32_t cols, std::uintptr_t codes, std::uintptr_t scales, std::uintptr_t stream,
         const std::string& target) {
        const QuantMode q = parse_quant_mode(mode);
        const Target t = parse_target(target);
        nb::gil_scoped_release release;
        quantize_fp8_gpu(rt, q, x, x_row_stride, rows, cols, codes, scales, to_stream(stream), t);
      },
      "runtime"_a, "mode"_a, "x"_a, "x_row_stride"_a, "rows"_a, "cols"_a, "codes"_a, "scales"_a, "stream"_a,
      "target"_a = "sm_90a", "quantize_fp8_gpu() with device addresses (x bfloat16 rows of x_row_stride elements).");
  m.def(
      "quantize_fp8_gpu",
      [](Runtime& rt, const std::string& mode, const AnyArray& x, const AnyArray& codes, const AnyArray& scales,
         std::uintptr_t stream, const std::string& target) {
        const QuantMode q = parse_quant_mode(mode);
        check_array(x, "x", Where::cuda, {DType::bf16}, {-1, -1}, false);
        const std::uint64_t rows = x.shape(0);
        const std::uint32_t cols = static_cast<std::uint32_t>(x.shape(1));
        check_array(codes, "codes", Where::cuda, {DType::e4m3}, {std::int64_t(rows), cols});
        if (q == QuantMode::mxfp8) check_array(scales, "scales", Where::cuda, {DType::u8}, {std::int64_t(rows), cols / 32});
        else check_array(scales, "scales", Where::cuda, {DType::f32}, {std::int64_t(rows)});
        const std::int64_t xs = row_stride(x, "x");
        const Target t = parse_target(target);
        nb::gil_scoped_release release;
        quantize_fp8_gpu(rt, q, device_ptr(x), xs, rows, cols, device_ptr(codes), device_ptr(scales), to_stream(stream), t);
      },
      "runtime"_a, "mode"_a, "x"_a, "codes"_a, "scales"_a, "stream"_a = 0, "target"_a = "sm_90a",
      "Activation quantizer of the FP8 modes on the GPU: x bfloat16 [rows, cols] -> codes e4m3 [rows, cols] and\n"
      "scales (fp8_per_token: float32 [rows]; mxfp8: uint8 E8M0 [rows, cols/32]).");
}

}  // namespace moejit::python
