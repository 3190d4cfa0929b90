#pragma once
// Conversions between the public types of moejit/cache_admin.hpp and the cache's own.
#include "cache/trust.hpp"
#include "moejit/cache_admin.hpp"

namespace moejit::cache_admin {

inline cache::Ownership internal(Ownership o) noexcept {
  return o == Ownership::shared ? cache::Ownership::shared : cache::Ownership::private_only;
}

}  // namespace moejit::cache_admin
