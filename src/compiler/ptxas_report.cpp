#include "compiler/ptxas_report.hpp"

#include <charconv>
#include <string>

namespace moejit::compiler {
namespace {

// The integer immediately before `unit` in `line` ("40 registers" -> 40); -1 if absent.
int number_before(std::string_view line, std::string_view unit) {
  std::size_t pos = line.find(unit);
  if (pos == std::string_view::npos || pos == 0) return -1;
  std::size_t end = pos;
  while (end > 0 && line[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == end) return -1;
  int v = -1;
  std::from_chars(line.data() + begin, line.data() + end, v);
  return v;
}

// The function name a "Compiling entry function 'X'" / "Function properties for X" line names.
std::string_view quoted_name(std::string_view line, std::string_view marker) {
  std::size_t p = line.find(marker);
  if (p == std::string_view::npos) return {};
  std::string_view rest = line.substr(p + marker.size());
  if (!rest.empty() && rest.front() == '\'') {
    rest.remove_prefix(1);
    return rest.substr(0, rest.find('\''));
  }
  std::size_t end = rest.find_first_of(" \r\n");
  return rest.substr(0, end);
}

}  // namespace

ResourceReport parse_ptxas_report(std::string_view log, std::string_view lowered_name) {
  ResourceReport first, wanted;
  bool have_first = false, have_wanted = false;
  std::string_view current;     // entry function the following lines describe
  ResourceReport* target = nullptr;
  ResourceReport scratch;

  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t nl = log.find('\n', pos);
    std::string_view line = log.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? log.size() : nl + 1;

    std::string_view name = quoted_name(line, "Compiling entry function ");
    if (name.empty()) name = quoted_name(line, "Function properties for ");
    if (!name.empty()) {
      if (name != current) {
        current = name;
        if (!lowered_name.empty() && name == lowered_name) {
          target = &wanted;
          have_wanted = true;
        } else if (!have_first) {
          target = &first;
          have_first = true;
        } else {
          target = &scratch;  // some other function: parsed and ignored
          scratch = {};
        }
      }
      continue;
    }
    if (!target) continue;
    if (line.find("bytes stack frame") != std::string_view::npos) {
      target->stack_frame_bytes = number_before(line, "bytes stack frame");
      target->spill_store_bytes = number_before(line, "bytes spill stores");
      target->spill_load_bytes = number_before(line, "bytes spill loads");
    } else if (line.find("Used ") != std::string_view::npos && line.find(" registers") != std::string_view::npos) {
      target->registers = number_before(line, "registers");
      int smem = number_before(line, "bytes smem");
      target->shared_bytes = smem < 0 ? 0 : smem;
    }
  }
  if (have_wanted) return wanted;
  return first;
}

}  // namespace moejit::compiler
