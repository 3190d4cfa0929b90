#pragma once
// Tile heuristic of the grouped GEMM family (kernels/grouped_gemm_sm90.cuh):
// specialization key -> tile configuration, and can_implement with a reason.
// Pure functions of the key: the codegen and the launcher call them alike, so a
// kernel's launch contract (grid, block, shared memory) lives in one place.
#include <cstdint>
#include <string>

#include "moejit/key.hpp"

namespace moejit::ops {

struct GemmConfig {
  int warps_m = 1, warps_n = 4, mi = 1, ni = 2, stages = 4;
  int splits = 1;       // split-K partials (down only; summed by the combine)
  bool k_tail = false;  // K % 64 != 0: zero-fill the last k-slice
  int bm() const { return 16 * mi * warps_m; }
  int bn() const { return 8 * ni * warps_n; }
  int threads() const { return 32 * warps_m * warps_n; }
  std::uint32_t smem_bytes(QuantMode q, std::uint32_t k) const;  // dynamic shared memory, bytes
  std::string to_string() const;  // "bm=16 bn=64 warps=1x4 mi=1 ni=2 stages=6 splits=1 k_tail=0"
};

// Empty when the key can be run; otherwise the reason, naming the field and value.
std::string why_not_implementable(const SpecKey& key);

// Config for key. Throws InvalidArgument with why_not_implementable()'s reason.
// Does not allocate on success.
GemmConfig choose_config(const SpecKey& key);

// Upper bound of m-tiles for `rows` routed rows over `experts` experts and tile
// height bm: sum_e ceil(c_e / bm) <= rows / bm + min(experts, rows).
// Rows above which the heuristic never splits K; the workspace sizes the
// split-K partials of Y from it.
inline constexpr std::uint64_t kSplitKMaxRows = 4096;
inline constexpr int kSplitKMax = 4;

inline std::uint32_t max_m_tiles(std::uint64_t rows, std::uint32_t experts, int bm) {
  const std::uint64_t nonempty = rows < experts ? rows : experts;
  return static_cast<std::uint32_t>(rows / bm + nonempty);
}

}  // namespace moejit::ops
