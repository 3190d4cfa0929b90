#pragma once
// Tile heuristic of the FP8 grouped GEMM family (kernels/grouped_gemm_fp8_sm90.cuh,
// quant = mxfp8 or fp8_per_token): specialization key -> tile configuration, and
// can_implement with a reason. Pure functions of the key: codegen, the routing
// tile lists and the launcher call them alike.
#include <cstdint>
#include <string>

#include "moejit/key.hpp"
#include "moejit/tuning.hpp"

namespace moejit::ops {

inline bool is_fp8(QuantMode q) { return q == QuantMode::mxfp8 || q == QuantMode::fp8_per_token; }

struct Fp8GemmConfig {
  int warps_m = 1, warps_n = 4, mi = 1, ni = 2, stages = 4;
  bool k_tail = false;  // K % 128 != 0: zero-fill the last k-slice
  // Past 24 rows per expert (both modes): the persistent warp-specialized
  // kernel (kernels/grouped_gemm_tma_ws_sm90.cuh): 128-row m-tiles x 128
  // weight rows (the accumulator and the partial sums both fit), 384
  // threads, one CTA per SM; stages is its ring depth.
  bool ws = false;
  // fp8_per_token on that kernel: K slices (128 each) per promotion of the
  // e4m3 partial sum into the fp32 accumulator (MXFP8 scales every 32 K).
  int promote_slices = 1;
  // fp8_per_token at most 8 routed rows per expert hit: the decode kernel
  // (kernels/grouped_gemm_fp8_decode_sm90.cuh): weights as the A operand,
  // 8-row m-tiles, wn warps of 16 weight rows along N, kw warps along K,
  // depth units of 64 k in flight per warp, ctas resident per SM.
  bool decode = false;
  int wn = 2, kw = 1, depth = 3, ctas = 12;
  // Decode buckets of at most 32 routes (bucket * top_k): the layer passes
  // topk_ids and launches no routing kernel; every warp routes them itself
  // (kernels/decode_routing.cuh). A launch choice, not a template argument.
  bool fr = false;
  int bm() const { return ws ? 128 : decode ? 8 : 16 * mi * warps_m; }
  int bn() const { return ws ? 128 : decode ? 16 * wn : 8 * ni * warps_n; }
  int threads() const { return ws ? 384 : decode ? 32 * wn * kw : 32 * warps_m * warps_n; }
  // Mirrors Fp8GemmTraits::kSmemBytes.
  std::uint32_t smem_bytes(QuantMode q) const;
  std::string to_string() const;  // "fp8 bm=16 bn=64 warps=1x4 mi=1 ni=2 stages=8 k_tail=0",
                                  // "fp8 kernel=decode wn=2 kw=2 depth=3 ctas=6 fr=1"
};

// The FP8 per-token decode kernel's K split (1, 2 or 4 warps per 16-row
// column) for `columns` 16-row weight columns over the experts hit, K of
// `units` 64-k units and `resident_warps` warps resident at once on the GPU.
int decode_k_split(std::uint64_t columns, std::uint64_t units, std::uint64_t resident_warps);

// Empty when the key can be run by the FP8 family; otherwise the reason, naming
// the field and value (K % 32 != 0 in mxfp8 is rejected here).
std::string why_not_fp8(const SpecKey& key);

// Config for key. Throws InvalidArgument with why_not_fp8()'s reason. The
// decode kernel takes GemmTuning::Decode's wn, kw, depth, ctas and fr where
// set (the MXFP4-only fields mw, nt and xs do not apply to it); the
// one-argument form reads MOEJIT_GEMM_TUNE. A tuning that breaks the
// kernel's contract throws InvalidArgument naming it.
Fp8GemmConfig choose_fp8_config(const SpecKey& key);
Fp8GemmConfig choose_fp8_config(const SpecKey& key, const GemmTuning& tuning);

}  // namespace moejit::ops
