// MoeLayerShape::to_string(): one line for logs and reports.
#include "moejit/moe_shape.hpp"

#include "key/float_text.hpp"

namespace moejit {

std::string MoeLayerShape::to_string() const {
  std::string s = "D=" + std::to_string(hidden) + " I=" + std::to_string(intermediate) +
                  " E=" + std::to_string(experts) + " top_k=" + std::to_string(top_k) +
                  " act=" + std::string(moejit::to_string(act));
  if (act == Activation::swiglu_oai || act_alpha != 0.f || act_limit != 0.f)
    s += " alpha=" + detail::float_text(act_alpha) + " limit=" + detail::float_text(act_limit);
  s += " gate_up_bias=" + std::string(moejit::to_string(gate_up_bias)) +
       " down_bias=" + std::string(moejit::to_string(down_bias));
  return s;
}

}  // namespace moejit
