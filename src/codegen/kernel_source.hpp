#pragma once
// The contract between a kernel family's host side and the JIT core.
// A family maps a SpecKey to a KernelSource; the core compiles it with NVRTC,
// caches the cubin under the content address of the KernelSource, and loads it.
#include <string>
#include <vector>

#include "moejit/key.hpp"
#include "moejit/runtime.hpp"

namespace moejit::codegen {

struct KernelSource {
  // The whole NVRTC translation unit: embedded kernels/*.cuh text plus the
  // instantiation lines. Never contains a path.
  std::string source;
  // For nvrtcAddNameExpression, e.g. "moejit::gemm_kernel<128, 64, 4, 1>".
  std::string name_expression;
  // NVRTC options beyond the target (-arch) and -Xptxas -v, which the compiler adds.
  std::vector<std::string> options;
  LaunchContract launch;
  // The heuristic's config, printed ("bm=64 bn=128 bk=64 warps=8 stages=3"), for logs.
  std::string config_text;
};

// Dispatches on key.op to the family's generator. Throws InvalidArgument when
// the key cannot be implemented (the message names the field and the reason).
KernelSource generate(const SpecKey& key);

// Text of one embedded kernels/ file by file name; throws Error if absent.
std::string_view kernel_file(std::string_view file_name);

}  // namespace moejit::codegen
