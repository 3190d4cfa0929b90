// SpecKey::hash(): XXH3-128 over a fixed little-endian packing of every field.
//
// Packing (40 bytes, offsets in bytes; enums as their numeric value):
//   0 u8  kKeyHashVersion      1 u8  op            2 u8  quant
//   3 u32 token_bucket         7 u32 n            11 u32 k
//  15 u16 n_align             17 u16 k_align      19 u16 experts
//  21 u16 top_k               23 u8  weight_scale
//  24 u8  bias                25 u8  act          26 u32 act_alpha (IEEE-754 bits; -0 as +0)
//  30 u32 act_limit (bits)    34 u8  router_weight 35 u8 in_dtype
//  36 u8  out_dtype           37 u16 target.sm    39 u8  target.arch_specific
// Why explicit packing and not the struct bytes: padding bytes are unspecified,
// and the hash is a published value (SpecKey.hash in Python, the golden value in
// tests/cpu/test_key.cpp), so it must not depend on the ABI or the build.
#include <bit>
#include <cstring>

#include <xxhash.h>

#include "moejit/key.hpp"

namespace moejit {
namespace {

constexpr std::size_t kPackedSize = 40;

struct Packer {
  unsigned char* p;
  void u8(std::uint8_t v) noexcept { *p++ = v; }
  void u16(std::uint16_t v) noexcept {
    u8(static_cast<std::uint8_t>(v));
    u8(static_cast<std::uint8_t>(v >> 8));
  }
  void u32(std::uint32_t v) noexcept {
    u16(static_cast<std::uint16_t>(v));
    u16(static_cast<std::uint16_t>(v >> 16));
  }
  void f32(float v) noexcept { u32(v == 0.f ? 0u : std::bit_cast<std::uint32_t>(v)); }
};

}  // namespace

Hash128 SpecKey::hash() const noexcept {
  unsigned char buf[kPackedSize];
  Packer pk{buf};
  pk.u8(kKeyHashVersion);
  pk.u8(static_cast<std::uint8_t>(op));
  pk.u8(static_cast<std::uint8_t>(quant));
  pk.u32(token_bucket);
  pk.u32(n);
  pk.u32(k);
  pk.u16(n_align);
  pk.u16(k_align);
  pk.u16(experts);
  pk.u16(top_k);
  pk.u8(static_cast<std::uint8_t>(weight_scale));
  pk.u8(static_cast<std::uint8_t>(bias));
  pk.u8(static_cast<std::uint8_t>(act));
  pk.f32(act_alpha);
  pk.f32(act_limit);
  pk.u8(router_weight ? 1 : 0);
  pk.u8(static_cast<std::uint8_t>(in_dtype));
  pk.u8(static_cast<std::uint8_t>(out_dtype));
  pk.u16(target.sm);
  pk.u8(target.arch_specific ? 1 : 0);
  const XXH128_hash_t h = XXH3_128bits(buf, kPackedSize);
  return Hash128{h.low64, h.high64};
}

std::string Hash128::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = kDigits[(hi >> (4 * i)) & 0xf];
    out[31 - i] = kDigits[(lo >> (4 * i)) & 0xf];
  }
  return out;
}

}  // namespace moejit
