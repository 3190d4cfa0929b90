#include "compiler/nvrtc_compiler.hpp"

#include <chrono>

#include "compiler/ptxas_report.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/error.hpp"

namespace moejit::compiler {
namespace {

// RAII nvrtcProgram: destroyed on every path, including a throwing check.
class Program {
 public:
  Program(const driver::NvrtcApi& api, const std::string& source) : api_(api) {
    MOEJIT_NVRTC_CHECK(api_.nvrtcCreateProgram(&prog_, source.c_str(), "moejit_kernel.cu", 0, nullptr, nullptr));
  }
  ~Program() {
    if (prog_) (void)api_.nvrtcDestroyProgram(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const noexcept { return prog_; }

  std::string log() const {
    std::size_t n = 0;
    MOEJIT_NVRTC_CHECK(api_.nvrtcGetProgramLogSize(prog_, &n));
    std::string out(n, '\0');
    if (n) MOEJIT_NVRTC_CHECK(api_.nvrtcGetProgramLog(prog_, out.data()));
    while (!out.empty() && out.back() == '\0') out.pop_back();
    return out;
  }

 private:
  const driver::NvrtcApi& api_;
  nvrtcProgram prog_ = nullptr;
};

}  // namespace

std::vector<std::string> nvrtc_options(const KernelSource& source, const Target& target) {
  std::vector<std::string> out;
  out.push_back("--gpu-architecture=" + to_string(target));
  bool has_std = false;
  for (const auto& o : source.options)
    if (o.rfind("-std=", 0) == 0 || o.rfind("--std=", 0) == 0) has_std = true;
  if (!has_std) out.push_back("-std=c++17");
  out.push_back("--ptxas-options=-v");
  out.insert(out.end(), source.options.begin(), source.options.end());
  return out;
}

std::string nvrtc_version_text() { return driver::nvrtc().version_text(); }

CompileOutput compile(const KernelSource& source, const Target& target, std::string_view key_text) {
  if (source.name_expression.empty())
    throw InvalidArgument("compile: KernelSource.name_expression is empty for key " + std::string(key_text));
  const auto& api = driver::nvrtc();
  const auto t0 = std::chrono::steady_clock::now();

  Program prog(api, source.source);
  MOEJIT_NVRTC_CHECK(api.nvrtcAddNameExpression(prog.get(), source.name_expression.c_str()));

  const std::vector<std::string> options = nvrtc_options(source, target);
  std::vector<const char*> argv;
  argv.reserve(options.size());
  for (const auto& o : options) argv.push_back(o.c_str());

  nvrtcResult r = api.nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  CompileOutput out;
  out.log = prog.log();
  if (r != NVRTC_SUCCESS) {
    std::string log = std::string(api.nvrtcGetErrorString(r)) + "\n" + out.log;
    throw CompileError(std::string(key_text), std::move(log));
  }

  const char* lowered = nullptr;
  r = api.nvrtcGetLoweredName(prog.get(), source.name_expression.c_str(), &lowered);
  if (r != NVRTC_SUCCESS || !lowered) {
    throw CompileError(std::string(key_text), "name expression '" + source.name_expression +
                                                   "' names no __global__ function (" +
                                                   api.nvrtcGetErrorString(r) + ")\n" + out.log);
  }
  out.lowered_name = lowered;

  std::size_t size = 0;
  MOEJIT_NVRTC_CHECK(api.nvrtcGetCUBINSize(prog.get(), &size));
  if (size == 0)
    throw CompileError(std::string(key_text), "NVRTC produced no cubin (is the target " + to_string(target) +
                                                   " a real architecture, not compute_XX?)\n" + out.log);
  out.cubin.resize(size);
  MOEJIT_NVRTC_CHECK(api.nvrtcGetCUBIN(prog.get(), out.cubin.data()));

  out.resources = parse_ptxas_report(out.log, out.lowered_name);
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace moejit::compiler
