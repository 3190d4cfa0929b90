// Parameters and epilogue functions shared by the bf16 / MXFP4 grouped GEMM kernels
// (grouped_gemm_sm90.cuh and grouped_gemm_mxfp4_wgmma_sm90.cuh: routed rows as
// the MMA's M dimension; grouped_gemm_mxfp4_decode_sm90.cuh: MXFP4 weights as
// the A operand, "swap AB") and by the TMA warp-specialized kernel
// (grouped_gemm_tma_ws_sm90.cuh: bf16 and both FP8 modes). The host mirror of
// GroupedGemmParams is GroupedGemmParamsArg in src/ops/kernel_params.hpp.

namespace moejit {

enum { kQuantBf16 = 0, kQuantMxfp4 = 1 };
enum { kActNone = 0, kActSiluGated = 1, kActSwigluOai = 2 };
enum { kBiasNone = 0, kBiasF32 = 1, kBiasBf16 = 2 };

struct GroupedGemmParams {
  const u16* a;              // bf16 (TMA WS FP8: e4m3) activations; gate_up: X [T, K]; down: H [rows, K]
  i64 a_row_stride;          // elements between rows of a
  const u8* w;               // bf16 [E, N, K] or packed e2m1 [E, N, K/2], contiguous
  const u8* w_scales;        // E8M0 [E, N, K/32] (MXFP4, MXFP8), or fp32 [E] / [E, N] (TMA WS FP8 per-token), contiguous
  const void* bias;          // [E, N] f32 or bf16, contiguous, or null
  const float* gamma;        // router weights [T * top_k], indexed by route id
  void* out;                 // gate_up: H bf16 [rows, N_out]; down: Y f32 [S, rows, N] or bf16 [rows, N] (S = 1)
  i64 out_row_stride;        // elements between rows of out
  i64 out_split_stride;      // elements between split-K partials of out (S = gridDim.z)
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
  // Decode with FR (<= 32 routes; MXFP4: the FR template argument, FP8
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
  i64 a_scale_row_stride;
};

// Bytes per weight row in the shared scale table: the row's K/32 scales plus up
// to 3 bytes of alignment slack in front, rounded up to 4. The host computes the
// same (src/ops/grouped_gemm_config.cpp).
__host__ __device__ __forceinline__ int scale_row_pitch(int K) { return ((K / 32 + 3) + 3) & ~3; }

// Logical output column -> physical weight row. silu_gated weights hold gate
// in rows [0, N/2) and up in [N/2, N); the kernel interleaves them (gate at even,
// up at odd logical columns) so that both halves of one output meet in one thread.
template <int ACT>
__device__ __forceinline__ int physical_row(int n, int N) {
  if (ACT == kActSiluGated) return (n & 1) ? (N >> 1) + (n >> 1) : (n >> 1);
  return n;
}


// Bias of logical output column n (physical weight row physical_row(n)) of expert e.
template <int BIAS, int ACT>
__device__ __forceinline__ float bias_at(const void* bias, int expert, int n, int N) {
  const i64 i = (i64)expert * N + physical_row<ACT>(n, N);
  if (BIAS == kBiasF32) return ((const float*)bias)[i];
  if (BIAS == kBiasBf16) return bf16_bits_to_f32(((const u16*)bias)[i]);
  return 0.f;
}

// Gated activation of one output: SiLU-gated (gate * sigmoid(gate) * up) or
// gpt-oss SwiGLU (model card: alpha 1.702, limit 7.0, +1 on the linear half).
template <int ACT>
__device__ __forceinline__ float gated_act(float gate, float up, float alpha, float limit) {
  if (ACT == kActSiluGated) return gate * sigmoidf_(gate) * up;
  // Comparisons, not fminf/fmaxf: a NaN gate or linear value must stay NaN.
  const float gt = gate > limit ? limit : gate;
  const float lin = up > limit ? limit : (up < -limit ? -limit : up);
  return gt * sigmoidf_(alpha * gt) * (lin + 1.f);
}

// Epilogue of two adjacent logical columns n, n + 1 of sorted row r for the
// kernels whose accumulator rows are routed rows (activations as the A
// operand): bias (when add_bias), then the router weight gamma and the store;
// for gated activations n is the gate and n + 1 the up column of output n / 2.
// OUT_F32 writes split-K partial z; bf16 output (gate_up, and down when K is
// not split) has no partials and ignores z.
template <int ACT, int BIAS, bool OUT_F32>
__device__ __forceinline__ void store_column_pair(const GroupedGemmParams& p, int expert, int r, int n, float v0,
                                                  float v1, float gamma, bool add_bias, int z) {
  const int N = p.n;
  if (BIAS != kBiasNone && add_bias) {
    v0 += bias_at<BIAS, ACT>(p.bias, expert, n, N);
    v1 += bias_at<BIAS, ACT>(p.bias, expert, n + 1, N);
  }
  if (OUT_F32) {
    float* o = (float*)p.out + z * p.out_split_stride + (i64)r * p.out_row_stride + n;
    o[0] = v0 * gamma;
    o[1] = v1 * gamma;
  } else if (ACT == kActNone) {
    u16* o = (u16*)p.out + (i64)r * p.out_row_stride + n;
    *(u32*)o = pack_bf16x2(v0 * gamma, v1 * gamma);
  } else {
    const float h = gated_act<ACT>(v0, v1, p.act_alpha, p.act_limit);
    ((u16*)p.out)[(i64)r * p.out_row_stride + (n >> 1)] = f32_to_bf16_bits(h * gamma);
  }
}

}  // namespace moejit
