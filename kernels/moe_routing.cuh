// MoE routing on the device: topk_ids [T, top_k] -> expert-sorted routed rows and
// the m-tile schedules of the two grouped GEMMs. One CTA, no host synchronization,
// capturable in a CUDA graph.
//
// ---- Tunable parameters -------------------------------------------------------
//   THREADS : CTA size (template argument: 256 up to 1024 routes, else 1024;
//             ops::route_threads).
//   STAGED  : routes staged in shared memory: topk_ids are read from global memory
//             once, and the expert-sorted order is built in shared memory and
//             written out with coalesced stores. Why: one SM scattering one 4-byte
//             store per route costs one L2 transaction each (16K at gpt-oss T = 4096).
//             false: scatter straight to global memory (256-thread buckets, and
//             buckets whose staging would not fit; ops::route_staged).
// Shared memory (dynamic, ops::route_smem_bytes): 4 ints per expert (counts,
// offsets, tile bases, cursors), then with STAGED 2 ints per route for up to
// ops::kRouteStagedRoutes routes (the host checks num_routes against it).
//
// Outputs (all int32, device memory):
//   expert_offsets [E + 1]    first sorted row of each expert; [E] = total rows
//   sorted_route   [T*top_k]  route id (t * top_k + j) at each sorted row
//   route_row      [T*top_k]  sorted row of each route, -1 if dropped
//   for each of two tile sizes bm (gate_up, down): tile_expert, tile_row_begin,
//   tile_row_end [max_tiles] and num_tiles [1]
// An expert id of -1 (not local under expert parallelism) drops the route; ids
// outside [-1, E) are a precondition violation and are dropped too. Experts with
// no rows get no m-tiles. The order of rows inside one expert follows shared
// atomics and may differ between runs; every row is computed independently, so
// results do not depend on it.

namespace moejit {

struct TileList {
  int bm;
  int* tile_expert;
  int* tile_row_begin;
  int* tile_row_end;
  int* num_tiles;
};

struct RouteParams {
  const int* topk_ids;   // [T, top_k]
  int num_routes;        // T * top_k
  int num_experts;       // E
  int* expert_offsets;   // [E + 1]
  int* sorted_route;     // [num_routes]
  int* route_row;        // [num_routes]
  TileList tiles[2];
};

// Exclusive scan of v[0, n) into out[0, n), by warp 0 (n small: experts).
__device__ __forceinline__ int warp0_exclusive_scan(const int* v, int* out, int n) {
  const int lane = threadIdx.x & 31;
  int carry = 0;
  for (int base = 0; base < n; base += 32) {
    const int i = base + lane;
    const int x = i < n ? v[i] : 0;
    int incl = x;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    if (i < n) out[i] = carry + incl - x;
    carry += __shfl_sync(0xffffffffu, incl, 31);
  }
  return carry;
}

template <int THREADS, bool STAGED>
__global__ void __launch_bounds__(THREADS) moe_route_kernel(const RouteParams p) {
  extern __shared__ int sh[];
  const int E = p.num_experts;
  int* count = sh;
  int* offset = sh + E;
  int* tile_base = sh + 2 * E;
  int* cursor = sh + 3 * E;
  int* topk_sh = sh + 4 * E;                // STAGED: [num_routes] expert of each route
  int* sorted_sh = topk_sh + p.num_routes;  // STAGED: [num_routes] route at each sorted row
  __shared__ int total_rows;
  __shared__ int total_tiles[2];
  const int tid = threadIdx.x;
  pdl_wait();  // topk_ids come from the caller's previous kernel
  pdl_launch_dependents();

  for (int e = tid; e < E; e += THREADS) count[e] = 0;
  __syncthreads();
  for (int i = tid; i < p.num_routes; i += THREADS) {
    const int e = p.topk_ids[i];
    if (STAGED) topk_sh[i] = e;
    if (e >= 0 && e < E) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (tid < 32) {
    const int total = warp0_exclusive_scan(count, offset, E);
    if (tid == 0) total_rows = total;
  }
  __syncthreads();
  for (int e = tid; e < E; e += THREADS) {
    p.expert_offsets[e] = offset[e];
    cursor[e] = offset[e];
  }
  if (tid == 0) p.expert_offsets[E] = total_rows;

#pragma unroll
  for (int l = 0; l < 2; ++l) {
    const TileList tl = l == 0 ? p.tiles[0] : p.tiles[1];
    if (tl.bm <= 0) continue;
    __syncthreads();
    // m-tiles per expert, then their exclusive scan in place.
    for (int e = tid; e < E; e += THREADS) tile_base[e] = (count[e] + tl.bm - 1) / tl.bm;
    __syncthreads();
    if (tid < 32) {
      // In-place exclusive scan: read all counts of a chunk before writing it.
      const int lane = tid;
      int carry = 0;
      for (int base = 0; base < E; base += 32) {
        const int i = base + lane;
        const int x = i < E ? tile_base[i] : 0;
        int incl = x;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
          const int y = __shfl_up_sync(0xffffffffu, incl, d);
          if (lane >= d) incl += y;
        }
        __syncwarp();
        if (i < E) tile_base[i] = carry + incl - x;
        carry += __shfl_sync(0xffffffffu, incl, 31);
      }
      if (lane == 0) {
        total_tiles[l] = carry;
        *tl.num_tiles = carry;
      }
    }
    __syncthreads();
    const int nt = total_tiles[l];
    for (int t = tid; t < nt; t += THREADS) {
      // expert of tile t: last e with tile_base[e] <= t and count[e] > 0
      int lo = 0, hi = E - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (tile_base[mid] <= t) lo = mid; else hi = mid - 1;
      }
      // skip empty experts sharing the same base (they have no tiles)
      while (count[lo] == 0) --lo;
      const int j = t - tile_base[lo];
      tl.tile_expert[t] = lo;
      tl.tile_row_begin[t] = offset[lo] + j * tl.bm;
      tl.tile_row_end[t] = offset[lo] + count[lo];
    }
  }
  __syncthreads();
  for (int i = tid; i < p.num_routes; i += THREADS) {
    const int e = STAGED ? topk_sh[i] : p.topk_ids[i];
    if (e >= 0 && e < E) {
      const int pos = atomicAdd(&cursor[e], 1);
      if (STAGED)
        sorted_sh[pos] = i;
      else
        p.sorted_route[pos] = i;
      p.route_row[i] = pos;
    } else {
      p.route_row[i] = -1;
    }
  }
  if (STAGED) {
    __syncthreads();
    for (int j = tid; j < total_rows; j += THREADS) p.sorted_route[j] = sorted_sh[j];
  }
}

}  // namespace moejit
