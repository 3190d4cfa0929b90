#pragma once
// The shape of one MoE layer as the kernels see it on one GPU (after tensor- and
// expert-parallel splits). Shared by model plans, prewarm and the ops.
#include <cstdint>
#include <string>

#include "moejit/key.hpp"
#include "moejit/types.hpp"

namespace moejit {

struct MoeLayerShape {
  std::uint32_t hidden = 0;        // D: K of gate_up, N of down
  std::uint32_t intermediate = 0;  // I per expert on this GPU (after TP): gate_up N = 2 I, down K = I
  std::uint32_t experts = 0;       // E local to this GPU (after EP)
  std::uint32_t top_k = 0;         // routes per token
  Activation act = Activation::silu_gated;
  float act_alpha = 0.f, act_limit = 0.f;  // swiglu_oai parameters (gpt-oss: 1.702, 7.0)
  BiasKind gate_up_bias = BiasKind::none;
  BiasKind down_bias = BiasKind::none;
  std::string to_string() const;  // "D=2880 I=2880 E=128 top_k=4 act=swiglu_oai ..."
  friend bool operator==(const MoeLayerShape&, const MoeLayerShape&) = default;
};

}  // namespace moejit
