#pragma once
// Host mirrors of the MoE layer kernels' parameter structs, passed by value to
// cuLaunchKernel: RouteParams (kernels/moe_routing.cuh), GroupedGemmParams
// (kernels/grouped_gemm_params.cuh), CombineParams (kernels/moe_combine.cuh).
// Field order and types must match the device structs.
#include <cstdint>

namespace moejit::ops {

struct TileListArg {
  int bm;
  int *tile_expert, *tile_row_begin, *tile_row_end, *num_tiles;
};
struct RouteParamsArg {
  const int* topk_ids;
  int num_routes, num_experts;
  int *expert_offsets, *sorted_route, *route_row;
  TileListArg tiles[2];
  int tail_rows;
  TileListArg tail;
  const int* group_offsets;
};
struct GroupedGemmParamsArg {
  const void* a;
  std::int64_t a_row_stride;
  const void* w;
  const void* w_scales;
  const void* bias;
  const float* gamma;
  void* out;
  std::int64_t out_row_stride;
  std::int64_t out_split_stride;
  const int *sorted_route, *tile_expert, *tile_row_begin, *tile_row_end, *num_tiles;
  int n, k, top_k;
  float act_alpha, act_limit;
  int wait_at_exit;
  int tiles_ready;
  const int* topk_ids;
  int num_routes, num_experts;
  int *route_expert_offsets, *route_sorted_route, *route_route_row;
  int* route_tiles[4];
  const int* expert_offsets;
  const float* a_scales;
  std::int64_t a_scale_row_stride;
};
struct CombineParamsArg {
  const void* y;
  std::int64_t y_row_stride;
  std::int64_t y_split_stride;
  int splits;
  const int* route_row;
  void* out;
  std::int64_t out_row_stride;
  int hidden, top_k;
  int num_tokens;
};

}  // namespace moejit::ops
