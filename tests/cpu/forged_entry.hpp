#pragma once
// Cache entries written by hand, without NVRTC: a well-formed entry of any
// entry format version at its content address, as a moejit of a given library
// version would have published it (the cubin is a short fake ELF; the sizes
// and both checksums are valid). For the tests of how verify and the loader
// treat entries of other format versions.
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "cache/content_address.hpp"
#include "cache/entry_format.hpp"

namespace moejit::test {

struct ForgedEntry {
  Hash128 address;
  std::filesystem::path path;
  cache::AddressPayload payload;  // what a load of this kernel expects
};

// The payload of the forged kernel number `n` built by `moejit_version`.
inline cache::AddressPayload forged_payload(std::uint32_t n, const std::string& moejit_version) {
  cache::AddressPayload p;
  p.moejit_version = moejit_version;
  p.nvrtc_version = "13.0";
  p.target = "sm_90a";
  p.name_expression = "tiny::add_const<" + std::to_string(n) + ">";
  p.options = {"--gpu-architecture=sm_90a", "-std=c++17", "--ptxas-options=-v"};
  const std::string source = "// forged kernel " + std::to_string(n) + "\n";
  p.source_hash = cache::xxh3_128(source);
  p.source_bytes = source.size();
  p.launch.block_threads = 128;
  return p;
}

// The bytes of that entry with `format_version` in its prefix. Version 1
// records its key in key version 1 text ("m=", no "in="), as such entries did.
inline std::string forged_entry_bytes(std::uint32_t n, std::uint32_t format_version,
                                      const std::string& moejit_version) {
  cache::Entry e;
  e.header.payload = forged_payload(n, moejit_version);
  e.header.launch = e.header.payload.launch;
  e.header.key_text = format_version == 1
                          ? "op=gate_up quant=bf16 m=1 n=" + std::to_string(n) +
                                " k=64 n_align=1 k_align=64 experts=0 top_k=0 wscale=none bias=none act=none alpha=0 "
                                "limit=0 router_weight=0 out=bf16 target=sm_90a"
                          : "op=gate_up quant=bf16 tokens=1 n=" + std::to_string(n) + " k=64 target=sm_90a";
  e.header.lowered_name = "_ZN4tiny9add_constILi" + std::to_string(n) + "EEEvPfi";
  e.header.compile_ms = 12.5;
  e.header.created_unix = 1700000000;
  e.cubin = std::string("\x7f" "ELF", 4) + std::string(256, static_cast<char>(n));
  std::string bytes = cache::encode_entry(e);
  for (int i = 0; i < 4; ++i) bytes[8 + static_cast<std::size_t>(i)] = static_cast<char>((format_version >> (8 * i)) & 0xFF);
  return bytes;
}

// Writes `bytes` as <dir>/entries/<hex[0:2]>/<hex>.entry (folders 0700, file 0600).
inline std::filesystem::path write_entry_file(const std::filesystem::path& dir, const Hash128& address,
                                              const std::string& bytes) {
  const std::string hex = address.hex();
  const std::filesystem::path shard = dir / "entries" / hex.substr(0, 2);
  std::filesystem::create_directories(shard);
  for (const auto& d : {dir, dir / "entries", shard}) ::chmod(d.c_str(), 0700);
  const std::filesystem::path path = shard / (hex + ".entry");
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ::chmod(path.c_str(), 0600);
  return path;
}

// A forged entry of kernel `n` in `format_version`, written into `dir`.
inline ForgedEntry forge_entry(const std::filesystem::path& dir, std::uint32_t n, std::uint32_t format_version,
                               const std::string& moejit_version = std::string(cache::library_version())) {
  ForgedEntry f;
  f.payload = forged_payload(n, moejit_version);
  f.address = f.payload.address();
  f.path = write_entry_file(dir, f.address, forged_entry_bytes(n, format_version, moejit_version));
  return f;
}

}  // namespace moejit::test
