// The parameter structs the host passes by value to cuLaunchKernel for the
// routing, grouped GEMM and combine kernels: one definition, compiled by NVRTC
// into every generated translation unit that launches them (after common.cuh)
// and by the host compiler (src/ops/kernel_params.hpp includes this file), so
// the two sides cannot disagree on a field. Plain C++ only: built-in types, no
// includes, nothing device-specific. The static_asserts pin the layout (64-bit
// pointers, 8-byte long long) on both sides; the fields are documented where
// the kernels read them (moe_routing.cuh, grouped_gemm_params.cuh,
// moe_combine.cuh, grouped_gemm_fp8_sm90.cuh, moe_wgrad_sm90.cuh).

namespace moejit {

// One m-tile list (moe_routing.cuh): tile height bm (0: the list is not built).
struct TileList {
  int bm;
  int* tile_expert;
  int* tile_row_begin;
  int* tile_row_end;
  int* num_tiles;
};

struct RouteParams {
  const int* topk_ids;   // [T, top_k]
  int num_routes;        // T * top_k (grouped GEMM: M rows)
  int num_experts;       // E
  int* expert_offsets;   // [E + 1]
  int* sorted_route;     // [num_routes]
  int* route_row;        // [num_routes]
  TileList tiles[2];
  // Split tail (tail_rows > 0; tiles[1] then unused, tiles[0] serves both
  // GEMMs): an expert's last c % bm rows, when 1..tail_rows of them, go to one
  // tile of `tail` (bm = tail_rows) instead of a tile of tiles[0].
  int tail_rows;
  TileList tail;
  const int* group_offsets;  // [E + 1] or null: rows already sorted by expert (moe_routing.cuh)
  // Chunked routing (moe_routing.cuh, "Phases"): 0 routes in one CTA; 1, 2, 3
  // are the count, list and scatter launches over chunks of chunk_routes routes,
  // which share chunk_counts [ceil(num_routes / chunk_routes), E].
  int* chunk_counts;
  int phase;
  int chunk_routes;
};

struct GroupedGemmParams {
  const unsigned short* a;   // bf16 (TMA WS FP8: e4m3) activations; gate_up: X [T, K]; down: H [rows, K]
  long long a_row_stride;    // elements between rows of a
  const unsigned char* w;    // bf16 [E, N, K] or packed e2m1 [E, N, K/2], contiguous
  const unsigned char* w_scales;  // E8M0 [E, N, K/32] (MXFP4, MXFP8), or fp32 [E] / [E, N] (TMA WS FP8 per-token)
  const void* bias;          // [E, N] f32 or bf16, contiguous, or null
  const float* gamma;        // router weights [T * top_k], indexed by route id
  void* out;                 // gate_up: H bf16 [rows, N_out]; down: Y f32 [S, rows, N] or bf16 [rows, N] (S = 1)
  long long out_row_stride;  // elements between rows of out
  long long out_split_stride;  // elements between split-K partials of out (S = gridDim.z)
  const int* sorted_route;   // [rows] route id (t * top_k + j) of each sorted row
  const int* tile_expert;    // [max_tiles] expert of each m-tile
  const int* tile_row_begin; // [max_tiles] first sorted row of the m-tile
  const int* tile_row_end;   // [max_tiles] end of the rows of the expert the tile list covers (exclusive)
  const int* num_tiles;      // [1] number of valid m-tiles
  int n, k, top_k;
  float act_alpha, act_limit;
  int wait_at_exit;          // mxfp4_wgmma split-tail launch: griddepcontrol.wait before exiting, not at the start
  int tiles_ready;           // decode kernels: topk_ids, the routing kernel's tile lists and sorted_route (when it
                             // ran), the weights and the bias were written before the previous launch on the
                             // stream, which waits for its own predecessors before it lets this one start
                             // (MoeLayer::run: MXFP4 down right after gate_up; FP8 gate_up and down right after
                             // their activation quantizer): read the tile fields (or route, FR), issue the first
                             // weight loads (MXFP4: and load the bias) before griddepcontrol.wait; with FR
                             // sorted_route is gate_up's output and waits
  // Decode with FR (<= 32 routes; MXFP4: the fr field of Mxfp4DecodeKernel, FP8
  // per-token: topk_ids non-null): every warp routes topk_ids itself;
  // warp 0 of gate_up's CTA (0, 0) writes the routing outputs (the layer then
  // launches no routing kernel). Same ranges as kernels/moe_routing.cuh, rows
  // of one expert in route order.
  const int* topk_ids;       // [num_routes]
  int num_routes, num_experts;
  int* route_expert_offsets; // [E + 1]
  int* route_sorted_route;   // [num_routes]
  int* route_route_row;      // [num_routes]
  int* route_tiles[4];       // tile_expert, tile_row_begin, tile_row_end [max m-tiles], num_tiles [1] (8-row tiles)
  // TMA warp-specialized kernel: the routing kernel's expert_offsets [E + 1]
  // (first sorted row of each expert), which orders its work items by expert.
  const int* expert_offsets;
  // TMA warp-specialized kernel, FP8 per-token: fp32 scale of each row of a;
  // MXFP8: E8M0 [rows of a, K/32], rows a_scale_row_stride bytes apart.
  const float* a_scales;
  long long a_scale_row_stride;
  // TMA warp-specialized kernel: its work-item counter, from which each CTA
  // takes its next work item when it is done with one, and two ints later
  // the count of CTAs done claiming (the last one zeroes both again):
  // num_tiles + 1 for gate_up (done: num_tiles[3]), num_tiles + 2 for down
  // ([4]), all zeroed by the routing kernel; null: CTA b takes items b,
  // b + gridDim.x, ... (a static order).
  int* item_counter;
};

struct CombineParams {
  const void* y;             // [splits, rows, hidden] fp32, or [rows, hidden] bf16 (Y_BF16); expert-sorted rows
  long long y_row_stride;    // elements
  long long y_split_stride;  // elements between partials
  int splits;                // >= 1 (1 with Y_BF16)
  const int* route_row;      // [T * top_k], -1 = dropped route
  unsigned short* out;       // bf16 [T, hidden]
  long long out_row_stride;  // elements
  int hidden, top_k;
  int num_tokens;            // T: the grid's last CTA has units past T * hidden / COLS
};

namespace f8 {
// The FP8 mma.sync grouped GEMM (grouped_gemm_fp8_sm90.cuh).
struct Fp8GemmParams {
  const unsigned char* a;    // e4m3 activations; gate_up: Xq [T, K]; down: Hq [rows, K]
  long long a_row_stride;    // bytes between rows of a
  const void* a_scales;      // per-token: fp32 [rows of a]; MX: E8M0 u8 [rows of a, K/32]
  long long a_scale_row_stride;  // MX: bytes between rows of a_scales (>= K/32); unused per-token
  const unsigned char* w;    // e4m3 [E, N, K], contiguous
  const void* w_scales;      // fp32 [E] / fp32 [E, N] / E8M0 [E, N, K/32], contiguous
  const void* bias;          // [E, N] f32 or bf16, contiguous, or null
  const float* gamma;        // router weights [T * top_k], indexed by route id
  void* out;                 // gate_up: H bf16 [rows, N_out]; down: Y bf16 or f32 [rows, N]
  long long out_row_stride;  // elements between rows of out
  const int* sorted_route;   // [rows] route id (t * top_k + j) of each sorted row
  const int* tile_expert;    // [max_tiles] expert of each m-tile
  const int* tile_row_begin; // [max_tiles] first sorted row of the m-tile
  const int* tile_row_end;   // [max_tiles] end of the expert's rows (exclusive)
  const int* num_tiles;      // [1] number of valid m-tiles
  int n, k, top_k;
  float act_alpha, act_limit;
};
}  // namespace f8

namespace wg {
// The MoE weight gradient (moe_wgrad_sm90.cuh).
struct WgradParams {
  const unsigned short* grad;  // bf16 [rows, N], expert-sorted routed rows
  long long grad_row_stride;   // elements
  const unsigned short* x;     // bf16 [T, K] (gather by token) or [rows, K]
  long long x_row_stride;      // elements
  const int* expert_offsets;   // [E + 1]: rows of expert e are [off[e], off[e+1])
  const int* sorted_route;     // [rows] route id t * top_k + j (gather by token only)
  void* dw;                    // [E, N, K] fp32 or bf16, contiguous
  float* db;                   // [E, N] fp32, or null
  int n, k, top_k, experts;
  int gather;                  // 1: X rows by token (src(r) = sorted_route[r] / top_k), 0: by routed row
};
}  // namespace wg

// The layout both compilers must produce: sizes on both sides, field offsets
// on the host (NVRTC has no offsetof; the sizes and the shared text cover it).
static_assert(sizeof(void*) == 8 && sizeof(long long) == 8, "64-bit pointers and long long");
static_assert(sizeof(TileList) == 40, "TileList layout");
static_assert(sizeof(RouteParams) == 192, "RouteParams layout");
static_assert(sizeof(GroupedGemmParams) == 248, "GroupedGemmParams layout");
static_assert(sizeof(CombineParams) == 72, "CombineParams layout");
static_assert(sizeof(f8::Fp8GemmParams) == 144, "Fp8GemmParams layout");
static_assert(sizeof(wg::WgradParams) == 88, "WgradParams layout");
#if !defined(__CUDACC_RTC__)
static_assert(__builtin_offsetof(TileList, tile_expert) == 8, "TileList layout");
static_assert(__builtin_offsetof(RouteParams, tiles) == 40 && __builtin_offsetof(RouteParams, tail_rows) == 120 &&
                  __builtin_offsetof(RouteParams, tail) == 128 && __builtin_offsetof(RouteParams, group_offsets) == 168 &&
                  __builtin_offsetof(RouteParams, chunk_counts) == 176 && __builtin_offsetof(RouteParams, phase) == 184 &&
                  __builtin_offsetof(RouteParams, chunk_routes) == 188,
              "RouteParams layout");
static_assert(__builtin_offsetof(GroupedGemmParams, n) == 112 && __builtin_offsetof(GroupedGemmParams, tiles_ready) == 136 &&
                  __builtin_offsetof(GroupedGemmParams, topk_ids) == 144 &&
                  __builtin_offsetof(GroupedGemmParams, route_tiles) == 184 &&
                  __builtin_offsetof(GroupedGemmParams, a_scale_row_stride) == 232 &&
                  __builtin_offsetof(GroupedGemmParams, item_counter) == 240,
              "GroupedGemmParams layout");
static_assert(__builtin_offsetof(CombineParams, route_row) == 32 && __builtin_offsetof(CombineParams, num_tokens) == 64,
              "CombineParams layout");
static_assert(__builtin_offsetof(f8::Fp8GemmParams, n) == 120 && __builtin_offsetof(f8::Fp8GemmParams, act_limit) == 136,
              "Fp8GemmParams layout");
static_assert(__builtin_offsetof(wg::WgradParams, db) == 56 && __builtin_offsetof(wg::WgradParams, experts) == 76 &&
                  __builtin_offsetof(wg::WgradParams, gather) == 80,
              "WgradParams layout");
#endif

}  // namespace moejit
