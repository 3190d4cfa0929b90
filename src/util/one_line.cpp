// moejit/error.hpp: one_line, an error message on one line.
#include <algorithm>
#include <string>
#include <string_view>

#include "moejit/error.hpp"

namespace moejit {

std::string one_line(std::string_view message) {
  auto trim = [](std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\r' || v.back() == ':')) v.remove_suffix(1);
    return v;
  };
  const std::size_t nl = message.find('\n');
  std::string s(trim(message.substr(0, nl)));
  if (nl == std::string_view::npos) return s;
  for (std::size_t at = nl + 1; at < message.size();) {
    const std::size_t end = std::min(message.find('\n', at), message.size());
    const std::string_view line = trim(message.substr(at, end - at));
    if (line.find("error") != std::string_view::npos && line != s) {
      s += ": ";
      s += line;
      break;
    }
    at = end + 1;
  }
  return s;
}
std::string one_line(const std::exception& e) { return one_line(std::string_view(e.what())); }

}  // namespace moejit
