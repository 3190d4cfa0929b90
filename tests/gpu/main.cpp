// Main of the GPU suite: exits 77 (ctest: Skipped) with a visible message when
// no GPU is usable, so a machine without a driver reports "skipped", not "passed".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "driver/cuda_api.hpp"
#include "moejit/error.hpp"

int main(int argc, char** argv) {
  if (!moejit::driver::gpu_available()) {
    std::string why = "no CUDA device";
    try {
      (void)moejit::driver::cuda();
    } catch (const moejit::Error& e) {
      why = e.what();
    }
    std::printf("SKIPPED: no GPU (%s)\n", why.c_str());
    std::fflush(stdout);
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
