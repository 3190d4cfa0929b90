// CPU suite entry. ctest runs it once per area (tests/CMakeLists.txt): the
// cases that compile kernels with NVRTC (tag [nvrtc]) run in their own entry
// with --require-nvrtc, which exits 77 (ctest: Skipped) with a visible message
// when libnvrtc cannot be loaded, so a machine without it reports those cases
// skipped instead of failing them.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "driver/nvrtc_api.hpp"

int main(int argc, char* argv[]) {
  if (argc > 1 && std::strcmp(argv[1], "--require-nvrtc") == 0) {
    if (!moejit::driver::nvrtc_available()) {
      std::printf("SKIPPED: the [nvrtc] cases of this area: libnvrtc not found (libnvrtc.so.13, .so.12, .so)\n");
      return 77;
    }
    argv[1] = argv[0];  // drop the flag: Catch sees the rest
    ++argv;
    --argc;
  }
  return Catch::Session().run(argc, argv);
}
