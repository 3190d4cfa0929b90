// Host side of op=k_order: key, translation unit, launch (device side:
// kernels/k_order.cuh).
#include "ops/k_order.hpp"

#include <algorithm>
#include <string>

#include "codegen/families.hpp"
#include "driver/programmatic_launch.hpp"
#include "moejit/error.hpp"

namespace moejit {
namespace {

constexpr unsigned kThreads = 256;
// A memory-bound grid-stride loop: enough CTAs to fill an H200 several times
// over, any count is correct.
constexpr std::uint64_t kMaxCtas = 132 * 8;

void check_cols(const char* fn, std::uint32_t cols) {
  if (cols == 0 || cols % 32 != 0)
    throw InvalidArgument(std::string(fn) + ": cols = " + std::to_string(cols) + " is not a positive multiple of 32");
}

}  // namespace

namespace ops {

SpecKey k_order_key(std::uint32_t cols, const Target& target) {
  check_cols("k_order_key", cols);
  // Tokens 1 (rows are a launch argument), k 0, out bf16, no epilogue fields.
  return make_gemm_key(OpKind::k_order, QuantMode::w4a16_mxfp4, 1, cols, 0, target);
}

void launch_k_order(const KernelRef& kernel, DevicePtr in, std::int64_t in_row_stride, std::uint64_t rows,
                    std::uint32_t cols, DevicePtr out, CUstream stream) {
  const char* fn = "launch_k_order";
  auto bad = [&](const char* name, std::uint64_t v, const char* why) {
    throw InvalidArgument(std::string(fn) + ": " + name + " = " + std::to_string(v) + " " + why);
  };
  check_cols(fn, cols);
  if (rows == 0) return;
  if (!in || in % 16) bad("in", in, "must be non-null and 16-byte aligned");
  if (in_row_stride < std::int64_t(cols) || in_row_stride % 8)
    bad("in_row_stride", static_cast<std::uint64_t>(in_row_stride), "must be >= cols and a multiple of 8");
  if (!out || out % 16) bad("out", out, "must be non-null and 16-byte aligned");
  if (!kernel.function) throw InvalidArgument(std::string(fn) + ": kernel is not a loaded k_order kernel");
  if (kernel.launch.block_threads != kThreads)
    bad("kernel block_threads", kernel.launch.block_threads, "does not match the k_order kernel's 256");
  const std::uint64_t blocks = rows * (cols / 32);
  const auto ctas = static_cast<unsigned>(std::min<std::uint64_t>((blocks + kThreads - 1) / kThreads, kMaxCtas));
  long long stride = in_row_stride, n_rows = static_cast<long long>(rows);
  int n_cols = static_cast<int>(cols);
  void* args[] = {&in, &stride, &n_rows, &n_cols, &out};
  driver::launch_programmatic(kernel.function, {ctas, 1, 1, kThreads, 0}, stream, args);
}

}  // namespace ops

namespace codegen {

KernelSource generate_k_order(const SpecKey& key) {
  validate(key);  // op=k_order: quant w4a16_mxfp4, tokens 1, n % 32 == 0, out bf16, no epilogue fields
  if (key.op != OpKind::k_order)
    throw InvalidArgument("generate_k_order: key field op = " + std::string(to_string(key.op)) + ": expected k_order");
  KernelSource ks;
  ks.source = "// moejit generated translation unit\n";
  ks.source += kernel_file("common.cuh");
  ks.source += "\n";
  ks.source += kernel_file("k_order.cuh");
  ks.name_expression = "moejit::k_order_kernel<" + std::to_string(kThreads) + ">";
  ks.launch.block_threads = kThreads;
  ks.launch.dynamic_smem_bytes = 0;
  ks.config_text = "family=k_order threads=" + std::to_string(kThreads);
  return ks;
}

}  // namespace codegen
}  // namespace moejit
