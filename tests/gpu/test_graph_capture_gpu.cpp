// MoeLayer::run captured in a CUDA graph (moejit/device.hpp Graph) and
// replayed gives the bytes of an eager run, for every weight format: serving
// engines capture decode steps, so run() must enqueue nothing that a capture
// rejects (allocation, synchronization, compilation) once its kernels exist.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "gpu/fp8_fixture.hpp"
#include "gpu/gpu_runtime.hpp"
#include "gpu/layer_fixture.hpp"
#include "moejit/device.hpp"
#include "moejit/error.hpp"

using namespace moejit;
using namespace moejit::testing;

namespace {

// Eager run, then the same call captured and replayed twice into a poisoned
// output: every replay must reproduce the eager bytes (and no NaN survives).
void check_graph_replay(const MoeLayer& layer, const MoeWeights& w, const MoeLayerShape& s, std::uint32_t T,
                        const char* what) {
  ref::TestRng rng(T + 31);
  const auto in = LayerInputs::make(s, T, Routing::with_drops, rng);
  LayerRun run(layer, in);
  device::Stream stream;
  layer.run(w, run.args, stream.get());  // compiles or loads the kernels outside the capture
  device::synchronize(stream.get());
  const auto eager = run.download_out(s);
  run.poison();
  device::Graph graph = device::Graph::capture(stream.get(), [&] { layer.run(w, run.args, stream.get()); });
  for (int replay = 0; replay < 2; ++replay) {
    run.out.fill_bytes(0xFF);
    graph.launch(stream.get());
    device::synchronize(stream.get());
    const auto replayed = run.download_out(s);
    INFO(what << " T=" << T << " replay " << replay);
    CHECK(ref::count_nonfinite(replayed.data(), replayed.size()) == 0);
    CHECK(std::memcmp(eager.data(), replayed.data(), eager.size() * 2) == 0);
  }
  std::printf("  graph %-24s T=%-5u replayed bytes %s\n", what, T,
              std::memcmp(eager.data(), run.download_out(s).data(), eager.size() * 2) == 0 ? "identical" : "DIFFERENT");
}

}  // namespace

TEST_CASE("gpu: MoeLayer::run replayed from a CUDA graph equals the eager run, every format", "[gpu][graph]") {
  {
    const MoeLayerShape s = gpt_oss_120b_shape();
    const auto w = LayerWeights::make(s, QuantMode::w4a16_mxfp4, ref::process_seed() + 4000);
    const MoeLayer layer(gpu_runtime(), s, QuantMode::w4a16_mxfp4);
    for (std::uint32_t T : {1u, 8u, 64u, 512u}) check_graph_replay(layer, w->device(), s, T, "gpt-oss w4a16_mxfp4");
  }
  {
    const MoeLayerShape s = qwen3_30b_shape();
    const auto w = LayerWeights::make(s, QuantMode::bf16, ref::process_seed() + 4001);
    const MoeLayer layer(gpu_runtime(), s, QuantMode::bf16);
    // T = 4096: 32768 routes, the chunked routing's three launches.
    for (std::uint32_t T : {1u, 64u, 512u, 4096u}) check_graph_replay(layer, w->device(), s, T, "qwen3 bf16");
  }
  const std::tuple<QuantMode, WeightScale> fp8[] = {{QuantMode::fp8_per_token, WeightScale::per_channel},
                                                   {QuantMode::mxfp8, WeightScale::e8m0_block32}};
  for (const auto& [q, ws] : fp8) {
    const MoeLayerShape s = qwen3_30b_shape();
    const auto w = Fp8LayerWeights::make(s, q, ws, ref::process_seed() + 4002);
    const MoeLayer layer(gpu_runtime(), s, q, ws);
    for (std::uint32_t T : {1u, 64u, 512u, 4096u})
      check_graph_replay(layer, w->device(), s, T, q == QuantMode::mxfp8 ? "qwen3 mxfp8" : "qwen3 fp8_per_token");
  }
}

TEST_CASE("gpu: Graph::capture rejects the legacy default stream and ends a capture whose body throws", "[gpu][graph]") {
  CHECK_THROWS_AS(device::Graph::capture(nullptr, [] {}), InvalidArgument);
  device::Stream stream;
  CHECK_THROWS_WITH(device::Graph::capture(stream.get(), [] { throw InvalidArgument("body failed"); }),
                    Catch::Contains("body failed"));
  // The stream left capture mode: an ordinary capture on it works.
  device::Graph empty = device::Graph::capture(stream.get(), [] {});
  CHECK(static_cast<bool>(empty));
  empty.launch(stream.get());
  device::synchronize(stream.get());
  device::Graph moved = std::move(empty);
  CHECK_FALSE(static_cast<bool>(empty));
  CHECK_THROWS_AS(empty.launch(stream.get()), InvalidArgument);
}
