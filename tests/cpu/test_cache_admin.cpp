// Library side of moejit-cache: list, read, verify, prune (LRU), clear, stats;
// plus the environment variables the cache reads.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/time.h>

#include <algorithm>
#include <map>

#include "cache/atomic_file.hpp"
#include "cache/cache_admin.hpp"
#include "cache/disk_cache.hpp"
#include "moejit/error.hpp"
#include "test_cache_support.hpp"
#include "util/env.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {
// Fills a cache with kernels for the given n values; returns their addresses.
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
}  // namespace

TEST_CASE("cache admin: list and read entries", "[cache][admin][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  auto addrs = fill(dir.path(), {71, 72});
  auto list = cache::list_entries(dir.path());
  REQUIRE(list.size() == 2);
  for (const auto& e : list) {
    REQUIRE(e.header);
    CHECK(e.problem.empty());
    CHECK(e.cubin_bytes > 0);
    CHECK(e.file_bytes > e.cubin_bytes);
    CHECK(e.header->payload.target == "sm_90a");
    CHECK(e.header->key_text.find("gate_up") != std::string::npos);
    CHECK(e.last_used_unix > 0);
  }
  const std::string hex = addrs[0].hex();
  auto entry = cache::read_entry(dir.path(), hex.substr(0, 12));
  CHECK(entry.header.payload.address() == addrs[0]);
  CHECK(entry.cubin.size() > 0);
  CHECK_THROWS_AS(cache::read_entry(dir.path(), "xyz"), InvalidArgument);
  CHECK_THROWS_AS(cache::read_entry(dir.path(), "0123456789abcdef0123456789abcdef"), InvalidArgument);
  CHECK_THROWS_AS(cache::read_entry(dir.path(), ""), InvalidArgument);
  CHECK(cache::list_entries(dir.path() / "missing").empty());
}

TEST_CASE("cache admin: an ambiguous id prefix names its matches on one line", "[cache][admin][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  // 17 entries: two of them share a first hex digit (16 digits).
  auto addrs = fill(dir.path(), {100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116});
  std::map<char, std::vector<std::string>> by_digit;
  for (const auto& a : addrs) by_digit[a.hex()[0]].push_back(a.hex());
  const auto shared = std::find_if(by_digit.begin(), by_digit.end(), [](const auto& d) { return d.second.size() > 1; });
  REQUIRE(shared != by_digit.end());
  try {
    cache::read_entry(dir.path(), std::string(1, shared->first));
    FAIL("an ambiguous prefix was accepted");
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    CHECK(what.find("ambiguous") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);  // the tools print the first line only
    for (const auto& id : shared->second) CHECK(what.find(id) != std::string::npos);
  }
}

TEST_CASE("cache admin: verify reports corrupt entries, foreign files and temp debris", "[cache][admin][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  auto addrs = fill(dir.path(), {73, 74, 75});
  cache::DiskCache dc(dir.path());
  CHECK(cache::verify_all(dir.path()).clean());
  CHECK(cache::verify_all(dir.path()).entries_ok == 3);

  std::string b = read_file(dc.entry_path(addrs[0]));
  write_file(dc.entry_path(addrs[0]), b.substr(0, b.size() - 1));             // truncated
  b = read_file(dc.entry_path(addrs[1]));
  b[b.size() - 10] ^= 1;
  write_file(dc.entry_path(addrs[1]), b);                                       // bit flip
  write_file(dir.path() / "entries" / "notes.txt", "hello");                     // foreign
  write_file(dc.entry_path(addrs[2]).parent_path() / "x.bin", "?");              // foreign in a shard
  write_file(dc.entry_path(addrs[2]).string() + ".tmp.123.abc", "partial");      // temp debris

  auto rep = cache::verify_all(dir.path());
  CHECK_FALSE(rep.clean());
  CHECK(rep.entries_ok == 1);
  std::map<cache::ProblemKind, int> kinds;
  for (const auto& p : rep.problems) kinds[p.kind]++;
  CHECK(kinds[cache::ProblemKind::corrupt] == 2);
  CHECK(kinds[cache::ProblemKind::foreign] == 2);
  CHECK(kinds[cache::ProblemKind::temp_debris] == 1);
  // Report mode changed nothing.
  CHECK(cache::verify_all(dir.path()).problems.size() == 5);

  // Repair: corrupt + foreign go to quarantine; fresh temp debris stays.
  auto fixed = cache::verify_all(dir.path(), cache::VerifyAction::repair);
  CHECK(fixed.problems.size() == 5);
  auto after = cache::verify_all(dir.path());
  REQUIRE(after.problems.size() == 1);
  CHECK(after.problems[0].kind == cache::ProblemKind::temp_debris);
  CHECK(cache::summarize(dir.path()).quarantined_files == 4);
}

TEST_CASE("cache admin: prune evicts least recently used by the cache's own stamp", "[cache][admin][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  auto addrs = fill(dir.path(), {81, 82, 83});
  cache::DiskCache dc(dir.path());
  const std::int64_t now = std::time(nullptr);
  // 81 used long ago, 82 recently, 83 in between. The entries' own mtimes say
  // the opposite, to show the stamp (not mtime/atime) decides.
  set_mtime(dc.stamp_path(addrs[0]), now - 10 * 86400);
  set_mtime(dc.stamp_path(addrs[1]), now - 10);
  set_mtime(dc.stamp_path(addrs[2]), now - 3600);
  set_mtime(dc.entry_path(addrs[0]), now);
  set_mtime(dc.entry_path(addrs[1]), now - 20 * 86400);

  cache::PruneOptions older;
  older.older_than = std::chrono::hours(24);
  auto r = cache::prune(dir.path(), older);
  CHECK(r.removed_entries == 1);
  CHECK_FALSE(fs::exists(dc.entry_path(addrs[0])));
  CHECK_FALSE(fs::exists(dc.stamp_path(addrs[0])));
  CHECK(fs::exists(dc.entry_path(addrs[1])));

  const std::uint64_t one = fs::file_size(dc.entry_path(addrs[1]));
  cache::PruneOptions cap;
  cap.max_bytes = one + 10;  // room for one entry: the most recently used stays
  r = cache::prune(dir.path(), cap);
  CHECK(r.removed_entries == 1);
  CHECK(r.kept_entries == 1);
  CHECK(fs::exists(dc.entry_path(addrs[1])));
  CHECK_FALSE(fs::exists(dc.entry_path(addrs[2])));

  // A hit refreshes the stamp.
  set_mtime(dc.stamp_path(addrs[1]), now - 5 * 86400);
  {
    TinyKernels tk;
    Runtime rt(options_for(dir.path(), tk));
    CHECK(rt.lookup_compiled(tiny_key(82)).origin == CompiledKernel::Origin::disk);
  }
  CHECK(cache::prune(dir.path(), older).removed_entries == 0);

  // An entry whose lock is held is never evicted.
  cache::FileLock held = dc.lock_entry(addrs[1], std::chrono::milliseconds(100));
  REQUIRE(held.locked());
  cache::PruneOptions all;
  all.max_bytes = 0;
  r = cache::prune(dir.path(), all);
  CHECK(r.skipped_locked == 1);
  CHECK(fs::exists(dc.entry_path(addrs[1])));
}

TEST_CASE("cache admin: clear and summarize", "[cache][admin][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  fill(dir.path(), {91, 92});
  auto s = cache::summarize(dir.path());
  CHECK(s.entries == 2);
  CHECK(s.entry_bytes > 0);
  CHECK(s.recorded.compiles == 2);
  CHECK(s.to_json().find("\"entries\": 2") != std::string::npos);
  auto c = cache::clear(dir.path());
  CHECK(c.entries == 2);
  CHECK(c.files() >= 2);
  CHECK(cache::list_entries(dir.path()).empty());
  CHECK(cache::summarize(dir.path()).recorded.compiles == 0);
  CHECK(cache::verify_all(dir.path()).clean());
}

TEST_CASE("atomic file: uncommitted temp is removed, committed replaces", "[cache]") {
  TempDir dir;
  const fs::path target = dir.path() / "f";
  fs::path temp;
  {
    cache::AtomicFile f(target);
    temp = f.temp_path();
    f.write("abc");
    CHECK(fs::exists(temp));
  }
  CHECK_FALSE(fs::exists(temp));
  CHECK_FALSE(fs::exists(target));
  {
    cache::AtomicFile f(target);
    f.write("hello");
    f.commit();
  }
  CHECK(read_file(target) == "hello");
  struct stat st{};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(count_files(dir.path()) == 1);
  CHECK_THROWS_AS(cache::AtomicFile(dir.path() / "no" / "such" / "dir" / "f"), Error);
}

TEST_CASE("env: cache directory resolution order", "[env]") {
  const auto saved_dir = util::env::raw("MOEJIT_CACHE_DIR");
  const auto saved_xdg = util::env::raw("XDG_CACHE_HOME");
  const auto saved_home = util::env::raw("HOME");
  ::setenv("MOEJIT_CACHE_DIR", "/x/explicit", 1);
  ::setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  ::setenv("HOME", "/x/home", 1);
  CHECK(util::env::cache_dir() == fs::path("/x/explicit"));
  ::unsetenv("MOEJIT_CACHE_DIR");
  CHECK(util::env::cache_dir() == fs::path("/x/xdg/moejit"));
  ::setenv("XDG_CACHE_HOME", "relative/path", 1);  // ignored, as the XDG spec asks
  CHECK(util::env::cache_dir() == fs::path("/x/home/.cache/moejit"));
  ::unsetenv("XDG_CACHE_HOME");
  CHECK(util::env::cache_dir() == fs::path("/x/home/.cache/moejit"));
  auto restore = [](const char* n, const std::optional<std::string>& v) {
    if (v) ::setenv(n, v->c_str(), 1);
    else ::unsetenv(n);
  };
  restore("MOEJIT_CACHE_DIR", saved_dir);
  restore("XDG_CACHE_HOME", saved_xdg);
  restore("HOME", saved_home);
}

TEST_CASE("env: byte sizes", "[env]") {
  using util::env::parse_byte_size;
  CHECK(parse_byte_size("0") == 0u);
  CHECK(parse_byte_size("1048576") == 1048576u);
  CHECK(parse_byte_size("64K") == 65536u);
  CHECK(parse_byte_size("512M") == 512ull << 20);
  CHECK(parse_byte_size("2g") == 2ull << 30);
  CHECK(parse_byte_size("1TiB") == 1ull << 40);
  CHECK(parse_byte_size("3GB") == 3ull << 30);
  CHECK_FALSE(parse_byte_size(""));
  CHECK_FALSE(parse_byte_size("M"));
  CHECK_FALSE(parse_byte_size("12X"));
  CHECK_FALSE(parse_byte_size("-5"));
  CHECK_FALSE(parse_byte_size("99999999999999999999"));
  CHECK_FALSE(parse_byte_size("20000000000T"));
}
