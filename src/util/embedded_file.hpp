#pragma once
// A file compiled into the library at build time (kernel sources, model configs).
#include <span>
#include <string_view>

namespace moejit::util {
struct EmbeddedFile {
  std::string_view name;  // file name (kernels) or folder name (models)
  std::string_view text;  // exact bytes of the file
};
}  // namespace moejit::util

namespace moejit::codegen {
// Every kernels/*.cuh, by file name ("grouped_gemm_sm90.cuh").
std::span<const util::EmbeddedFile> embedded_kernel_sources();
}
namespace moejit::model {
// Every models/<name>/config.json, by <name> ("gpt-oss-120b").
std::span<const util::EmbeddedFile> embedded_model_configs();
}
