#pragma once
// The library's log messages (cache problems, misses after seal, the compile
// report at debug): their level and where they go. By default messages at
// MOEJIT_LOG_LEVEL (docs/environment.md; unset: warn) and above go to stderr
// as "[time] [moejit] [level] message". An application can set the level
// itself and take the messages into its own logging.
#include <functional>
#include <string_view>

namespace moejit {

enum class LogLevel : unsigned char { trace, debug, info, warn, error, critical, off };

// "trace", "debug", "info", "warn", "error", "critical", "off".
std::string_view to_string(LogLevel level) noexcept;

// Messages below `level` are dropped (off: all). Thread-safe; takes effect for
// the next message; overrides MOEJIT_LOG_LEVEL. The first call of either
// creates the library's logger (throws only std::bad_alloc).
void set_log_level(LogLevel level);
LogLevel log_level();

// Receives each message at or above the level instead of stderr: its level
// and its text (no time, prefix or line break). Called on the thread that
// logs, one call at a time (the library serializes them); it must not log
// through moejit. An exception it throws is swallowed: logging never fails
// a library call.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;
// Installs `sink` (thread-safe); an empty function restores stderr. Once this
// returns, the previous sink is never called again. The library keeps `sink`
// until it is replaced and logs until the process exits (a Runtime flushes
// its statistics at exit), so restore stderr with set_log_sink({}) before
// anything the sink refers to is destroyed.
void set_log_sink(LogSink sink);

}  // namespace moejit
