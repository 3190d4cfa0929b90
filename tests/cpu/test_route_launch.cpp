// The routing kernel's launch contract (src/ops/launch_contracts.hpp): which
// buckets run the staged variant, the shared memory each variant asks for, and
// that the codegen's name, block size and shared memory agree with it; and the
// prewarm grouping, which must split keys whose sources agree but whose launch
// contracts differ (they are two cache entries).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "codegen/kernel_source.hpp"
#include "ops/launch_contracts.hpp"
#include "ops/moe_keys.hpp"
#include "prewarm/kernel_groups.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using testing::layer_shape;

TEST_CASE("route launch: staging only for 1024-thread buckets whose routes and experts fit", "[route][codegen]") {
  CHECK(ops::route_threads(32) == 256);
  CHECK(ops::route_threads(1024) == 256);
  CHECK(ops::route_threads(1025) == 1024);
  CHECK_FALSE(ops::route_staged(128, 1024));   // 256 threads: scatter straight to global memory
  CHECK(ops::route_staged(128, 1025));
  CHECK(ops::route_staged(128, ops::kRouteStagedRoutes));
  CHECK_FALSE(ops::route_staged(128, ops::kRouteStagedRoutes + 1));
  // 16 B per expert + 8 B per staged route within 220 KB: E <= 1792.
  CHECK(ops::route_staged(1792, 4096));
  CHECK_FALSE(ops::route_staged(1793, 4096));
  CHECK_FALSE(ops::route_staged(4096, 4096));
  CHECK(ops::route_smem_bytes(128, 1024) == 16u * 128);
  CHECK(ops::route_smem_bytes(128, 4096) == 16u * 128 + 8u * ops::kRouteStagedRoutes);
  CHECK(ops::route_smem_bytes(1793, 4096) == 16u * 1793);
  CHECK(ops::route_smem_bytes(1792, 4096) <= 227u * 1024);
}

TEST_CASE("route launch: the codegen's name, block size and shared memory follow the contract", "[route][codegen]") {
  for (std::uint32_t E : {8u, 128u, 1792u, 1793u, 4096u})
    for (std::uint32_t bucket : {1u, 256u, 257u, 4096u, 6144u, 8192u}) {
      const MoeLayerShape s = layer_shape(2880, 2880, E, 4, Activation::swiglu_oai);
      const SpecKey key = ops::route_key(s, bucket, Target{});
      const auto ks = codegen::generate(key);
      const std::uint64_t routes = std::uint64_t(bucket) * 4;
      const bool staged = ops::route_staged(E, routes);
      INFO(key.to_text() << " -> " << ks.name_expression << " " << ks.config_text);
      CHECK(ks.launch.block_threads == ops::route_threads(routes));
      CHECK(ks.launch.dynamic_smem_bytes == ops::route_smem_bytes(E, routes));
      CHECK(ks.name_expression == "moejit::moe_route_kernel<moejit::RouteKernel{.threads = " +
                                      std::to_string(ops::route_threads(routes)) + ", .staged = " +
                                      (staged ? "true" : "false") + "}>");
      // The shared memory never depends on the bucket beyond the variant: one
      // cache entry per (variant, E), not one per bucket.
      if (staged) CHECK(ks.launch.dynamic_smem_bytes == 16u * E + 8u * ops::kRouteStagedRoutes);
    }
}

TEST_CASE("prewarm grouping: same source, different launch contract -> two groups", "[prewarm][route]") {
  // The routing kernel's source and name do not depend on E; its shared memory does.
  const SpecKey a = ops::route_key(layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai), 64, Target{});
  const SpecKey b = ops::route_key(layer_shape(2880, 2880, 64, 4, Activation::swiglu_oai), 64, Target{});
  const auto sa = codegen::generate(a), sb = codegen::generate(b);
  REQUIRE(sa.source == sb.source);
  REQUIRE(sa.name_expression == sb.name_expression);
  REQUIRE(sa.launch.dynamic_smem_bytes != sb.launch.dynamic_smem_bytes);
  const auto g = prewarm_detail::group_by_kernel({a, b}, GemmTuning{});
  CHECK(g.groups.size() == 2);
  // Same key twice: one group.
  CHECK(prewarm_detail::group_by_kernel({a, a}, GemmTuning{}).groups.size() == 1);
}
