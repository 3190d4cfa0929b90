// What the tools say about the state of a cache: kernels that could not be
// persisted make moejit-prewarm exit 4 and are counted in its summary and
// --json; --check tells a complete read-only cache (exit 0) from an incomplete
// one (exit 1) without writing; a missing libnvrtc is said once; ls marks an
// entry BAD that a load would refuse; verify --repair, prune --dry-run and
// clear report what they did; verify lists entries of other format versions
// (outdated, newer_format) apart from its problems and exits 0 over them.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/run_tool.hpp"
#include "driver/nvrtc_api.hpp"
#include "forged_entry.hpp"

using moejit::test::read_text;
using moejit::test::run_tool;
using moejit::test::shell_quote;
using moejit::test::TempDir;
using moejit::test::tool_path;
using moejit::test::ToolResult;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kSmall = {"--model", "gpt-oss-20b", "--max-num-tokens", "8", "--arch", "sm_90a",
                                         "-j", "2"};

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> extra) {
  a.insert(a.end(), extra);
  return a;
}

bool have_nvrtc_tool() { return moejit::driver::nvrtc_available(); }

#define REQUIRE_NVRTC_TOOL()                                  \
  if (!have_nvrtc_tool()) {                                   \
    WARN("skipped: moejit-prewarm cannot compile (libnvrtc)"); \
    return;                                                   \
  }

std::size_t count_containing(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<fs::path> entry_files(const fs::path& cache) {
  std::vector<fs::path> out;
  for (const auto& de : fs::recursive_directory_iterator(cache / "entries"))
    if (de.path().extension() == ".entry") out.push_back(de.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, std::pair<std::uintmax_t, std::int64_t>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<std::uintmax_t, std::int64_t>> out;
  for (const auto& de : fs::recursive_directory_iterator(dir)) {
    struct stat st{};
    ::lstat(de.path().c_str(), &st);
    out[de.path().string()] = {static_cast<std::uintmax_t>(st.st_size),
                               static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

}  // namespace

TEST_CASE("moejit-prewarm: kernels that cannot be written (file-size limit) exit 4 and are counted",
          "[tools][cli][nvrtc][persistence]") {
  REQUIRE_NVRTC_TOOL();
  TempDir dir("cli-efbig");
  const fs::path cache = dir.path() / "c";
  // bash: ulimit -f counts 1024-byte blocks; the smallest entry is larger than 8 KiB.
  // SIGXFSZ ignored, so the writes fail with EFBIG (as on a full disk or quota).
  std::string cmd = "ulimit -f 8; trap '' XFSZ; exec " + shell_quote(tool_path("moejit-prewarm").string());
  for (const std::string& a : with(kSmall, {"--cache-dir", cache.string(), "--json", "-"})) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote((dir.path() / "out").string()) + " 2>" + shell_quote((dir.path() / "err").string());
  const int status = std::system(("bash -c " + shell_quote(cmd)).c_str());
  const std::string out = read_text(dir.path() / "out"), err = read_text(dir.path() / "err");
  INFO(out << err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 4);
  const auto j = nlohmann::json::parse(out);
  CHECK(j["failed"] == 0);
  CHECK(j["memory_only"].get<int>() == j["compiled"].get<int>());
  CHECK(j["memory_only"].get<int>() > 0);
  CHECK(j["persisted"] == 0);
  CHECK_THAT(err, Catch::Contains("memory only") && Catch::Contains("moejit-prewarm: error: cache incomplete"));
}

TEST_CASE("moejit-prewarm --check: a complete cache exits 0, an incomplete one 1, and nothing is written",
          "[tools][cli][nvrtc][readonly]") {
  REQUIRE_NVRTC_TOOL();
  TempDir dir("cli-check");
  const fs::path cache = dir.path() / "c";
  REQUIRE(run_tool("moejit-prewarm", with(kSmall, {"--cache-dir", cache.string()})).exit_code == 0);
  const auto before = snapshot(cache);
  const ToolResult ok = run_tool("moejit-prewarm", with(kSmall, {"--check", "--cache-dir", cache.string()}));
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("missing            0"));
  CHECK(snapshot(cache) == before);
  fs::remove(entry_files(cache).front());
  const auto gone = snapshot(cache);
  const ToolResult incomplete =
      run_tool("moejit-prewarm", with(kSmall, {"--check", "--json", "-", "--cache-dir", cache.string()}));
  INFO(incomplete.out << incomplete.err);
  CHECK(incomplete.exit_code == 1);
  CHECK(nlohmann::json::parse(incomplete.out)["missing"] == 1);
  CHECK_THAT(incomplete.err, Catch::Contains("--check: 1 of"));
  CHECK(snapshot(cache) == gone);
  // A missing directory is the environment's problem, and it is not created.
  const ToolResult none =
      run_tool("moejit-prewarm", with(kSmall, {"--check", "--cache-dir", (dir.path() / "none").string()}));
  CHECK(none.exit_code == 3);
  CHECK(!fs::exists(dir.path() / "none"));
}

TEST_CASE("moejit-prewarm: a shard folder or quarantine/ writable by others is refused like the root (exit 3)",
          "[tools][cli][trust]") {
  for (const char* folder : {"entries/ab", "quarantine", "entries"}) {
    TempDir dir("cli-trust");
    const fs::path cache = dir.path() / "c";
    fs::create_directories(cache / "entries" / "ab");
    fs::create_directories(cache / "quarantine");
    for (const char* p : {"", "entries", "entries/ab", "quarantine"}) ::chmod((cache / p).c_str(), 0700);
    ::chmod((cache / folder).c_str(), 0777);
    const ToolResult r = run_tool("moejit-prewarm", with(kSmall, {"--cache-dir", cache.string()}));
    INFO(folder << ": " << r.err);
    CHECK(r.exit_code == 3);
    REQUIRE(r.err_lines().size() == 1);
    CHECK_THAT(r.err, Catch::Contains((cache / folder).string() + ": it is writable by other users (mode 0777)") &&
                          Catch::Contains("MOEJIT_CACHE_ALLOW_SHARED"));
    // moejit-cache verify says the same (exit 1), and --check refuses it as well.
    const ToolResult v = run_tool("moejit-cache", {"verify", "--cache-dir", cache.string()});
    CHECK(v.exit_code == 1);
    CHECK_THAT(v.out, Catch::Contains("untrusted: " + (cache / folder).string()));
    CHECK(run_tool("moejit-prewarm", with(kSmall, {"--check", "--cache-dir", cache.string()})).exit_code == 3);
  }
}

TEST_CASE("moejit-prewarm: a libnvrtc that cannot be loaded is said once, with where it looked and the fix",
          "[tools][cli]") {
  TempDir dir("cli-no-nvrtc");
  const ToolResult r = run_tool("moejit-prewarm", with(kSmall, {"--cache-dir", (dir.path() / "c").string()}),
                                {"MOEJIT_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.13"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK(count_containing(r.out + r.err, "MOEJIT_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.13") == 1);
  CHECK(count_containing(r.out + r.err, "libnvrtc not found") == 1);
  CHECK_THAT(r.err, Catch::Contains("LD_LIBRARY_PATH") && Catch::Contains("fix:"));
  CHECK(r.err_lines().size() == 1);
}

TEST_CASE("moejit-cache: ls marks BAD what a load refuses; verify --repair keeps a young temp file and says why",
          "[tools][cli][nvrtc][repair]") {
  REQUIRE_NVRTC_TOOL();
  TempDir dir("cli-state");
  const fs::path cache = dir.path() / "c";
  REQUIRE(run_tool("moejit-prewarm", with(kSmall, {"--cache-dir", cache.string()})).exit_code == 0);
  const fs::path flipped = entry_files(cache).front();
  {
    std::string bytes = read_text(flipped);
    bytes.back() ^= 1;  // the cubin's last byte: prefix and header still decode
    moejit::test::write_text(flipped, bytes);
  }
  const ToolResult ls = run_tool("moejit-cache", {"ls", "--cache-dir", cache.string()});
  CHECK_THAT(ls.out, Catch::Contains(flipped.stem().string() + "  ") && Catch::Contains("BAD: body checksum mismatch"));
  const auto lsj = nlohmann::json::parse(run_tool("moejit-cache", {"ls", "--json", "--cache-dir", cache.string()}).out);
  CHECK(std::count_if(lsj.begin(), lsj.end(), [](const auto& e) { return e["ok"] == false; }) == 1);

  const fs::path young = flipped.parent_path() / (flipped.filename().string() + ".tmp.1.abc");
  moejit::test::write_text(young, "a publish in progress");
  const ToolResult rep = run_tool("moejit-cache", {"verify", "--repair", "--cache-dir", cache.string()});
  INFO(rep.out << rep.err);
  CHECK(rep.exit_code == 1);  // one problem kept
  CHECK(count_containing(rep.out, flipped.filename().string() + ":") == 1);  // each problem once
  CHECK(rep.err.empty());
  CHECK_THAT(rep.out, Catch::Contains("kept:") && Catch::Contains("sweep age") &&
                          Catch::Contains("2 problems: 1 repaired, 1 kept"));
  const auto stats = nlohmann::json::parse(run_tool("moejit-cache", {"stats", "--json", "--cache-dir", cache.string()}).out);
  CHECK(stats["quarantined"] == 1);
  CHECK(stats["quarantined_files"] == 1);

  // prune --dry-run says what would go and removes nothing; clear reports by kind.
  const auto before = snapshot(cache);
  const ToolResult dry = run_tool("moejit-cache", {"prune", "--max-size", "1", "--dry-run", "--cache-dir", cache.string()});
  INFO(dry.out << dry.err);
  CHECK(dry.exit_code == 0);
  CHECK_THAT(dry.out, Catch::StartsWith("would remove") && Catch::Contains("1 quarantined files") &&
                          Catch::Contains("dry run"));
  CHECK(snapshot(cache) == before);
  const ToolResult clear = run_tool("moejit-cache", {"clear", "--yes", "--cache-dir", cache.string()});
  INFO(clear.out);
  CHECK_THAT(clear.out, Catch::Contains("8 entries") && Catch::Contains("lock files") &&
                            Catch::Contains("1 quarantined files") && Catch::Contains("1 temp files"));
}

TEST_CASE("moejit-cache verify: outdated and newer-format entries are listed by kind, exit 0; --repair quarantines "
          "the outdated one only; a corrupt one still exits 1",
          "[tools][cli][versions]") {
  TempDir dir("cli-versions");
  const fs::path cache = dir.path() / "c";
  fs::create_directories(cache);
  const auto current = moejit::test::forge_entry(cache, 1, moejit::cache::kEntryFormatVersion);
  const auto old = moejit::test::forge_entry(cache, 2, 1);
  const auto newer = moejit::test::forge_entry(cache, 3, moejit::cache::kEntryFormatVersion + 1, "99.0.0");

  const ToolResult v = run_tool("moejit-cache", {"verify", "--cache-dir", cache.string()});
  INFO(v.out << v.err);
  CHECK(v.exit_code == 0);  // superseded entries are nothing wrong
  CHECK_THAT(v.out, Catch::Contains("outdated: " + old.path.string() + ": format version 1 is older than"));
  CHECK_THAT(v.out, Catch::Contains("newer_format: " + newer.path.string() + ": format version 3 is newer than"));
  CHECK_THAT(v.out, Catch::Contains(cache.string() + ": 1 entries ok, 1 outdated, 1 of a newer format (kept), 0 problems"));
  CHECK_THAT(v.out, Catch::Contains("--repair"));  // the hint: outdated entries can be moved aside now
  CHECK(count_containing(v.out, "corrupt") == 1);  // only in the hint, never as a kind
  CHECK(v.err.empty());

  const ToolResult vj = run_tool("moejit-cache", {"verify", "--json", "--cache-dir", cache.string()});
  CHECK(vj.exit_code == 0);
  const auto j = nlohmann::json::parse(vj.out);
  CHECK(j["ok"] == true);
  CHECK(j["resolved"] == true);
  CHECK(j["entries_ok"] == 1);
  CHECK(j["outdated"] == 1);
  CHECK(j["newer_format"] == 1);
  REQUIRE(j["problems"].size() == 2);
  std::map<std::string, nlohmann::json> by_path;
  for (const auto& p : j["problems"]) by_path[p["path"]] = p;
  CHECK(by_path[old.path.string()]["kind"] == "outdated");
  CHECK(by_path[old.path.string()]["fault"] == false);
  CHECK(by_path[newer.path.string()]["kind"] == "newer_format");
  CHECK(by_path[newer.path.string()]["fault"] == false);

  const ToolResult rep = run_tool("moejit-cache", {"verify", "--repair", "--cache-dir", cache.string()});
  INFO(rep.out << rep.err);
  CHECK(rep.exit_code == 0);
  CHECK_THAT(rep.out, Catch::Contains("outdated: " + old.path.string()) && Catch::Contains("(moved to "));
  CHECK_THAT(rep.out, Catch::Contains("(kept: the newer moejit that wrote it uses it)"));
  CHECK_THAT(rep.out, Catch::Contains("1 entries ok, 1 outdated (1 moved to quarantine), 1 of a newer format (kept), "
                                      "0 problems"));
  CHECK_FALSE(fs::exists(old.path));
  CHECK(fs::exists(newer.path));
  CHECK(fs::exists(current.path));
  const auto stats = nlohmann::json::parse(run_tool("moejit-cache", {"stats", "--json", "--cache-dir", cache.string()}).out);
  CHECK(stats["quarantined"] == 1);
  CHECK(stats["quarantined_files"] == 1);

  // A genuinely corrupt entry next to them: corrupt, exit 1.
  std::string bytes = read_text(current.path);
  bytes[bytes.size() - 5] ^= 1;
  moejit::test::write_text(current.path, bytes);
  const ToolResult bad = run_tool("moejit-cache", {"verify", "--json", "--cache-dir", cache.string()});
  CHECK(bad.exit_code == 1);
  const auto bj = nlohmann::json::parse(bad.out);
  CHECK(bj["ok"] == false);
  REQUIRE(bj["problems"].size() == 2);
  std::size_t corrupt = 0;
  for (const auto& p : bj["problems"])
    if (p["kind"] == "corrupt") {
      ++corrupt;
      CHECK(p["fault"] == true);
      CHECK(p["path"] == current.path.string());
    }
  CHECK(corrupt == 1);
}
