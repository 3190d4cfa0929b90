#pragma once
// Launch constants of the routing and combine kernels (their tunable blocks are
// at the top of kernels/moe_routing.cuh and kernels/moe_combine.cuh).
#include <cstdint>

namespace moejit::ops {

// Why two sizes: a 1024-thread CTA pays for its barriers even when a decode
// step routes a handful of tokens; 256 threads finish sooner below ~1k routes.
inline constexpr std::uint32_t route_threads(std::uint64_t routes) { return routes <= 1024 ? 256 : 1024; }
inline constexpr std::uint32_t kRouteMaxExperts = 4096;  // 4 ints each in shared memory
// The 1024-thread routing kernel stages up to kRouteStagedRoutes routes in
// shared memory (STAGED, 8 bytes each after the 16 bytes per expert;
// kernels/moe_routing.cuh) when that fits; larger buckets scatter to global
// memory. Why a fixed capacity rather than the bucket's routes: the shared
// memory size is part of the kernel's launch contract and cache address, so a
// per-bucket size would compile one routing kernel per bucket.
// 220 KB: below the 227 KB a CTA may use on sm_90, with room for the kernel's
// static shared memory.
inline constexpr std::uint64_t kRouteStagedRoutes = 24576;
inline constexpr bool route_staged(std::uint32_t experts, std::uint64_t routes) {
  return route_threads(routes) == 1024 && routes <= kRouteStagedRoutes &&
         16ull * experts + 8ull * kRouteStagedRoutes <= 220ull * 1024ull;
}
// Chunked routing (kernels/moe_routing.cuh, "Phases"): the unstaged 1024-thread
// kernel runs as three launches over chunks of kRouteChunkRoutes routes (count,
// lists, scatter), so the scattered stores of the sorted order are spread over
// one CTA per chunk instead of one SM. Why 4096: four routes per thread, and
// at 131K routes (Qwen3-30B-A3B, T = 16384) 32 CTAs, a list phase that sums
// 32 counts per expert.
inline constexpr std::uint32_t kRouteChunkRoutes = 4096;
// bucket_routes: the bucket's routes (they choose the kernel); routes: the call's.
inline constexpr bool route_chunked(std::uint32_t experts, std::uint64_t bucket_routes, std::uint64_t routes) {
  return route_threads(bucket_routes) == 1024 && !route_staged(experts, bucket_routes) && routes > kRouteChunkRoutes;
}
inline constexpr std::uint64_t route_chunks(std::uint64_t routes) {
  return (routes + kRouteChunkRoutes - 1) / kRouteChunkRoutes;
}
// routes: the bucket's routes (token bucket * top_k).
inline constexpr std::uint32_t route_smem_bytes(std::uint32_t experts, std::uint64_t routes) {
  return 4 * 4 * experts + (route_staged(experts, routes) ? static_cast<std::uint32_t>(8 * kRouteStagedRoutes) : 0u);
}

// Combine (kernels/moe_combine.cuh): one thread per (token, combine_cols(...)
// columns), the grid flat over T * hidden / cols such units. Why cols is 8 only
// for bf16 Y with hidden % 8 == 0: that is one 16-byte load per Y row; other
// bf16 shapes keep 4 columns (8-byte loads), and f32 Y keeps 4 (one 16-byte
// load; the kernel's tunable block says why not 2 x 16 B). The codegen passes
// (key.n, key.out_dtype == bf16), the layer (hidden, Y dtype): the same values.
inline constexpr std::uint32_t kCombineThreads = 256;
// Y rows a thread loads before it sums any: top_k (one window per token when
// Y has no split-K partials), at most kCombineMaxInFlight. Why from top_k: a
// fixed 8 kept registers for 4 idle slots at top_k 4 (74 registers, 3 CTAs of
// 256 per SM, against 48 and 5).
inline constexpr std::uint32_t kCombineMaxInFlight = 8;
inline constexpr std::uint32_t combine_in_flight(std::uint32_t top_k) {
  return top_k < 1 ? 1 : top_k < kCombineMaxInFlight ? top_k : kCombineMaxInFlight;
}
inline constexpr std::uint32_t combine_cols(std::uint64_t hidden, bool y_bf16) {
  return y_bf16 && hidden % 8 == 0 ? 8 : 4;
}
inline constexpr std::uint64_t combine_ctas(std::uint64_t tokens, std::uint64_t hidden, std::uint32_t cols) {
  return (tokens * (hidden / cols) + kCombineThreads - 1) / kCombineThreads;
}
// The kernel indexes units in 32 bits: the grid's threads must fit.
inline constexpr bool combine_fits(std::uint64_t tokens, std::uint64_t hidden, std::uint32_t cols) {
  return combine_ctas(tokens, hidden, cols) * kCombineThreads <= (std::uint64_t(1) << 32);
}

}  // namespace moejit::ops
