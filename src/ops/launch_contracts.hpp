#pragma once
// Launch constants of the routing and combine kernels (their tunable blocks are
// at the top of kernels/moe_routing.cuh and kernels/moe_combine.cuh).
#include <cstdint>

namespace moejit::ops {

// Why two sizes: a 1024-thread CTA pays for its barriers even when a decode
// step routes a handful of tokens; 256 threads finish sooner below ~1k routes.
inline constexpr std::uint32_t route_threads(std::uint64_t routes) { return routes <= 1024 ? 256 : 1024; }
inline constexpr std::uint32_t kRouteMaxExperts = 4096;  // 4 ints each in shared memory
inline constexpr std::uint32_t route_smem_bytes(std::uint32_t experts) { return 4 * 4 * experts; }
inline constexpr std::uint32_t kCombineThreads = 256;

}  // namespace moejit::ops
