// moejit-prewarm --pack, moejit-cache export and ls/verify/explain --pack, and a
// prewarm with MOEJIT_CACHE_PACK into a fresh directory compiling nothing.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli/run_tool.hpp"
#include "driver/nvrtc_api.hpp"

using namespace moejit::test;

TEST_CASE("moejit-prewarm --pack; the pack serves a fresh cache directory with 0 compiles; moejit-cache on packs",
          "[tools][cli][pack][nvrtc]") {
  if (!moejit::driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  TempDir dir("pack-cli");
  const std::string pack = (dir.path() / "gpt-oss-120b.moejitpack").string();
  const std::vector<std::string> plan = {"--model", "gpt-oss-120b", "--max-num-tokens", "4", "-j2"};
  auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = plan;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ToolResult built = run_tool("moejit-prewarm", args({"--cache-dir", (dir.path() / "build-cache").string(), "--pack", pack}));
  INFO(built.err);
  REQUIRE(built.exit_code == 0);
  CHECK(built.err.find("wrote AOT pack") != std::string::npos);

  ToolResult keys = run_tool("moejit-prewarm", args({"--list-keys"}));
  REQUIRE(keys.exit_code == 0);
  const std::string first_key = keys.out.substr(0, keys.out.find('\n'));

  // A fresh, empty cache directory with the pack mounted: nothing compiles.
  const std::string fresh = (dir.path() / "fresh").string();
  ToolResult warm = run_tool("moejit-prewarm", args({"--cache-dir", fresh, "--json", "-", "--seal-check"}),
                             {"MOEJIT_CACHE_PACK=" + pack, "MOEJIT_STRICT=1"});
  INFO(warm.err);
  REQUIRE(warm.exit_code == 0);
  const auto j = nlohmann::json::parse(warm.out);
  CHECK(j["compiled"] == 0);
  CHECK(j["disk_hits"] == j["distinct_kernels"]);

  ToolResult ls = run_tool("moejit-cache", {"ls", "--pack", pack, "--json"});
  REQUIRE(ls.exit_code == 0);
  const auto lj = nlohmann::json::parse(ls.out);
  CHECK(lj["entries"].size() == j["distinct_kernels"].get<std::size_t>());
  CHECK(lj["keys"] == j["keys"]);
  CHECK(lj["plan"]["model"] == "gpt-oss-120b");
  CHECK(run_tool("moejit-cache", {"verify", "--pack", pack}).exit_code == 0);
  ToolResult hit = run_tool("moejit-cache", {"explain", "--pack", pack, first_key});
  CHECK(hit.exit_code == 0);
  CHECK(hit.out.rfind("hit: pack entry", 0) == 0);
  std::string other = first_key;
  other.replace(other.find("target=sm_90a"), 13, "target=sm_100a");
  ToolResult miss = run_tool("moejit-cache", {"explain", "--pack", pack, other});
  CHECK(miss.exit_code == 1);
  CHECK(miss.out.find("target: built for sm_90a, this process runs sm_100a") != std::string::npos);

  // export from the directory the first prewarm filled: same entries.
  const std::string exported = (dir.path() / "export.moejitpack").string();
  ToolResult ex = run_tool("moejit-cache", {"export", exported, "--cache-dir", (dir.path() / "build-cache").string()});
  INFO(ex.err);
  REQUIRE(ex.exit_code == 0);
  const auto ej = nlohmann::json::parse(run_tool("moejit-cache", {"ls", "--pack", exported, "--json"}).out);
  CHECK(ej["entries"].size() == lj["entries"].size());
  CHECK(run_tool("moejit-cache", {"verify", "--pack", exported}).exit_code == 0);

  // A damaged pack: verify exit 1; not a pack at all: exit 3, one line.
  std::string bytes = read_text(exported);
  bytes[bytes.size() - 20] ^= 1;
  write_text(dir.path() / "bad.moejitpack", bytes);
  CHECK(run_tool("moejit-cache", {"verify", "--pack", (dir.path() / "bad.moejitpack").string()}).exit_code == 1);
  write_text(dir.path() / "junk", "junk");
  ToolResult junk = run_tool("moejit-cache", {"ls", "--pack", (dir.path() / "junk").string()});
  CHECK(junk.exit_code == 3);
  CHECK(junk.err_lines().size() == 1);
}

TEST_CASE("moejit-prewarm refuses a cache directory other users can write to (exit 3, says why)", "[tools][cli]") {
  TempDir dir("shared-dir");
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);
  ToolResult r = run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--max-num-tokens", "1", "--cache-dir",
                                             dir.path().string()});
  CHECK(r.exit_code == 3);
  REQUIRE(r.err_lines().size() == 1);
  CHECK(r.err.find("writable by other users (mode 0777)") != std::string::npos);
  CHECK(r.err.find("MOEJIT_CACHE_ALLOW_SHARED=1") != std::string::npos);
}
