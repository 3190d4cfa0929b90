// codegen::kernel_file: text of one embedded kernels/*.cuh by file name.
#include <string>

#include "codegen/kernel_source.hpp"
#include "moejit/error.hpp"
#include "util/embedded_file.hpp"

namespace moejit::codegen {

std::string_view kernel_file(std::string_view file_name) {
  for (const util::EmbeddedFile& f : embedded_kernel_sources())
    if (f.name == file_name) return f.text;
  std::string known;
  for (const util::EmbeddedFile& f : embedded_kernel_sources()) {
    if (!known.empty()) known += ", ";
    known += f.name;
  }
  throw Error("kernel_file: no embedded kernel source named '" + std::string(file_name) +
              "' (embedded: " + (known.empty() ? std::string("none") : known) + ")");
}

}  // namespace moejit::codegen
