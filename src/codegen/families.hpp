#pragma once
// One generator per kernel family (key -> NVRTC translation unit). generate()
// in generate.cpp dispatches on SpecKey::op.
#include "codegen/kernel_source.hpp"

namespace moejit::codegen {

KernelSource generate_grouped_gemm(const SpecKey& key);  // op = gate_up, down (src/ops)
KernelSource generate_route(const SpecKey& key);         // op = route (src/ops)
KernelSource generate_combine(const SpecKey& key);       // op = combine (src/ops)
KernelSource generate_quantize(const SpecKey& key);      // op = quantize (src/quant)

}  // namespace moejit::codegen
