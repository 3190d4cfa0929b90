// MoE weight gradient: key, codegen (kernels/moe_wgrad_sm90.cuh) and launch.
#include <string>

#include "codegen/families.hpp"
#include "driver/cuda_api.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_wgrad.hpp"
#include "ops/device_ptr.hpp"

namespace moejit {
namespace {
using ops::ptr;

// Mirrors of the constants at the top of kernels/moe_wgrad_sm90.cuh.
constexpr std::uint32_t kThreads = 256, kBN = 128, kBK = 128, kSmemBytes = 4 * 2 * 32 * 128 * 2;

// Mirror of moejit::wg::WgradParams.
struct WgradParamsArg {
  const void* grad;
  std::int64_t grad_row_stride;
  const void* x;
  std::int64_t x_row_stride;
  const int* expert_offsets;
  const int* sorted_route;
  void* dw;
  float* db;
  int n, k, top_k, gather;
};

std::string why_not(const SpecKey& key) {
  auto field = [](const char* f, std::uint64_t v, const char* why) {
    return std::string("key field ") + f + "=" + std::to_string(v) + ": " + why;
  };
  if (key.op != OpKind::wgrad) return "key field op=" + std::string(to_string(key.op)) + ": expected wgrad";
  if (key.quant != QuantMode::bf16)
    return "key field quant=" + std::string(to_string(key.quant)) + ": wgrad reads bf16 grad and X";
  if (key.n == 0 || key.n % 8) return field("n", key.n, "must be a positive multiple of 8");
  if (key.k == 0 || key.k % 8) return field("k", key.k, "must be a positive multiple of 8");
  if (key.experts == 0) return field("experts", key.experts, "must be >= 1");
  if (key.top_k == 0) return field("top_k", key.top_k, "must be >= 1");
  if (key.out_dtype != DType::f32 && key.out_dtype != DType::bf16)
    return "key field out=" + std::string(to_string(key.out_dtype)) + ": dW is f32 or bf16";
  if (key.bias != BiasKind::none || key.act != Activation::none || key.router_weight)
    return "key fields bias/act/router_weight: wgrad has no epilogue";
  return {};
}

}  // namespace

namespace codegen {
KernelSource generate_wgrad(const SpecKey& key) {
  validate(key);
  if (auto why = why_not(key); !why.empty()) throw InvalidArgument(why);
  KernelSource ks;
  ks.source = "// moejit generated translation unit\n";
  ks.source += kernel_file("common.cuh");
  ks.source += "\n";
  ks.source += kernel_file("moe_wgrad_sm90.cuh");
  ks.name_expression = std::string("moejit::wg::moe_wgrad_kernel<") + (key.out_dtype == DType::bf16 ? "true" : "false") + ">";
  ks.launch.block_threads = kThreads;
  ks.launch.dynamic_smem_bytes = kSmemBytes;
  ks.config_text = "wgrad bn=128 bk=128 br=32 stages=4 threads=256";
  return ks;
}
}  // namespace codegen

SpecKey moe_wgrad_key(const MoeWgradShape& s, std::uint32_t token_bucket, const Target& target) {
  if (s.experts == 0 || s.experts > 65535)
    throw InvalidArgument("MoeWgradShape.experts=" + std::to_string(s.experts) + ": must be in [1, 65535]");
  SpecKey key = make_gemm_key(OpKind::wgrad, QuantMode::bf16, token_bucket, s.n, s.k, target);
  key.experts = static_cast<std::uint16_t>(s.experts);
  key.top_k = static_cast<std::uint16_t>(s.top_k);
  key.out_dtype = s.out_dtype;
  validate(key);
  if (auto why = why_not(key); !why.empty()) throw InvalidArgument(why);
  return key;
}

MoeWgrad::MoeWgrad(Runtime& runtime, const MoeWgradShape& shape, Target target)
    : runtime_(runtime), shape_(shape), target_(target) {
  (void)moe_wgrad_key(shape, 1, target);  // checks the shape
}

void MoeWgrad::run(const MoeWgradArgs& a, CUstream stream) const {
  const MoeWgradShape& s = shape_;
  auto bad = [](const char* f, std::uint64_t v, const std::string& why) {
    throw InvalidArgument(std::string("MoeWgradArgs.") + f + "=" + std::to_string(v) + ": " + why);
  };
  const std::int64_t gs = a.grad_row_stride ? a.grad_row_stride : s.n;
  const std::int64_t xs = a.x_row_stride ? a.x_row_stride : s.k;
  if (gs < std::int64_t(s.n) || gs % 8) bad("grad_row_stride", gs, "must be >= n and a multiple of 8");
  if (xs < std::int64_t(s.k) || xs % 8) bad("x_row_stride", xs, "must be >= k and a multiple of 8");
  if (!a.dw || a.dw % 16) bad("dw", a.dw, "must be non-null and 16-byte aligned");
  if (a.db % 4) bad("db", a.db, "must be 4-byte aligned");
  if (!a.expert_offsets || a.expert_offsets % 4) bad("expert_offsets", a.expert_offsets, "must be non-null, aligned");
  if (a.num_tokens > 0) {
    if (!a.grad || a.grad % 16) bad("grad", a.grad, "must be non-null and 16-byte aligned");
    if (!a.x || a.x % 16) bad("x", a.x, "must be non-null and 16-byte aligned");
    if (a.gather == WgradGather::by_token && !a.sorted_route) bad("sorted_route", 0, "null with gather by_token");
  }
  if (std::uint64_t(a.num_tokens) * s.top_k > 0x7fffffffull)
    bad("num_tokens", a.num_tokens, "num_tokens * top_k must fit in int32");
  const SpecKey key = moe_wgrad_key(s, a.num_tokens ? round_up_tokens(a.num_tokens) : 1, target_);
  const KernelRef k = runtime_.get(key);
  WgradParamsArg p{};
  // Why valid pointers even for T = 0: the kernel never dereferences them then
  // (no rows), but a null base would be a trap for a later change.
  p.grad = ptr<const void>(a.grad ? a.grad : a.dw);
  p.grad_row_stride = gs;
  p.x = ptr<const void>(a.x ? a.x : a.dw);
  p.x_row_stride = xs;
  p.expert_offsets = ptr<const int>(a.expert_offsets);
  p.sorted_route = ptr<const int>(a.sorted_route);
  p.dw = ptr<void>(a.dw);
  p.db = ptr<float>(a.db);
  p.n = static_cast<int>(s.n);
  p.k = static_cast<int>(s.k);
  p.top_k = static_cast<int>(s.top_k);
  p.gather = a.gather == WgradGather::by_token ? 1 : 0;
  void* args[] = {&p};
  const unsigned gx = (s.k + kBK - 1) / kBK, gy = (s.n + kBN - 1) / kBN;
  if (gy > 65535) bad("n", s.n, "too many N tiles for one launch");
  MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernel(k.function, gx, gy, s.experts, k.launch.block_threads, 1, 1,
                                                k.launch.dynamic_smem_bytes, stream, args, nullptr));
}

}  // namespace moejit
