// moejit-cache as a subprocess over a cache that moejit-prewarm filled:
// verify finds a truncated entry, a bit-flipped entry and foreign files; the
// next prewarm recompiles the bad entries with a warning; explain, prune,
// clear, and the one-line errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/run_tool.hpp"
#include "moejit/cache_admin.hpp"

using moejit::test::run_tool;
using moejit::test::TempDir;
using moejit::test::ToolResult;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kPrewarm = {"--model", "gpt-oss-20b", "--max-num-tokens", "8", "--arch", "sm_90a",
                                           "-j", "2"};

std::vector<std::string> prewarm_args(const fs::path& cache, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = kPrewarm;
  a.push_back("--cache-dir");
  a.push_back(cache.string());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::vector<fs::path> entry_files(const fs::path& cache) {
  std::vector<fs::path> out;
  for (const auto& de : fs::recursive_directory_iterator(cache / "entries"))
    if (de.path().extension() == ".entry") out.push_back(de.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t count_kind(const nlohmann::json& verify, const std::string& kind) {
  std::size_t n = 0;
  for (const auto& p : verify["problems"]) n += p["kind"] == kind ? 1 : 0;
  return n;
}

nlohmann::json json_of(const ToolResult& r) {
  INFO(r.err);
  return nlohmann::json::parse(r.out);
}

// A filled cache shared by the test cases of this file (compiling it once keeps the suite fast).
const fs::path& filled_cache() {
  static TempDir dir("cache-cli-filled");
  static bool filled = false;
  if (!filled) {
    const ToolResult r = run_tool("moejit-prewarm", prewarm_args(dir.path() / "c"));
    INFO(r.err << r.out);
    REQUIRE(r.exit_code == 0);
    filled = true;
  }
  static fs::path p = dir.path() / "c";
  return p;
}

fs::path copy_of_filled(const TempDir& dir) {
  const fs::path dst = dir.path() / "c";
  fs::copy(filled_cache(), dst, fs::copy_options::recursive);
  return dst;
}

}  // namespace

TEST_CASE("moejit-cache verify reports a truncated entry, a bit-flipped entry and foreign files; prewarm recompiles",
          "[tools][cli][nvrtc]") {
  TempDir dir("cache-cli-corrupt");
  const fs::path cache = copy_of_filled(dir);
  const ToolResult clean = run_tool("moejit-cache", {"verify", "--cache-dir", cache.string()});
  INFO(clean.out << clean.err);
  REQUIRE(clean.exit_code == 0);

  const std::vector<fs::path> entries = entry_files(cache);
  REQUIRE(entries.size() >= 3);
  const fs::path truncated = entries[0], flipped = entries[1];
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  {
    std::fstream f(flipped, std::ios::in | std::ios::out | std::ios::binary);
    const auto pos = static_cast<std::streamoff>(fs::file_size(flipped) - 100);  // inside the cubin
    f.seekg(pos);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x04);
    f.seekp(pos);
    f.write(&c, 1);
  }
  const fs::path foreign_root = cache / "notes.txt";
  moejit::test::write_text(foreign_root, "not a cache entry");
  const fs::path foreign_entry = entries[2].parent_path() / (std::string(32, 'f').replace(0, 2, entries[2].parent_path().filename().string()) + ".entry");
  moejit::test::write_text(foreign_entry, std::string(4096, 'x'));  // an entry name with foreign bytes

  const ToolResult v = run_tool("moejit-cache", {"verify", "--cache-dir", cache.string()});
  INFO(v.out << v.err);
  CHECK(v.exit_code == 1);
  CHECK_THAT(v.out, Catch::Contains(truncated.string()) && Catch::Contains("truncated"));
  CHECK_THAT(v.out, Catch::Contains(flipped.string()) && Catch::Contains("checksum"));
  CHECK_THAT(v.out, Catch::Contains(foreign_root.string()));
  CHECK_THAT(v.out, Catch::Contains(foreign_entry.string()) && Catch::Contains("magic"));
  const auto vj = json_of(run_tool("moejit-cache", {"verify", "--json", "--cache-dir", cache.string()}));
  CHECK(vj["ok"] == false);
  CHECK(count_kind(vj, "corrupt") == 3);
  CHECK(count_kind(vj, "foreign") == 1);
  CHECK(vj["entries_ok"].get<std::size_t>() == entries.size() - 2);

  // The next prewarm: the two damaged entries are quarantined with a warning and recompiled.
  const ToolResult p = run_tool("moejit-prewarm", prewarm_args(cache, {"--json", (dir.path() / "r.json").string()}),
                                {"MOEJIT_LOG_LEVEL=warn"});
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  CHECK_THAT(p.err, Catch::Contains("warn") && Catch::Contains(truncated.filename().string()) &&
                        Catch::Contains(flipped.filename().string()));
  const auto r = nlohmann::json::parse(moejit::test::read_text(dir.path() / "r.json"));
  CHECK(r["compiled"] == 2);
  CHECK(r["disk_hits"].get<int>() == r["distinct_kernels"].get<int>() - 2);
  CHECK(fs::file_size(truncated) > 0);
  const auto after = json_of(run_tool("moejit-cache", {"verify", "--json", "--cache-dir", cache.string()}));
  CHECK(count_kind(after, "corrupt") == 1);  // only the foreign bytes under an entry name no key maps to
  CHECK(after["entries_ok"].get<std::size_t>() == entries.size());

  // --repair moves the remaining problems aside (exit 0: all repaired, each
  // listed once); then verify is clean.
  const ToolResult repaired = run_tool("moejit-cache", {"verify", "--repair", "--cache-dir", cache.string()});
  INFO(repaired.out << repaired.err);
  CHECK(repaired.exit_code == 0);
  CHECK(repaired.err.empty());
  CHECK_THAT(repaired.out, Catch::Contains("2 problems: 2 repaired, 0 kept"));
  const ToolResult clean2 = run_tool("moejit-cache", {"verify", "--cache-dir", cache.string()});
  INFO(clean2.out);
  CHECK(clean2.exit_code == 0);
  const auto stats = json_of(run_tool("moejit-cache", {"stats", "--json", "--cache-dir", cache.string()}));
  CHECK(stats["quarantined_files"] == 4);  // 2 by the prewarm, 2 by --repair
  CHECK(stats["quarantined"] == stats["quarantined_files"]);  // the counter agrees with what was moved
}

TEST_CASE("moejit-cache ls, show, cubin, stats and explain on a filled cache", "[tools][cli][nvrtc]") {
  const fs::path& cache = filled_cache();
  const auto ls = json_of(run_tool("moejit-cache", {"ls", "--json", "--cache-dir", cache.string()}));
  REQUIRE(ls.size() == entry_files(cache).size());
  const std::string id = ls[0]["id"];
  const std::string key = ls[0]["key"];
  CHECK(ls[0]["ok"] == true);
  CHECK(ls[0]["registers"].get<int>() > 0);

  const ToolResult show = run_tool("moejit-cache", {"show", id.substr(0, 8), "--cache-dir", cache.string()});
  CHECK(show.exit_code == 0);
  CHECK_THAT(show.out, Catch::Contains(id) && Catch::Contains(key) && Catch::Contains("registers"));
  const ToolResult missing = run_tool("moejit-cache", {"show", "0000dead", "--cache-dir", cache.string()});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err_lines().size() == 1);

  // cubin: the entry's ELF, byte for byte, replacing an existing file; OUT
  // that is "-", a directory, or in a folder that does not exist, and an
  // unknown id: exit 2 with one line naming OUT.
  TempDir out("cache-cli-cubin");
  const fs::path k = out.path() / "k.cubin";
  std::ofstream(k) << "an older file";
  const ToolResult cubin = run_tool("moejit-cache", {"cubin", id.substr(0, 8), k.string(), "--cache-dir", cache.string()});
  INFO(cubin.out << cubin.err);
  CHECK(cubin.exit_code == 0);
  std::ifstream cf(k, std::ios::binary);
  const std::string elf((std::istreambuf_iterator<char>(cf)), std::istreambuf_iterator<char>());
  REQUIRE(elf.size() > 4);
  CHECK(elf.compare(0, 4, "\x7f" "ELF") == 0);
  CHECK(elf == moejit::cache_admin::read_entry(cache, id).cubin);
  for (const std::string& bad_out : {(out.path() / "no" / "k.cubin").string(), out.path().string(), std::string("-")}) {
    const ToolResult r = run_tool("moejit-cache", {"cubin", id, bad_out, "--cache-dir", cache.string()});
    INFO(bad_out << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err_lines().size() == 1);
    CHECK_THAT(r.err, Catch::Contains("cubin: ") && Catch::Contains("OUT '" + bad_out + "'"));
  }
  CHECK(run_tool("moejit-cache", {"cubin", "0000dead", (out.path() / "x.cubin").string(), "--cache-dir",
                                  cache.string()}).exit_code == 2);
  CHECK(!fs::exists(out.path() / "x.cubin"));

  const auto stats = json_of(run_tool("moejit-cache", {"stats", "--json", "--cache-dir", cache.string()}));
  CHECK(stats["entries"] == ls.size());
  CHECK(stats["compiles"].get<int>() >= static_cast<int>(ls.size()));

  // explain: the key that compiled an entry hits it; the same key for another target misses,
  // and the explanation names the target.
  const ToolResult hit = run_tool("moejit-cache", {"explain", key, "--cache-dir", cache.string()});
  INFO(hit.out << hit.err);
  CHECK(hit.exit_code == 0);
  CHECK_THAT(hit.out, Catch::StartsWith("hit: entry " + id));
  std::string other = key;
  other.replace(other.find("target=sm_90a"), 13, "target=sm_100a");
  const ToolResult miss = run_tool("moejit-cache", {"explain", other, "--cache-dir", cache.string()});
  INFO(miss.out << miss.err);
  CHECK(miss.exit_code == 1);
  CHECK_THAT(miss.out, Catch::StartsWith("miss:") && Catch::Contains("target: sm_100a -> sm_90a"));
  const ToolResult bad = run_tool("moejit-cache", {"explain", "op=gate_up tokens=", "--cache-dir", cache.string()});
  CHECK(bad.exit_code == 2);
  REQUIRE(bad.err_lines().size() == 1);
  CHECK_THAT(bad.err, Catch::StartsWith("moejit-cache: error: "));
}

TEST_CASE("moejit-cache prune and clear", "[tools][cli][nvrtc]") {
  TempDir dir("cache-cli-prune");
  const fs::path cache = copy_of_filled(dir);
  const std::size_t n = entry_files(cache).size();
  REQUIRE(n >= 2);

  // Nothing is older than a week: nothing removed.
  CHECK(run_tool("moejit-cache", {"prune", "--older-than", "7d", "--cache-dir", cache.string()}).exit_code == 0);
  CHECK(entry_files(cache).size() == n);
  // Make one entry old (its last-use stamp and the entry), then prune by age.
  const fs::path old_entry = entry_files(cache)[0];
  const auto long_ago = fs::file_time_type::clock::now() - std::chrono::hours(24 * 30);
  fs::last_write_time(old_entry, long_ago);
  fs::path stamp = old_entry;
  stamp.replace_extension(".used");
  if (fs::exists(stamp)) fs::last_write_time(stamp, long_ago);
  const ToolResult p = run_tool("moejit-cache", {"prune", "--older-than", "7d", "--cache-dir", cache.string()});
  INFO(p.out << p.err);
  CHECK(p.exit_code == 0);
  CHECK_FALSE(fs::exists(old_entry));
  CHECK(entry_files(cache).size() == n - 1);

  // By size: MOEJIT_CACHE_MAX_BYTES is the default limit; 1K leaves nothing.
  CHECK(run_tool("moejit-cache", {"prune", "--max-size", "100M", "--cache-dir", cache.string()}).exit_code == 0);
  CHECK(entry_files(cache).size() == n - 1);
  CHECK(run_tool("moejit-cache", {"prune", "--cache-dir", cache.string()}, {"MOEJIT_CACHE_MAX_BYTES=1K"}).exit_code == 0);
  CHECK(entry_files(cache).empty());

  // Bad arguments: one line, exit code 2.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"prune", "--cache-dir", cache.string()},
        std::vector<std::string>{"prune", "--max-size", "12Q", "--cache-dir", cache.string()},
        std::vector<std::string>{"prune", "--older-than", "soon", "--cache-dir", cache.string()},
        std::vector<std::string>{"frobnicate"}, std::vector<std::string>{}}) {
    const ToolResult r = run_tool("moejit-cache", args, {"MOEJIT_CACHE_MAX_BYTES="});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err_lines().size() == 1);
  }

  // clear: refuses without --yes when stdin is not a terminal; keeps foreign files.
  TempDir dir2("cache-cli-clear");
  const fs::path c2 = copy_of_filled(dir2);
  moejit::test::write_text(c2 / "mine.txt", "keep me");
  const ToolResult refused = run_tool("moejit-cache", {"clear", "--cache-dir", c2.string()});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("--yes"));
  CHECK_FALSE(entry_files(c2).empty());
  CHECK(run_tool("moejit-cache", {"clear", "--yes", "--cache-dir", c2.string()}).exit_code == 0);
  CHECK(entry_files(c2).empty());
  CHECK(fs::exists(c2 / "mine.txt"));
  const auto stats = json_of(run_tool("moejit-cache", {"stats", "--json", "--cache-dir", c2.string()}));
  CHECK(stats["entries"] == 0);
  CHECK(stats["compiles"] == 0);
}
