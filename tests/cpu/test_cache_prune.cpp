// prune and the size cap account for everything the cache stores (quarantine
// included, with its own age limit; empty shard folders removed; --dry-run
// removes nothing); verify --repair repairs, says why it kept anything, and
// records what it moved in the statistics; clear reports exactly what it
// removed, lock files included, and never counts foreign files as entries.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/time.h>

#include "cache/atomic_file.hpp"
#include "cache/cache_admin.hpp"
#include "cache/cache_stats.hpp"
#include "cache/disk_cache.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

std::vector<Hash128> fill(const fs::path& dir, std::initializer_list<std::uint32_t> ns) {
  TinyKernels tk;
  Runtime rt(options_for(dir, tk));
  std::vector<Hash128> out;
  for (auto n : ns) out.push_back(rt.compiled(tiny_key(n))->content_hash);
  return out;
}

void set_mtime(const fs::path& p, std::int64_t unix_seconds) {
  struct timeval tv[2] = {{static_cast<time_t>(unix_seconds), 0}, {static_cast<time_t>(unix_seconds), 0}};
  REQUIRE(::utimes(p.c_str(), tv) == 0);
}

std::uint64_t entry_bytes(const fs::path& dir) {
  std::uint64_t n = 0;
  for (const auto& e : cache::list_entries(dir)) n += e.file_bytes;
  return n;
}

}  // namespace

TEST_CASE("prune: quarantined files count toward the cap and go first; their own age limit; empty shards removed",
          "[cache][cap][prune][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  const auto addrs = fill(dir.path(), {101, 102});
  const std::uint64_t entries = entry_bytes(dir.path());
  cache::DiskCache dc(dir.path());
  // 1 MiB of quarantine: a cap that fits the entries alone must remove it, not an entry.
  write_file(dc.quarantine_dir() / "old.entry.20200101T000000Z.1.0", std::string(1 << 20, 'q'));
  cache::PruneOptions o;
  o.max_bytes = entries + 4096;
  SECTION("dry run removes nothing and says what would go") {
    o.dry_run = true;
    const cache::PruneReport r = cache::prune(dir.path(), o);
    CHECK(r.removed_quarantined == 1);
    CHECK(r.removed_quarantine_bytes == (1u << 20));
    CHECK(r.removed_entries == 0);
    CHECK(count_files(dc.quarantine_dir()) == 1);
  }
  SECTION("the cap removes the quarantined file, not the entries") {
    const cache::PruneReport r = cache::prune(dir.path(), o);
    CHECK(r.removed_quarantined == 1);
    CHECK(r.removed_entries == 0);
    CHECK(r.kept_entries == 2);
    CHECK(count_files(dc.quarantine_dir()) == 0);
  }
  SECTION("the runtime's cap after a publish counts the quarantine too") {
    TinyKernels tk;
    RuntimeOptions ro = options_for(dir.path(), tk);
    ro.max_cache_bytes = entries + (entries / 2) + 4096;  // room for a third entry, not for the quarantine
    Runtime rt(ro);
    rt.compiled(tiny_key(103));
    CHECK(count_files(dc.quarantine_dir()) == 0);
    CHECK(cache::list_entries(dir.path()).size() == 3);
  }
  SECTION("age: quarantined files older than quarantine_max_age go without a cap") {
    cache::PruneOptions age;
    age.older_than = std::chrono::hours(24 * 365);
    set_mtime(dc.quarantine_dir() / "old.entry.20200101T000000Z.1.0", std::time(nullptr) - 8 * 86400);
    write_file(dc.quarantine_dir() / "new.entry.x", "fresh");
    const cache::PruneReport r = cache::prune(dir.path(), age);
    CHECK(r.removed_quarantined == 1);
    CHECK(r.kept_quarantined == 1);
    CHECK(fs::exists(dc.quarantine_dir() / "new.entry.x"));
  }
  SECTION("evicting every entry of a shard removes the empty shard folder") {
    cache::PruneOptions old;
    old.older_than = std::chrono::seconds(0);
    for (const auto& a : addrs) set_mtime(dc.stamp_path(a), std::time(nullptr) - 100);
    // Locks and stamps go too once old (orphans), so the folder is empty.
    cache::PruneOptions o2 = old;
    o2.temp_max_age = std::chrono::seconds(0);
    for (const auto& a : addrs) set_mtime(dc.lock_path(a), std::time(nullptr) - 100);
    const cache::PruneReport r = cache::prune(dir.path(), o2);
    CHECK(r.removed_entries == 2);
    CHECK(r.removed_folders >= 1);
    for (const auto& a : addrs) CHECK(!fs::exists(dc.entry_path(a).parent_path()));
    // A later publish recreates its shard.
    TinyKernels tk;
    Runtime rt(options_for(dir.path(), tk));
    CHECK(rt.lookup_compiled(tiny_key(101)).origin == CompiledKernel::Origin::compiled);
    CHECK(cache::list_entries(dir.path()).size() == 1);
  }
}

TEST_CASE("verify --repair: each problem once, repaired or kept with the reason; stats agree with the moves",
          "[cache][admin][repair][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  const auto addrs = fill(dir.path(), {111, 112});
  cache::DiskCache dc(dir.path());
  write_file(dc.entry_path(addrs[0]), "MOEJITCE garbage");                       // corrupt
  write_file(dc.entry_path(addrs[1]).parent_path() / "notes.txt", "foreign");     // foreign
  const fs::path young = dc.entry_path(addrs[1]).string() + ".tmp.1.young";
  write_file(young, "publish in progress");                                       // young temp file
  const std::uint64_t quarantined_before = cache::read_stats(dir.path()).quarantined;

  SECTION("a young temp file is kept, and says why") {
    LogCapture log;
    const cache::VerifyReport r = cache::verify_all(dir.path(), cache::VerifyAction::repair);
    REQUIRE(r.problems.size() == 3);
    CHECK(!r.resolved());
    std::size_t repaired = 0;
    for (const cache::Problem& p : r.problems) {
      if (p.kind == cache::ProblemKind::temp_debris) {
        CHECK(!p.repaired);
        CHECK_THAT(p.message, Catch::Contains("kept") && Catch::Contains("sweep age"));
      } else {
        CHECK(p.repaired);
        ++repaired;
      }
    }
    CHECK(repaired == 2);
    CHECK(r.quarantined == 2);
    CHECK(log.lines().empty());  // printed once, by the caller; no log line of its own
    CHECK(cache::read_stats(dir.path()).quarantined == quarantined_before + 2);
    CHECK(count_files(dc.quarantine_dir()) == 2);
    CHECK(cache::summarize(dir.path()).quarantined_files == 2);
  }
  SECTION("everything repaired: resolved, and a second verify is clean") {
    set_mtime(young, std::time(nullptr) - 3600);
    const cache::VerifyReport r = cache::verify_all(dir.path(), cache::VerifyAction::repair);
    CHECK(r.problems.size() == 3);
    CHECK(r.resolved());
    CHECK(cache::verify_all(dir.path()).clean());
  }
}

TEST_CASE("clear: counts entries, stamps, locks, temp, quarantined and foreign files apart, as removed",
          "[cache][admin][clear][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  const auto addrs = fill(dir.path(), {121, 122, 123});
  cache::DiskCache dc(dir.path());
  const fs::path shard = dc.entry_path(addrs[0]).parent_path();
  write_file(shard / "README", "foreign");
  write_file(shard / (std::string(32, 'f') + ".entry"), "an entry name in the wrong shard");  // foreign too
  write_file(dc.quarantine_dir() / "x.entry.20200101T000000Z.1.0", "bad");
  fs::create_directories(dir.path() / "entries" / "zz");
  write_file(dir.path() / "entries" / "zz" / "y", "foreign folder");
  const cache::CacheSummary before = cache::summarize(dir.path());
  CHECK(before.entries == 3);  // the misplaced name is not an entry
  const cache::ClearReport r = cache::clear(dir.path());
  CHECK(r.entries == 3);
  CHECK(r.stamps == 3);
  CHECK(r.locks == 3);
  CHECK(r.quarantined == 1);
  CHECK(r.foreign == 3);
  CHECK(r.failed == 0);
  CHECK(r.entry_bytes == before.entry_bytes);
  CHECK(r.files() == 13);
  CHECK(count_files(dir.path() / "entries") == 0);
  CHECK(count_files(dc.quarantine_dir()) == 0);
}
