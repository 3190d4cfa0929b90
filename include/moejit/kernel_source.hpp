#pragma once
// What the JIT compiles: one NVRTC translation unit plus the kernel's launch
// contract. Public so that RuntimeOptions::generator (moejit/runtime.hpp) can be
// set by users and tests without including src/ headers; src/codegen uses the
// same type as codegen::KernelSource.
#include <cstdint>
#include <string>
#include <vector>

namespace moejit {

// Launch contract of a compiled kernel; travels with it from the heuristic.
struct LaunchContract {
  std::uint32_t block_threads = 0;
  std::uint32_t dynamic_smem_bytes = 0;  // raised with cuFuncSetAttribute when > 48 KB
  friend bool operator==(const LaunchContract&, const LaunchContract&) = default;
};

struct KernelSource {
  // The whole NVRTC translation unit: embedded kernels/*.cuh text plus the
  // instantiation lines. Never contains a path; includes no toolkit header.
  std::string source;
  // For nvrtcAddNameExpression, e.g. "moejit::k_order_kernel<256>",
  // "moejit::grouped_gemm_mxfp4_ws_kernel<moejit::Mxfp4WsKernel{.bm = 192, ...}>"
  // (a config struct named field by field; needs -std=c++20 in options) or the
  // plain name of an extern "C" kernel. Must name exactly one __global__ function.
  std::string name_expression;
  // NVRTC options beyond the target (--gpu-architecture) and ptxas -v, which the
  // compiler adds; "-std=c++17" is added unless an option starting with "-std=" is
  // present. Part of the content address.
  std::vector<std::string> options;
  LaunchContract launch;
  // The heuristic's config, printed ("bm=64 bn=128 bk=64 warps=8 stages=3"), for
  // logs only (not part of the content address).
  std::string config_text;
};

}  // namespace moejit
