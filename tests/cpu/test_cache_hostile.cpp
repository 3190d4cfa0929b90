// Hostile files and directories: entries owned by another user, cache
// directories others can write to or another user owns. Each is refused with
// one warning saying why; nothing is loaded from them.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "cache/cache_admin.hpp"
#include "cache/disk_cache.hpp"
#include "env_guard.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {
constexpr uid_t kNobody = 65534;

// chown needs root (the CI runs as root); elsewhere the owner tests are skipped.
bool can_chown() { return ::geteuid() == 0; }
}  // namespace

TEST_CASE("hostile: an entry owned by another user is quarantined, warned once, recompiled", "[cache][hostile][nvrtc]") {
  REQUIRE_NVRTC();
  if (!can_chown()) {
    WARN("skipped: not root, cannot chown an entry to another user");
    return;
  }
  TempDir dir;
  TinyKernels tk;
  Hash128 address;
  std::string good;
  {
    Runtime rt(options_for(dir.path(), tk));
    auto k = rt.compiled(tiny_key(71));
    address = k->content_hash;
    good = k->cubin;
  }
  cache::DiskCache dc(dir.path());
  const fs::path entry = dc.entry_path(address);
  REQUIRE(::chown(entry.c_str(), kNobody, kNobody) == 0);
  // verify names the owner problem too.
  const cache::VerifyReport v = cache::verify_all(dir.path());
  REQUIRE(v.problems.size() == 1);
  CHECK(v.problems[0].message.find("owned by uid 65534") != std::string::npos);
  {
    LogCapture log;
    Runtime rt(options_for(dir.path(), tk));
    auto got = rt.lookup_compiled(tiny_key(71));
    CHECK(got.origin == CompiledKernel::Origin::compiled);
    CHECK(got.kernel->cubin == good);
    CHECK(rt.stats().quarantined == 1);
    CHECK(log.count_containing("owned by uid 65534") == 1);
    CHECK(count_files(dc.quarantine_dir()) == 1);
  }
  // The recompiled entry is ours again: a hit.
  struct stat st{};
  REQUIRE(::stat(entry.c_str(), &st) == 0);
  CHECK(st.st_uid == ::geteuid());
  Runtime rt(options_for(dir.path(), tk));
  CHECK(rt.lookup_compiled(tiny_key(71)).origin == CompiledKernel::Origin::disk);
}

TEST_CASE("hostile: with allow_shared_cache an entry of another user is accepted", "[cache][hostile][nvrtc]") {
  REQUIRE_NVRTC();
  if (!can_chown()) {
    WARN("skipped: not root");
    return;
  }
  TempDir dir;
  TinyKernels tk;
  Hash128 address;
  {
    Runtime rt(options_for(dir.path(), tk));
    address = rt.compiled(tiny_key(72))->content_hash;
  }
  REQUIRE(::chown(cache::DiskCache(dir.path()).entry_path(address).c_str(), kNobody, kNobody) == 0);
  RuntimeOptions o = options_for(dir.path(), tk);
  o.allow_shared_cache = true;
  Runtime rt(o);
  CHECK(rt.lookup_compiled(tiny_key(72)).origin == CompiledKernel::Origin::disk);
  CHECK(rt.stats().quarantined == 0);
}

TEST_CASE("hostile: a cache directory other users can write to is refused unless allowed", "[cache][hostile][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  const fs::path cache_dir = dir.path() / "shared";
  fs::create_directories(cache_dir);
  REQUIRE(::chmod(cache_dir.c_str(), 0777) == 0);
  {
    LogCapture log;
    Runtime rt(options_for(cache_dir, tk));
    CHECK(log.count_containing("writable by other users (mode 0777)") == 1);
    CHECK(log.count_containing("MOEJIT_CACHE_ALLOW_SHARED") == 1);
    CHECK(rt.lookup_compiled(tiny_key(73)).origin == CompiledKernel::Origin::compiled);
    CHECK(count_files(cache_dir) == 0);  // nothing written into it
  }
  SECTION("RuntimeOptions::allow_shared_cache") {
    RuntimeOptions o = options_for(cache_dir, tk);
    o.allow_shared_cache = true;
    LogCapture log;
    Runtime rt(o);
    CHECK(log.count_containing("refused") == 0);
    rt.compiled(tiny_key(73));
    CHECK(cache::list_entries(cache_dir).size() == 1);
  }
  SECTION("MOEJIT_CACHE_ALLOW_SHARED=1") {
    EnvGuard env("MOEJIT_CACHE_ALLOW_SHARED", "1");
    Runtime rt(options_for(cache_dir, tk));
    env.restore();
    rt.compiled(tiny_key(73));
    CHECK(cache::list_entries(cache_dir).size() == 1);
  }
  SECTION("group-writable (0770) is refused too") {
    REQUIRE(::chmod(cache_dir.c_str(), 0770) == 0);
    LogCapture log;
    Runtime rt(options_for(cache_dir, tk));
    CHECK(log.count_containing("mode 0770") == 1);
  }
}

TEST_CASE("hostile: a cache directory owned by another user is refused", "[cache][hostile][nvrtc]") {
  REQUIRE_NVRTC();
  if (!can_chown()) {
    WARN("skipped: not root");
    return;
  }
  TempDir dir;
  TinyKernels tk;
  const fs::path cache_dir = dir.path() / "theirs";
  fs::create_directories(cache_dir);
  REQUIRE(::chmod(cache_dir.c_str(), 0700) == 0);
  REQUIRE(::chown(cache_dir.c_str(), kNobody, kNobody) == 0);
  LogCapture log;
  Runtime rt(options_for(cache_dir, tk));
  CHECK(log.count_containing("owned by uid 65534") == 1);
  CHECK(rt.lookup_compiled(tiny_key(74)).origin == CompiledKernel::Origin::compiled);
  CHECK(count_files(cache_dir) == 0);
}

TEST_CASE("hostile: directory_trust_problem", "[cache][hostile]") {
  TempDir dir;
  CHECK(cache::directory_trust_problem(dir.path()).empty());  // mkdtemp: 0700, ours
  CHECK(cache::directory_trust_problem(dir.path() / "absent").empty());
  ::chmod(dir.path().c_str(), 0755);
  CHECK(cache::directory_trust_problem(dir.path()).empty());
  ::chmod(dir.path().c_str(), 01777);
  CHECK(cache::directory_trust_problem(dir.path()) == "it is writable by other users (mode 1777)");
  ::chmod(dir.path().c_str(), 0700);
}
