// MoE layer shapes for the CPU tests: D (hidden), I (intermediate), E, top_k,
// activation and bias kind; SwiGLU gets gpt-oss's alpha 1.702 and limit 7.0
// (model card).
#pragma once

#include <cstdint>

#include "moejit/moe_layer.hpp"

namespace moejit::testing {

inline MoeLayerShape layer_shape(std::uint32_t d, std::uint32_t i, std::uint32_t e, std::uint32_t k, Activation act,
                                 BiasKind bias = BiasKind::none) {
  MoeLayerShape s;
  s.hidden = d, s.intermediate = i, s.experts = e, s.top_k = k, s.act = act;
  s.gate_up_bias = s.down_bias = bias;
  if (act == Activation::swiglu_oai) s.act_alpha = 1.702f, s.act_limit = 7.f;
  return s;
}

}  // namespace moejit::testing
