#pragma once
// The plan of one MoE layer for one token bucket: every fact a call derives
// from (shape, quant mode, weight-scale granularity, bucket, target) and not
// from the call's tensors, computed once. MoeLayer keeps one plan per bucket
// it has seen (plan_cache.hpp) and its launches read the plan; moe_layer_keys
// (and so prewarm) lists the plan's keys, so a sealed runtime never misses a
// key the layer asks for.
#include <array>
#include <cstdint>
#include <vector>

#include "moejit/key.hpp"
#include "moejit/moe_shape.hpp"
#include "moejit/tuning.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/grouped_gemm_config.hpp"

namespace moejit::ops {

// One grouped GEMM (gate_up or down) of the plan.
struct GemmPlan {
  SpecKey key;
  GemmConfig config;        // bf16 / w4a16_mxfp4
  Fp8GemmConfig fp8;        // mxfp8 / fp8_per_token
  int bm = 0;               // routed rows per m-tile
  unsigned splits = 1;      // split-K partials (gridDim.z)
  bool has_tail = false;    // split tail: the tail key's kernel runs each expert's last rows
  SpecKey tail_key;         // the smaller bucket's GEMM key (has_tail)
  std::uint32_t tail_grid_n = 0;  // CTAs along N of the tail launch: ceil(n / tail bn)
  SpecKey quantize_key;     // FP8 modes: the quantizer of this GEMM's input rows
  // w4a16_mxfp4 gate_up on the warp-specialized kernel: the reorder of X into
  // its fragment k order (ops/k_order.hpp), launched before the GEMM.
  bool k_order = false;
  SpecKey k_order_key;
};

// The steps of MoeLayer::run in launch order.
enum class LayerStep : std::uint8_t { route, gate_up, down, combine };

struct MoeLayerPlan {
  std::uint32_t bucket = 0;
  QuantMode quant = QuantMode::bf16;
  bool fp8 = false;
  // Both GEMMs route topk_ids themselves (MXFP4 and FP8 per-token decode,
  // <= 32 routes): run() launches no routing kernel.
  bool fused_route = false;
  SpecKey route_key;
  bool route_staged = false;  // routes staged in shared memory (kernels/moe_routing.cuh)
  GemmPlan gate_up, down;
  // Both GEMMs on the same m-tile height share one tile list (routing builds it once).
  bool shared_tiles = false;
  std::uint32_t tail_bucket = 0;  // split tail: the smaller bucket whose kernels run the tails; 0 none
  // H in the fragment k order (MoeWorkspaceView::h_fragment_order): gate_up
  // stores it so and down reads it so (the MXFP4 warp-specialized kernels).
  bool h_fragment_order = false;
  DType y_dtype = DType::f32;     // the down projection's output dtype (the combine's input)
  unsigned y_splits = 1;          // Y partials the combine sums
  SpecKey combine_key;
  std::uint32_t combine_cols = 0;  // columns per combine thread
  std::array<LayerStep, 4> steps{};  // run()'s launches, in order
  std::uint8_t num_steps = 0;

  // Every kernel the layer may launch for this bucket, in moe_layer_keys order:
  // route, [FP8: quantize X; MXFP4 warp-specialized: k_order X], gate_up, [FP8:
  // quantize H], down, combine, [split tail: gate_up and down of the tail bucket].
  std::vector<SpecKey> keys() const;
};

// The GEMMs' configurations (and through them the down key's Y dtype and the
// split tail) follow `tuning`. Throws InvalidArgument (bad shape, bucket 0, a
// key the heuristics refuse, a tuning that breaks a kernel's contract).
MoeLayerPlan make_layer_plan(const MoeLayerShape& shape, QuantMode quant, WeightScale wscale, std::uint32_t bucket,
                             const Target& target, const GemmTuning& tuning);

}  // namespace moejit::ops
