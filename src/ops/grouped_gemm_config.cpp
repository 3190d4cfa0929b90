#include "ops/grouped_gemm_config.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "moejit/error.hpp"

namespace moejit::ops {
namespace {
constexpr int kSmCount = 132;  // H200; only shapes the heuristic, never correctness
constexpr int kBK = 64;
}  // namespace

std::uint32_t GemmConfig::smem_bytes(QuantMode q, std::uint32_t k) const {
  const std::uint32_t a = bm() * kBK * 2;
  const std::uint32_t b = q == QuantMode::w4a16_mxfp4 ? bn() * kBK / 2 : bn() * kBK * 2;
  // MXFP4: the E8M0 scale table of the tile's rows (scale_row_pitch in the kernel).
  const std::uint32_t table = q == QuantMode::w4a16_mxfp4 ? bn() * (((k / 32 + 3) + 3) & ~3u) : 0;
  return stages * (a + b) + table;
}

std::string GemmConfig::to_string() const {
  return "bm=" + std::to_string(bm()) + " bn=" + std::to_string(bn()) + " warps=" + std::to_string(warps_m) +
         "x" + std::to_string(warps_n) + " mi=" + std::to_string(mi) + " ni=" + std::to_string(ni) +
         " stages=" + std::to_string(stages) + " splits=" + std::to_string(splits) + " k_tail=" + (k_tail ? "1" : "0");
}

std::string why_not_implementable(const SpecKey& key) {
  auto field = [](const char* name, auto v, const char* why) {
    return std::string("key field ") + name + "=" + std::to_string(v) + ": " + why;
  };
  if (key.op != OpKind::gate_up && key.op != OpKind::down)
    return "key field op=" + std::string(to_string(key.op)) + ": not a grouped GEMM";
  if (key.quant != QuantMode::bf16 && key.quant != QuantMode::w4a16_mxfp4)
    return "key field quant=" + std::string(to_string(key.quant)) +
           ": the grouped GEMM supports bf16 and w4a16_mxfp4 in this build";
  if (key.k == 0 || key.k % 32 != 0) return field("k", key.k, "K must be a positive multiple of 32 (one MXFP4 block)");
  if (key.n == 0 || key.n % 16 != 0) return field("n", key.n, "N must be a positive multiple of 16");
  if (key.experts == 0) return field("experts", key.experts, "must be >= 1");
  if (key.top_k == 0) return field("top_k", key.top_k, "must be >= 1");
  if (key.op == OpKind::gate_up && key.out_dtype != DType::bf16)
    return "key field out=" + std::string(to_string(key.out_dtype)) + ": gate_up writes bf16";
  if (key.op == OpKind::down && key.out_dtype != DType::f32)
    return "key field out=" + std::string(to_string(key.out_dtype)) + ": down writes f32 rows for the combine";
  if (key.op == OpKind::down && key.act != Activation::none)
    return "key field act=" + std::string(to_string(key.act)) + ": down has no activation";
  if (key.op == OpKind::gate_up && key.router_weight)
    return "key field router_weight=1: the router weight is applied by down";
  return {};
}

GemmConfig choose_config(const SpecKey& key) {
  if (auto why = why_not_implementable(key); !why.empty()) throw InvalidArgument(why);
  GemmConfig c;
  c.k_tail = key.k % kBK != 0;
  const std::uint64_t rows = std::uint64_t(key.token_bucket) * key.top_k;
  const std::uint64_t hit = std::min<std::uint64_t>(key.experts, rows);
  const std::uint64_t avg = (rows + hit - 1) / hit;  // rows per expert that was hit
  const int KT = static_cast<int>((key.k + kBK - 1) / kBK);
  c.warps_m = 1;
  c.ni = 4;
  if (avg <= 24) {
    // Bytes bound: the weights of the experts hit stream once; one or two m16
    // tiles. Why the warp count matters: each warp's slice loop is latency
    // bound (ncu at T = 1 with 5 warps per SM: 3 cycles per issued instruction,
    // IPC 1.6), while narrower warps repeat the activation work per weight
    // (IPC-bound at 22 warps per SM with ni = 1). Measured on gpt-oss-120b T = 1:
    // gate_up 37 us at 5 warps/SM (ni 4), 31 us at 11 (ni 2), 36 us at 22 (ni 1):
    // aim for about 8 warps per SM with the widest ni.
    c.mi = avg <= 8 ? 1 : 2;
    c.warps_n = 4;
    const std::uint64_t want_warps = 8 * kSmCount;
    c.ni = 1;
    for (int ni : {4, 2}) {
      if (((key.n + 8 * ni - 1) / (8 * ni)) * hit >= want_warps) {
        c.ni = ni;
        break;
      }
    }
    c.stages = 8;
    // Still too few warps: split K (down only, fp32 partials summed by the
    // combine in a fixed order).
    const std::uint64_t warps = ((key.n + 8 * c.ni - 1) / (8 * c.ni)) * hit;
    if (key.op == OpKind::down && rows <= kSplitKMaxRows && warps < want_warps) {
      const std::uint64_t want = (want_warps + warps - 1) / warps;
      c.splits = static_cast<int>(std::min<std::uint64_t>({want, kSplitKMax, std::uint64_t(KT / 4 > 0 ? KT / 4 : 1)}));
    }
  } else {
    // Tensor bound: taller tiles amortize dequantization (1/mi per MMA) but pad
    // each expert's last tile. Cost model: padded rows of an expert with
    // u = avg + sqrt(avg) rows, times (1 + 2/mi) for the per-MMA overhead.
    c.warps_n = 4;
    const double u = static_cast<double>(avg) + std::sqrt(static_cast<double>(avg));
    double best = 1e30;
    // mi = 8 (128 rows) needs 255 registers and spills (every variant: see
    // tests/cpu/test_kernel_sources.cpp), so 64 rows is the tallest tile.
    for (int mi : {2, 3, 4}) {
      const double bm = 16.0 * mi;
      const double cost = std::ceil(u / bm) * bm * (1.0 + 2.0 / mi);
      if (cost <= best) best = cost, c.mi = mi;
    }
    c.stages = 4;
  }
  // Keep within the 227 KB of shared memory a block may use on sm_90.
  while (c.stages > 2 && c.smem_bytes(key.quant, key.k) > 227u * 1024u) --c.stages;
  if (c.smem_bytes(key.quant, key.k) > 227u * 1024u)
    throw InvalidArgument("key field k=" + std::to_string(key.k) + ": the scale table of a " +
                          std::to_string(c.bn()) + "-row tile does not fit in shared memory");
  return c;
}

}  // namespace moejit::ops
