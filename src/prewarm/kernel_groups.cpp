#include "prewarm/kernel_groups.hpp"

#include <xxhash.h>

#include <exception>
#include <unordered_map>

#include "codegen/kernel_source.hpp"

namespace moejit::prewarm_detail {
namespace {

void append_field(std::string& blob, std::string_view field) {
  // Why length-prefixed: "ab"+"c" and "a"+"bc" must hash differently.
  blob += std::to_string(field.size());
  blob += ':';
  blob += field;
}

Hash128 source_hash(const SpecKey& key, const codegen::KernelSource& src) {
  std::string blob;
  blob.reserve(src.source.size() + 256);
  append_field(blob, src.source);
  append_field(blob, src.name_expression);
  for (const std::string& opt : src.options) append_field(blob, opt);
  append_field(blob, to_string(key.target));
  // The launch contract is part of the cache's content address too: keys whose
  // sources agree but whose shared memory differs (the routing kernel for two
  // expert counts) are two cache entries, so two groups.
  append_field(blob, std::to_string(src.launch.block_threads) + "x" + std::to_string(src.launch.dynamic_smem_bytes));
  const XXH128_hash_t h = XXH3_128bits(blob.data(), blob.size());
  return Hash128{h.low64, h.high64};
}

struct Hash128Fn {
  std::size_t operator()(const Hash128& h) const noexcept { return static_cast<std::size_t>(h.lo ^ h.hi); }
};

}  // namespace

Grouping group_by_kernel(const std::vector<SpecKey>& keys, const GemmTuning& tuning) {
  Grouping out;
  std::unordered_map<Hash128, std::size_t, Hash128Fn> group_of;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    Hash128 h;
    try {
      h = source_hash(keys[i], codegen::generate(keys[i], tuning));
    } catch (const std::exception&) {
      // Why not reject here: the runtime may use its own generator
      // (RuntimeOptions::generator) that implements this key. A group of its
      // own lets the runtime decide; its InvalidArgument becomes the failure.
      out.groups.push_back({Hash128{i, ~0ull}, {i}});
      continue;
    }
    auto [it, inserted] = group_of.try_emplace(h, out.groups.size());
    if (inserted) out.groups.push_back({h, {}});
    out.groups[it->second].members.push_back(i);
  }
  return out;
}

}  // namespace moejit::prewarm_detail
