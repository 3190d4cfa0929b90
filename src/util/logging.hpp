#pragma once
// The library's logger: spdlog logger "moejit", created on first use. Its first
// sink writes to stderr, or to the application's sink (moejit/logging.hpp,
// set_log_sink). Level from MOEJIT_LOG_LEVEL (trace, debug, info, warn, error,
// critical, off) or set_log_level; default warn, so a library embedded in a
// server stays quiet unless something needs attention (a corrupt cache entry,
// a miss after seal).
#include <memory>

#include <spdlog/spdlog.h>

namespace moejit::util {

// Thread-safe; the same logger for the whole process. Its level may be changed
// at any time; its sink list only while no other thread logs (the tests add a
// capturing sink that way).
std::shared_ptr<spdlog::logger>& logger();

}  // namespace moejit::util
