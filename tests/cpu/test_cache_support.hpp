#pragma once
// Fixtures shared by the cache / runtime tests: a private temp directory, tiny
// NVRTC-clean kernels selected by the key, a log capture.
#include <spdlog/sinks/ringbuffer_sink.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "driver/nvrtc_api.hpp"
#include "moejit/error.hpp"
#include "moejit/runtime.hpp"
#include "util/logging.hpp"

namespace moejit::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "moejit-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline bool have_nvrtc() { return driver::nvrtc_available(); }

// First statement of a test that compiles kernels: skips it visibly without NVRTC.
#define REQUIRE_NVRTC()                  \
  if (!::moejit::test::have_nvrtc()) {   \
    WARN("skipped: libnvrtc not found"); \
    return;                              \
  }

// A gate_up key whose n selects the kernel text (see TinyKernels).
inline SpecKey tiny_key(std::uint32_t n, std::uint32_t bucket = 1) {
  SpecKey k;
  k.op = OpKind::gate_up;
  k.quant = QuantMode::bf16;
  k.token_bucket = bucket;
  k.n = n;
  k.k = 64;
  k.n_align = alignment_of(n);
  k.k_align = alignment_of(64);
  return k;
}

// Generator of tiny kernels: the source depends on key.n only (so keys that
// differ in token_bucket share one kernel); n == 13 produces a syntax error;
// n == 0 is "cannot implement" (InvalidArgument). Counts its calls.
struct TinyKernels {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);

  std::function<KernelSource(const SpecKey&)> generator() const {
    auto c = calls;
    return [c](const SpecKey& key) {
      c->fetch_add(1);
      if (key.n == 0) throw InvalidArgument("tiny generator: n=0 cannot be implemented");
      KernelSource s;
      s.source = "namespace tiny {\ntemplate <int C>\n__global__ void add_const(float* x, int n) {\n"
                 "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] += float(C);\n}\n}\n";
      if (key.n == 13) s.source += "this is not valid C++;\n";
      s.name_expression = "tiny::add_const<" + std::to_string(key.n) + ">";
      s.launch.block_threads = 128;
      s.launch.dynamic_smem_bytes = 0;
      s.config_text = "tiny C=" + std::to_string(key.n);
      return s;
    };
  }
};

inline RuntimeOptions options_for(const std::filesystem::path& dir, const TinyKernels& k) {
  RuntimeOptions o;
  o.cache_dir = dir;
  o.generator = k.generator();
  o.seal_policy = SealPolicy::warn;
  return o;
}

// Captures the moejit logger's messages while alive.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)) {
    util::logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = util::logger()->sinks();
    std::erase(sinks, std::static_pointer_cast<spdlog::sinks::sink>(sink_));
  }
  std::vector<std::string> lines() const { return sink_->last_formatted(); }
  std::size_t count_containing(const std::string& needle) const {
    std::size_t n = 0;
    for (const auto& l : lines())
      if (l.find(needle) != std::string::npos) ++n;
    return n;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::size_t count_files(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return 0;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); it != std::filesystem::directory_iterator(); ++it) ++n;
  return n;
}

}  // namespace moejit::test
