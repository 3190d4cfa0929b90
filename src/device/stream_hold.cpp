// The stream-holding kernel of the public device utilities (moejit/device.hpp).
#include <string>
#include <utility>

#include "compiler/nvrtc_compiler.hpp"
#include "driver/cuda_api.hpp"
#include "moejit/device.hpp"
#include "moejit/error.hpp"
#include "moejit/kernel_source.hpp"

namespace moejit::device {
namespace {

constexpr unsigned kThreads = 32;  // one warp; one thread spins, the launch needs no more

KernelSource hold_source() {
  KernelSource ks;
  // %globaltimer counts nanoseconds on every GPU moejit supports.
  ks.source =
      "namespace moejit_device {\n"
      "__global__ void hold(unsigned long long ns) {\n"
      "  unsigned long long t0, t;\n"
      "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
      "  do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); } while (t - t0 < ns);\n"
      "}\n"
      "}\n";
  ks.name_expression = "moejit_device::hold";
  ks.launch.block_threads = kThreads;
  return ks;
}

}  // namespace

StreamHold::StreamHold() {
  const compiler::CompileOutput out = compiler::compile(hold_source(), Target{}, "device::StreamHold");
  const auto& cu = driver::cuda();
  MOEJIT_CU_CHECK(cu.cuModuleLoadData(&module_, out.cubin.data()));
  if (CUresult r = cu.cuModuleGetFunction(&function_, module_, out.lowered_name.c_str()); r != CUDA_SUCCESS) {
    (void)cu.cuModuleUnload(std::exchange(module_, nullptr));
    driver::check_cu(r, "cuModuleGetFunction(moejit_device::hold)", __FILE__, __LINE__);
  }
}
StreamHold::~StreamHold() {
  if (module_ != nullptr) (void)driver::cuda().cuModuleUnload(module_);
}
StreamHold::StreamHold(StreamHold&& o) noexcept
    : module_(std::exchange(o.module_, nullptr)), function_(std::exchange(o.function_, nullptr)) {}
StreamHold& StreamHold::operator=(StreamHold&& o) noexcept {
  if (this != &o) {
    if (module_ != nullptr) (void)driver::cuda().cuModuleUnload(module_);
    module_ = std::exchange(o.module_, nullptr);
    function_ = std::exchange(o.function_, nullptr);
  }
  return *this;
}

void StreamHold::launch(CUstream stream, std::chrono::nanoseconds duration) const {
  if (function_ == nullptr) throw InvalidArgument("device::StreamHold::launch: the hold is empty (moved from)");
  if (duration.count() < 0)
    throw InvalidArgument("device::StreamHold::launch: duration " + std::to_string(duration.count()) +
                          " ns is negative");
  unsigned long long ns = static_cast<unsigned long long>(duration.count());
  void* args[] = {&ns};
  MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernel(function_, 1, 1, 1, kThreads, 1, 1, 0, stream, args, nullptr));
}

}  // namespace moejit::device
