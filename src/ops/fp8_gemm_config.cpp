#include "ops/fp8_gemm_config.hpp"

#include <algorithm>
#include <string>

#include "moejit/error.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "util/env.hpp"

namespace moejit::ops {
namespace {
constexpr int kSmCount = 132;  // H200; only shapes the heuristic, never correctness
constexpr int kBK = 128;       // bytes (= e4m3 elements) per k-slice
constexpr std::uint32_t kMaxSmem = 227 * 1024;
}  // namespace

int decode_k_split(std::uint64_t columns, std::uint64_t units, std::uint64_t resident_warps) {
  if (resident_warps == 0) throw InvalidArgument("decode_k_split: resident_warps=0 (must be >= 1)");
  // Why a model: where the warps of one split fill the SMs a little more
  // than once, the last warps start when the first ones end and stream
  // their whole K range nearly alone (a tail as long as a warp's life), so
  // a finer split that fills two or three waves evenly is faster; where
  // one wave holds them all, the finest split that does is fastest. The
  // cost of kw is waves x (units / kw + 10): a warp's life in units of
  // 64 k, plus about 10 units of fixed work (routing or tile fields, the
  // activation loads, the reduction and the epilogue), fitted to a sweep of
  // kw = 1, 2, 4 (the 36 GEMMs of the layers at T = 1-8 on gpt-oss-120b,
  // Qwen3-30B-A3B and Mixtral-8x7B; docs/kernels.md, "FP8 per-token
  // decode"): it picks the fastest split, or one within 3 % of it, in all
  // but Mixtral's down at T = 2 (kw = 2 where 4 is 18 % faster); the
  // finest split that fits one wave, with none past one, is 4-26 % slower
  // in 9 of them.
  constexpr double kFixedUnits = 10.0;
  int best = 1;
  double best_cost = 0.0;
  for (int kw : {1, 2, 4}) {
    if (kw > 1 && units < 4) break;  // the kernel's K segments: min(4, units)
    const std::uint64_t warps = columns * static_cast<std::uint64_t>(kw);
    const double waves = static_cast<double>((warps + resident_warps - 1) / resident_warps);
    const double cost = waves * (static_cast<double>(units) / kw + kFixedUnits);
    if (kw == 1 || cost < best_cost) best = kw, best_cost = cost;
  }
  return best;
}

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

Fp8GemmConfig choose_fp8_config(const SpecKey& key) { return choose_fp8_config(key, util::env::gemm_tuning()); }

Fp8GemmConfig choose_fp8_config(const SpecKey& key, const GemmTuning& tuning) {
  if (auto why = why_not_fp8(key); !why.empty()) throw InvalidArgument(why);
  check_gemm_tuning(tuning);  // every number in 1..16 (no zero divisor in the heuristics or contracts)
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
    // 24 warps per SM at <= 85 registers (ctas x 32 wn kw threads = 768).
    // Three units of 64 k in flight per warp: 72 KB per SM (24 warps x 3 x
    // 1 KB), about twice what the copy rate times a DRAM latency needs; a
    // fourth spills at 80 registers. The K split (kw warps of a CTA share
    // each 16-row column) is decode_k_split's. MXFP8 stays on the mma.sync kernel: its
    // 32-blocks allow 8 bytes per lane and row only, and that form of this
    // kernel was slower than the mma.sync one at every decode T measured.
    // Layers of more than 128 experts (DeepSeek-V3: 256) stay there too: with
    // up to 220 experts hit and K = 2048 in down this kernel measured 1.16x
    // (T = 8) and 1.53x (T = 64) the mma.sync kernel's layer time.
    c.decode = true;
    c.wn = 2;
    c.depth = 3;
    constexpr int warps_per_sm = 24;
    const std::uint64_t columns = (key.n + 15) / 16 * hit;  // 16-row warp columns of the grid
    const std::uint64_t units = (key.k + 63) / 64;
    c.kw = decode_k_split(columns, units, std::uint64_t(kSmCount) * warps_per_sm);
    const GemmTuning::Decode& t = tuning.decode;
    bool tuned = t.fr.has_value();
    auto set = [&](int& field, const std::optional<int>& v) {
      if (v) field = *v, tuned = true;
    };
    set(c.wn, t.wn);
    set(c.kw, t.kw);
    set(c.depth, t.depth);
    c.ctas = std::max(1, warps_per_sm / (c.wn * c.kw));
    set(c.ctas, t.ctas);
    // At most 32 routes: decode_route_in_warp's one route per lane. The
    // routing kernel's launch (about 4 us before gate_up at T = 1) then goes.
    // A down key without router weights is the grouped GEMM over rows sorted
    // by expert (moejit/grouped_gemm.hpp): no topk_ids to route.
    c.fr = t.fr.value_or(true) && rows <= 32 && (key.op == OpKind::gate_up || key.router_weight);
    if (tuned) {
      // The kernel's contract (its tunable block).
      const bool ok = (c.kw == 1 || ((c.kw == 2 || c.kw == 4) && units >= 4)) && c.depth <= 6 &&
                      c.ctas * c.threads() <= 2048 && c.wn * c.kw <= 32;
      if (!ok)
        throw InvalidArgument("GEMM tuning '" + to_string(tuning) +
                              "' (RuntimeOptions::gemm_tuning or MOEJIT_GEMM_TUNE): " + c.to_string() +
                              " breaks the FP8 decode kernel's contract for k=" + std::to_string(key.k));
    }
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
