#include "ops/grouped_gemm_config.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "moejit/error.hpp"
#include "util/env.hpp"

namespace moejit::ops {
namespace {
constexpr int kSmCount = 132;  // H200; only shapes the heuristic, never correctness
constexpr int kBK = 64;
}  // namespace

int GemmConfig::bm() const {
  if (kernel == GemmKernel::bf16_ws) return 128;
  if (kernel == GemmKernel::mxfp4_ws) return tm;
  if (kernel == GemmKernel::mxfp4_wgmma) return 64 * wg;
  return kernel == GemmKernel::x_operand_a ? 16 * mi * warps_m : 8 * nt;
}
int GemmConfig::bn() const {
  if (kernel == GemmKernel::bf16_ws) return 64 * wb;
  if (kernel == GemmKernel::mxfp4_ws) return 64 * cwg;
  if (kernel == GemmKernel::mxfp4_wgmma) return 128;
  return kernel == GemmKernel::x_operand_a ? 8 * ni * warps_n : 16 * mw * wn;
}
int GemmConfig::threads() const {
  if (kernel == GemmKernel::bf16_ws) return 384;
  if (kernel == GemmKernel::mxfp4_ws) return 128 * (1 + cwg);
  if (kernel == GemmKernel::mxfp4_wgmma) return wa ? 256 : 128 * wg;
  return kernel == GemmKernel::x_operand_a ? 32 * warps_m * warps_n : 32 * wn * kw;
}

std::uint32_t GemmConfig::smem_bytes(QuantMode q, std::uint32_t k) const {
  // Decode: the staged activation rows (the K-split reduction buffer is static).
  if (kernel == GemmKernel::mxfp4_decode) return static_cast<std::uint32_t>(xs) * ((k + 255) / 256 * 512 + 16);
  // kernels/grouped_gemm_tma_ws_sm90.cuh, "Shared memory".
  if (kernel == GemmKernel::bf16_ws)
    return 1024 + stages * (128 * 128 + bn() * 128) + stages * 16 + kTmaWsItemSlotBytes +
           tma_ws_epilogue_smem_bytes(bn());
  // kernels/grouped_gemm_mxfp4_ws_sm90.cuh, "Shared memory": per stage the
  // activation rows, the packed weights and two scale words per weight row.
  if (kernel == GemmKernel::mxfp4_ws)
    return 1024 + stages * (bm() * 128 + bn() * 32 + bn() * 8) + stages * 16 + 2 * bm() * 4;
  // MXFP4: the E8M0 scale table of the tile's rows (scale_row_pitch in the kernels).
  const std::uint32_t table = bn() * (((k / 32 + 3) + 3) & ~3u);
  if (kernel == GemmKernel::mxfp4_wgmma)  // kernels/grouped_gemm_mxfp4_wgmma{_wa,}_sm90.cuh, "Shared memory"
    return 1024 + stages * (bm() * 128 + bn() * 32) + table + (wa ? bm() * 4 : 2 * bn() * 128);
  const std::uint32_t a = bm() * kBK * 2;
  const std::uint32_t b = q == QuantMode::w4a16_mxfp4 ? bn() * kBK / 2 : bn() * kBK * 2;
  return stages * (a + b) + (q == QuantMode::w4a16_mxfp4 ? table : 0);
}

std::uint32_t GemmConfig::grid_x(std::uint32_t n, std::uint32_t tiles) const {
  const std::uint32_t blocks = (n + bn() - 1) / bn();
  if (kernel == GemmKernel::mxfp4_ws || kernel == GemmKernel::bf16_ws)
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(kPersistentMaxCtas, std::uint64_t(blocks) * tiles));
  return blocks;
}
std::uint32_t GemmConfig::grid_y(std::uint32_t tiles) const {
  return kernel == GemmKernel::mxfp4_ws || kernel == GemmKernel::bf16_ws ? 1u : tiles;
}

std::string GemmConfig::to_string() const {
  if (kernel == GemmKernel::bf16_ws)
    return "kernel=bf16_ws bm=128 bn=" + std::to_string(bn()) + " stages=" + std::to_string(stages) +
           " k_tail=" + (k_tail ? "1" : "0");
  if (kernel == GemmKernel::mxfp4_ws)
    return "kernel=mxfp4_ws bm=" + std::to_string(bm()) + " bn=" + std::to_string(bn()) +
           " cwg=" + std::to_string(cwg) + " stages=" + std::to_string(stages) + " k_tail=" + (k_tail ? "1" : "0") +
           " k_order_in=" + (k_order_in ? "1" : "0") + " k_order_out=" + (k_order_out ? "1" : "0");
  if (kernel == GemmKernel::mxfp4_wgmma && wa)  // no overlap field: WA always overlaps (depth unused)
    return "kernel=mxfp4_wgmma bm=" + std::to_string(bm()) + " bn=" + std::to_string(bn()) + " wg=" +
           std::to_string(wg) + " stages=" + std::to_string(stages) + " k_tail=" + (k_tail ? "1" : "0") +
           " split_tail=" + (split_tail ? "1" : "0") + " wa=1";
  if (kernel == GemmKernel::mxfp4_wgmma)
    return "kernel=mxfp4_wgmma bm=" + std::to_string(bm()) + " bn=" + std::to_string(bn()) + " wg=" +
           std::to_string(wg) + " stages=" + std::to_string(stages) + " overlap=" + (depth == 2 ? "1" : "0") +
           " k_tail=" + (k_tail ? "1" : "0") + " split_tail=" + (split_tail ? "1" : "0") + " wa=" + (wa ? "1" : "0");
  if (kernel != GemmKernel::x_operand_a)
    return std::string("kernel=mxfp4_decode") +
           " bm=" + std::to_string(bm()) + " bn=" + std::to_string(bn()) + " warps=" + std::to_string(wn) + "x" +
           std::to_string(kw) + " mw=" + std::to_string(mw) + " nt=" + std::to_string(nt) +
           " depth=" + std::to_string(depth) + " ctas=" + std::to_string(ctas) + " xs=" + std::to_string(xs) +
           " fr=" + (fr ? "1" : "0");
  return "kernel=x_operand_a bm=" + std::to_string(bm()) + " bn=" + std::to_string(bn()) + " warps=" + std::to_string(warps_m) +
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
  if (key.op == OpKind::down && key.out_dtype != DType::f32 && key.out_dtype != DType::bf16)
    return "key field out=" + std::string(to_string(key.out_dtype)) +
           ": down writes f32 or bf16 rows (bf16 only without split-K) for the combine";
  if (key.op == OpKind::down && key.act != Activation::none)
    return "key field act=" + std::string(to_string(key.act)) + ": down has no activation";
  if (key.op == OpKind::gate_up && key.router_weight)
    return "key field router_weight=1: the router weight is applied by down";
  return {};
}

namespace {
// The tuned fields of the config's side (decode: mxfp4_decode; prefill: the
// wgmma and warp-specialized kernels), then the kernels' contracts. Whether
// the warp-specialized and weights-as-A kernels run (prefill ws, wa) was
// decided before, from the tuning, and sets no field here except wa.
void apply_tune(GemmConfig& c, const SpecKey& key, const GemmTuning& tuning) {
  const bool decode = c.kernel == GemmKernel::mxfp4_decode;
  bool changed = false;
  auto set = [&changed](auto& field, const auto& value) {
    if (!value) return;
    field = *value;
    changed = true;
  };
  if (decode) {
    const GemmTuning::Decode& t = tuning.decode;
    set(c.wn, t.wn);
    set(c.kw, t.kw);
    set(c.mw, t.mw);
    set(c.nt, t.nt);
    set(c.depth, t.depth);
    set(c.ctas, t.ctas);
    set(c.xs, t.xs);  // 1 / 0 here; staged_rows() turns it into rows
    set(c.fr, t.fr);
  } else {
    const GemmTuning::Prefill& t = tuning.prefill;
    set(c.wg, t.wg);
    set(c.stages, t.stages);
    set(c.depth, t.depth);
    set(c.split_tail, t.split_tail);
    set(c.wa, t.wa);
    set(c.wb, t.wb);
  }
  if (!changed) return;
  // The kernels' contracts (see their tunable blocks).
  const int kseg = std::min(4, static_cast<int>((key.k + 255) / 256));
  const bool ok = decode ? (kseg % c.kw == 0 && c.wn * c.kw <= 32 && c.ctas * c.threads() <= 2048)
                 : c.kernel == GemmKernel::bf16_ws
                     ? (c.wb == 2 || c.wb == 4) && c.stages >= 2 && c.smem_bytes(key.quant, key.k) <= 227u * 1024u
                 : c.kernel == GemmKernel::mxfp4_ws ? c.stages >= 3 && c.smem_bytes(key.quant, key.k) <= 227u * 1024u
                         : c.wg >= 1 && c.wg <= (c.wa ? 2 : 3) && c.stages >= 3 && (c.depth == 1 || c.depth == 2) &&
         c.smem_bytes(key.quant, key.k) <= 227u * 1024u;
  if (!ok)
    throw InvalidArgument("GEMM tuning '" + to_string(tuning) + "' (RuntimeOptions::gemm_tuning or MOEJIT_GEMM_TUNE): " +
                          c.to_string() + " breaks the kernel's contract for k=" + std::to_string(key.k));
}

// Decode, one n8 token tile: the activation rows a CTA stages in shared memory
// (kernel parameter XS). A tile holds one expert's rows, at most 8 and at most
// bucket * top_k (a token may route to one expert more than once). Off above
// 32 KB per CTA, so the six CTAs per SM that staging allows (see ctas below)
// fit in the SM's 227 KB of shared memory.
int staged_rows(const SpecKey& key, const GemmConfig& c) {
  if (c.nt != 1) return 0;
  const std::uint64_t rows = std::min<std::uint64_t>(8, std::uint64_t(key.token_bucket) * key.top_k);
  const std::uint64_t bytes = rows * ((key.k + 255) / 256 * 512 + 16);
  return bytes <= 32 * 1024 ? static_cast<int>(rows) : 0;
}

// Whether the MXFP4 warp-specialized kernel runs a key past decode by default.
// Measured with the activations in the fragment k order (layer us, one call,
// two runs each, `prefill.ws=1` against the default; docs/kernels.md, "Where
// it runs, and why"):
// - tiles of 32 and 64 rows (four consumer warpgroups): faster than the
//   activations-as-A kernel at 9..24 routed rows per expert hit (DeepSeek-V3's
//   256 experts included: T = 320-768 1.08-1.09x) and than the one-warpgroup
//   wgmma kernel at 32 and 48 (gpt-oss-120b T = 1024 / 1536 1.10x, Qwen3-30B-A3B
//   T = 512 1.25x, Mixtral-8x7B T = 128 1.10x, DeepSeek-V3 T = 1024 1.09x);
// - tiles of 128 rows (two consumer warpgroups): slower than the two-warpgroup
//   wgmma kernel (gpt-oss-120b T = 2048 0.89x, DeepSeek-V3 T = 2048 0.88x,
//   Qwen3 T = 1024 0.95x, Mixtral T = 256 0.96x), level at gpt-oss T = 3072;
// - tiles of 192 rows (avg + sqrt(avg) > 128): gpt-oss-120b T = 4096 2663 /
//   2646 us, 16384 8530 / 8900 against the wgmma kernels (column order).
// The 64-row tiles stay off by default: they add two kernels to the
// gpt-oss-120b plan (26 distinct kernels against a budget of 24), and the
// buckets of 41..56 rows must keep the one-warpgroup wgmma kernel anyway,
// which the 128-row buckets run their experts' last 1..64 rows on (split
// tail, ops::split_tail_bucket: worth 3-11 % of the layer at 64 rows per
// expert hit, gpt-oss-120b T = 2048 1671-1680 / 1877-1902 us without).
// The grouped GEMM over rows sorted by expert (a down key without router
// weights) reads its caller's rows in column order, the six-instruction
// conversion: there the middle range keeps the limit of 128 experts measured
// in that order (DeepSeek-V3 T = 320-768 3-5 % slower than activations as A;
// docs/results.md, "The MXFP4 middle range, per model").
// The MoE layer's GEMM keys (gate_up, and down with router weights): their
// activations come in the fragment k order where the warp-specialized kernel runs.
bool layer_gemm(const SpecKey& key) { return key.op == OpKind::gate_up || key.router_weight; }

bool mxfp4_ws_default(const SpecKey& key, std::uint64_t avg) {
  const double u = static_cast<double>(avg) + std::sqrt(static_cast<double>(avg));
  return u > 128.0 || (avg > 8 && avg <= 24 && (layer_gemm(key) || key.experts <= 128));
}

// MXFP4 weights as the MMA's A operand (kernels/grouped_gemm_mxfp4_*_sm90.cuh).
GemmConfig choose_mxfp4_swapab(const SpecKey& key, std::uint64_t hit, std::uint64_t avg, const GemmTuning& tuning) {
  GemmConfig c;
  if (avg <= 8) {
    // Decode: the weights of the experts hit stream once. Aim for 32
    // warp-tasks per SM; fewer 16-row weight groups than that: split K across
    // the CTA's warps (fixed segments, reduced in shared memory in order).
    // One super-step of weights in flight per warp (depth 1): the registers of
    // a deeper ring cost resident warps, and resident warps hide this loop's
    // dequantize -> MMA chains. Measured on gpt-oss-120b, H200 (layer us, depth
    // 1 / 2 / 3): T = 1 46.6 / 51.2 / 52.6, T = 8 200.4 / 210.0, T = 64
    // 737.9 / 765.1 (MOEJIT_GEMM_TUNE decode.depth, scripts/tune-sweep.sh).
    c.kernel = GemmKernel::mxfp4_decode;
    // One n8 token tile per warp task, also at 5..8 rows per expert hit, where
    // an expert with more than 8 rows takes a second task (and streams its
    // weights again): two tiles per task (nt = 2) cost registers and resident
    // warps. Layer us, nt = 2 -> 1 (moejit-run, H200; docs/results.md, "MXFP4
    // decode at 5 to 8 routed rows per expert"): gpt-oss-120b T = 160 1068-1072
    // -> 817, 256 1124-1129 -> 1029-1030; Qwen3-30B-A3B T = 96 225-228 ->
    // 178-179; Mixtral-8x7B T = 24 473-474 -> 366.
    c.nt = 1;
    c.depth = 1;
    const std::uint64_t want_warps = 32 * kSmCount;
    const std::uint64_t groups = (key.n + 15) / 16 * hit;  // 16-row weight groups over the experts hit
    const int steps = static_cast<int>((key.k + 255) / 256);  // 256-k super-steps
    const int kseg = std::min(steps, 4);  // the kernel's fixed K segments; kw divides it
    // Weight groups per warp: two 16-row groups where the experts hit average
    // more than 4 routed rows and the activations are not staged (one
    // activation fragment load then serves twice the weights); one below
    // (twice the registers in flight per warp, fewer resident warps) and with
    // staging (80 registers). Layer us, mw = 1 -> 2 (moejit-run, H200, two
    // runs each; docs/kernels.md, "Decode"): at 6-8 rows gpt-oss-120b T = 256
    // 1033-1037 -> 966-972, Qwen3-30B-A3B T = 128 207-208 -> 194-196,
    // Mixtral-8x7B T = 24 / 32 365-370 -> 349-350 / 447-450 -> 416-417,
    // DeepSeek-V3 T = 192 2713-2757 -> 2524-2548; at 4 rows mixed (Qwen3
    // 149-150 -> 143-146, Mixtral level, DeepSeek-V3 -5 %, gpt-oss-120b T = 128
    // 798 against 771 in another run); below 4, gpt-oss-120b T = 8 / 64
    // 183 -> 198 / 661-663 -> 695-696 and T = 1 gate_up 28.4 -> 35.6.
    // MW = 2 with NT >= 2 spills.
    c.mw = avg > 4 && staged_rows(key, c) == 0 ? 2 : 1;
    c.kw = 1;
    while (c.kw < 4 && kseg % (c.kw * 2) == 0 && groups / c.mw * c.kw < want_warps) c.kw *= 2;
    c.wn = 4 / c.kw;
    // Staged activations (XS) take the x registers out of the loop; with them
    // ptxas fits the kernel in 80 registers without spilling, so 6 CTAs (24
    // warps) per SM are resident instead of 4. At gpt-oss-120b T = 1 that puts
    // down's 720 CTAs in one wave and gate_up's 1440 in two instead of three:
    // layer 43.5 -> 37.8 us queued (5 CTAs: 43.0, no wave saved; H200).
    // With K unsplit (kw = 1, the
    // segment sums held in registers) 80 registers spill 4 bytes: no cap there.
    // ctas = 0 here means "not tuned".
    c.xs = 1;
    c.ctas = 0;
    c.fr = true;
    // With six CTAs per SM a wave is 24 * SMs warp-tasks: where the K split
    // above would need a second wave that a split in two avoids, split in two
    // (twice the super-steps per warp, one wave). gpt-oss gate_up T = 1: 720
    // CTAs of 2 x 2 warps instead of 1440 of 1 x 4, 5760 -> 2880 warp-tasks
    // for 3168 slots; measured gate_up 23.9-24.1 -> 22.2-22.6 us alone.
    if (c.kw == 4 && c.nt == 1 && staged_rows(key, c) > 0 && groups * 4 > 24 * kSmCount &&
        groups * 2 <= 24 * kSmCount) {
      c.kw = 2;
      c.wn = 2;
    }
    // Two token tiles take one weight group per warp unless tuned (MW = 2
    // with NT >= 2 spills).
    if (tuning.decode.nt && *tuning.decode.nt >= 2 && !tuning.decode.mw) c.mw = 1;
    apply_tune(c, key, tuning);
    c.xs = c.xs != 0 ? staged_rows(key, c) : 0;
    // Six CTAs for the heuristic's 128-thread CTAs only: a tuned wider CTA
    // would get a register cap it cannot meet (or more threads than an SM holds).
    if (c.ctas == 0) c.ctas = c.xs > 0 && c.kw > 1 && c.threads() == 128 ? 6 : 1;
    // Fused routing: one warp holds every route (<= 32), one n8 token tile.
    // At most 256 experts: gate_up's CTA (0, 0) writes expert_offsets [E + 1]
    // 32 entries per step with a 32-shuffle count each, before its weights.
    // A down key without router weights is the grouped GEMM over rows sorted
    // by expert (moejit/grouped_gemm.hpp): no topk_ids to route.
    c.fr = c.fr && c.nt == 1 && std::uint64_t(key.token_bucket) * key.top_k <= 32 && key.experts <= 256 &&
           (key.op == OpKind::gate_up || key.router_weight);
    return c;
  }
  // Where the warp-specialized kernel runs by default (mxfp4_ws_default):
  // the middle range and tiles of 192 rows. MOEJIT_GEMM_TUNE prefill.ws=1
  // (GemmTuning::Prefill::ws) forces it at any T past decode.
  if (tuning.prefill.ws.value_or(mxfp4_ws_default(key, avg))) {
    // Past decode: the persistent warp-specialized kernel. Each m-tile
    // dequantizes its 128-row weight block once, so a tile should hold all of
    // an expert's rows (u = avg + sqrt(avg) covers most experts under uniform
    // routing), and the tensor work grows with the tile: the smallest of the
    // four tile heights that holds u, two or more tiles above 192 (256 rows
    // need more registers than the 168 a 384-thread CTA has).
    c.kernel = GemmKernel::mxfp4_ws;
    c.ws = true;
    c.k_tail = key.k % kBK != 0;
    const double u = static_cast<double>(avg) + std::sqrt(static_cast<double>(avg));
    c.tm = 192;
    for (int tm : {32, 64, 128})
      if (u <= tm) {
        c.tm = tm;
        break;
      }
    // Four consumer warpgroups (16 consumer warps per SM) where their
    // 96-register budget holds the accumulators (BM <= 64): with two, the
    // dequantize -> wgmma chain of 8 warps per SM is latency bound.
    c.cwg = c.tm <= 64 ? 4 : 2;
    // The MoE layer's activations in the fragment k order
    // (kernels/mxfp4_fragments.cuh, fragment_k_position): X reordered by the
    // layer's k_order kernel before gate_up, H stored so by gate_up for down.
    // Each bf16x2 of weights then takes about four instructions instead of
    // six. Both GEMMs of a bucket take this kernel (the choice depends on the
    // routed rows per expert and the expert count only); make_layer_plan checks it.
    c.k_order_in = layer_gemm(key);
    c.k_order_out = key.op == OpKind::gate_up;
    // The deepest ring within 227 KB, at most 16 slices.
    c.stages = 16;
    while (c.stages > 3 && c.smem_bytes(key.quant, key.k) > 227u * 1024u) --c.stages;
    apply_tune(c, key, tuning);
    return c;
  }
  // Prefill: tensor bound. wgmma on 64 * wg routed rows x 128 weight rows; the
  // dequantized slice is shared by the wg warpgroups, so two of them halve the
  // dequantization per MMA once experts hold enough rows to fill them.
  c.kernel = GemmKernel::mxfp4_wgmma;
  c.k_tail = key.k % kBK != 0;
  // Each m-tile dequantizes the expert's whole weight slice once, so the tile
  // should hold all of an expert's rows: u = avg + sqrt(avg) rows, one
  // warpgroup per 64 (a warpgroup past the expert's last row idles). Measured on
  // gpt-oss-120b T = 4096 (128 rows per expert): 64-row tiles 5125 us per layer,
  // 128-row tiles 3409 us.
  const double u = static_cast<double>(avg) + std::sqrt(static_cast<double>(avg));
  // Two warpgroups at most: three (one CTA per SM in shared memory) measured
  // 4144 us against 3409 us with two (two CTAs per SM) at T = 4096.
  c.wg = static_cast<int>(std::min(2.0, std::ceil(u / 64.0)));
  // Shared memory per CTA: stages * (BM * 128 + 4096) + 32 KB + scales: two
  // CTAs per SM (227 KB) with either tile height.
  c.stages = c.wg == 1 ? 4 : 3;
  // The weights-as-A kernel has no dequantized tile: the deepest ring that
  // keeps two CTAs per SM (228 KB per SM, 1 KB reserved per CTA).
  // Measured on gpt-oss-120b (H200, docs/kernels.md), WA vs the
  // dequantized-tile kernel: gate_up 922 vs 1165 us at T = 1024, 1719-1748 vs
  // 1902-1948 at T = 4096; down 494-498 vs 557-559 at T = 1024, 931-950 vs
  // 920-938 at T = 4096. Every bucket takes the same kernel, so a split tail
  // (a smaller bucket's kernel) gives the main tiles' bits.
  c.wa = tuning.prefill.wa.value_or(true);
  // Large K (Mixtral's down, K = 14336: a 56 KB scale table) leaves one CTA
  // per SM: then the deepest ring within 227 KB (the loop below).
  if (c.wa) {
    auto two_ctas = [&] { return 2 * (c.smem_bytes(key.quant, key.k) + 1024) <= 228u * 1024u; };
    c.stages = 8;
    while (c.stages > 3 && !two_ctas()) --c.stages;
    if (!two_ctas()) c.stages = 8;
  }
  // Large K: the scale table (128 * K/32 bytes) takes ring stages, then warpgroups.
  constexpr std::uint32_t kSmemMax = 227u * 1024u;
  while (c.smem_bytes(key.quant, key.k) > kSmemMax && c.stages > 3) --c.stages;
  while (c.smem_bytes(key.quant, key.k) > kSmemMax && c.wg > 1) --c.wg;
  if (c.smem_bytes(key.quant, key.k) > kSmemMax)
    throw InvalidArgument("key field k=" + std::to_string(key.k) + ": the E8M0 scale table of a 128-row tile (" +
                          std::to_string(128 * (key.k / 32)) + " bytes) does not fit in shared memory");
  // Why split the tail: with 128-row tiles an expert of 129..192 rows pays a
  // second tile (a full dequantization of its weight slice and two
  // warpgroups of wgmma) for a few rows; at gpt-oss T = 4096 about 30 % of
  // the tiles are such remainders. A one-warpgroup tile does half the wgmma
  // work with half the shared memory per CTA.
  c.split_tail = true;
  apply_tune(c, key, tuning);
  c.split_tail = c.split_tail && c.wg == 2;
  return c;
}
}  // namespace

GemmConfig choose_config(const SpecKey& key) { return choose_config(key, util::env::gemm_tuning()); }

GemmConfig choose_config(const SpecKey& key, const GemmTuning& tuning) {
  if (auto why = why_not_implementable(key); !why.empty()) throw InvalidArgument(why);
  check_gemm_tuning(tuning);  // every number in 1..16 (no zero divisor in the heuristics or contracts)
  GemmConfig c;
  c.k_tail = key.k % kBK != 0;
  const std::uint64_t rows = std::uint64_t(key.token_bucket) * key.top_k;
  const std::uint64_t hit = std::min<std::uint64_t>(key.experts, rows);
  const std::uint64_t avg = (rows + hit - 1) / hit;  // rows per expert that was hit
  // MXFP4 between decode and prefill (8 < avg <= 24 rows per expert): the
  // warp-specialized kernel (mxfp4_ws_default), else (MOEJIT_GEMM_TUNE
  // prefill.ws=0) the activations-as-A kernel (measured on gpt-oss-120b
  // T = 512, 16 rows per expert: layer 1382 us there, 2109 us on 64-row wgmma
  // tiles, 2497 us on the decode kernel with 32-row tiles).
  if (key.quant == QuantMode::w4a16_mxfp4 &&
      (avg <= 8 || avg > 24 || tuning.prefill.ws.value_or(mxfp4_ws_default(key, avg))))
    return choose_mxfp4_swapab(key, hit, avg, tuning);
  if (key.quant == QuantMode::bf16 && tuning.prefill.ws.value_or(avg > 24)) {
    // Past the bytes-bound range: the persistent warp-specialized wgmma
    // kernel, 128-row m-tiles (a consumer warpgroup past an expert's last row
    // issues no wgmma) times 256 weight rows, the deepest ring within 227 KB.
    c.kernel = GemmKernel::bf16_ws;
    c.wb = 4;
    c.stages = 8;
    while (c.stages > 2 && c.smem_bytes(key.quant, key.k) > 227u * 1024u) --c.stages;
    apply_tune(c, key, tuning);
    // A tuned wb re-derives the ring unless the stages were tuned too.
    if (!tuning.prefill.stages) {
      c.stages = 8;
      while (c.stages > 2 && c.smem_bytes(key.quant, key.k) > 227u * 1024u) --c.stages;
    }
    return c;
  }
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
  // Why reject rather than force splits = 1 for bf16 out: the out dtype then
  // never changes the tiles, so a bf16 key runs exactly its f32 twin's config
  // and down_out_dtype() (bf16 iff the twin has splits == 1) is consistent by
  // construction; forcing would make the heuristic branch on the dtype and hand
  // bf16 keys a slower unsplit config at small T without saying so.
  if (key.op == OpKind::down && key.out_dtype == DType::bf16 && c.splits > 1)
    throw InvalidArgument("key field out=bf16: this down key splits K into " + std::to_string(c.splits) +
                          " partials (m=" + std::to_string(key.token_bucket) + ", k=" + std::to_string(key.k) +
                          "), which the combine sums in fp32: use out=f32 (down_out_dtype gives the layer's choice)");
  return c;
}

DType down_out_dtype(const SpecKey& key, const GemmTuning& tuning) {
  SpecKey f32 = key;
  f32.out_dtype = DType::f32;
  // A key the heuristic rejects keeps f32: the layer then fails on it with the
  // same message as before, when it is compiled or launched, not here.
  if (!why_not_implementable(f32).empty()) return DType::f32;
  try {
    return choose_config(f32, tuning).splits == 1 ? DType::bf16 : DType::f32;
  } catch (const InvalidArgument&) {
    return DType::f32;
  }
}

}  // namespace moejit::ops
