#pragma once
// A one-line progress bar on stderr: "[#####.....] 12/40 kernels  3.1/s  ETA 9 s".
// Redrawn in place with '\r'; only used when stderr is a terminal.
#include <chrono>
#include <cstddef>
#include <cstdio>

namespace moejit::tools {

class ProgressBar {
 public:
  explicit ProgressBar(std::FILE* out) : out_(out), start_(std::chrono::steady_clock::now()) {}
  // Redraws the bar; called serialized (prewarm serializes on_progress).
  void update(std::size_t done, std::size_t total);
  // Ends the line (call once after the last update, before other output).
  void finish();

 private:
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
};

}  // namespace moejit::tools
