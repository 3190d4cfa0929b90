// Routing of at most 32 routes inside each warp of a decode grouped GEMM
// (grouped_gemm_mxfp4_decode_sm90.cuh with FR, grouped_gemm_fp8_decode_sm90.cuh
// when p.topk_ids is set): at <= 32 routes the GEMMs route topk_ids
// themselves and MoeLayer::run launches no routing kernel; and the exit of a
// decode CTA that has no tile. Needs
// grouped_gemm_params.cuh and common.cuh (pdl_wait).

namespace moejit {

// A decode CTA with no tile leaves through here. With p.tiles_ready it still
// waits: were every CTA to leave unwaited (all routes dropped), the launch
// could complete before the one it follows, and the next launch's wait would
// no longer cover that one. The caller returns after it.
__device__ __forceinline__ void decode_leave_without_tile(const GroupedGemmParams& p) {
  if (p.tiles_ready) pdl_wait();
}

// Routing of at most 32 routes by one warp (the decode GEMMs' FR): the ranges of
// kernels/moe_routing.cuh with 8-row tiles, rows inside an expert in route
// order. Every warp of the CTA runs it (no shared memory, no barrier before the
// first weight load) and gets this CTA's tile (out: expert, first row, end of
// the expert's rows, number of tiles) and, per lane, the activation row of its
// token column g = lane / 4 (src_g; a padding column reads the tile's first
// row). Warp 0 of gate_up's CTA (0, 0) also writes the routing outputs for the
// down projection (which routes itself too) and the combine. All 32 lanes call it.
template <bool GATHER>
__device__ __forceinline__ void decode_route_in_warp(const GroupedGemmParams& p, int tile, int (&out)[4], int& src_g) {
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int kBm = 8;
  const int lane = threadIdx.x & 31;
  const int R = p.num_routes, E = p.num_experts;
  const int e = lane < R ? p.topk_ids[lane] : -1;
  const bool valid = lane < R && e >= 0 && e < E;
  // Radix compare through ballots, most significant bit first: lt = lanes
  // with a smaller key, eq = lanes with the same key. Dropped routes sort last.
  const int key = valid ? e : E;
  unsigned lt = 0u, eq = kAll;
  for (int b = 31 - __clz(E); b >= 0; --b) {
    const bool one = (key >> b) & 1;
    const unsigned ones = __ballot_sync(kAll, one);
    if (one) lt |= eq & ~ones;
    eq &= one ? ones : ~ones;
  }
  const int rank = __popc(eq & ((1u << lane) - 1u)), cnt = __popc(eq);
  const int less = __popc(lt);  // routes of smaller experts: the expert's first sorted row
  const int pos = less + rank;  // this route's sorted row
  const bool leader = valid && rank == 0;
  // Sum of v (0 <= v <= 32) over the lanes of mask, bit by bit.
  auto masked_sum = [&](unsigned mask, int v) {
    int sum = 0;
#pragma unroll
    for (int b = 0; b < 6; ++b) sum += __popc(mask & __ballot_sync(kAll, (v >> b) & 1)) << b;
    return sum;
  };
  auto warp_sum = [&](int v) {
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(kAll, v, d);
    return v;
  };
  const int ntl = leader ? (cnt + kBm - 1) / kBm : 0;
  const int tb = masked_sum(lt, ntl);  // tiles of smaller experts
  const int total = warp_sum(ntl);
  const unsigned own = __ballot_sync(kAll, leader && tile >= tb && tile < tb + ntl);
  const int L = own ? __ffs(own) - 1 : 0;
  const int first = __shfl_sync(kAll, less, L), n_rows = __shfl_sync(kAll, cnt, L), tbL = __shfl_sync(kAll, tb, L);
  const int row_begin = first + (tile - tbL) * kBm, row_end = first + n_rows;
  out[0] = __shfl_sync(kAll, key, L);
  out[1] = row_begin;
  out[2] = row_end;
  out[3] = total;
  // The route of each column: one ballot per column, each lane keeps its own
  // column's, then one division per lane in parallel.
  const int g = lane >> 2;
  unsigned mine = 0u;
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const int r = row_begin + c < row_end ? row_begin + c : row_begin;
    const unsigned m = __ballot_sync(kAll, valid && pos == r);
    if (c == g) mine = m;
  }
  const int r_g = row_begin + g < row_end ? row_begin + g : row_begin;
  src_g = GATHER ? (mine ? __ffs(mine) - 1 : 0) / p.top_k : r_g;
  if (!GATHER || blockIdx.x != 0 || blockIdx.y != 0 || threadIdx.x >= 32) return;
  if (lane < R) {
    p.route_route_row[lane] = valid ? pos : -1;
    if (valid) p.route_sorted_route[pos] = lane;
  }
  for (int base = 0; base <= E; base += 32) {  // first sorted row of expert x; [E] = all rows
    const int x = base + lane;
    int below = 0;
    for (int j = 0; j < 32; ++j) below += __shfl_sync(kAll, key, j) < x ? 1 : 0;
    if (x <= E) p.route_expert_offsets[x] = below;
  }
  if (p.route_tiles[0] != nullptr) {
    for (int t = 0; t < ntl; ++t) {
      p.route_tiles[0][tb + t] = key;
      p.route_tiles[1][tb + t] = less + t * kBm;
      p.route_tiles[2][tb + t] = less + cnt;
    }
    if (lane == 0) *p.route_tiles[3] = total;
  }
}

}  // namespace moejit
