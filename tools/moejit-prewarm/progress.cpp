#include "progress.hpp"

#include <string>

#include "common/tool_support.hpp"

namespace moejit::tools {

void ProgressBar::update(std::size_t done, std::size_t total) {
  const auto now = std::chrono::steady_clock::now();
  // Why throttle: hundreds of disk hits arrive within milliseconds; redrawing
  // each one costs more than the hit. The last update is always drawn.
  if (drawn_ && done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(kWidth - filled), '.');
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0.0;
  std::string eta = "--";
  if (done >= total) eta = "0 s";
  else if (rate > 0) eta = format_ms(1000.0 * static_cast<double>(total - done) / rate);
  std::fprintf(out_, "\r[%s] %zu/%zu kernels  %.1f/s  ETA %s\x1b[K", bar.c_str(), done, total, rate, eta.c_str());
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (drawn_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

}  // namespace moejit::tools
