// The public cache administration API (moejit/cache_admin.hpp) on directories
// built by hand: no NVRTC and no GPU needed.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "env_guard.hpp"
#include "moejit/cache_admin.hpp"
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
