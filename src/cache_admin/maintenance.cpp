// verify, prune, clear and the summary (moejit/cache_admin.hpp) over src/cache.
#include "cache/pack.hpp"
#include "cache_admin/convert.hpp"
#include "util/env.hpp"

namespace moejit::cache_admin {

std::string_view to_string(ProblemKind k) {
  switch (k) {
    case ProblemKind::corrupt: return "corrupt";
    case ProblemKind::foreign: return "foreign";
    case ProblemKind::temp_debris: return "temp_debris";
    case ProblemKind::untrusted: return "untrusted";
    case ProblemKind::outdated: return "outdated";
    case ProblemKind::newer_format: return "newer_format";
  }
  return "unknown";
}

std::optional<std::uint64_t> max_bytes_from_env() noexcept {
  try {
    return util::env::cache_max_bytes();
  } catch (...) {
    return std::nullopt;  // the warning about a bad value could not be logged
  }
}

VerifyReport verify(const std::filesystem::path& dir, VerifyAction action, Ownership ownership) {
  return from_internal(cache::verify_all(
      dir, action == VerifyAction::repair ? cache::VerifyAction::repair : cache::VerifyAction::report,
      internal(ownership)));
}

VerifyReport verify_pack(const std::filesystem::path& pack) { return from_internal(cache::verify_pack(pack)); }

PruneReport prune(const std::filesystem::path& dir, const PruneOptions& options) {
  cache::PruneOptions o;
  o.max_bytes = options.max_bytes;
  o.older_than = options.older_than;
  o.temp_max_age = options.temp_max_age;
  o.quarantine_max_age = options.quarantine_max_age;
  o.dry_run = options.dry_run;
  const cache::PruneReport r = cache::prune(dir, o);
  PruneReport out;
  out.removed_entries = r.removed_entries;
  out.kept_entries = r.kept_entries;
  out.skipped_locked = r.skipped_locked;
  out.removed_temp = r.removed_temp;
  out.removed_bytes = r.removed_bytes;
  out.kept_bytes = r.kept_bytes;
  out.removed_quarantined = r.removed_quarantined;
  out.kept_quarantined = r.kept_quarantined;
  out.removed_quarantine_bytes = r.removed_quarantine_bytes;
  out.kept_quarantine_bytes = r.kept_quarantine_bytes;
  out.removed_folders = r.removed_folders;
  return out;
}

ClearReport clear(const std::filesystem::path& dir) {
  const cache::ClearReport r = cache::clear(dir);
  ClearReport out;
  out.entries = r.entries;
  out.stamps = r.stamps;
  out.locks = r.locks;
  out.temp_files = r.temp_files;
  out.quarantined = r.quarantined;
  out.foreign = r.foreign;
  out.folders = r.folders;
  out.entry_bytes = r.entry_bytes;
  out.quarantine_bytes = r.quarantine_bytes;
  out.foreign_bytes = r.foreign_bytes;
  out.other_bytes = r.other_bytes;
  out.failed = r.failed;
  return out;
}

CacheSummary summarize(const std::filesystem::path& dir) {
  const cache::CacheSummary s = cache::summarize(dir);
  return CacheSummary{s.entries, s.entry_bytes, s.quarantined_files, s.quarantine_bytes, s.recorded};
}

std::string CacheSummary::to_json() const {
  return cache::CacheSummary{entries, entry_bytes, quarantined_files, quarantine_bytes, recorded}.to_json();
}

}  // namespace moejit::cache_admin
