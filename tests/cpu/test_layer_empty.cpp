// num_tokens = 0: frameworks pass empty tensors with null data. MoeLayer::run
// and each step accept null x, topk_ids, topk_weights, out and workspace then,
// and launch (and look up) nothing; with one token the same nulls are refused.
#include <catch2/catch.hpp>

#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/runtime.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using testing::layer_shape;

TEST_CASE("layer: num_tokens = 0 with null tensors launches nothing; one token with them is refused", "[layer]") {
  RuntimeOptions o;
  o.use_disk_cache = false;
  Runtime rt(o);
  for (QuantMode q : {QuantMode::w4a16_mxfp4, QuantMode::bf16, QuantMode::fp8_per_token}) {
    INFO(to_string(q));
    MoeLayer layer(rt, layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai), q);
    MoeWeights w;  // weights are real tensors of the layer: given (not dereferenced here)
    w.w1 = w.w2 = 0x10000;
    w.w1_scales = w.w2_scales = 0x20000;
    w.b1 = w.b2 = 0x30000;
    MoeLayerArgs empty;  // num_tokens 0, every pointer null, workspace_bytes 0
    CHECK_NOTHROW(layer.run(w, empty, nullptr));
    CHECK_NOTHROW(layer.route(empty, nullptr));
    CHECK_NOTHROW(layer.gate_up(w, empty, nullptr));
    CHECK_NOTHROW(layer.down(w, empty, nullptr));
    CHECK_NOTHROW(layer.combine(empty, nullptr));
    const RuntimeStats s = rt.stats();
    CHECK(s.compiles + s.memory_hits + s.disk_hits + s.module_loads == 0);

    MoeLayerArgs one = empty;
    one.num_tokens = 1;
    CHECK_THROWS_WITH(layer.run(w, one, nullptr), Catch::Contains("MoeLayerArgs.x=0: null"));
  }
}
