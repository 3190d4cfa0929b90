// dlopen()ed driver tables: behaviour with and without libcuda / libnvrtc.
#include <catch2/catch.hpp>

#include "driver/cuda_api.hpp"
#include "driver/dynlib.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/error.hpp"

using namespace moejit;

TEST_CASE("driver: open_first reports every failed name", "[driver]") {
  auto lib = driver::open_first({"libmoejit_no_such_lib_a.so", "libmoejit_no_such_lib_b.so"});
  CHECK(lib.handle == nullptr);
  CHECK(lib.error.find("libmoejit_no_such_lib_a.so") != std::string::npos);
  CHECK(lib.error.find("libmoejit_no_such_lib_b.so") != std::string::npos);
  auto libc = driver::open_first({"libmoejit_no_such_lib_a.so", "libc.so.6"});
  REQUIRE(libc.handle != nullptr);
  CHECK(libc.name == "libc.so.6");
  CHECK(driver::find_symbol(libc.handle, "malloc") != nullptr);
  CHECK(driver::find_symbol(libc.handle, "moejit_definitely_not_a_symbol") == nullptr);
}

TEST_CASE("driver: libcuda missing gives one DriverError naming libcuda.so.1", "[driver]") {
  auto probe = driver::open_first({"libcuda.so.1"});
  if (probe.handle) {
    // A driver is installed here: the table must load, and gpu_available()
    // agrees with cuDeviceGetCount.
    const auto& cu = driver::cuda();
    CHECK(cu.cuLaunchKernel != nullptr);
    CHECK(cu.cuMemAlloc_v2 != nullptr);
    int count = 0;
    MOEJIT_CU_CHECK(cu.cuDeviceGetCount(&count));
    CHECK(driver::gpu_available() == (count > 0));
    return;
  }
  CHECK_FALSE(driver::gpu_available());
  try {
    driver::cuda();
    FAIL("expected DriverError");
  } catch (const DriverError& e) {
    std::string msg = e.what();
    CHECK(msg.find("libcuda.so.1 not found") != std::string::npos);
    CHECK(msg.find("no NVIDIA driver") != std::string::npos);
  }
  // The outcome is remembered: the same error again, no crash.
  CHECK_THROWS_AS(driver::cuda(), DriverError);
  CHECK_THROWS_AS(driver::ensure_context(0), DriverError);
}

TEST_CASE("driver: NVRTC table loads with a version", "[driver][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    CHECK_THROWS_AS(driver::nvrtc(), DriverError);
    return;
  }
  const auto& rtc = driver::nvrtc();
  CHECK(rtc.major >= 11);
  CHECK(rtc.nvrtcCompileProgram != nullptr);
  CHECK(rtc.version_text() == std::to_string(rtc.major) + "." + std::to_string(rtc.minor));
  // A failing call is reported by name with NVRTC's text.
  try {
    MOEJIT_NVRTC_CHECK(rtc.nvrtcCompileProgram(nullptr, 0, nullptr));
    FAIL("expected DriverError");
  } catch (const DriverError& e) {
    CHECK(std::string(e.what()).find("nvrtcCompileProgram") != std::string::npos);
    CHECK(std::string(e.what()).find("NVRTC_ERROR") != std::string::npos);
  }
}
