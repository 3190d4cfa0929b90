#pragma once
// Conversions between the public types of moejit/cache_admin.hpp and the cache's own.
#include "cache/cache_admin.hpp"
#include "cache/trust.hpp"
#include "moejit/cache_admin.hpp"

namespace moejit::cache_admin {

inline cache::Ownership internal(Ownership o) noexcept {
  return o == Ownership::shared ? cache::Ownership::shared : cache::Ownership::private_only;
}

inline ProblemKind from_internal(cache::ProblemKind k) noexcept {
  switch (k) {
    case cache::ProblemKind::corrupt: return ProblemKind::corrupt;
    case cache::ProblemKind::foreign: return ProblemKind::foreign;
    case cache::ProblemKind::temp_debris: return ProblemKind::temp_debris;
    case cache::ProblemKind::untrusted: return ProblemKind::untrusted;
    case cache::ProblemKind::outdated: return ProblemKind::outdated;
    case cache::ProblemKind::newer_format: return ProblemKind::newer_format;
  }
  return ProblemKind::corrupt;
}

inline VerifyReport from_internal(const cache::VerifyReport& r) {
  VerifyReport out;
  out.entries_ok = r.entries_ok;
  out.quarantined = r.quarantined;
  out.problems.reserve(r.problems.size());
  for (const cache::Problem& p : r.problems) out.problems.push_back({p.path, from_internal(p.kind), p.message, p.repaired});
  return out;
}

inline EntryHeader from_internal(const cache::EntryHeader& h) {
  EntryHeader out;
  out.key_text = h.key_text;
  out.target = h.payload.target;
  out.nvrtc_version = h.payload.nvrtc_version;
  out.moejit_version = h.payload.moejit_version;
  out.name_expression = h.payload.name_expression;
  out.nvrtc_options = h.payload.options;
  out.source_hash = h.payload.source_hash;
  out.source_bytes = h.payload.source_bytes;
  out.lowered_name = h.lowered_name;
  out.launch = h.launch;
  out.resources = h.resources;
  out.compile_ms = h.compile_ms;
  out.created_unix = h.created_unix;
  out.nvrtc_log = h.nvrtc_log;
  return out;
}

}  // namespace moejit::cache_admin
