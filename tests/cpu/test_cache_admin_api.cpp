// The public cache administration API (moejit/cache_admin.hpp) on directories
// built by hand: no NVRTC and no GPU needed.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "env_guard.hpp"
#include "moejit/cache_admin.hpp"
#include "moejit/error.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

TEST_CASE("cache_admin: the ownership rule follows MOEJIT_CACHE_ALLOW_SHARED", "[cache][admin]") {
  {
    EnvGuard g("MOEJIT_CACHE_ALLOW_SHARED", "1");
    CHECK(cache_admin::ownership_from_env() == cache_admin::Ownership::shared);
  }
  {
    EnvGuard g("MOEJIT_CACHE_ALLOW_SHARED", "0");
    CHECK(cache_admin::ownership_from_env() == cache_admin::Ownership::private_only);
  }
  CHECK(cache_admin::to_string(cache_admin::Ownership::shared) == "shared");
}

TEST_CASE("cache_admin: layout_trust_problem names the refused folder", "[cache][admin][trust]") {
  TempDir dir;
  ::chmod(dir.path().c_str(), 0700);
  CHECK(cache_admin::layout_trust_problem(dir.path(), cache_admin::Ownership::private_only).empty());
  CHECK(cache_admin::layout_trust_problem(dir.path() / "missing", cache_admin::Ownership::private_only).empty());
  TempDir elsewhere;
  fs::create_directory_symlink(elsewhere.path(), dir.path() / "entries");
  const std::string why = cache_admin::layout_trust_problem(dir.path(), cache_admin::Ownership::shared);
  CHECK(why.find((dir.path() / "entries").string()) != std::string::npos);
  CHECK(why.find("symbolic link") != std::string::npos);
}

TEST_CASE("cache_admin: list, verify, summarize, prune and clear a directory with a corrupt entry",
          "[cache][admin]") {
  TempDir dir;
  ::chmod(dir.path().c_str(), 0700);
  const std::string id = "ab0123456789abcdef0123456789abcd";
  fs::create_directories(dir.path() / "entries" / "ab");
  ::chmod((dir.path() / "entries").c_str(), 0700);
  ::chmod((dir.path() / "entries" / "ab").c_str(), 0700);
  write_file(dir.path() / "entries" / "ab" / (id + ".entry"), "not an entry");

  const std::vector<cache_admin::EntryInfo> list = cache_admin::list_entries(dir.path());
  REQUIRE(list.size() == 1);
  CHECK(list[0].address.hex() == id);
  CHECK_FALSE(list[0].header);
  CHECK_FALSE(list[0].problem.empty());
  CHECK_THROWS_AS(cache_admin::read_entry(dir.path(), "zz"), InvalidArgument);
  CHECK_THROWS_AS(cache_admin::read_entry(dir.path(), "ab"), Error);

  const cache_admin::VerifyReport v = cache_admin::verify(dir.path());
  CHECK(v.entries_ok == 0);
  REQUIRE(v.problems.size() == 1);
  CHECK(v.problems[0].kind == cache_admin::ProblemKind::corrupt);
  CHECK(cache_admin::to_string(v.problems[0].kind) == "corrupt");
  CHECK_FALSE(v.resolved());

  const cache_admin::CacheSummary s = cache_admin::summarize(dir.path());
  CHECK(s.entries == 1);
  CHECK(s.entry_bytes == 12);
  CHECK(s.to_json().find("\"entry_bytes\": 12") != std::string::npos);

  cache_admin::PruneOptions dry;
  dry.max_bytes = 1;
  dry.dry_run = true;
  const cache_admin::PruneReport p = cache_admin::prune(dir.path(), dry);
  CHECK(p.removed_entries == 1);
  CHECK(fs::exists(dir.path() / "entries" / "ab" / (id + ".entry")));

  const cache_admin::ClearReport c = cache_admin::clear(dir.path());
  CHECK(c.entries == 1);
  CHECK(c.failed == 0);
  CHECK(cache_admin::summarize(dir.path()).entries == 0);
}
