// The trust rules at every level of a cache directory: entries/, quarantine/
// and each shard folder pass the same owner/mode check as the root (refused:
// the runtime keeps kernels in memory); a shard folder that is a symbolic link
// is refused like an entry that is one (moved to quarantine, nothing read
// through it); verify, ls and read_entry apply the runtime's rules.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_admin.hpp"
#include "cache/disk_cache.hpp"
#include "env_guard.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

// A cache with one published tiny entry; its address.
Hash128 fill(const fs::path& dir, const TinyKernels& tk, std::uint32_t n) {
  Runtime rt(options_for(dir, tk));
  return rt.compiled(tiny_key(n))->content_hash;
}

fs::path shard_of(const fs::path& dir, const Hash128& a) { return cache::DiskCache(dir).entry_path(a).parent_path(); }

}  // namespace

TEST_CASE("trust: entries/, quarantine/ and a shard folder writable by others are refused like the root",
          "[cache][hostile][trust][nvrtc]") {
  REQUIRE_NVRTC();
  TinyKernels tk;
  for (const char* level : {"entries", "quarantine", "shard"}) {
    TempDir dir;
    const Hash128 a = fill(dir.path(), tk, 91);
    const fs::path folder = std::string(level) == "shard" ? shard_of(dir.path(), a) : dir.path() / level;
    REQUIRE(::chmod(folder.c_str(), 0777) == 0);
    INFO(level);
    {
      LogCapture log;
      Runtime rt(options_for(dir.path(), tk));
      CHECK(log.count_containing("writable by other users (mode 0777)") == 1);
      CHECK(log.count_containing(folder.string()) >= 1);
      // Nothing is loaded from a refused directory.
      CHECK(rt.lookup_compiled(tiny_key(91)).origin == CompiledKernel::Origin::compiled);
    }
    CHECK(cache::layout_trust_problem(dir.path(), cache::Ownership::private_only).find(folder.string()) == 0);
    CHECK(cache::layout_trust_problem(dir.path(), cache::Ownership::shared).empty());
    // verify names the folder; ls marks the entry BAD.
    const cache::VerifyReport v = cache::verify_all(dir.path());
    REQUIRE(!v.clean());
    CHECK(v.problems[0].kind == cache::ProblemKind::untrusted);
    CHECK(v.problems[0].path == folder);
    CHECK(v.entries_ok == 0);
    for (const cache::EntryInfo& e : cache::list_entries(dir.path())) CHECK(!e.problem.empty());
    CHECK_THROWS_WITH(cache::read_entry(dir.path(), a.hex()), Catch::Contains("mode 0777"));
    // MOEJIT_CACHE_ALLOW_SHARED=1 accepts it everywhere.
    EnvGuard env("MOEJIT_CACHE_ALLOW_SHARED", "1");
    Runtime rt(options_for(dir.path(), tk));
    CHECK(rt.lookup_compiled(tiny_key(91)).origin == CompiledKernel::Origin::disk);
    CHECK(cache::verify_all(dir.path(), cache::VerifyAction::report, cache::Ownership::shared).clean());
    REQUIRE(::chmod(folder.c_str(), 0700) == 0);
  }
}

TEST_CASE("trust: a shard folder that is a symbolic link is never read through; it is quarantined and recompiled",
          "[cache][hostile][trust][nvrtc]") {
  REQUIRE_NVRTC();
  TinyKernels tk;
  TempDir dir, elsewhere;
  const Hash128 a = fill(dir.path(), tk, 92);
  const fs::path shard = shard_of(dir.path(), a);
  // The real shard moves elsewhere (a valid entry: following the link would hit);
  // the shard's place becomes a link to it.
  const fs::path target = elsewhere.path() / shard.filename();
  fs::rename(shard, target);
  fs::create_directory_symlink(target, shard);
  const std::string entry_bytes = read_file(target / cache::DiskCache(dir.path()).entry_path(a).filename());
  const std::size_t files_there = count_files(target);

  // The tools' views: never "ok".
  for (const cache::EntryInfo& e : cache::list_entries(dir.path())) CHECK(e.address != a);
  CHECK_THROWS(cache::read_entry(dir.path(), a.hex()));
  const cache::VerifyReport v = cache::verify_all(dir.path());
  REQUIRE(v.problems.size() == 1);
  CHECK(v.problems[0].kind == cache::ProblemKind::untrusted);
  CHECK(v.problems[0].message.find("symbolic link") != std::string::npos);

  {
    LogCapture log;
    Runtime rt(options_for(dir.path(), tk));
    const CompiledLookup got = rt.lookup_compiled(tiny_key(92));
    CHECK(got.origin == CompiledKernel::Origin::compiled);  // not a disk hit through the link
    CHECK(rt.stats().quarantined == 1);
    CHECK(log.count_containing("symbolic link") == 1);
  }
  // The link went to quarantine, the entry was published into a real folder,
  // and nothing was written through the link.
  struct stat st{};
  REQUIRE(::lstat(shard.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(count_files(dir.path() / "quarantine") == 1);
  CHECK(count_files(target) == files_there);
  CHECK(read_file(target / cache::DiskCache(dir.path()).entry_path(a).filename()) == entry_bytes);
  Runtime rt(options_for(dir.path(), tk));
  CHECK(rt.lookup_compiled(tiny_key(92)).origin == CompiledKernel::Origin::disk);
}

TEST_CASE("trust: an entries/ folder that is a symbolic link refuses the directory", "[cache][hostile][trust][nvrtc]") {
  REQUIRE_NVRTC();
  TinyKernels tk;
  TempDir dir, elsewhere;
  fill(dir.path(), tk, 93);
  fs::rename(dir.path() / "entries", elsewhere.path() / "entries");
  fs::create_directory_symlink(elsewhere.path() / "entries", dir.path() / "entries");
  LogCapture log;
  Runtime rt(options_for(dir.path(), tk));
  CHECK(log.count_containing("symbolic link") == 1);
  CHECK(rt.lookup_compiled(tiny_key(93)).origin == CompiledKernel::Origin::compiled);
  CHECK(cache::verify_all(dir.path()).problems.at(0).kind == cache::ProblemKind::untrusted);
}

TEST_CASE("trust: ls and read_entry verify the body as a load does (a flipped cubin byte is BAD, never ok)",
          "[cache][hostile][trust][nvrtc]") {
  REQUIRE_NVRTC();
  TinyKernels tk;
  TempDir dir;
  const Hash128 a = fill(dir.path(), tk, 94);
  const fs::path entry = cache::DiskCache(dir.path()).entry_path(a);
  std::string bytes = read_file(entry);
  bytes.back() ^= 0x40;  // last byte of the cubin: header and prefix still decode
  write_file(entry, bytes);
  const auto list = cache::list_entries(dir.path());
  REQUIRE(list.size() == 1);
  CHECK(list[0].problem == "body checksum mismatch");
  CHECK(!list[0].header);
  CHECK_THROWS_WITH(cache::read_entry(dir.path(), a.hex()), Catch::Contains("body checksum mismatch"));
}
