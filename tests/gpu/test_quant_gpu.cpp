// GPU MXFP4 quantizer (kernels/quantize_mxfp4.cuh) against the CPU quantizer,
// bit for bit, on fresh random data with zero, huge, tiny, NaN and Inf blocks.
//
// NaN policy under test (docs/formats.md): a block holding any NaN or Inf gets
// scale byte 0xFF and all-zero codes on both sides.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "codegen/families.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "driver/cuda_api.hpp"
#include "driver/device_buffer.hpp"
#include "gpu_runtime.hpp"
#include "moejit/error.hpp"
#include "moejit/quant.hpp"
#include "reference/rng.hpp"
#include "reference/tensors.hpp"

using namespace moejit;
using moejit::driver::DeviceBuffer;
using moejit::ref::TestRng;

namespace {

// The quantizer compiled and loaded once in the primary context of device 0.
// (Straight through the compiler, so this test does not depend on the Runtime's
// caches; the Runtime path is the same key -> same source.)
// Target of the current device (sm_90a on the H200).
Target device_target() {
  driver::ensure_context(0);
  const auto& cu = driver::cuda();
  int major = 0, minor = 0;
  CUdevice dev = 0;
  MOEJIT_CU_CHECK(cu.cuCtxGetDevice(&dev));
  MOEJIT_CU_CHECK(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  MOEJIT_CU_CHECK(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  return Target{static_cast<std::uint16_t>(major * 10 + minor), major >= 9};
}

// The quantizer compiled and loaded once in the primary context of device 0,
// straight through the compiler (the Runtime path has its own test case below).
struct LoadedQuantizer {
  CUmodule module = nullptr;
  KernelRef ref;
  LoadedQuantizer() {
    const Target target = device_target();
    const SpecKey key = quantize_mxfp4_key(32, target);
    const KernelSource ks = codegen::generate(key);
    const auto out = compiler::compile(ks, target, key.to_text());
    const auto& cu = driver::cuda();
    MOEJIT_CU_CHECK(cu.cuModuleLoadData(&module, out.cubin.data()));
    MOEJIT_CU_CHECK(cu.cuModuleGetFunction(&ref.function, module, out.lowered_name.c_str()));
    ref.launch = ks.launch;
  }
};

const KernelRef& quantizer() {
  static LoadedQuantizer q;
  return q.ref;
}

float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// Fills w [rows, cols] block by block with a mix of block kinds.
void fill_blocks(std::vector<float>& w, TestRng& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t b = 0; b < w.size() / 32; ++b) {
    float* x = w.data() + b * 32;
    const auto kind = rng.integer(0, 11);
    for (int i = 0; i < 32; ++i) {
      switch (kind) {
        case 0: x[i] = 0.0f; break;                                                    // amax 0
        case 1: x[i] = i % 3 ? -0.0f : 0.0f; break;                                    // signed zeros
        case 2: x[i] = static_cast<float>(rng.normal(0.0, 1e37)); break;               // huge
        case 3: x[i] = from_bits(static_cast<std::uint32_t>(rng.bits32() & 0x807FFFFFu)); break;  // subnormal
        case 4: x[i] = static_cast<float>(rng.normal(0.0, 1e-30)); break;              // tiny normal
        case 5: x[i] = static_cast<float>(rng.normal()); if (i == 17) x[i] = std::numeric_limits<float>::quiet_NaN(); break;
        case 6: x[i] = static_cast<float>(rng.normal()); if (i == 3) x[i] = (b & 1) ? inf : -inf; break;
        case 7: x[i] = (rng.bits32() & 1 ? -1.0f : 1.0f) * kE2m1Values[rng.integer(0, 7)] * 0.25f; break;  // ties
        case 8: x[i] = from_bits((rng.bits32() & 0x807FFFFFu) | (static_cast<std::uint32_t>(rng.integer(1, 254)) << 23)); break;
        default: x[i] = static_cast<float>(rng.normal(0.0, 0.02)); break;              // weight-like
      }
    }
  }
}

struct Result {
  std::vector<std::uint8_t> data, scales;
};

// Runs the GPU quantizer on host input `in_bytes` (fp32 or bf16) and returns its output.
Result run_gpu(const void* in_bytes, DType dtype, std::uint64_t rows, std::uint32_t cols, CUstream stream = nullptr) {
  const std::size_t elem = dtype == DType::f32 ? 4 : 2;
  DeviceBuffer in(rows * cols * elem), data(rows * cols / 2), scales(rows * cols / 32);
  in.upload(in_bytes, in.bytes());
  data.fill_bytes(0xAB);  // poison: every byte must be written
  scales.fill_bytes(0xAB);
  quantize_mxfp4_gpu(quantizer(), in.get(), dtype, rows, cols, data.get(), scales.get(), stream);
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
  Result r;
  r.data.resize(data.bytes());
  r.scales.resize(scales.bytes());
  data.download(r.data.data(), r.data.size());
  scales.download(r.scales.data(), r.scales.size());
  return r;
}

std::size_t first_mismatch(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i]) return i;
  return a.size() == b.size() ? std::string::npos : std::min(a.size(), b.size());
}

}  // namespace

TEST_CASE("GPU MXFP4 quantizer equals the CPU quantizer bit for bit (fp32 and bf16)", "[gpu][quant]") {
  struct Shape { std::uint64_t rows; std::uint32_t cols; };
  const Shape shape = GENERATE(Shape{1, 32}, Shape{7, 96}, Shape{333, 2880}, Shape{2048, 768}, Shape{5760, 2880});
  TestRng rng(100 + shape.cols);
  const std::uint64_t n = shape.rows * shape.cols;
  std::vector<float> w(n);
  fill_blocks(w, rng);

  std::vector<std::uint8_t> cpu_data(n / 2), cpu_scales(n / 32);
  quantize_mxfp4_cpu(w.data(), shape.rows, shape.cols, cpu_data.data(), cpu_scales.data());
  const Result g32 = run_gpu(w.data(), DType::f32, shape.rows, shape.cols);
  INFO("rows " << shape.rows << " cols " << shape.cols);
  CHECK(first_mismatch(g32.scales, cpu_scales) == std::string::npos);
  CHECK(first_mismatch(g32.data, cpu_data) == std::string::npos);
  // The data covered NaN / Inf blocks and zero blocks (when there are enough blocks).
  if (n / 32 > 100) {
    CHECK(std::count(cpu_scales.begin(), cpu_scales.end(), 0xFF) > 0);
    CHECK(std::count(cpu_scales.begin(), cpu_scales.end(), 0x00) > 0);
  }

  std::vector<std::uint16_t> w16(n);
  for (std::size_t i = 0; i < n; ++i) w16[i] = float_to_bf16(w[i]);
  quantize_mxfp4_cpu(w16.data(), shape.rows, shape.cols, cpu_data.data(), cpu_scales.data());
  const Result g16 = run_gpu(w16.data(), DType::bf16, shape.rows, shape.cols);
  CHECK(first_mismatch(g16.scales, cpu_scales) == std::string::npos);
  CHECK(first_mismatch(g16.data, cpu_data) == std::string::npos);
}

TEST_CASE("GPU MXFP4 quantizer: any grid size covers every block (grid-stride)", "[gpu][quant]") {
  TestRng rng(200);
  const std::uint64_t rows = 77;
  const std::uint32_t cols = 320;
  std::vector<float> w(rows * cols);
  fill_blocks(w, rng);
  std::vector<std::uint8_t> cpu_data(w.size() / 2), cpu_scales(w.size() / 32);
  quantize_mxfp4_cpu(w.data(), rows, cols, cpu_data.data(), cpu_scales.data());
  DeviceBuffer in(w.size() * 4), data(cpu_data.size()), scales(cpu_scales.size());
  in.upload(w.data(), in.bytes());
  data.fill_bytes(0xAB);
  scales.fill_bytes(0xAB);
  const KernelRef& k = quantizer();
  CUdeviceptr pin = in.get(), pdata = data.get(), pscales = scales.get();
  int dtype = 0;
  unsigned long long blocks = rows * cols / 32;
  void* args[] = {&pin, &dtype, &blocks, &pdata, &pscales};
  MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernel(k.function, 3, 1, 1, k.launch.block_threads, 1, 1, 0, nullptr, args, nullptr));
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
  std::vector<std::uint8_t> gd(cpu_data.size()), gs(cpu_scales.size());
  data.download(gd.data(), gd.size());
  scales.download(gs.data(), gs.size());
  CHECK(gd == cpu_data);
  CHECK(gs == cpu_scales);
}

TEST_CASE("GPU MXFP4 quantizer: argument errors are thrown before any launch", "[gpu][quant]") {
  const KernelRef& k = quantizer();
  DeviceBuffer buf(4096);
  CHECK_THROWS_AS(quantize_mxfp4_gpu(k, buf.get(), DType::f16, 1, 32, buf.get(), buf.get(), nullptr), InvalidArgument);
  CHECK_THROWS_AS(quantize_mxfp4_gpu(k, buf.get(), DType::f32, 1, 48, buf.get(), buf.get(), nullptr), InvalidArgument);
  CHECK_THROWS_AS(quantize_mxfp4_gpu(k, buf.get() + 2, DType::f32, 1, 32, buf.get(), buf.get(), nullptr), InvalidArgument);
  CHECK_THROWS_AS(quantize_mxfp4_gpu(k, 0, DType::f32, 1, 32, buf.get(), buf.get(), nullptr), InvalidArgument);
  CHECK_NOTHROW(quantize_mxfp4_gpu(k, 0, DType::f32, 0, 32, 0, 0, nullptr));  // nothing to do
}

TEST_CASE("GPU MXFP4 quantizer throughput: at least 0.3 TB/s on gpt-oss-120b gate_up rows", "[gpu][quant][perf]") {
  // gpt-oss-120b gate_up of 8 experts in bf16: [8 * 5760, 2880]. Measured on
  // an H200: 700 us, 0.48 TB/s over bf16 in + codes + scales out; the bound
  // leaves room for clock and machine spread and fails a 1.6x regression.
  const std::uint64_t rows = 8 * 5760;
  const std::uint32_t cols = 2880;
  DeviceBuffer in(rows * cols * 2), data(rows * cols / 2), scales(rows * cols / 32);
  in.fill_bytes(0x3F);  // bf16 0x3F3F, finite
  const auto& cu = driver::cuda();
  CUevent start, stop;
  MOEJIT_CU_CHECK(cu.cuEventCreate(&start, 0));
  MOEJIT_CU_CHECK(cu.cuEventCreate(&stop, 0));
  quantize_mxfp4_gpu(quantizer(), in.get(), DType::bf16, rows, cols, data.get(), scales.get(), nullptr);  // warm
  MOEJIT_CU_CHECK(cu.cuEventRecord(start, nullptr));
  const int iters = 10;
  for (int i = 0; i < iters; ++i)
    quantize_mxfp4_gpu(quantizer(), in.get(), DType::bf16, rows, cols, data.get(), scales.get(), nullptr);
  MOEJIT_CU_CHECK(cu.cuEventRecord(stop, nullptr));
  MOEJIT_CU_CHECK(cu.cuEventSynchronize(stop));
  float ms = 0.0f;
  MOEJIT_CU_CHECK(cu.cuEventElapsedTime_v2(&ms, start, stop));
  const double bytes = static_cast<double>(rows * cols) * (2.0 + 0.5 + 1.0 / 32);
  WARN("quantize_mxfp4 bf16 [" << rows << ", " << cols << "]: " << ms / iters * 1e3 << " us, "
                               << bytes / (ms / iters * 1e-3) / 1e12 << " TB/s");
  (void)cu.cuEventDestroy_v2(start);
  (void)cu.cuEventDestroy_v2(stop);
  REQUIRE(ms > 0.0f);
  CHECK(bytes / (ms / iters * 1e-3) / 1e12 >= 0.3);
}

TEST_CASE("GPU MXFP4 quantizer through the Runtime (key -> cached kernel)", "[gpu][quant][runtime]") {
  TestRng rng(300);
  const std::uint64_t rows = 129;
  const std::uint32_t cols = 2880;
  std::vector<float> w(rows * cols);
  fill_blocks(w, rng);
  std::vector<std::uint16_t> w16(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) w16[i] = float_to_bf16(w[i]);
  std::vector<std::uint8_t> cpu_data(w.size() / 2), cpu_scales(w.size() / 32);
  quantize_mxfp4_cpu(w16.data(), rows, cols, cpu_data.data(), cpu_scales.data());

  Runtime& rt = moejit::testing::gpu_runtime();
  DeviceBuffer in(w16.size() * 2), data(cpu_data.size()), scales(cpu_scales.size());
  in.upload(w16.data(), in.bytes());
  data.fill_bytes(0xAB);
  scales.fill_bytes(0xAB);
  quantize_mxfp4_gpu(rt, in.get(), DType::bf16, rows, cols, data.get(), scales.get(), nullptr, device_target());
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
  std::vector<std::uint8_t> gd(cpu_data.size()), gs(cpu_scales.size());
  data.download(gd.data(), gd.size());
  scales.download(gs.data(), gs.size());
  CHECK(first_mismatch(gd, cpu_data) == std::string::npos);
  CHECK(first_mismatch(gs, cpu_scales) == std::string::npos);
  // Another column count: a different key with the same source, so no new compile.
  const auto compiles = rt.stats().compiles;
  DeviceBuffer d2(64 * 64 / 2), s2(64 * 64 / 32);
  quantize_mxfp4_gpu(rt, in.get(), DType::bf16, 64, 64, d2.get(), s2.get(), nullptr, device_target());
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
  CHECK(rt.stats().compiles == compiles);
}
