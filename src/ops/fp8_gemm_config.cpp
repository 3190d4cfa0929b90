#include "ops/fp8_gemm_config.hpp"

#include <algorithm>
#include <string>

#include "moejit/error.hpp"
#include "ops/grouped_gemm_config.hpp"

namespace moejit::ops {
namespace {
constexpr int kSmCount = 132;  // H200; only shapes the heuristic, never correctness
constexpr int kBK = 128;       // bytes (= e4m3 elements) per k-slice
constexpr std::uint32_t kMaxSmem = 227 * 1024;
}  // namespace

std::uint32_t Fp8GemmConfig::smem_bytes(QuantMode q) const {
  if (decode) return 0;  // its K-split reduction is static shared memory
  // kernels/grouped_gemm_tma_ws_sm90.cuh, "Shared memory".
  // MXFP8 adds each slice's scales as fp32 (TmaWsLayout::kSBytes), per token
  // the epilogue staging and the column-operand tables.
  if (ws)
    return static_cast<std::uint32_t>(1024 + stages * (128 * 128 + bn() * 128 + (q == QuantMode::mxfp8 ? 4608 : 0)) +
                                      stages * 16 + kTmaWsItemSlotBytes +
                                      (q == QuantMode::mxfp8 ? 0 : tma_ws_epilogue_smem_bytes(bn())));
  const int a = bm() * kBK, b = bn() * kBK;
  const int s = q == QuantMode::mxfp8 ? (((bm() + bn()) * (kBK / 32) + 15) / 16) * 16 : 0;
  return static_cast<std::uint32_t>(stages * (a + b + s));
}

std::string Fp8GemmConfig::to_string() const {
  if (decode)
    return "fp8 kernel=decode wn=" + std::to_string(wn) + " kw=" + std::to_string(kw) + " depth=" +
           std::to_string(depth) + " ctas=" + std::to_string(ctas) + " fr=" + (fr ? "1" : "0");
  if (ws)
    return "fp8 kernel=tma_ws bm=128 bn=" + std::to_string(bn()) + " stages=" + std::to_string(stages) +
           " promote=" + std::to_string(promote_slices) + " k_tail=" + (k_tail ? "1" : "0");
  return "fp8 bm=" + std::to_string(bm()) + " bn=" + std::to_string(bn()) + " warps=" + std::to_string(warps_m) +
         "x" + std::to_string(warps_n) + " mi=" + std::to_string(mi) + " ni=" + std::to_string(ni) +
         " stages=" + std::to_string(stages) + " k_tail=" + (k_tail ? "1" : "0");
}

std::string why_not_fp8(const SpecKey& key) {
  auto field = [](const char* name, auto v, const std::string& why) {
    return std::string("key field ") + name + "=" + std::to_string(v) + ": " + why;
  };
  auto named = [](const char* name, std::string_view v, const std::string& why) {
    return std::string("key field ") + name + "=" + std::string(v) + ": " + why;
  };
  if (key.op != OpKind::gate_up && key.op != OpKind::down)
    return named("op", to_string(key.op), "not a grouped GEMM");
  if (!is_fp8(key.quant)) return named("quant", to_string(key.quant), "the FP8 family runs mxfp8 and fp8_per_token");
  if (key.quant == QuantMode::mxfp8) {
    if (key.weight_scale != WeightScale::e8m0_block32)
      return named("wscale", to_string(key.weight_scale), "mxfp8 needs e8m0_block32");
    if (key.k == 0 || key.k % 32 != 0)
      return field("k", key.k, "mxfp8 needs K to be a positive multiple of 32 (one E8M0 scale per 32 K)");
  } else {
    if (key.weight_scale != WeightScale::per_expert && key.weight_scale != WeightScale::per_channel)
      return named("wscale", to_string(key.weight_scale), "fp8_per_token needs per_expert or per_channel");
    if (key.k == 0 || key.k % 16 != 0)
      return field("k", key.k, "fp8_per_token needs K to be a positive multiple of 16 (16-byte row chunks)");
  }
  if (key.n == 0 || key.n % 16 != 0) return field("n", key.n, "N must be a positive multiple of 16");
  if (key.experts == 0) return field("experts", key.experts, "must be >= 1");
  if (key.top_k == 0) return field("top_k", key.top_k, "must be >= 1");
  if (key.op == OpKind::gate_up && key.out_dtype != DType::bf16)
    return named("out", to_string(key.out_dtype), "gate_up writes bf16");
  if (key.op == OpKind::down && key.out_dtype != DType::f32 && key.out_dtype != DType::bf16)
    return named("out", to_string(key.out_dtype), "down writes bf16 or f32 rows for the combine");
  if (key.op == OpKind::down && key.act != Activation::none)
    return named("act", to_string(key.act), "down has no activation");
  if (key.op == OpKind::gate_up && key.router_weight)
    return "key field router_weight=1: the router weight is applied by down";
  return {};
}

Fp8GemmConfig choose_fp8_config(const SpecKey& key) {
  if (auto why = why_not_fp8(key); !why.empty()) throw InvalidArgument(why);
  Fp8GemmConfig c;
  c.k_tail = key.k % kBK != 0;
  const std::uint64_t rows = std::uint64_t(key.token_bucket) * key.top_k;
  const std::uint64_t hit = std::max<std::uint64_t>(1, std::min<std::uint64_t>(key.experts, rows));
  const std::uint64_t avg = (rows + hit - 1) / hit;  // rows per expert that was hit
  if (avg > 24) {
    // Tensor bound: the warp-specialized wgmma kernel, the deepest ring
    // within 227 KB (kernels/grouped_gemm_tma_ws_sm90.cuh); MXFP8 applies its
    // block scales there on every 32-K partial sum.
    c.ws = true;
    // Per token: promote every 256 K. Layer us at T = 4096 / 16384 against
    // every 128 K: 0.94-0.96x on the four models; every 512 K (0.86-0.93x)
    // measured a float64 reference error of 1.01e-2 on Mixtral's K = 14336
    // down projection (T = 300), every 256 K 4.1e-3 there (128 K: 4.0e-3).
    if (key.quant == QuantMode::fp8_per_token) c.promote_slices = 2;
    c.stages = 8;
    while (c.stages > 2 && c.smem_bytes(key.quant) > kMaxSmem) --c.stages;
    return c;
  }
  if (key.quant == QuantMode::fp8_per_token && avg <= 8 && key.experts <= 128 &&
      std::uint64_t(key.n) * key.k <= 0xFFFFFFFFull) {  // the kernel's 32-bit row offsets within an expert
    // Decode: the weight stream (kernels/grouped_gemm_fp8_decode_sm90.cuh).
    // 24 warps per SM at <= 85 registers (ctas x 32 wn kw threads = 768);
    // K split over as many warps (4, 2, 1) as keep every warp of the grid
    // resident at once (132 SMs x 24 warps), so no CTA waits for a second
    // wave. Three units of 64 k in flight per warp: 72 KB per SM (24 warps x
    // 3 x 1 KB), about twice what the copy rate times a DRAM latency needs;
    // a fourth spills at 80 registers. MXFP8 stays on the mma.sync kernel: its
    // 32-blocks allow 8 bytes per lane and row only, and that form of this
    // kernel was slower than the mma.sync one at every decode T measured.
    // Layers of more than 128 experts (DeepSeek-V3: 256) stay there too: with
    // up to 220 experts hit and K = 2048 in down this kernel measured 1.16x
    // (T = 8) and 1.53x (T = 64) the mma.sync kernel's layer time.
    c.decode = true;
    c.wn = 2;
    c.depth = 3;
    const std::uint64_t columns = (key.n + 15) / 16 * hit;  // 16-row warp columns of the grid
    const std::uint64_t units = (key.k + 63) / 64;
    c.kw = 1;
    for (int kw : {4, 2}) {
      if (units >= 4 && columns * kw <= std::uint64_t(kSmCount) * 24) {
        c.kw = kw;
        break;
      }
    }
    c.ctas = 24 / (c.wn * c.kw);
    // At most 32 routes: decode_route_in_warp's one route per lane. The
    // routing kernel's launch (about 4 us before gate_up at T = 1) then goes.
    // A down key without router weights is the grouped GEMM over rows sorted
    // by expert (moejit/grouped_gemm.hpp): no topk_ids to route.
    c.fr = rows <= 32 && (key.op == OpKind::gate_up || key.router_weight);
    return c;
  }
  // Why these steps: few rows per expert stream weights (bytes bound): one m16
  // MMA high, narrow N to fill the SMs; more rows reuse each weight fragment
  // across taller tiles.
  if (avg <= 16) {
    c.warps_m = 1, c.mi = 1;
  } else if (avg <= 32) {
    c.warps_m = 1, c.mi = 2;
  } else if (avg <= 96) {
    c.warps_m = 2, c.mi = 2;
  } else {
    c.warps_m = 2, c.mi = 4;
  }
  c.warps_n = 4;
  if (c.bm() <= 32) {
    c.ni = 1;
    for (int ni : {4, 2}) {
      const std::uint64_t ctas = ((key.n + 8 * ni * 4 - 1) / (8 * ni * 4)) * hit;
      if (ctas >= 2 * kSmCount) {
        c.ni = ni;
        break;
      }
    }
    c.stages = 6;
  } else {
    c.ni = 4;
    c.stages = 4;
  }
  while (c.stages > 2 && c.smem_bytes(key.quant) > kMaxSmem) --c.stages;
  return c;
}

}  // namespace moejit::ops
