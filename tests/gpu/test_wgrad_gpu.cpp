// MoE weight gradient on the GPU against a float64 reference: 0, 1 and 10000
// rows for one expert, uniform routing on real shapes, both gathers, zero-row
// experts written as exact zeros, NaN rows past the routed rows never read,
// bit-reproducible runs, bf16 output.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "driver/cuda_api.hpp"
#include "gpu/fp8_fixture.hpp"
#include "gpu/gpu_runtime.hpp"
#include "moejit/moe_wgrad.hpp"

using namespace moejit;
using namespace moejit::testing;

namespace {

struct WgradCase {
  std::uint32_t T, top_k, E, N, K;
  Routing how;
  WgradGather gather;
  DType out = DType::f32;
  std::uint32_t grad_pad = 0;  // grad_row_stride = N + grad_pad; the pad columns hold NaN
};

void run_case(const char* name, const WgradCase& c) {
  ref::TestRng rng(c.T * 13 + c.N + c.K);
  const auto ids = random_ids(c.T, c.top_k, c.E, c.how, rng);
  HostRouting hr(ids, c.T, c.top_k, c.E, 16);
  const std::uint64_t R = hr.routing.rows();
  // 64 rows of NaN after the last routed row of grad (and of X by row): a
  // stage that read past its expert's rows would turn them into NaN outputs.
  constexpr std::uint64_t kPoisonRows = 64;
  const std::uint64_t gs = c.N + c.grad_pad;
  auto grad = ref::random_bf16((R + kPoisonRows) * gs, rng, 1.0);
  for (std::size_t i = R * gs; i < grad.size(); ++i) grad[i] = 0x7FC0;
  for (std::uint64_t r = 0; r < R; ++r)
    for (std::uint64_t n = c.N; n < gs; ++n) grad[r * gs + n] = 0x7FC0;
  const std::uint64_t x_rows = c.gather == WgradGather::by_token ? c.T : R;
  auto x = ref::random_bf16((x_rows + kPoisonRows) * c.K, rng, 1.0);
  for (std::size_t i = x_rows * c.K; i < x.size(); ++i) x[i] = 0x7FC0;
  std::vector<std::int32_t> offs(c.E + 1);
  for (std::uint32_t e = 0; e <= c.E; ++e) offs[e] = static_cast<std::int32_t>(hr.routing.expert_offsets[e]);
  driver::DeviceBuffer dgrad(grad.size() * 2), dx(x.size() * 2), doffs(offs.size() * 4);
  dgrad.upload(grad.data(), grad.size() * 2);
  dx.upload(x.data(), x.size() * 2);
  doffs.upload(offs.data(), offs.size() * 4);
  const std::size_t elems = std::size_t(c.E) * c.N * c.K;
  const std::size_t esize = c.out == DType::bf16 ? 2 : 4;
  driver::DeviceBuffer ddw(elems * esize), ddb(std::size_t(c.E) * c.N * 4), ddw2(elems * esize);
  ddw.fill_bytes(0xFF);
  ddw2.fill_bytes(0xFF);
  ddb.fill_bytes(0xFF);
  MoeWgrad op(gpu_runtime(), MoeWgradShape{c.E, c.top_k, c.N, c.K, c.out});
  MoeWgradArgs a;
  a.num_tokens = c.T;
  a.grad = dgrad.get();
  a.grad_row_stride = static_cast<std::int64_t>(gs);
  a.x = dx.get();
  a.gather = c.gather;
  a.expert_offsets = doffs.get();
  a.sorted_route = hr.d_sorted.get();
  a.dw = ddw.get();
  a.db = ddb.get();
  op.run(a, nullptr);
  a.dw = ddw2.get();
  op.run(a, nullptr);
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
  std::vector<std::uint8_t> raw(elems * esize), raw2(elems * esize);
  ddw.download(raw.data(), raw.size());
  ddw2.download(raw2.data(), raw2.size());
  std::vector<float> db(std::size_t(c.E) * c.N);
  ddb.download(db.data(), db.size() * 4);
  auto got = [&](std::size_t i) -> double {
    if (c.out == DType::bf16) {
      std::uint16_t v;
      std::memcpy(&v, raw.data() + i * 2, 2);
      return bf16_to_float(v);
    }
    float v;
    std::memcpy(&v, raw.data() + i * 4, 4);
    return v;
  };
  // Reference per expert, in parallel over experts.
  std::vector<double> ref_dw(elems, 0.0), ref_db(std::size_t(c.E) * c.N, 0.0);
  parallel_fill(c.E, 0, [&](std::size_t eb, std::size_t ee, std::uint64_t) {
    std::vector<double> xr(c.K);
    for (std::size_t e = eb; e < ee; ++e) {
      for (std::uint64_t r = hr.routing.expert_offsets[e]; r < hr.routing.expert_offsets[e + 1]; ++r) {
        const std::uint64_t src = c.gather == WgradGather::by_token ? hr.routing.row_token[r] : r;
        for (std::uint32_t k = 0; k < c.K; ++k) xr[k] = bf16_to_float(x[src * c.K + k]);
        for (std::uint32_t n = 0; n < c.N; ++n) {
          const double gv = bf16_to_float(grad[r * gs + n]);
          ref_db[e * c.N + n] += gv;
          double* o = &ref_dw[(e * c.N + n) * c.K];
          for (std::uint32_t k = 0; k < c.K; ++k) o[k] += gv * xr[k];
        }
      }
    }
  });
  long double num = 0, den = 0;
  std::size_t zero_violations = 0, nonfinite = 0;
  for (std::uint32_t e = 0; e < c.E; ++e) {
    const bool empty = hr.routing.expert_rows(e) == 0;
    for (std::size_t i = std::size_t(e) * c.N * c.K; i < std::size_t(e + 1) * c.N * c.K; ++i) {
      const double g = got(i);
      if (!std::isfinite(g)) ++nonfinite;
      if (empty && (g != 0.0 || std::signbit(g))) ++zero_violations;
      num += (long double)(g - ref_dw[i]) * (g - ref_dw[i]);
      den += (long double)ref_dw[i] * ref_dw[i];
    }
  }
  const double err = den == 0 ? (num == 0 ? 0.0 : INFINITY) : double(std::sqrt(num / den));
  const double db_err = ref::relative_frobenius_error(ref_db.data(), db.data(), db.size());
  std::printf("  wgrad %-26s T=%-5u rows=%-6llu E=%-3u N=%-5u K=%-5u out=%s rel.err dW=%.2e db=%.2e\n", name, c.T,
              static_cast<unsigned long long>(R), c.E, c.N, c.K, std::string(to_string(c.out)).c_str(), err, db_err);
  INFO(name << " T=" << c.T << " rows=" << R);
  CHECK(nonfinite == 0);
  CHECK(zero_violations == 0);
  CHECK(err < 1e-2);
  CHECK(db_err < 1e-3);
  CHECK(std::memcmp(raw.data(), raw2.data(), raw.size()) == 0);  // deterministic
}

}  // namespace

TEST_CASE("gpu: wgrad with 0, 1 and 10000 rows for one expert", "[gpu][wgrad]") {
  run_case("one expert, 0 rows", {0, 1, 4, 256, 512, Routing::one_expert, WgradGather::by_token});
  run_case("one expert, 1 row", {1, 1, 4, 256, 512, Routing::one_expert, WgradGather::by_token});
  run_case("one expert, 10000 rows", {10000, 1, 4, 256, 512, Routing::one_expert, WgradGather::by_token});
  run_case("one expert, 10000 rows bf16", {10000, 1, 4, 256, 512, Routing::one_expert, WgradGather::by_row, DType::bf16});
}

TEST_CASE("gpu: wgrad on real shapes, both gathers, zero-row experts, odd tails", "[gpu][wgrad]") {
  // gpt-oss-120b gate_up weights (N = 2I = 5760, K = D = 2880) and down (N = D, K = I, X = H by
  // row); 8 of the 128 experts, so the float64 reference of dW fits in host memory.
  run_case("gpt-oss gate_up (E=8)", {64, 4, 8, 5760, 2880, Routing::uniform, WgradGather::by_token});
  run_case("gpt-oss down (E=8)", {64, 4, 8, 2880, 2880, Routing::uniform, WgradGather::by_row});
  // Qwen3 down (K = I = 768), few tokens: most experts have no rows.
  run_case("qwen3 down, zero-row experts", {3, 8, 128, 2048, 768, Routing::uniform, WgradGather::by_row});
  run_case("tails N=24 K=40", {300, 2, 8, 24, 40, Routing::with_drops, WgradGather::by_token});
  run_case("E=256 expert 255 only", {33, 8, 256, 64, 7168, Routing::last_expert_only, WgradGather::by_token});
}

TEST_CASE("gpu: wgrad warp-specialized kernel (64 routed rows per expert and more)", "[gpu][wgrad]") {
  // gpt-oss-120b down weights (N = K = 2880: 192 output channels per item, a K
  // tail of 64 features), 4 experts, about 500 rows each: every expert ends in a
  // partial stage, whose grad rows come by cp.async, the others by TMA.
  run_case("gpt-oss down, ws (E=4)", {1000, 2, 4, 2880, 2880, Routing::uniform, WgradGather::by_row});
  // 256 channels per item, gathered by token, bf16 dW, grad rows strided past N (NaN between).
  run_case("N=512 K=384 ws bf16 strided", {3000, 4, 16, 512, 384, Routing::uniform, WgradGather::by_token, DType::bf16, 24});
  // 192 channels per item with bf16 dW (N = 576 = 3 x 192, K = 136: a feature tail of 8).
  run_case("N=576 K=136 ws bf16", {2000, 2, 4, 576, 136, Routing::with_drops, WgradGather::by_row, DType::bf16});
  // One feature block (K = 128): no cluster; the cases above run in clusters of two CTAs,
  // with an odd number of feature blocks (K = 2880: 23, K = 384: 3) and an even one.
  run_case("N=512 K=128 ws no cluster", {3000, 4, 16, 512, 128, Routing::uniform, WgradGather::by_token});
  // Channel and feature tails (N = 264: 192 + 72, K = 200: 128 + 72) with dropped routes.
  run_case("tails N=264 K=200 ws", {4096, 2, 8, 264, 200, Routing::with_drops, WgradGather::by_token});
}
