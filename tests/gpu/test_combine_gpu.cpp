// The combine kernel alone, bit for bit against its definition: out[t] = bf16 of
// the fp32 sum, from +0, of Y[z][route_row[t * top_k + j]] in (j, z) order,
// dropped routes (-1) skipped. Every variant (bf16 Y with 8 and 4 columns per
// thread, f32 Y with split-K partials), windows of more than one IN_FLIGHT,
// -0 / +0 / subnormal values, tokens with every route dropped, and outputs
// whose rows are not 16-byte aligned (the 4-byte store path).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "driver/cuda_api.hpp"
#include "driver/device_buffer.hpp"
#include "gpu_runtime.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/formats.hpp"
#include "ops/kernel_params.hpp"
#include "ops/launch_contracts.hpp"
#include "ops/moe_keys.hpp"
#include "reference/rng.hpp"

using namespace moejit;
using moejit::driver::DeviceBuffer;

namespace {

struct CombineCase {
  const char* name;
  std::uint32_t hidden, top_k, tokens;
  DType y;
  int splits;
  std::int64_t out_row_stride;  // elements
  std::size_t out_offset;       // bytes past a 256-byte aligned allocation
};

// Values whose fp32 sums round differently under another order: magnitudes over
// 2^-20..2^20, with exact -0, +0 and fp32 subnormals mixed in.
float draw(ref::TestRng& rng) {
  const auto pick = rng.integer(0, 99);
  if (pick < 4) return -0.0f;
  if (pick < 8) return 0.0f;
  if (pick < 10) return std::ldexp(static_cast<float>(rng.uniform(-1, 1)), -130);  // subnormal in fp32
  return std::ldexp(static_cast<float>(rng.normal()), static_cast<int>(rng.integer(-20, 20)));
}

void run_case(const CombineCase& c, std::uint64_t seed) {
  ref::TestRng rng(seed);
  const std::uint64_t R = std::uint64_t(c.tokens) * c.top_k, D = c.hidden;
  const bool bf16 = c.y == DType::bf16;
  REQUIRE((!bf16 || c.splits == 1));
  // Y rows, stored bf16 or f32; the reference reads the same values.
  std::vector<float> y(std::size_t(c.splits) * R * D);
  for (auto& v : y) v = draw(rng);
  std::vector<std::uint16_t> y16;
  if (bf16) {
    y16.resize(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) y16[i] = float_to_bf16(y[i]), y[i] = bf16_to_float(y16[i]);
  }
  // route_row: a random permutation of the rows with ~15 % dropped; token 0
  // (and every 37th) has all of its routes dropped.
  std::vector<std::int32_t> route_row(R);
  for (std::uint64_t i = 0; i < R; ++i) route_row[i] = static_cast<std::int32_t>(i);
  for (std::uint64_t i = R; i > 1; --i) std::swap(route_row[i - 1], route_row[rng.integer(0, std::int64_t(i) - 1)]);
  for (std::uint64_t i = 0; i < R; ++i)
    if (rng.integer(0, 99) < 15 || (i / c.top_k) % 37 == 0) route_row[i] = -1;

  // Reference: exactly the definition, in fp32.
  const std::int64_t os = c.out_row_stride;
  std::vector<std::uint16_t> want(std::size_t(c.tokens) * os, 0xFFFF);
  for (std::uint32_t t = 0; t < c.tokens; ++t)
    for (std::uint64_t d = 0; d < D; ++d) {
      float s = 0.f;
      for (std::uint32_t j = 0; j < c.top_k; ++j) {
        const std::int32_t r = route_row[std::size_t(t) * c.top_k + j];
        if (r < 0) continue;
        for (int z = 0; z < c.splits; ++z) s += y[(std::size_t(z) * R + r) * D + d];
      }
      want[std::size_t(t) * os + d] = float_to_bf16(s);
    }

  const std::size_t ybytes = y.size() * (bf16 ? 2 : 4), obytes = want.size() * 2;
  DeviceBuffer dy(ybytes), dr(R * 4), dout(c.out_offset + obytes + 256);
  dy.upload(bf16 ? static_cast<const void*>(y16.data()) : static_cast<const void*>(y.data()), ybytes);
  dr.upload(route_row.data(), R * 4);
  dout.fill_bytes(0xFF);  // NaN poison, also between rows and past the end

  MoeLayerShape s;
  s.hidden = c.hidden, s.top_k = c.top_k, s.experts = c.top_k, s.intermediate = 32;
  const SpecKey key = ops::combine_key(s, c.y, round_up_tokens(c.tokens), Target{});
  const KernelRef k = moejit::testing::gpu_runtime().get(key);
  const std::uint32_t cols = ops::combine_cols(key.n, bf16);
  REQUIRE(ops::combine_fits(c.tokens, D, cols));
  CombineParams p{};
  p.y = dy.as<const void>();
  p.y_row_stride = static_cast<std::int64_t>(D);
  p.y_split_stride = static_cast<std::int64_t>(R * D);
  p.splits = c.splits;
  p.route_row = dr.as<const int>();
  p.out = reinterpret_cast<std::uint16_t*>(static_cast<std::uintptr_t>(dout.get() + c.out_offset));
  p.out_row_stride = os;
  p.hidden = static_cast<int>(D);
  p.top_k = static_cast<int>(c.top_k);
  p.num_tokens = static_cast<int>(c.tokens);
  void* args[] = {&p};
  const auto& cu = driver::cuda();
  MOEJIT_CU_CHECK(cu.cuLaunchKernel(k.function, static_cast<unsigned>(ops::combine_ctas(c.tokens, D, cols)), 1, 1,
                                    k.launch.block_threads, 1, 1, k.launch.dynamic_smem_bytes, nullptr, args, nullptr));
  MOEJIT_CU_CHECK(cu.cuCtxSynchronize());
  std::vector<std::uint16_t> got(want.size()), tail(128);
  dout.download(got.data(), obytes, c.out_offset);
  dout.download(tail.data(), 256, c.out_offset + obytes);

  std::size_t bad = 0, first = got.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) bad += 1, first = std::min(first, i);
  INFO(c.name << " hidden=" << c.hidden << " top_k=" << c.top_k << " T=" << c.tokens << " splits=" << c.splits
               << " cols=" << cols << " seed=" << rng.seed());
  std::string where = "no mismatch";
  if (bad) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "first mismatch at token %lld column %lld: got 0x%04x want 0x%04x",
                  static_cast<long long>(first / os), static_cast<long long>(first % os), got[first], want[first]);
    where = buf;
  }
  INFO(bad << " mismatches; " << where);
  CHECK(bad == 0);
  CHECK(got[0] == 0x0000);  // token 0: every route dropped -> +0 (not -0, not untouched)
  bool tail_untouched = true;
  for (auto v : tail) tail_untouched = tail_untouched && v == 0xFFFF;
  CHECK(tail_untouched);
  std::printf("  combine %-34s T=%-5u cols=%u: %s\n", c.name, c.tokens, cols, bad ? "DIFFERENT" : "bit-exact");
}

}  // namespace

TEST_CASE("gpu: the combine equals its fp32 (j, z)-order definition bit for bit, every variant", "[gpu][combine]") {
  const CombineCase cases[] = {
      // bf16 Y, 8 columns per thread (16-byte loads and stores); T = 1 spans
      // two CTAs, T = 7 ends mid-CTA.
      {"gpt-oss bf16 Y", 2880, 4, 1, DType::bf16, 1, 2880, 0},
      {"gpt-oss bf16 Y", 2880, 4, 7, DType::bf16, 1, 2880, 0},
      {"gpt-oss bf16 Y", 2880, 4, 300, DType::bf16, 1, 2880, 0},
      // top_k 9 > IN_FLIGHT: two windows, the second of one row.
      {"top_k 9 bf16 Y", 2048, 9, 65, DType::bf16, 1, 2048, 0},
      // Output rows 4-byte but not 16-byte aligned: the 4-byte store path.
      {"bf16 Y, out stride hidden + 2", 2880, 4, 33, DType::bf16, 1, 2882, 4},
      // hidden % 8 == 4: bf16 Y with 4 columns per thread (8-byte loads).
      {"bf16 Y, hidden % 8 == 4", 2884, 4, 50, DType::bf16, 1, 2884, 0},
      // f32 Y: one partial, and 3 split-K partials with top_k 8 (24 rows per
      // token: three windows, partials of one slot across a window boundary).
      {"f32 Y", 2880, 4, 40, DType::f32, 1, 2880, 0},
      {"f32 Y, 3 partials", 2048, 8, 20, DType::f32, 3, 2048, 0},
      {"f32 Y, 3 partials, out stride + 2", 96, 3, 11, DType::f32, 3, 98, 4},
  };
  std::uint64_t seed = 4242;
  for (const auto& c : cases) run_case(c, seed++);
}
