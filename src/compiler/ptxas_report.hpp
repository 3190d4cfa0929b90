#pragma once
// Parser of ptxas's "-v" resource report, as NVRTC returns it in the program log:
//
//   ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90a'
//   ptxas info    : Function properties for _Z3fooPf
//       8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
//   ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
#include <string_view>

#include "moejit/runtime.hpp"

namespace moejit::compiler {

// The report of entry function `lowered_name` (or, when empty or not found, the
// first entry function in the log). Fields absent from the log stay -1 except
// shared_bytes and the stack/spill figures, which ptxas omits when 0 for some
// versions: once an entry's "Used N registers" line is seen, a missing smem
// figure is 0. Never throws.
ResourceReport parse_ptxas_report(std::string_view log, std::string_view lowered_name = {});

}  // namespace moejit::compiler
