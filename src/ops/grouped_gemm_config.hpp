#pragma once
// Tile heuristic of the grouped GEMM family (kernels/grouped_gemm_sm90.cuh):
// specialization key -> tile configuration, and can_implement with a reason.
// Pure functions of the key: the codegen and the launcher call them alike, so a
// kernel's launch contract (grid, block, shared memory) lives in one place.
#include <cstdint>
#include <string>

#include "moejit/key.hpp"
#include "moejit/tuning.hpp"

namespace moejit::ops {

// Which kernel of the family runs the key.
//   x_operand_a   : kernels/grouped_gemm_sm90.cuh, activations as the MMA's A
//                   operand (bf16 weights; MXFP4 on other targets' fallbacks);
//   mxfp4_decode  : kernels/grouped_gemm_mxfp4_decode_sm90.cuh, MXFP4 weights as
//                   A, weights streamed to registers, K split across warps;
//   mxfp4_wgmma   : kernels/grouped_gemm_mxfp4_wgmma_sm90.cuh, weights dequantized
//                   to a shared bf16 tile, wgmma on 64 * wg routed rows x 128.
//   mxfp4_ws      : kernels/grouped_gemm_mxfp4_ws_sm90.cuh, persistent and
//                   warp-specialized: a producer warpgroup fills an mbarrier
//                   ring (the packed weights by TMA), cwg (two or four)
//                   consumer warpgroups dequantize into wgmma A registers;
//                   tm routed rows per m-tile (wgmma N).
//   bf16_ws       : kernels/grouped_gemm_tma_ws_sm90.cuh (bf16), persistent and
//                   warp-specialized for bf16 weights: 128 routed rows (two
//                   consumer warpgroups) x 64 * wb weight rows, both operands
//                   in shared memory.
enum class GemmKernel { x_operand_a, mxfp4_decode, mxfp4_wgmma, mxfp4_ws, bf16_ws };

struct GemmConfig {
  GemmKernel kernel = GemmKernel::x_operand_a;
  // x_operand_a
  int warps_m = 1, warps_n = 4, mi = 1, ni = 2, stages = 4;
  int splits = 1;       // split-K partials (down with f32 out only; summed by the combine)
  bool k_tail = false;  // K % 64 != 0: zero-fill the last k-slice
  // mxfp4_decode: wn warps along N, kw warps along K, mw 16-row weight groups
  // per warp, nt n8 token tiles, depth weight steps in flight per warp, ctas
  // resident CTAs per SM asked of ptxas (__launch_bounds__ minimum: it caps
  // the registers at 64K / (ctas * threads)); 1 = no cap.
  int wn = 4, kw = 1, mw = 2, nt = 1, depth = 2, ctas = 1;
  // mxfp4_decode with nt = 1: activation rows staged once per CTA in shared
  // memory (kernel parameter XS, at most min(8, bucket * top_k) rows of
  // ceil(K / 256) * 512 + 16 bytes); 0 = read through L1 in the loop.
  // GemmTuning::Decode::xs = false turns it off.
  int xs = 0;
  // mxfp4_decode with nt = 1, at most 32 routes (bucket * top_k) and at most 256
  // experts: the kernel
  // routes topk_ids itself (kernel parameter FR; MoeLayer::run then launches no
  // routing kernel). GemmTuning::Decode::fr = false turns it off.
  bool fr = false;
  // mxfp4_wgmma with wg = 2: an expert's last 1..64 rows may run as a
  // one-warpgroup tile (ops::split_tail_bucket); GemmTuning::Prefill::split_tail = false turns it off.
  bool split_tail = false;
  // mxfp4_wgmma: the weights-as-A kernel (kernels/grouped_gemm_mxfp4_wgmma_wa_sm90.cuh:
  // weights dequantized into wgmma A registers, 256 threads, wg = 64-row halves
  // of the routed-row tile; depth is not used). GemmTuning::Prefill::wa.
  bool wa = false;
  // mxfp4_ws: routed rows per m-tile (the wgmma N dimension: 32, 64, 128 or
  // 192); stages is its ring depth. The default from 9 to 24 routed rows per
  // expert hit and where tiles of 192 rows fit the experts (gpt-oss-120b
  // T >= ~3000); GemmTuning::Prefill::ws forces it on or off past decode.
  int tm = 0;
  int cwg = 2;  // mxfp4_ws: consumer warpgroups (2 or 4; 64 * cwg weight rows per CTA)
  // mxfp4_ws: the activation rows arrive in the fragment k order (kernel
  // parameter K_ORDER_IN: the MoE layer's gate_up, whose X the layer's k_order
  // kernel reorders, and down, whose H gate_up wrote so), resp. the output is
  // stored in it (K_ORDER_OUT: the layer's gate_up). Not for the grouped GEMM
  // over rows sorted by expert (a down key without router weights), whose A
  // the caller writes in column order.
  bool k_order_in = false, k_order_out = false;
  int wb = 4;   // bf16_ws: weight rows per work item in blocks of 64 (2 or 4: the wgmma N, 128 or 256)
  bool ws = false;
  int wg = 2;  // mxfp4_wgmma: warpgroups (64 routed rows each); depth 2 = MMAs overlap the next
               // slice's dequantization, 1 = they retire first
  int bm() const;  // routed rows per m-tile
  int bn() const;  // weight rows (logical output columns) per CTA
  int threads() const;
  std::uint32_t smem_bytes(QuantMode q, std::uint32_t k) const;  // dynamic shared memory, bytes
  // Grid of a launch over `tiles` m-tiles (at most): x, y. The persistent
  // mxfp4_ws kernel takes one CTA per SM at most and walks the work itself.
  std::uint32_t grid_x(std::uint32_t n, std::uint32_t tiles) const;
  std::uint32_t grid_y(std::uint32_t tiles) const;
  std::string to_string() const;  // "kernel=x_operand_a bm=16 bn=64 warps=1x4 mi=1 ni=2 stages=6 splits=1 k_tail=0"
};

// Empty when the key can be run; otherwise the reason, naming the field and value.
std::string why_not_implementable(const SpecKey& key);

// Config for key under `tuning` (moejit/tuning.hpp: unset fields keep the
// heuristic's choice). Throws InvalidArgument with why_not_implementable()'s
// reason, for a down key with out=bf16 whose config splits K (splits > 1: the
// partials must stay f32), and for a tuning that breaks the chosen kernel's
// contract for this key (naming the tuning, the config and k). The out dtype
// never changes the config. Does not allocate on success.
GemmConfig choose_config(const SpecKey& key, const GemmTuning& tuning);
// The same under the process's MOEJIT_GEMM_TUNE (util::env::gemm_tuning()).
GemmConfig choose_config(const SpecKey& key);

// The dtype the MoE layer's down projection writes Y in for a down key of its
// shape (key.out_dtype is ignored): bf16 when choose_config keeps K whole
// (splits == 1), halving Y's bytes for the down store and the combine; f32 when
// it splits K, under `tuning`. f32 also for keys choose_config rejects.
// bf16 / w4a16_mxfp4 only.
DType down_out_dtype(const SpecKey& key, const GemmTuning& tuning);

// Upper bound of m-tiles for `rows` routed rows over `experts` experts and tile
// height bm: sum_e ceil(c_e / bm) <= rows / bm + min(experts, rows).
// Rows above which the heuristic never splits K; the workspace sizes the
// split-K partials of Y from it.
inline constexpr std::uint64_t kSplitKMaxRows = 4096;
inline constexpr int kSplitKMax = 4;

// Grid of the persistent kernels (mxfp4_ws, bf16_ws and the FP8 per-token
// warp-specialized kernel): one CTA per SM of an H200 at most; they walk their
// work items themselves, so a GPU with fewer SMs only queues the rest.
inline constexpr std::uint64_t kPersistentMaxCtas = 132;

// Shared memory of the TMA warp-specialized kernel's epilogue after the
// mbarriers (kernels/grouped_gemm_tma_ws_sm90.cuh): 128-byte alignment, the
// staging blocks (TmaWsLayout::kEpiBytes: 8 consumer warps x 2 KB) and the
// column-operand tables (TmaWsLayout::kColBytes: per consumer warpgroup and
// parity of its items, BN biases and BN weight scales as fp32). Every mode
// but MXFP8 has them (bf16_ws here, FP8 per token in fp8_gemm_config.cpp).
// The work-item slots after the ring's mbarriers (two ids and four mbarriers:
// the persistent tile scheduler's hand-off from the producer to the consumers).
inline constexpr std::uint32_t kTmaWsItemSlotBytes = 64;
inline constexpr std::uint32_t tma_ws_epilogue_smem_bytes(int bn) {
  return 128u + 8u * 2048u + 4u * 2u * 4u * static_cast<std::uint32_t>(bn);
}

inline std::uint32_t max_m_tiles(std::uint64_t rows, std::uint32_t experts, int bm) {
  const std::uint64_t nonempty = rows < experts ? rows : experts;
  return static_cast<std::uint32_t>(rows / bm + nonempty);
}

}  // namespace moejit::ops
