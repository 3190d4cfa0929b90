// MoE weight gradient: key, codegen (kernels/moe_wgrad_sm90.cuh, kernels/moe_wgrad_mma_sm90.cuh) and launch.
#include <algorithm>
#include <string>
#include <vector>

#include "codegen/families.hpp"
#include "driver/cluster_launch.hpp"
#include "driver/cuda_api.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_wgrad.hpp"
#include "ops/device_ptr.hpp"
#include "ops/kernel_configs.hpp"
#include "ops/kernel_params.hpp"
#include "ops/tensor_map.hpp"

namespace moejit {
namespace {

// The warp-specialized kernel (kernels/moe_wgrad_sm90.cuh): 384 threads, BN output
// channels x 128 input features per item, stages of 64 routed rows.
constexpr std::uint32_t kThreads = 384, kBk = 128, kStageRows = 64;

// The mma.sync kernel for few rows per expert (kernels/moe_wgrad_mma_sm90.cuh):
// 256 threads, 128 x 128 tiles, grid (K tiles, N tiles, E), 4 cp.async stages of 32 rows.
constexpr std::uint32_t kMmaThreads = 256, kMmaTile = 128, kMmaSmemBytes = 4 * 2 * 32 * 128 * 2;
// Average routed rows per expert from which the warp-specialized kernel runs:
// from 64 rows (one stage per item) it was 1.1-2.0x the mma.sync kernel on
// gpt-oss-120b, Qwen3-30B-A3B and Mixtral-8x7B (docs/kernels.md, "Weight
// gradient"); below it both are bound by writing dW, and the mma.sync kernel stays.
constexpr std::uint64_t kWsMinRowsPerExpert = 64;

// The warp-specialized kernel's epilogue staging: 4 buffers of 32 channels x 64
// features in fp32, stored by TMA.
constexpr std::uint32_t kEpilogueBytes = 4 * 32 * 64 * 4;

struct WgradConfig {
  bool ws;  // the warp-specialized wgmma kernel, else the mma.sync one
  std::uint32_t bn, stages;
  std::uint32_t cluster = 1;  // warp-specialized: CTAs per cluster sharing the grad tiles
  std::uint32_t smem_bytes() const {
    return ws ? 1024 + stages * (bn * 128 + kBk * 128) + kEpilogueBytes + stages * 16 : kMmaSmemBytes;
  }
};

// BN: 256 output channels per item where N is a multiple of 256, else 192 where N is
// one of 192 (gpt-oss-120b: N = 5760 = 30 x 192, 2880 = 15 x 192), else whichever
// pads N less (256 on a tie: fewer items). Stages: as many as fit next to the
// epilogue's buffers (32 KB) under the 227 KB limit with room for the alignment
// (BN 256: 4 x 48 KB, 192: 4 x 40 KB).
// Kernel: by the bucket's average rows per expert (token_bucket * top_k / experts).
WgradConfig choose_wgrad_config(const SpecKey& key) {
  const std::uint32_t n = key.n;
  if (std::uint64_t(key.token_bucket) * key.top_k < kWsMinRowsPerExpert * key.experts) return WgradConfig{false, 128, 4};
  auto pad = [n](std::uint32_t bn) { return (n + bn - 1) / bn * bn - n; };
  const std::uint32_t bn = n % 256 == 0 ? 256 : n % 192 == 0 ? 192 : pad(192) < pad(256) ? 192 : 256;
  // Clusters of two CTAs on adjacent feature blocks share the grad tiles where K has
  // two feature blocks or more (docs/kernels.md, "Weight gradient": 1.00-1.04x the
  // unclustered kernel, measured).
  return WgradConfig{true, bn, 4u, key.k > kBk ? 2u : 1u};
}

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
  const WgradConfig c = choose_wgrad_config(key);
  KernelSource ks;
  if (c.ws) {
    ks.source = config_unit({"wgmma_sm90.cuh", "moe_wgrad_sm90.cuh"});
  } else {
    ks.source = "// moejit generated translation unit\n";
    for (const char* f : {"common.cuh", "kernel_params.cuh", "moe_wgrad_mma_sm90.cuh"}) {
      ks.source += kernel_file(f);
      ks.source += "\n";
    }
  }
  const char* out_bf16 = key.out_dtype == DType::bf16 ? "true" : "false";
  if (c.ws) {
    ks.name_expression = ops::instantiation(
        "moejit::wg::moe_wgrad_kernel",
        WgradKernel{.bn = static_cast<int>(c.bn), .stages = static_cast<int>(c.stages),
                    .cluster = static_cast<int>(c.cluster), .out_bf16 = key.out_dtype == DType::bf16});
    ks.options = kernel_config_options();
    ks.launch.block_threads = kThreads;
    ks.config_text = "wgrad ws bn=" + std::to_string(c.bn) + " bk=" + std::to_string(kBk) + " rows=" +
                     std::to_string(kStageRows) + " stages=" + std::to_string(c.stages) + " threads=" +
                     std::to_string(kThreads) + " cluster=" + std::to_string(c.cluster) +
                     " persistent epilogue=tma";
  } else {
    ks.name_expression = std::string("moejit::wg::moe_wgrad_mma_kernel<") + out_bf16 + ">";
    ks.launch.block_threads = kMmaThreads;
    ks.config_text = "wgrad mma bn=128 bk=128 br=32 stages=4 threads=256";
  }
  ks.launch.dynamic_smem_bytes = c.smem_bytes();
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
  wg::WgradParams p{};
  // Why valid pointers even for T = 0: the kernel never dereferences them then
  // (no rows), but a null base would be a trap for a later change.
  p.grad = ops::dptr(a.grad ? a.grad : a.dw);
  p.grad_row_stride = gs;
  p.x = ops::dptr(a.x ? a.x : a.dw);
  p.x_row_stride = xs;
  p.expert_offsets = ops::dptr(a.expert_offsets);
  p.sorted_route = ops::dptr(a.sorted_route);
  p.dw = ops::dptr(a.dw);
  p.db = ops::dptr(a.db);
  p.n = static_cast<int>(s.n);
  p.k = static_cast<int>(s.k);
  p.top_k = static_cast<int>(s.top_k);
  p.experts = static_cast<int>(s.experts);
  p.gather = a.gather == WgradGather::by_token ? 1 : 0;
  const WgradConfig c = choose_wgrad_config(key);
  void* args[] = {&p};
  if (c.ws) {
    const std::uint64_t items = std::uint64_t(s.experts) * ((s.n + c.bn - 1) / c.bn) * ((s.k + kBk - 1) / kBk);
    if (items > 0x7fffffffull) bad("n", s.n, "experts x channel blocks x feature blocks must fit in int32");
    // grad rows: at most T * top_k (at least one, for a valid map when T = 0).
    const std::uint64_t rows = std::max<std::uint64_t>(1, std::uint64_t(a.num_tokens) * s.top_k);
    CUtensorMap grad_map = ops::rows_map(a.grad ? a.grad : a.dw, rows, s.n, gs);
    CUtensorMap dw_map = ops::expert_output_map(a.dw, s.experts, s.n, s.k, s.out_dtype == DType::bf16 ? 2 : 4);
    void* ws_args[] = {&p, &grad_map, &dw_map};
    // A persistent grid: as many clusters as run at once (one CTA per SM), at most one per unit
    // (the cluster's items: adjacent feature blocks of one expert and channel block).
    const std::uint64_t units =
        std::uint64_t(s.experts) * ((s.n + c.bn - 1) / c.bn) * ((s.k + kBk * c.cluster - 1) / (kBk * c.cluster));
    driver::ClusterLaunch l;
    l.cluster_x = c.cluster;
    l.block_threads = k.launch.block_threads;
    l.dynamic_smem_bytes = k.launch.dynamic_smem_bytes;
    const unsigned resident = driver::max_active_clusters(k.function, l);
    l.clusters = static_cast<unsigned>(std::min<std::uint64_t>(units, resident));
    driver::launch_cluster(k.function, l, stream, ws_args);
  } else {
    const unsigned gx = (s.k + kMmaTile - 1) / kMmaTile, gy = (s.n + kMmaTile - 1) / kMmaTile;
    if (gy > 65535) bad("n", s.n, "too many N tiles for one launch");
    MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernel(k.function, gx, gy, s.experts, k.launch.block_threads, 1, 1,
                                                  k.launch.dynamic_smem_bytes, stream, args, nullptr));
  }
}

}  // namespace moejit
