#pragma once
// Groups specialization keys by the kernel they compile to. Many keys share one
// kernel (the heuristic picks the same tiles for neighbouring buckets), so
// prewarm compiles one representative per group instead of racing N threads on
// identical sources.
#include <cstddef>
#include <string>
#include <vector>

#include "moejit/key.hpp"
#include "moejit/tuning.hpp"

namespace moejit::prewarm_detail {

struct KernelGroup {
  Hash128 source_hash;               // XXH3-128 of source, name expression, options, target
  std::vector<std::size_t> members;  // indices into the key vector, ascending; members[0] compiles
};

struct Grouping {
  std::vector<KernelGroup> groups;  // ordered by their first member
};

// Runs codegen::generate(key, tuning) on every key (no compile, no NVRTC) and groups keys
// with byte-identical generated sources, NVRTC options, target and launch contract. Within one
// NVRTC version that is exactly the cache's content address. A key that
// generate() rejects gets a group of its own (the runtime, which may have its
// own generator, decides). Never throws for a key.
Grouping group_by_kernel(const std::vector<SpecKey>& keys, const GemmTuning& tuning);

}  // namespace moejit::prewarm_detail
