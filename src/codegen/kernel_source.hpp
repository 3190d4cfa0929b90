#pragma once
// The contract between a kernel family's host side and the JIT core.
// A family maps a SpecKey to a KernelSource; the core compiles it with NVRTC,
// caches the cubin under the content address of the KernelSource, and loads it.
#include <string>
#include <vector>

#include "moejit/key.hpp"
#include "moejit/kernel_source.hpp"
#include "moejit/runtime.hpp"
#include "moejit/tuning.hpp"

namespace moejit::codegen {

// Defined in moejit/kernel_source.hpp (public, so RuntimeOptions::generator can
// name it); the codegen name stays for the families' generators.
using KernelSource = ::moejit::KernelSource;

// Dispatches on key.op to the family's generator; the MXFP4 grouped GEMMs
// follow `tuning` (moejit/tuning.hpp). Throws InvalidArgument when the key
// cannot be implemented (the message names the field and the reason).
KernelSource generate(const SpecKey& key, const GemmTuning& tuning);
// The same under the process's MOEJIT_GEMM_TUNE (util::env::gemm_tuning()).
KernelSource generate(const SpecKey& key);

// Text of one embedded kernels/ file by file name; throws Error if absent.
std::string_view kernel_file(std::string_view file_name);

}  // namespace moejit::codegen
