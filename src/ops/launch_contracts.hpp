#pragma once
// Launch constants of the routing and combine kernels (their tunable blocks are
// at the top of kernels/moe_routing.cuh and kernels/moe_combine.cuh).
#include <cstdint>

namespace moejit::ops {

inline constexpr std::uint32_t kRouteThreads = 1024;
inline constexpr std::uint32_t kRouteMaxExperts = 4096;  // 4 ints each in shared memory
inline constexpr std::uint32_t route_smem_bytes(std::uint32_t experts) { return 4 * 4 * experts; }
inline constexpr std::uint32_t kCombineThreads = 256;

}  // namespace moejit::ops
