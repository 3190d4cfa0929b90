#pragma once
// Launch constants of the routing and combine kernels (their tunable blocks are
// at the top of kernels/moe_routing.cuh and kernels/moe_combine.cuh).
#include <cstdint>

namespace moejit::ops {

// Why two sizes: a 1024-thread CTA pays for its barriers even when a decode
// step routes a handful of tokens; 256 threads finish sooner below ~1k routes.
inline constexpr std::uint32_t route_threads(std::uint64_t routes) { return routes <= 1024 ? 256 : 1024; }
inline constexpr std::uint32_t kRouteMaxExperts = 4096;  // 4 ints each in shared memory
// The routing kernel stages the routes in shared memory (STAGED, 8 bytes per
// route of the bucket after the 16 bytes per expert; kernels/moe_routing.cuh)
// when both fit in 200 KB; larger buckets scatter to global memory.
inline constexpr bool route_staged(std::uint32_t experts, std::uint64_t routes) {
  return 16ull * experts + 8ull * routes <= 200ull * 1024ull;
}
// routes: the bucket's routes (token bucket * top_k).
inline constexpr std::uint32_t route_smem_bytes(std::uint32_t experts, std::uint64_t routes) {
  return 4 * 4 * experts + (route_staged(experts, routes) ? static_cast<std::uint32_t>(8 * routes) : 0u);
}
inline constexpr std::uint32_t kCombineThreads = 256;

}  // namespace moejit::ops
