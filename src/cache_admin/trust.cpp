// The trust rules of moejit/cache_admin.hpp over src/cache/trust.hpp.
#include "cache/trust.hpp"
#include "cache_admin/convert.hpp"
#include "moejit/cache_admin.hpp"
#include "util/env.hpp"

namespace moejit::cache_admin {

std::string_view to_string(Ownership o) {
  switch (o) {
    case Ownership::private_only: return "private_only";
    case Ownership::shared: return "shared";
  }
  return "?";
}

Ownership ownership_from_env() noexcept {
  try {
    return util::env::cache_allow_shared() ? Ownership::shared : Ownership::private_only;
  } catch (...) {
    return Ownership::private_only;  // the warning about a bad value could not be logged
  }
}

std::string layout_trust_problem(const std::filesystem::path& dir, Ownership ownership) {
  return cache::layout_trust_problem(dir, internal(ownership));
}

}  // namespace moejit::cache_admin
