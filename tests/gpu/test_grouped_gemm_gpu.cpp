// The grouped GEMM over rows sorted by expert (moejit/grouped_gemm.hpp) in every
// format against a float64 reference over the dequantized operands: group sizes
// with empty groups, every row on the last group, rows past the last offset,
// M = 0 and M = 1 through prefill sizes (decode, middle-range, split-K and
// warp-specialized kernels), with and without bias; outputs poisoned with NaN;
// padding invariance by memcmp against the bucket-padded batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "driver/cuda_api.hpp"
#include "gpu/fp8_fixture.hpp"
#include "gpu/gpu_runtime.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/grouped_gemm.hpp"

using namespace moejit;
using namespace moejit::testing;

namespace {

enum class Groups { random, with_empty, last_only, short_of_m };

bool is_fp8_mode(QuantMode q) { return q == QuantMode::mxfp8 || q == QuantMode::fp8_per_token; }

// The weights of one (format, shape), in host memory and on the device, and
// the dequantized rows the reference reads.
struct Weights {
  QuantMode q;
  WeightScale ws;
  GroupedGemmShape shape;
  std::vector<std::uint16_t> bf16;  // bf16: [E, N, K]
  ref::Mxfp4Weights mx4;                // w4a16_mxfp4
  Fp8Weights f8;                    // mxfp8 / fp8_per_token
  std::vector<std::uint16_t> b16;
  std::vector<float> b32;
  driver::DeviceBuffer dw, dscales, dbias;

  ref::WeightsView view() const {
    if (q == QuantMode::bf16) return ref::WeightsView::of_bf16(bf16.data(), shape.experts, shape.n, shape.k);
    if (q == QuantMode::w4a16_mxfp4) return ref::WeightsView::of_mxfp4(mx4);
    return f8.view();
  }
  double bias(std::uint32_t e, std::uint32_t n) const {
    const std::size_t i = std::size_t(e) * shape.n + n;
    return shape.bias == BiasKind::bf16 ? bf16_to_float(b16[i]) : shape.bias == BiasKind::f32 ? b32[i] : 0.0;
  }
};

Weights make_weights(QuantMode q, WeightScale ws, const GroupedGemmShape& s, std::uint64_t seed) {
  Weights w;
  w.q = q;
  w.ws = ws;
  w.shape = s;
  ref::TestRng rng(seed);
  const std::size_t elems = std::size_t(s.experts) * s.n * s.k;
  const double sd = 1.0 / std::sqrt(static_cast<double>(s.k));
  if (q == QuantMode::bf16) {
    w.bf16 = ref::random_bf16(elems, rng, sd);
    w.dw = driver::DeviceBuffer(elems * 2);
    w.dw.upload(w.bf16.data(), elems * 2);
  } else if (q == QuantMode::w4a16_mxfp4) {
    w.mx4 = ref::random_mxfp4(s.experts, s.n, s.k, rng, sd);
    w.dw = driver::DeviceBuffer(w.mx4.data.size());
    w.dw.upload(w.mx4.data.data(), w.mx4.data.size());
    w.dscales = driver::DeviceBuffer(w.mx4.scales.size());
    w.dscales.upload(w.mx4.scales.data(), w.mx4.scales.size());
  } else {
    w.f8 = random_fp8_weights(q, ws, s.experts, s.n, s.k, seed);
    w.f8.upload();
  }
  if (s.bias == BiasKind::bf16) {
    w.b16 = ref::random_bf16(std::size_t(s.experts) * s.n, rng, 0.5);
    w.dbias = driver::DeviceBuffer(w.b16.size() * 2);
    w.dbias.upload(w.b16.data(), w.b16.size() * 2);
  } else if (s.bias == BiasKind::f32) {
    w.b32 = ref::random_f32(std::size_t(s.experts) * s.n, rng, 0.5);
    w.dbias = driver::DeviceBuffer(w.b32.size() * 4);
    w.dbias.upload(w.b32.data(), w.b32.size() * 4);
  }
  return w;
}

std::vector<std::int32_t> make_offsets(std::uint32_t M, std::uint32_t E, Groups g, ref::TestRng& rng) {
  std::vector<std::int32_t> o(E + 1, 0);
  const std::uint32_t rows = g == Groups::short_of_m ? M - M / 4 : M;  // short_of_m: the last M/4 rows in no group
  if (g == Groups::last_only) {
    for (std::uint32_t e = 0; e < E; ++e) o[e] = 0;
    o[E] = static_cast<std::int32_t>(rows);
    return o;
  }
  // Random cut points; with_empty forces every third group empty.
  std::vector<std::uint32_t> cuts;
  for (std::uint32_t e = 1; e < E; ++e) cuts.push_back(static_cast<std::uint32_t>(rng.uniform(0.0, 1.0) * (rows + 1)) % (rows + 1));
  std::sort(cuts.begin(), cuts.end());
  for (std::uint32_t e = 1; e < E; ++e) o[e] = static_cast<std::int32_t>(cuts[e - 1]);
  o[E] = static_cast<std::int32_t>(rows);
  if (g == Groups::with_empty)  // groups 0, 3, 6, ... empty
    for (std::uint32_t e = 1; e < E; e += 3) o[e] = o[e - 1];
  return o;
}

struct Run {
  std::vector<std::uint16_t> y;  // [M, N] as downloaded (stride N)
};

// Runs the op on M rows of A with the given offsets; Y poisoned with NaN first.
Run run_op(const GroupedGemm& op, const Weights& w, std::uint32_t M, const driver::DeviceBuffer& da,
           const driver::DeviceBuffer& dascales, const std::vector<std::int32_t>& offs) {
  const GroupedGemmShape& s = w.shape;
  driver::DeviceBuffer doffs(offs.size() * 4), dy(std::max<std::size_t>(16, std::size_t(M) * s.n * 2));
  doffs.upload(offs.data(), offs.size() * 4);
  dy.fill_bytes(0xFF);  // bf16 NaN
  const std::size_t wsb = op.workspace_size(M);
  driver::DeviceBuffer dws(std::max<std::size_t>(256, wsb));
  GroupedGemmArgs a;
  a.num_rows = M;
  a.a = da.get();
  a.a_scales = is_fp8_mode(w.q) ? dascales.get() : 0;
  a.expert_offsets = doffs.get();
  a.w = w.q == QuantMode::mxfp8 || w.q == QuantMode::fp8_per_token ? w.f8.d_data.get() : w.dw.get();
  a.w_scales = w.q == QuantMode::mxfp8 || w.q == QuantMode::fp8_per_token ? w.f8.d_scales.get() : w.dscales.get();
  a.bias = s.bias != BiasKind::none ? w.dbias.get() : 0;
  a.out = dy.get();
  a.workspace = dws.get();
  a.workspace_bytes = wsb;
  op.run(a, nullptr);
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
  Run r;
  r.y.resize(std::size_t(M) * s.n);
  if (!r.y.empty()) dy.download(r.y.data(), r.y.size() * 2);
  return r;
}

struct Case {
  std::string name;
  std::uint32_t M;
  Groups groups;
};

void check_format(QuantMode q, WeightScale ws, const GroupedGemmShape& s, const std::vector<Case>& cases) {
  const Weights w = make_weights(q, ws, s, ref::process_seed() ^ (std::uint64_t(q) * 1315423911u + s.n * 31 + s.k));
  const GroupedGemm op(gpu_runtime(), s, q, ws);
  const ref::WeightsView wv = w.view();
  std::vector<std::vector<float>> wdeq(s.experts);
  for (const Case& c : cases) {
    INFO(to_string(q) << " " << to_string(ws) << " N=" << s.n << " K=" << s.k << " E=" << s.experts << " "
                      << c.name << " M=" << c.M);
    ref::TestRng rng(c.M * 7 + s.n + s.k);
    const std::uint32_t M = c.M;
    // The bucket-padded batch: the same rows, then rows up to round_up_tokens(M)
    // appended to the last group (padding invariance).
    const std::uint32_t Mp = M == 0 ? 0 : round_up_tokens(M);
    const auto a16 = ref::random_bf16(std::max<std::size_t>(1, std::size_t(Mp) * s.k), rng, 1.0);
    driver::DeviceBuffer da, dsc;
    Fp8Acts acts;
    const bool fp8 = is_fp8_mode(q);
    if (fp8) {
      acts = Fp8Acts::quantize(q, a16.data(), std::max(Mp, 1u), s.k);
      acts.upload();
    } else {
      da = driver::DeviceBuffer(a16.size() * 2);
      da.upload(a16.data(), a16.size() * 2);
    }
    const driver::DeviceBuffer& A = fp8 ? acts.d_codes : da;
    const driver::DeviceBuffer& AS = fp8 ? acts.d_scales : dsc;
    const auto offs = M == 0 ? std::vector<std::int32_t>(s.experts + 1, 0) : make_offsets(M, s.experts, c.groups, rng);
    const Run r = run_op(op, w, M, A, AS, offs);
    if (M == 0) continue;
    // Reference over sampled rows of the groups (first, last, spread).
    const std::uint32_t lo = static_cast<std::uint32_t>(offs[0]), hi = static_cast<std::uint32_t>(offs[s.experts]);
    std::vector<std::uint32_t> rows;
    if (hi > lo)
      for (std::uint32_t t : sample_tokens(hi - lo, 24)) rows.push_back(lo + t);
    std::vector<double> ref_y, got_y;
    std::size_t nonfinite = 0;
    for (std::uint32_t row : rows) {
      std::uint32_t e = 0;
      while (!(row >= std::uint32_t(offs[e]) && row < std::uint32_t(offs[e + 1]))) ++e;
      if (wdeq[e].empty()) wv.dequantize_expert(e, wdeq[e]);
      std::vector<double> arow(s.k);
      if (fp8) {
        arow = acts.dequantized_row(row);
      } else {
        for (std::uint32_t k = 0; k < s.k; ++k) arow[k] = bf16_to_float(a16[std::size_t(row) * s.k + k]);
      }
      for (std::uint32_t n = 0; n < s.n; ++n) {
        // dequantize_expert gives fp8_per_token's bare e4m3 values: its
        // per-expert or per-channel scale is row_scale (1 for the other formats).
        const float* wr = wdeq[e].data() + std::size_t(n) * s.k;
        double dot = 0;
        for (std::uint32_t k = 0; k < s.k; ++k) dot += double(wr[k]) * arow[k];
        ref_y.push_back(dot * wv.row_scale(e, n) + w.bias(e, n));
        const float g = bf16_to_float(r.y[std::size_t(row) * s.n + n]);
        nonfinite += !std::isfinite(g);
        got_y.push_back(g);
      }
    }
    const double err = ref::relative_frobenius_error(ref_y, got_y);
    std::printf("  grouped gemm %-13s %-12s N=%-5u K=%-5u E=%-3u %-12s M=%-5u rows=%-3zu rel.err=%.2e nonfinite=%zu\n",
                std::string(to_string(q)).c_str(), std::string(to_string(ws)).c_str(), s.n, s.k, s.experts,
                c.name.c_str(), M, rows.size(), err, nonfinite);
    CHECK(nonfinite == 0);
    CHECK(err < 1e-2);
    // Every row of a group was written (the NaN poison is gone).
    std::size_t poisoned = 0;
    for (std::uint32_t row = lo; row < hi; ++row)
      poisoned += ref::count_nonfinite(r.y.data() + std::size_t(row) * s.n, s.n);
    CHECK(poisoned == 0);
    // Padding invariance: the same rows inside a batch of round_up_tokens(M)
    // rows (the extra rows appended to the last group) give the same bits.
    if (Mp != M && c.groups != Groups::short_of_m) {
      std::vector<std::int32_t> padded = offs;
      padded[s.experts] = static_cast<std::int32_t>(Mp);
      const Run rp = run_op(op, w, Mp, A, AS, padded);
      CHECK(std::memcmp(rp.y.data() + std::size_t(lo) * s.n, r.y.data() + std::size_t(lo) * s.n,
                        std::size_t(hi - lo) * s.n * 2) == 0);
    }
  }
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"empty", 0, Groups::random},          {"one row", 1, Groups::random},
      {"decode", 7, Groups::with_empty},     {"middle", 300, Groups::random},
      {"empty groups", 300, Groups::with_empty}, {"last group", 300, Groups::last_only},
      {"short of M", 1000, Groups::short_of_m},  {"prefill", 4100, Groups::random},
  };
  return c;
}

}  // namespace

TEST_CASE("gpu: grouped GEMM over expert-sorted rows, bf16 and w4a16_mxfp4", "[gpu][grouped_gemm]") {
  GroupedGemmShape gptoss{2880, 2880, 8, BiasKind::bf16};  // gpt-oss-120b's down projection, 8 experts
  GroupedGemmShape odd{768, 256, 16, BiasKind::f32};
  GroupedGemmShape nobias{2048, 768, 32, BiasKind::none};  // Qwen3-30B-A3B's down, 32 experts
  for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4})
    for (const GroupedGemmShape& s : {gptoss, odd, nobias}) check_format(q, default_weight_scale(q), s, cases());
}

TEST_CASE("gpu: grouped GEMM over expert-sorted rows, mxfp8 and fp8_per_token", "[gpu][grouped_gemm][fp8]") {
  GroupedGemmShape gptoss{2880, 2880, 8, BiasKind::bf16};
  GroupedGemmShape odd{768, 256, 16, BiasKind::f32};
  GroupedGemmShape nobias{2048, 768, 32, BiasKind::none};
  for (const GroupedGemmShape& s : {gptoss, odd, nobias}) {
    check_format(QuantMode::mxfp8, WeightScale::e8m0_block32, s, cases());
    check_format(QuantMode::fp8_per_token, WeightScale::per_expert, s, cases());
  }
  check_format(QuantMode::fp8_per_token, WeightScale::per_channel, odd, cases());
}
