// MoE routing on the device: topk_ids [T, top_k] -> expert-sorted routed rows and
// the m-tile schedules of the two grouped GEMMs. One CTA (or three chunked
// launches where the routes do not fit the staging: "Phases" below), no host
// synchronization, capturable in a CUDA graph.
//
// ---- Tunable parameters (RouteKernel, kernels/kernel_configs.cuh: the fields in
// lower case; chosen in src/ops/launch_contracts.hpp) ----
//   THREADS : CTA size (256 up to 1024 routes, else 1024; ops::route_threads).
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
//   tile_row_end [max_tiles] and num_tiles [5] (the tile count, then the work-item
//   counters of the persistent GEMMs, zeroed here: [1] gate_up's, [2] down's,
//   [3] and [4] their done counts, GroupedGemmParams::item_counter); with
//   split tail (tail_rows > 0),
//   the tail list as well (one tile per expert at most)
// An expert id of -1 (not local under expert parallelism) drops the route; ids
// outside [-1, E) are a precondition violation and are dropped too. Experts with
// no rows get no m-tiles. The order of rows inside one expert follows shared
// atomics and may differ between runs; every row is computed independently, so
// results do not depend on it.
//
// Phases (p.phase; one instantiation serves all four). 0: everything above in
// one CTA. A single CTA scatters one 4-byte store per route to a random row,
// so past about 16K routes it runs for tens of microseconds (Qwen3-30B-A3B at
// T = 16384, 131K routes: about 150 us); the host then launches three phases
// over chunks of chunk_routes routes (ops::kRouteChunkRoutes):
//   1 count:   CTA c counts the experts of its chunk into chunk_counts[c][e];
//   2 lists:   one CTA sums them into the expert counts and builds
//              expert_offsets and the m-tile lists as phase 0 does, and turns
//              chunk_counts[c][e] into the first sorted row of chunk c's routes
//              of expert e (expert offset + the counts of the chunks before);
//   3 scatter: CTA c places its chunk's routes from those bases.
// Each phase waits for the one before (programmatic dependent launch,
// griddepcontrol.wait before the first read), so the three stay capturable.
//
// Rows already sorted by expert (group_offsets != null, the grouped GEMM of
// moejit/grouped_gemm.hpp; topk_ids unused, num_routes = M rows): expert e owns
// rows [group_offsets[e], group_offsets[e + 1]); the outputs are the same
// lists, expert_offsets a copy of group_offsets, sorted_route the identity and
// route_row the identity on [group_offsets[0], group_offsets[E]) and -1
// elsewhere. Each offset is clamped to [0, M] and a decreasing pair gives an
// empty group; offsets must be non-decreasing (overlapping groups would need
// more m-tiles than the lists hold).

namespace moejit {

// TileList and RouteParams (the launch parameters): kernel_params.cuh.

// Tiles of list `kind` for an expert of c rows (kind 0, 1: a list of height bm;
// with split tail, kind 0 leaves out the tail and kind 2 is the tail list),
// and the first and end row of its tile j relative to the expert's first row.
__device__ __forceinline__ int route_list_tiles(int kind, int c, int bm, int tail_rows) {
  const int r = tail_rows > 0 ? c % bm : 0;
  const bool in_tail = r > 0 && r <= tail_rows;
  if (kind == 2) return in_tail ? 1 : 0;
  return in_tail ? c / bm : (c + bm - 1) / bm;
}
__device__ __forceinline__ void route_list_rows(int kind, int c, int bm, int tail_rows, int j, int& begin, int& end) {
  const int r = tail_rows > 0 ? c % bm : 0;
  const bool in_tail = r > 0 && r <= tail_rows;
  begin = kind == 2 ? c - r : j * bm;
  end = kind != 2 && in_tail ? c - r : c;
}

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

template <RouteKernel C>
__global__ void __launch_bounds__(C.threads) moe_route_kernel(const RouteParams p) {
  constexpr int THREADS = C.threads;
  constexpr bool STAGED = C.staged;
  extern __shared__ int sh[];
  const int E = p.num_experts;
  int* count = sh;
  int* offset = sh + E;
  int* tile_base = sh + 2 * E;
  int* cursor = sh + 3 * E;
  int* topk_sh = sh + 4 * E;                // STAGED: [num_routes] expert of each route
  int* sorted_sh = topk_sh + p.num_routes;  // STAGED: [num_routes] route at each sorted row
  __shared__ int total_rows;
  __shared__ int total_tiles[3];
  const int tid = threadIdx.x;
  pdl_wait();  // topk_ids come from the caller's previous kernel
  pdl_launch_dependents();

  const bool grouped = p.group_offsets != nullptr;
  const int phase = grouped ? 0 : p.phase;
  if (phase == 1 || phase == 3) {
    // Count (1) or scatter (3) the routes of chunk blockIdx.x.
    const long long begin = (long long)blockIdx.x * p.chunk_routes;
    const int end = (int)min(begin + p.chunk_routes, (long long)p.num_routes);
    int* chunk = p.chunk_counts + (long long)blockIdx.x * E;
    for (int e = tid; e < E; e += THREADS) count[e] = phase == 1 ? 0 : chunk[e];
    __syncthreads();
    for (long long i = begin + tid; i < end; i += THREADS) {
      const int e = p.topk_ids[i];
      const bool ok = e >= 0 && e < E;
      if (phase == 1) {
        if (ok) atomicAdd(&count[e], 1);
      } else {
        const int pos = ok ? atomicAdd(&count[e], 1) : -1;
        if (ok) p.sorted_route[pos] = (int)i;
        p.route_row[i] = pos;
      }
    }
    if (phase == 1) {
      __syncthreads();
      for (int e = tid; e < E; e += THREADS) chunk[e] = count[e];
    }
    return;
  }
  const int chunks = phase == 2 ? (int)(((long long)p.num_routes + p.chunk_routes - 1) / p.chunk_routes) : 0;
  if (phase == 2) {
    for (int e = tid; e < E; e += THREADS) {
      int c = 0;
      for (int k = 0; k < chunks; ++k) c += p.chunk_counts[(long long)k * E + e];
      count[e] = c;
    }
  } else if (grouped) {
    for (int e = tid; e < E; e += THREADS) {
      const int lo = min(max(p.group_offsets[e], 0), p.num_routes);
      const int hi = min(max(p.group_offsets[e + 1], 0), p.num_routes);
      count[e] = max(hi - lo, 0);
    }
  } else {
    for (int e = tid; e < E; e += THREADS) count[e] = 0;
    __syncthreads();
    for (int i = tid; i < p.num_routes; i += THREADS) {
      const int e = p.topk_ids[i];
      if (STAGED) topk_sh[i] = e;
      if (e >= 0 && e < E) atomicAdd(&count[e], 1);
    }
  }
  __syncthreads();
  if (tid < 32) {
    const int total = warp0_exclusive_scan(count, offset, E);
    if (tid == 0) total_rows = total;
  }
  __syncthreads();
  int group_begin = 0, group_end = 0;  // grouped: the rows inside [offsets[0], offsets[E])
  if (grouped) {
    for (int e = tid; e < E; e += THREADS) offset[e] = min(max(p.group_offsets[e], 0), p.num_routes);
    group_begin = min(max(p.group_offsets[0], 0), p.num_routes);
    group_end = min(max(p.group_offsets[E], 0), p.num_routes);
    if (tid == 0) total_rows = group_end;
    __syncthreads();
  }
  for (int e = tid; e < E; e += THREADS) {
    p.expert_offsets[e] = offset[e];
    cursor[e] = offset[e];
    // Phase 2: each chunk's first sorted row of expert e, in chunk order.
    int base = offset[e];
    for (int k = 0; k < chunks; ++k) {
      int* cc = p.chunk_counts + (long long)k * E + e;
      const int c = *cc;
      *cc = base;
      base += c;
    }
  }
  if (tid == 0) p.expert_offsets[E] = total_rows;

  // Lists: tiles[0], tiles[1], and with split tail the tail list (kind 2),
  // whose tiles are cut from tiles[0]'s height.
#pragma unroll
  for (int l = 0; l < 3; ++l) {
    const TileList tl = l == 0 ? p.tiles[0] : l == 1 ? p.tiles[1] : p.tail;
    if (l == 2 && p.tail_rows <= 0) continue;
    if (tl.bm <= 0) continue;
    const int split = l == 1 ? 0 : p.tail_rows;  // tiles[1] never splits
    const int bm_cut = l == 2 ? p.tiles[0].bm : tl.bm;
    __syncthreads();
    // m-tiles per expert, then their exclusive scan in place.
    for (int e = tid; e < E; e += THREADS) tile_base[e] = route_list_tiles(l, count[e], bm_cut, split);
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
        tl.num_tiles[0] = carry;
        for (int c = 1; c < 5; ++c) tl.num_tiles[c] = 0;  // the GEMMs' work-item counters
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
      // skip experts without tiles in this list sharing the same base (no rows,
      // or with split tail all their rows in the other list)
      while (route_list_tiles(l, count[lo], bm_cut, split) == 0) --lo;
      int begin, end;
      route_list_rows(l, count[lo], bm_cut, split, t - tile_base[lo], begin, end);
      tl.tile_expert[t] = lo;
      tl.tile_row_begin[t] = offset[lo] + begin;
      tl.tile_row_end[t] = offset[lo] + end;
    }
  }
  __syncthreads();
  if (phase == 2) return;  // phase 3 scatters
  if (grouped) {
    for (int i = tid; i < p.num_routes; i += THREADS) {
      p.route_row[i] = i >= group_begin && i < group_end ? i : -1;
      p.sorted_route[i] = i;
    }
    return;
  }
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
