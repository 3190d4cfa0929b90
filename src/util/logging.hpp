#pragma once
// The library's logger: spdlog logger "moejit" writing to stderr, created on
// first use. Level from MOEJIT_LOG_LEVEL (trace, debug, info, warn, error,
// critical, off); default warn, so a library embedded in a server stays quiet
// unless something needs attention (a corrupt cache entry, a miss after seal).
#include <memory>

#include <spdlog/spdlog.h>

namespace moejit::util {

// Thread-safe; the same logger for the whole process. Callers may change its
// level or sinks (tools raise it to info for -v).
std::shared_ptr<spdlog::logger>& logger();

}  // namespace moejit::util
