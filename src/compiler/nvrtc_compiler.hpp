#pragma once
// NVRTC compilation of one KernelSource straight to a cubin for a target.
// Needs libnvrtc (dlopen on first use); needs no GPU and no CUDA headers on disk.
#include <string>
#include <string_view>
#include <vector>

#include "moejit/kernel_source.hpp"
#include "moejit/runtime.hpp"
#include "moejit/types.hpp"

namespace moejit::compiler {

struct CompileOutput {
  std::string cubin;         // ELF bytes for cuModuleLoadData
  std::string lowered_name;  // mangled name of source.name_expression
  std::string log;           // full NVRTC log (includes ptxas -v output)
  ResourceReport resources;  // parsed from log
  double compile_ms = 0.0;   // wall time of create + compile + extraction
};

// The exact option list passed to nvrtcCompileProgram: --gpu-architecture=<target>,
// -std=c++17 (unless the source sets -std=), --ptxas-options=-v, then source.options.
// Part of the content address.
std::vector<std::string> nvrtc_options(const KernelSource& source, const Target& target);

// "13.0" for the NVRTC that would compile. Throws DriverError (libnvrtc missing).
std::string nvrtc_version_text();

// Compiles. Throws CompileError(key_text, full log) when NVRTC rejects the source or
// the name expression; DriverError when libnvrtc is missing or fails otherwise;
// InvalidArgument when source.name_expression is empty. The program handle is
// released on every path.
CompileOutput compile(const KernelSource& source, const Target& target, std::string_view key_text);

}  // namespace moejit::compiler
