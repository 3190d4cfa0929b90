#pragma once
// Host side of the FP8 grouped GEMM family (kernels/grouped_gemm_fp8_sm90.cuh;
// kernels/grouped_gemm_tma_ws_sm90.cuh for both modes past 24 rows per expert;
// kernels/grouped_gemm_fp8_decode_sm90.cuh for fp8_per_token decode buckets,
// at most 8 rows per expert hit on average, layers of at most 128 experts):
// the launch of one specialization over routing metadata already on the device.
// The MoE layer (src/ops/moe_layer.cpp) and the GPU tests call it.
#include <cstdint>

#include "moejit/key.hpp"
#include "moejit/runtime.hpp"
#include "moejit/types.hpp"
#include "ops/fp8_gemm_config.hpp"

namespace moejit::ops {

// Device tensors of one FP8 grouped GEMM (shapes of key: N = key.n, K = key.k).
//   a:        e4m3 [rows_a, K], row stride a_row_stride bytes (multiple of 16, >= K);
//             rows_a = T (gate_up: gathered by token) or routed rows (down)
//   a_scales: fp8_per_token: fp32 [rows_a]; mxfp8: E8M0 [rows_a, K/32] with row
//             stride a_scale_row_stride bytes (0 = K/32)
//   w:        e4m3 [E, N, K] contiguous
//   w_scales: fp8_per_token: fp32 [E] (per_expert) or [E, N] (per_channel);
//             mxfp8: E8M0 [E, N, K/32]
//   bias:     [E, N] per key.bias, or 0
//   gamma:    fp32 [T * top_k] router weights (key.router_weight), else 0
//   out:      gate_up: bf16 [rows, N or N/2 (gated)]; down: bf16 or fp32 (key.out_dtype) [rows, N];
//             row stride out_row_stride elements
//   routing:  sorted_route [rows], and the m-tile list of tile height
//             choose_fp8_config(key).bm(): tile_expert / tile_row_begin /
//             tile_row_end [max_tiles], num_tiles [1] (kernels/moe_routing.cuh);
//             expert_offsets int32 [E + 1] (first sorted row of each expert),
//             read by the warp-specialized kernel (choose_fp8_config(key).ws)
struct Fp8GemmArgs {
  DevicePtr a = 0;
  std::int64_t a_row_stride = 0;
  DevicePtr a_scales = 0;
  std::int64_t a_scale_row_stride = 0;
  DevicePtr w = 0, w_scales = 0, bias = 0, gamma = 0;
  DevicePtr out = 0;
  std::int64_t out_row_stride = 0;
  DevicePtr sorted_route = 0, tile_expert = 0, tile_row_begin = 0, tile_row_end = 0, num_tiles = 0;
  DevicePtr expert_offsets = 0;
  // Warp-specialized kernel: int32 work-item counter and, 8 bytes later, its
  // done count, both zeroed by the routing kernel (num_tiles + 4 for gate_up,
  // + 8 for down), or 0: static order (GroupedGemmParams::item_counter).
  DevicePtr item_counter = 0;
  std::uint32_t max_tiles = 0;  // an upper bound of *num_tiles (0 launches nothing): grid.y, or the
                                // persistent kernel's grid.x bound
  // Decode kernel only (choose_fp8_config(key).decode):
  //   tiles_ready: the launch just before this one on the stream waits
  //     (griddepcontrol.wait) for the launches before it before it lets this
  //     one start (griddepcontrol.launch_dependents), and topk_ids, the tile
  //     lists and the weights were written before that launch (MoeLayer::run:
  //     this call's activation quantizer); the kernel then reads them before
  //     its own griddepcontrol.wait. False for a launch that cannot know.
  //   topk_ids int32 [num_routes] (num_routes <= 32, choose_fp8_config(key).fr;
  //     max_tiles >= max_m_tiles(num_routes, E, 8)):
  //     every warp routes them itself and the tile lists are not read; gate_up
  //     (key.op) also writes the routing outputs route_expert_offsets [E + 1],
  //     sorted_route [num_routes], route_row [num_routes] and route_tiles
  //     (tile_expert, tile_row_begin, tile_row_end [max_tiles], num_tiles [1])
  //     as kernels/moe_routing.cuh would. 0: read the tile lists.
  bool tiles_ready = false;
  DevicePtr topk_ids = 0;
  std::uint32_t num_routes = 0;
  DevicePtr route_expert_offsets = 0, route_sorted_route = 0, route_route_row = 0;
  DevicePtr route_tiles[4] = {0, 0, 0, 0};
};

// Enqueues the kernel (from Runtime::get(key) or a cubin of generate(key,
// tuning)); config is choose_fp8_config(key, tuning) for the same tuning (the
// grid and the launch checks follow it; choosing it checked the key). Throws
// InvalidArgument (null or misaligned pointers, max_tiles > 65535, a config
// whose threads differ from the kernel's) and DriverError.
void launch_fp8_grouped_gemm(const KernelRef& kernel, const SpecKey& key, const Fp8GemmConfig& config,
                             const Fp8GemmArgs& args, CUstream stream);

}  // namespace moejit::ops
