// Entries of other entry format versions, written by hand (no NVRTC): verify
// reports an intact older one as outdated and a newer one as newer_format,
// neither as corrupt nor as a fault; repair moves an outdated entry to
// quarantine and keeps a newer one; damage is still corrupt, whatever the
// version; and a load still treats every other version as a miss.
#include <catch2/catch.hpp>

#include <map>

#include "cache/cache_admin.hpp"
#include "cache/cache_stats.hpp"
#include "cache/disk_cache.hpp"
#include "cache/little_endian.hpp"
#include "forged_entry.hpp"
#include "moejit/cache_admin.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

std::map<cache::ProblemKind, std::vector<cache::Problem>> by_kind(const cache::VerifyReport& r) {
  std::map<cache::ProblemKind, std::vector<cache::Problem>> out;
  for (const cache::Problem& p : r.problems) out[p.kind].push_back(p);
  return out;
}

std::string flip(std::string bytes, std::size_t pos) {
  bytes[pos] = static_cast<char>(bytes[pos] ^ 0x10);
  return bytes;
}

const std::string kNewerLibrary = "99.0.0";

}  // namespace

TEST_CASE("format versions: an intact format-1 entry is outdated, not corrupt, and no fault",
          "[cache][admin][versions]") {
  TempDir dir;
  const ForgedEntry current = forge_entry(dir.path(), 1, cache::kEntryFormatVersion);
  const ForgedEntry old = forge_entry(dir.path(), 2, 1);

  const cache::VerifyReport r = cache::verify_all(dir.path());
  CHECK(r.entries_ok == 1);
  REQUIRE(r.problems.size() == 1);
  const cache::Problem& p = r.problems[0];
  CHECK(p.kind == cache::ProblemKind::outdated);
  CHECK(p.path == old.path);
  CHECK_THAT(p.message, Catch::Contains("format version 1 is older than this library's 2") &&
                            Catch::Contains("superseded"));
  CHECK_FALSE(p.repaired);
  CHECK(cache::to_string(p.kind) == "outdated");
  CHECK_FALSE(cache::is_fault(p.kind));
  CHECK(r.clean());
  CHECK(r.resolved());
  CHECK(fs::exists(old.path));  // report mode changes nothing

  // The public API says the same.
  const cache_admin::VerifyReport pub = cache_admin::verify(dir.path());
  CHECK(pub.entries_ok == 1);
  REQUIRE(pub.problems.size() == 1);
  CHECK(pub.problems[0].kind == cache_admin::ProblemKind::outdated);
  CHECK(cache_admin::to_string(pub.problems[0].kind) == "outdated");
  CHECK_FALSE(cache_admin::is_fault(pub.problems[0].kind));
  CHECK(pub.clean());
  CHECK(pub.resolved());
  (void)current;
}

TEST_CASE("format versions: a format-1 entry that is damaged is corrupt", "[cache][admin][versions]") {
  TempDir dir;
  const ForgedEntry flipped = forge_entry(dir.path(), 3, 1);
  const ForgedEntry truncated = forge_entry(dir.path(), 4, 1);
  const ForgedEntry header = forge_entry(dir.path(), 5, 1);
  const ForgedEntry moved = forge_entry(dir.path(), 6, 1);
  std::string b = read_file(flipped.path);
  write_file(flipped.path, flip(b, b.size() - 10));                              // in the cubin
  b = read_file(truncated.path);
  write_file(truncated.path, b.substr(0, b.size() - 1));
  write_file(header.path, flip(read_file(header.path), cache::kEntryPrefixBytes + 3));
  // An intact format-1 entry under another kernel's name: its address does not match.
  write_file(moved.path, forged_entry_bytes(7, 1, std::string(cache::library_version())));

  const cache::VerifyReport r = cache::verify_all(dir.path());
  CHECK(r.entries_ok == 0);
  auto kinds = by_kind(r);
  REQUIRE(kinds[cache::ProblemKind::corrupt].size() == 4);
  CHECK(kinds[cache::ProblemKind::outdated].empty());
  std::map<fs::path, std::string> why;
  for (const cache::Problem& p : kinds[cache::ProblemKind::corrupt]) why[p.path] = p.message;
  CHECK_THAT(why[flipped.path], Catch::Contains("format version 1 entry") && Catch::Contains("body checksum mismatch"));
  CHECK_THAT(why[truncated.path], Catch::Contains("truncated"));
  CHECK_THAT(why[header.path], Catch::Contains("header checksum mismatch"));
  CHECK_THAT(why[moved.path], Catch::Contains("not to the file name's"));
  CHECK_FALSE(r.clean());
  CHECK_FALSE(r.resolved());
}

TEST_CASE("format versions: a newer format entry is newer_format, no fault, and kept by repair",
          "[cache][admin][versions]") {
  TempDir dir;
  // Same layout, written by a newer library (its version in the header and the address).
  const ForgedEntry same_layout = forge_entry(dir.path(), 8, cache::kEntryFormatVersion + 1, kNewerLibrary);
  // A layout this library cannot read: only the magic and the version are known.
  Hash128 other;
  other.hi = 0xcd00000000000000ull;
  other.lo = 42;
  std::string unknown(cache::kEntryMagic, 8);
  cache::put_u32(unknown, 7);
  unknown += std::string(100, 'z');
  const fs::path unknown_path = write_entry_file(dir.path(), other, unknown);

  const cache::VerifyReport r = cache::verify_all(dir.path());
  CHECK(r.entries_ok == 0);
  auto kinds = by_kind(r);
  REQUIRE(kinds[cache::ProblemKind::newer_format].size() == 2);
  CHECK(kinds[cache::ProblemKind::corrupt].empty());
  for (const cache::Problem& p : kinds[cache::ProblemKind::newer_format]) {
    CHECK_THAT(p.message, Catch::Contains("is newer than this library's 2") && Catch::Contains("newer moejit"));
    CHECK(cache::to_string(p.kind) == "newer_format");
  }
  CHECK(r.clean());
  CHECK(r.resolved());
  CHECK_FALSE(cache::is_fault(cache::ProblemKind::newer_format));

  const cache::VerifyReport fixed = cache::verify_all(dir.path(), cache::VerifyAction::repair);
  REQUIRE(fixed.problems.size() == 2);
  for (const cache::Problem& p : fixed.problems) {
    CHECK(p.kind == cache::ProblemKind::newer_format);
    CHECK_FALSE(p.repaired);
    CHECK_THAT(p.message, Catch::Contains("(kept: the newer moejit that wrote it uses it)"));
  }
  CHECK(fixed.quarantined == 0);
  CHECK(fixed.resolved());
  CHECK(fs::exists(same_layout.path));
  CHECK(fs::exists(unknown_path));
  CHECK(count_files(dir.path() / "quarantine") == 0);

  const cache_admin::VerifyReport pub = cache_admin::verify(dir.path());
  REQUIRE(pub.problems.size() == 2);
  CHECK(pub.problems[0].kind == cache_admin::ProblemKind::newer_format);
  CHECK(cache_admin::to_string(pub.problems[0].kind) == "newer_format");
  CHECK(pub.resolved());
}

TEST_CASE("format versions: a damaged version field or garbage after the magic is corrupt, not another version",
          "[cache][admin][versions]") {
  TempDir dir;
  // This library's own entry with a version byte flipped to 3 (0x02 ^ 0x01) and to 0.
  const ForgedEntry raised = forge_entry(dir.path(), 9, cache::kEntryFormatVersion);
  const ForgedEntry zeroed = forge_entry(dir.path(), 10, cache::kEntryFormatVersion);
  const ForgedEntry magic = forge_entry(dir.path(), 11, 1);
  const ForgedEntry garbage = forge_entry(dir.path(), 18, 1);
  write_file(garbage.path, "MOEJITCE garbage");  // the magic, then bytes that are no version
  std::string b = read_file(raised.path);
  b[8] = static_cast<char>(b[8] ^ 0x01);
  write_file(raised.path, b);
  b = read_file(zeroed.path);
  b[8] = 0;
  write_file(zeroed.path, b);
  b = read_file(magic.path);
  b.replace(0, 8, "NOTMOEJT");
  write_file(magic.path, b);

  const cache::VerifyReport r = cache::verify_all(dir.path());
  auto kinds = by_kind(r);
  REQUIRE(kinds[cache::ProblemKind::corrupt].size() == 4);
  std::map<fs::path, std::string> why;
  for (const cache::Problem& p : kinds[cache::ProblemKind::corrupt]) why[p.path] = p.message;
  CHECK_THAT(why[raised.path], Catch::Contains("format version 3 is newer") && Catch::Contains("damaged version field"));
  CHECK_THAT(why[zeroed.path], Catch::Contains("format version 0 is no version a moejit writes"));
  CHECK_THAT(why[garbage.path], Catch::Contains("is no version a moejit writes") && Catch::Contains("truncated"));
  CHECK_THAT(why[magic.path], Catch::Contains("bad magic"));
  CHECK_FALSE(r.resolved());
}

TEST_CASE("format versions: repair moves an outdated entry to quarantine and counts it", "[cache][admin][versions]") {
  TempDir dir;
  const ForgedEntry current = forge_entry(dir.path(), 12, cache::kEntryFormatVersion);
  const ForgedEntry old = forge_entry(dir.path(), 13, 1);
  const ForgedEntry newer = forge_entry(dir.path(), 14, cache::kEntryFormatVersion + 1, kNewerLibrary);

  const cache::VerifyReport fixed = cache::verify_all(dir.path(), cache::VerifyAction::repair);
  CHECK(fixed.entries_ok == 1);
  auto kinds = by_kind(fixed);
  REQUIRE(kinds[cache::ProblemKind::outdated].size() == 1);
  const cache::Problem& moved = kinds[cache::ProblemKind::outdated][0];
  CHECK(moved.repaired);
  CHECK_THAT(moved.message, Catch::Contains("(moved to " + (dir.path() / "quarantine").string()));
  CHECK(fixed.quarantined == 1);
  CHECK(fixed.resolved());
  CHECK_FALSE(fs::exists(old.path));
  CHECK(fs::exists(current.path));
  CHECK(fs::exists(newer.path));
  CHECK(count_files(dir.path() / "quarantine") == 1);
  CHECK(cache::read_stats(dir.path()).quarantined == 1);  // stats agree with the move

  // Afterwards only the newer entry is listed.
  const cache::VerifyReport after = cache::verify_all(dir.path());
  REQUIRE(after.problems.size() == 1);
  CHECK(after.problems[0].kind == cache::ProblemKind::newer_format);
  CHECK(after.entries_ok == 1);
}

TEST_CASE("format versions: a load still treats an outdated or newer entry as a miss and quarantines it",
          "[cache][versions]") {
  TempDir dir;
  cache::DiskCache dc(dir.path());
  dc.ensure_layout();
  const ForgedEntry current = forge_entry(dir.path(), 15, cache::kEntryFormatVersion);
  const ForgedEntry old = forge_entry(dir.path(), 16, 1);
  // A newer format at an address this library looks up (same library version).
  const ForgedEntry newer = forge_entry(dir.path(), 17, cache::kEntryFormatVersion + 1);

  // What the tools that use an entry see (ls, show, export): not valid.
  const cache::EntryCheck seen = dc.inspect(old.address);
  CHECK(seen.found);
  CHECK_FALSE(seen.entry);
  CHECK(seen.problem == "format version 1 is older than this library's 2");
  CHECK(seen.format_version == 1);

  CHECK(dc.load(current.address, current.payload).status == cache::LoadStatus::hit);
  LogCapture log;
  const cache::LoadResult o = dc.load(old.address, old.payload);
  CHECK(o.status == cache::LoadStatus::quarantined);
  CHECK_FALSE(o.entry);
  CHECK(o.reason == "format version 1 is older than this library's 2");
  CHECK_FALSE(fs::exists(old.path));
  const cache::LoadResult n = dc.load(newer.address, newer.payload);
  CHECK(n.status == cache::LoadStatus::quarantined);
  CHECK(n.reason == "format version 3 is newer than this library's 2");
  CHECK(count_files(dc.quarantine_dir()) == 2);
  CHECK(log.count_containing(old.path.string()) == 1);
}
