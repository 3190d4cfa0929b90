// Every corrupt or hostile entry is a miss + quarantine + one warning + a
// recompile, never a crash and never a wrong kernel.
#include <catch2/catch.hpp>

#include <functional>

#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

struct Damage {
  const char* name;
  std::function<void(const fs::path& entry, const fs::path& other_entry)> apply;
};

std::string flip(std::string bytes, std::size_t pos) {
  bytes[pos] = static_cast<char>(bytes[pos] ^ 0x10);
  return bytes;
}

}  // namespace

TEST_CASE("cache corruption: each damaged entry is quarantined and recompiled", "[cache][corruption][nvrtc]") {
  if (!have_nvrtc()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  const std::vector<Damage> cases = {
      {"truncated", [](const fs::path& e, const fs::path&) {
         std::string b = read_file(e);
         write_file(e, b.substr(0, b.size() / 2));
       }},
      {"bit-flipped body", [](const fs::path& e, const fs::path&) {
         std::string b = read_file(e);
         write_file(e, flip(b, b.size() - 100));
       }},
      {"bit-flipped header", [](const fs::path& e, const fs::path&) {
         write_file(e, flip(read_file(e), cache::kEntryPrefixBytes + 3));
       }},
      {"bit-flipped size field", [](const fs::path& e, const fs::path&) { write_file(e, flip(read_file(e), 13)); }},
      {"wrong magic", [](const fs::path& e, const fs::path&) {
         std::string b = read_file(e);
         b.replace(0, 8, "NOTMOEJT");
         write_file(e, b);
       }},
      {"newer format version", [](const fs::path& e, const fs::path&) {
         std::string b = read_file(e);
         b[8] = static_cast<char>(cache::kEntryFormatVersion + 1);
         write_file(e, b);
       }},
      {"format version 1 (key version 1 text)", [](const fs::path& e, const fs::path&) {
         // What a library of key version 1 wrote for the same kernel: the same
         // address payload and cubin, its key line in the old grammar ("m=",
         // no "in="), format version 1. Checksums are valid: only the version
         // refuses it.
         cache::DecodeResult d = cache::decode_entry(read_file(e));
         REQUIRE(d.entry);
         d.entry->header.key_text =
             "op=gate_up quant=bf16 m=1 n=51 k=64 n_align=1 k_align=64 experts=0 top_k=0 wscale=none bias=none "
             "act=none alpha=0 limit=0 router_weight=0 out=bf16 target=sm_90a";
         std::string b = cache::encode_entry(*d.entry);
         b[8] = 1;
         write_file(e, b);
       }},
      {"zero-length file", [](const fs::path& e, const fs::path&) { write_file(e, ""); }},
      {"extra trailing bytes", [](const fs::path& e, const fs::path&) { write_file(e, read_file(e) + "junk"); }},
      {"payload of another key under this name", [](const fs::path& e, const fs::path& other) {
         fs::copy_file(other, e, fs::copy_options::overwrite_existing);
       }},
      {"directory in place of the entry", [](const fs::path& e, const fs::path&) {
         fs::remove(e);
         fs::create_directory(e);
         write_file(e / "inner", "x");
       }},
      {"symlink in place of the entry", [](const fs::path& e, const fs::path& other) {
         fs::remove(e);
         fs::create_symlink(other, e);
       }},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      TempDir dir;
      TinyKernels tk;
      Hash128 address, other_address;
      std::string good_cubin;
      {
        Runtime rt(options_for(dir.path(), tk));
        auto k = rt.compiled(tiny_key(51));
        address = k->content_hash;
        good_cubin = k->cubin;
        other_address = rt.compiled(tiny_key(52))->content_hash;
      }
      cache::DiskCache dc(dir.path());
      const fs::path entry = dc.entry_path(address);
      c.apply(entry, dc.entry_path(other_address));

      LogCapture log;
      Runtime rt(options_for(dir.path(), tk));
      auto got = rt.lookup_compiled(tiny_key(51));
      INFO(c.name);
      CHECK(got.origin == CompiledKernel::Origin::compiled);
      CHECK(got.kernel->content_hash == address);
      CHECK(got.kernel->cubin == good_cubin);  // never the other key's kernel
      CHECK(rt.stats().quarantined == 1);
      CHECK(rt.stats().compiles == 1);
      CHECK(count_files(dc.quarantine_dir()) == 1);
      CHECK(log.count_containing(entry.string()) == 1);
      CHECK(log.count_containing("quarantine") >= 1);
      // Republished and valid: a third runtime hits the disk.
      Runtime rt3(options_for(dir.path(), tk));
      CHECK(rt3.lookup_compiled(tiny_key(51)).origin == CompiledKernel::Origin::disk);
      CHECK(rt3.stats().quarantined == 0);
    }
  }
}

TEST_CASE("cache corruption: a foreign file in the entries dir does not disturb lookups", "[cache][corruption][nvrtc]") {
  if (!have_nvrtc()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  TempDir dir;
  TinyKernels tk;
  {
    Runtime rt(options_for(dir.path(), tk));
    rt.compiled(tiny_key(61));
  }
  write_file(dir.path() / "entries" / "README.txt", "not an entry");
  fs::create_directories(dir.path() / "entries" / "zz");
  write_file(dir.path() / "entries" / "zz" / "foreign.entry", "MOEJITCE garbage");
  Runtime rt(options_for(dir.path(), tk));
  CHECK(rt.lookup_compiled(tiny_key(61)).origin == CompiledKernel::Origin::disk);
  CHECK(rt.stats().quarantined == 0);
}

TEST_CASE("entry format: encode/decode round trip and every prefix rejects", "[cache]") {
  cache::Entry e;
  e.header.payload.moejit_version = "0.1.0";
  e.header.payload.nvrtc_version = "13.0";
  e.header.payload.target = "sm_90a";
  e.header.payload.name_expression = "ns::k<1, 2>";
  e.header.payload.options = {"--gpu-architecture=sm_90a", "-DX=a b", "-Dweird=\\n\n"};
  e.header.payload.source_hash = Hash128{0x1234, 0xabcdef};
  e.header.payload.source_bytes = 999;
  e.header.key_text = "op=gate_up tokens=1";
  e.header.lowered_name = "_Z1kv";
  e.header.launch = {256, 100000};
  e.header.payload.launch = e.header.launch;  // the launch contract is part of the address
  e.header.resources = {40, 4, 8, 16, 1024};
  e.header.compile_ms = 12.5;
  e.header.created_unix = 1700000000;
  e.header.nvrtc_log = "line1\nline2\r\n\\end";
  e.cubin = std::string("\x7f" "ELF\0\1\2", 7) + std::string(100, 'x');
  const std::string bytes = cache::encode_entry(e);
  auto d = cache::decode_entry(bytes);
  REQUIRE(d.entry);
  CHECK(d.error.empty());
  CHECK(d.entry->header.payload == e.header.payload);
  CHECK(d.entry->header.key_text == e.header.key_text);
  CHECK(d.entry->header.lowered_name == e.header.lowered_name);
  CHECK(d.entry->header.launch.dynamic_smem_bytes == 100000);
  CHECK(d.entry->header.resources.spill_load_bytes == 8);
  CHECK(d.entry->header.resources.shared_bytes == 1024);
  CHECK(d.entry->header.compile_ms == 12.5);
  CHECK(d.entry->header.created_unix == 1700000000);
  CHECK(d.entry->header.nvrtc_log == e.header.nvrtc_log);
  CHECK(d.entry->cubin == e.cubin);
  CHECK(cache::check_entry(*d.entry, e.header.payload.address(), &e.header.payload).empty());
  CHECK_FALSE(cache::check_entry(*d.entry, Hash128{1, 2}, nullptr).empty());
  // Every strict prefix of the file is rejected (truncation at any byte).
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto t = cache::decode_entry(std::string_view(bytes).substr(0, n));
    if (t.entry) FAIL("prefix of " << n << " bytes decoded");
  }
  // Every single-bit flip in the file is rejected.
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0x01);
    auto t = cache::decode_entry(b);
    if (t.entry) FAIL("bit flip at byte " << i << " decoded");
  }
  // Errors name the part.
  CHECK(cache::decode_entry("").error == "empty file");
  std::string nv = bytes;
  nv[8] = 9;
  CHECK(cache::decode_entry(nv).error.find("newer") != std::string::npos);
}
