// AOT packs: write, mount read-only with the directory as overlay, serve
// without NVRTC, refuse mismatches naming them, survive corruption.
#include <catch2/catch.hpp>

#include <ctime>

#include "cache/cache_admin.hpp"
#include "cache/pack.hpp"
#include "moejit/aot_pack.hpp"
#include "moejit/model.hpp"
#include "moejit/version.hpp"
#include "runtime/runtime_access.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

// Builds a pack of tiny keys `ns`; `edit` may change the entries and manifest
// (another version, another target) before writing.
fs::path build_pack(const fs::path& out, const TinyKernels& tk, const std::vector<std::uint32_t>& ns,
                    const std::function<void(cache::PackManifest&, std::vector<cache::Entry>&)>& edit = {}) {
  RuntimeOptions o;
  o.use_disk_cache = false;
  o.generator = tk.generator();
  Runtime rt(o);
  cache::PackManifest m;
  std::vector<cache::Entry> entries;
  for (std::uint32_t n : ns) {
    cache::Entry e = RuntimeAccess::entry_for(rt, tiny_key(n));
    m.keys.push_back({e.header.key_text, e.header.payload.address()});
    entries.push_back(std::move(e));
  }
  m.moejit_version = entries[0].header.payload.moejit_version;
  m.nvrtc_version = entries[0].header.payload.nvrtc_version;
  m.target = entries[0].header.payload.target;
  m.created_unix = std::time(nullptr);
  m.plan_json = R"({"model":"tiny"})";
  if (edit) {
    edit(m, entries);
    for (std::size_t i = 0; i < entries.size(); ++i) m.keys[i].address = entries[i].header.payload.address();
  }
  cache::write_pack(out, m, entries);
  return out;
}

RuntimeOptions pack_options(const fs::path& dir, const fs::path& pack, const TinyKernels& tk) {
  RuntimeOptions o = options_for(dir, tk);
  o.pack = pack;
  return o;
}

}  // namespace

TEST_CASE("pack: round trip; mounted read-only in front of an empty directory; misses go to the overlay",
          "[cache][pack][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  const fs::path pack = build_pack(dir.path() / "p.moejitpack", tk, {151, 152, 153});
  CHECK((fs::status(pack).permissions() & fs::perms::owner_write) == fs::perms::none);  // 0444
  const auto p = cache::Pack::open(pack);
  CHECK(p->head().index.size() == 3);
  CHECK(p->manifest().keys.size() == 3);
  CHECK(p->manifest().plan_json == R"({"model":"tiny"})");
  CHECK(cache::verify_pack(pack).entries_ok == 3);

  const fs::path overlay = dir.path() / "overlay";
  Runtime rt(pack_options(overlay, pack, tk));
  REQUIRE(RuntimeAccess::pack_mounted(rt));
  for (std::uint32_t n : {151, 152, 153}) CHECK(rt.lookup_compiled(tiny_key(n)).origin == CompiledKernel::Origin::disk);
  CHECK(rt.stats().pack_hits == 3);
  CHECK(rt.stats().disk_hits == 3);  // pack hits are disk hits too
  CHECK(rt.stats().compiles == 0);
  RuntimeAccess::flush_stats(rt);
  CHECK(cache::read_stats(overlay).pack_hits == 3);  // and the overlay's stats.json says so
  CHECK(cache::list_entries(overlay).empty());  // pack hits are not copied
  CHECK(rt.lookup_compiled(tiny_key(154)).origin == CompiledKernel::Origin::compiled);
  CHECK(cache::list_entries(overlay).size() == 1);  // the miss went to the writable overlay
}

TEST_CASE("pack: a node without NVRTC serves pack hits and names libnvrtc on a miss", "[cache][pack][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  const fs::path pack = build_pack(dir.path() / "p.moejitpack", tk, {161, 162});
  Runtime rt(pack_options(dir.path() / "empty", pack, tk));
  RuntimeAccess::pretend_nvrtc_missing(rt);
  CHECK(rt.lookup_compiled(tiny_key(161)).origin == CompiledKernel::Origin::disk);
  CHECK(rt.lookup_compiled(tiny_key(162)).origin == CompiledKernel::Origin::disk);
  CHECK(rt.stats().compiles == 0);
  try {
    rt.compiled(tiny_key(163));
    FAIL("a miss without NVRTC must throw");
  } catch (const DriverError& e) {
    CHECK(std::string(e.what()).find("libnvrtc") != std::string::npos);
  }
}

TEST_CASE("pack: a disk hit without NVRTC uses the version recorded in the directory", "[cache][pack][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  std::string cubin;
  {
    Runtime rt(options_for(dir.path(), tk));
    cubin = rt.compiled(tiny_key(171))->cubin;
  }
  CHECK(fs::exists(dir.path() / "nvrtc_version"));
  CHECK(cache::verify_all(dir.path()).clean());
  Runtime rt(options_for(dir.path(), tk));
  RuntimeAccess::pretend_nvrtc_missing(rt);
  auto got = rt.lookup_compiled(tiny_key(171));
  CHECK(got.origin == CompiledKernel::Origin::disk);
  CHECK(got.kernel->cubin == cubin);
  CHECK_THROWS_AS(rt.compiled(tiny_key(172)), DriverError);
}

TEST_CASE("pack: another library version, NVRTC version or target is refused, naming the mismatch",
          "[cache][pack][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  SECTION("library version") {
    const fs::path pack = build_pack(dir.path() / "lib.pack", tk, {181}, [](auto& m, auto& es) {
      m.moejit_version = "0.0.1";
      for (auto& e : es) e.header.payload.moejit_version = "0.0.1";
    });
    LogCapture log;
    Runtime rt(pack_options(dir.path() / "d", pack, tk));
    CHECK_FALSE(RuntimeAccess::pack_mounted(rt));
    CHECK(RuntimeAccess::pack_problem(rt).find("library version: built by moejit 0.0.1, this is moejit ") !=
          std::string::npos);
    CHECK(log.count_containing("refused") == 1);
    CHECK(rt.lookup_compiled(tiny_key(181)).origin == CompiledKernel::Origin::compiled);
  }
  SECTION("NVRTC version") {
    const fs::path pack = build_pack(dir.path() / "nvrtc.pack", tk, {182}, [](auto& m, auto& es) {
      m.nvrtc_version = "1.0";
      for (auto& e : es) e.header.payload.nvrtc_version = "1.0";
    });
    LogCapture log;
    Runtime rt(pack_options(dir.path() / "d", pack, tk));
    CHECK(rt.lookup_compiled(tiny_key(182)).origin == CompiledKernel::Origin::compiled);
    CHECK_FALSE(RuntimeAccess::pack_mounted(rt));
    CHECK(RuntimeAccess::pack_problem(rt).find("NVRTC version: built with NVRTC 1.0, this machine has NVRTC ") !=
          std::string::npos);
    CHECK(log.count_containing("NVRTC version") == 1);
  }
  SECTION("target") {
    const fs::path pack = build_pack(dir.path() / "t.pack", tk, {183});
    RuntimeOptions o = pack_options(dir.path() / "d", pack, tk);
    o.pack_target = "sm_100a";
    Runtime rt(o);
    CHECK_FALSE(RuntimeAccess::pack_mounted(rt));
    CHECK(RuntimeAccess::pack_problem(rt).find("target: built for sm_90a, this process runs sm_100a") !=
          std::string::npos);
  }
}

TEST_CASE("pack: corrupt packs are refused or their bad entries skipped, never loaded", "[cache][pack][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  const fs::path good = build_pack(dir.path() / "good.pack", tk, {191, 192});
  const std::string bytes = read_file(good);
  auto variant = [&](const char* name, std::string b) {
    const fs::path p = dir.path() / name;
    write_file(p, b);
    return p;
  };
  // Damage in the head: refused at mount.
  for (const auto& [name, b] : std::vector<std::pair<const char*, std::string>>{
           {"truncated", bytes.substr(0, bytes.size() - 1)},
           {"empty", ""},
           {"magic", "XOEJITPK" + bytes.substr(8)},
           {"manifest-flip", [&] { std::string c = bytes; c[cache::kPackPrefixBytes + 5] ^= 1; return c; }()},
           {"newer version", [&] { std::string c = bytes; c[8] = static_cast<char>(cache::kPackFormatVersion + 1); return c; }()},
           // A pack of key version 1 (format 1): refused before its manifest is read.
           {"version 1", [&] { std::string c = bytes; c[8] = 1; return c; }()}}) {
    INFO(name);
    LogCapture log;
    Runtime rt(pack_options(dir.path() / "d", variant(name, b), tk));
    CHECK_FALSE(RuntimeAccess::pack_mounted(rt));
    CHECK(log.count_containing("AOT pack") == 1);
    CHECK(rt.compiled(tiny_key(191))->cubin.size() > 0);
    CHECK(cache::verify_pack(dir.path() / name).problems.size() == 1);
  }
  // Damage in a blob: mounted, the blob is refused at load (one warning), the
  // kernel comes from NVRTC; the other blob still hits.
  std::string c = bytes;
  c[c.size() - 10] ^= 1;
  const fs::path blob = variant("blob-flip", c);
  CHECK(cache::verify_pack(blob).problems.size() == 1);
  CHECK(cache::verify_pack(blob).entries_ok == 1);
  LogCapture log;
  Runtime rt(pack_options(dir.path() / "d2", blob, tk));
  REQUIRE(RuntimeAccess::pack_mounted(rt));
  auto a = rt.lookup_compiled(tiny_key(191));
  auto b = rt.lookup_compiled(tiny_key(192));
  CHECK(rt.stats().pack_hits == 1);
  CHECK(rt.stats().compiles == 1);
  CHECK(log.count_containing("is bad") == 1);
}

TEST_CASE("pack: write_pack never creates the output folder (a typo fails instead of making folders)",
          "[cache][pack][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  const fs::path out = dir.path() / "no-such-folder" / "p.pack";
  CHECK_THROWS_AS(build_pack(out, tk, {95}), InvalidArgument);
  CHECK(!fs::exists(out.parent_path()));
  CHECK_NOTHROW(build_pack(dir.path() / "p.pack", tk, {95}));
}

TEST_CASE("pack: write_aot_pack and write_pack refuse a destination before any work", "[cache][pack]") {
  TempDir dir;
  TinyKernels tk;
  RuntimeOptions o;
  o.use_disk_cache = false;
  o.generator = tk.generator();
  Runtime rt(o);
  PrewarmPlan plan = make_plan(embedded_model("gpt-oss-120b"), PlanOptions{});
  for (const fs::path& out : {dir.path() / "no-such-folder" / "p.moejitpack", dir.path()}) {
    INFO(out);
    CHECK_THROWS_WITH(write_aot_pack(rt, plan, out), Catch::Contains(out.has_filename() && out != dir.path()
                                                                         ? (dir.path() / "no-such-folder").string()
                                                                         : out.string()));
  }
  CHECK(*tk.calls == 0);  // no kernel was generated for a pack that could not be written
  CHECK_THROWS_WITH(cache::write_pack(dir.path() / "x" / "p", cache::PackManifest{}, {}),
                    Catch::Contains("does not exist"));
}

TEST_CASE("pack: read_aot_pack lists the manifest and every entry; a corrupt entry is listed, not thrown",
          "[cache][pack][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  const fs::path good = build_pack(dir.path() / "good.pack", tk, {171, 172});
  const AotPackInfo info = read_aot_pack(good);
  CHECK(info.keys == 2);
  CHECK(info.plan_json == R"({"model":"tiny"})");
  CHECK(info.moejit_version == std::string(moejit::version()));
  CHECK(!info.target.empty());
  CHECK(!info.nvrtc_version.empty());
  CHECK(info.created_unix > 0);
  REQUIRE(info.entries.size() == 2);
  for (const AotPackEntryInfo& e : info.entries) {
    INFO(e.id);
    CHECK(e.ok);
    CHECK(e.problem.empty());
    CHECK(e.id.size() == 32);
    CHECK(e.cubin_bytes > 0);
    CHECK(e.bytes > e.cubin_bytes);
    CHECK(e.registers > 0);
  }
  CHECK((info.entries[0].key == tiny_key(171).to_text() || info.entries[0].key == tiny_key(172).to_text()));
  // One flipped byte in the last blob: listed with its problem, the other entry still ok.
  std::string bytes = read_file(good);
  bytes[bytes.size() - 10] ^= 1;
  const fs::path bad = dir.path() / "blob-flip.pack";
  write_file(bad, bytes);
  const AotPackInfo b = read_aot_pack(bad);
  REQUIRE(b.entries.size() == 2);
  CHECK((b.entries[0].ok ? 1 : 0) + (b.entries[1].ok ? 1 : 0) == 1);
  for (const AotPackEntryInfo& e : b.entries)
    if (!e.ok) CHECK(!e.problem.empty());
  // Not a pack: an Error naming the path.
  const fs::path junk = dir.path() / "junk.pack";
  write_file(junk, "not a pack");
  CHECK_THROWS_AS(read_aot_pack(junk), Error);
  CHECK_THROWS_WITH(read_aot_pack(junk), Catch::Contains(junk.string()));
  CHECK_THROWS_WITH(read_aot_pack(dir.path() / "missing.pack"), Catch::Contains("missing.pack"));
}

TEST_CASE("pack: export_aot_pack packs a cache directory's kernels; refuses a bad destination and an empty directory",
          "[cache][pack][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  const fs::path cache_dir = dir.path() / "cache";
  {
    Runtime rt(options_for(cache_dir, tk));
    for (std::uint32_t n : {181, 182, 183}) CHECK(rt.compiled(tiny_key(n))->cubin.size() > 0);
  }
  const fs::path out = dir.path() / "export.pack";
  const AotPackExport r = export_aot_pack(cache_dir, out, "");
  CHECK(r.entries == 3);
  CHECK(r.found == 3);
  CHECK(r.skipped.empty());
  CHECK(!r.target.empty());
  const AotPackInfo info = read_aot_pack(out);
  CHECK(info.keys == 3);
  CHECK(info.target == r.target);
  REQUIRE(info.entries.size() == 3);
  for (const AotPackEntryInfo& e : info.entries) CHECK(e.ok);
  // The pack serves a fresh directory with no compile.
  Runtime served(pack_options(dir.path() / "fresh", out, tk));
  REQUIRE(RuntimeAccess::pack_mounted(served));
  for (std::uint32_t n : {181, 182, 183})
    CHECK(served.lookup_compiled(tiny_key(n)).origin == CompiledKernel::Origin::disk);
  CHECK(served.stats().compiles == 0);
  // Another target: nothing usable, InvalidArgument naming the directory.
  CHECK_THROWS_WITH(export_aot_pack(cache_dir, dir.path() / "other.pack", "sm_80"), Catch::Contains(cache_dir.string()));
  CHECK(!fs::exists(dir.path() / "other.pack"));
  // A destination that cannot take a pack, and an empty directory.
  CHECK_THROWS_AS(export_aot_pack(cache_dir, dir.path(), ""), InvalidArgument);
  CHECK_THROWS_AS(export_aot_pack(cache_dir, dir.path() / "no-such-folder" / "p.pack", ""), InvalidArgument);
  fs::create_directories(dir.path() / "empty");
  CHECK_THROWS_WITH(export_aot_pack(dir.path() / "empty", dir.path() / "e.pack", ""), Catch::Contains("no usable entries"));
}
