// explain KEY: would this key hit the cache (or an AOT pack), and if not, why not.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "common/tool_support.hpp"
#include "moejit/cache_admin.hpp"
#include "moejit/error.hpp"
#include "moejit/key.hpp"

namespace moejit::tools {
namespace {

int print_report(const cache_admin::ExplainReport& r) {
  for (const std::string& line : r.lines) std::printf("%s\n", line.c_str());
  return r.hit ? 0 : static_cast<int>(ExitCode::failed);
}

}  // namespace

int cmd_explain(const std::filesystem::path& dir, const std::string& key_text) {
  const SpecKey key = parse_key(key_text);  // InvalidArgument: exit code 2
  return print_report(cache_admin::explain(dir, key));
}

int cmd_explain_pack(const std::filesystem::path& pack_path, const std::string& key_text) {
  const SpecKey key = parse_key(key_text);  // InvalidArgument: exit code 2
  validate(key);
  cache_admin::ExplainReport r;
  try {
    r = cache_admin::explain_in_pack(pack_path, key);
  } catch (const InvalidArgument&) {
    throw;
  } catch (const Error& e) {
    throw EnvironmentError(one_line(e));
  }
  return print_report(r);
}

}  // namespace moejit::tools
