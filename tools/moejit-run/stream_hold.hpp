#pragma once
// A one-warp kernel that holds the default stream for a fixed time, so the
// launches the host enqueues behind it are already queued on the GPU when the
// first timing event fires. The event pair then measures the GPU's execution
// of those launches without the host's launch latency (nvbench's "blocking
// kernel" method). Compiled once with NVRTC; needs a current context.
#include <string>

#include "compiler/nvrtc_compiler.hpp"
#include "driver/cuda_api.hpp"
#include "moejit/kernel_source.hpp"

namespace moejit::run_tool {

class StreamHold {
 public:
  StreamHold() {
    KernelSource ks;
    // globaltimer counts nanoseconds; one thread is enough to keep the stream busy.
    ks.source =
        "namespace moejit_run {\n"
        "__global__ void hold(unsigned long long ns) {\n"
        "  unsigned long long t0, t;\n"
        "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
        "  do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); } while (t - t0 < ns);\n"
        "}\n"
        "}\n";
    ks.name_expression = "moejit_run::hold";
    ks.launch.block_threads = 32;
    const compiler::CompileOutput out = compiler::compile(ks, Target{}, "moejit-run stream hold");
    const auto& cu = driver::cuda();
    MOEJIT_CU_CHECK(cu.cuModuleLoadData(&module_, out.cubin.data()));
    MOEJIT_CU_CHECK(cu.cuModuleGetFunction(&function_, module_, out.lowered_name.c_str()));
  }
  ~StreamHold() {
    if (module_) (void)driver::cuda().cuModuleUnload(module_);
  }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  // Enqueues the hold on the default stream; returns at once.
  void launch(unsigned long long ns) const {
    void* args[] = {&ns};
    MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernel(function_, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  }

 private:
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

}  // namespace moejit::run_tool
