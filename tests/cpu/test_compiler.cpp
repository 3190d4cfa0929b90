// NVRTC compile path with tiny self-contained kernels (no dependency on kernels/).
#include <catch2/catch.hpp>

#include "compiler/nvrtc_compiler.hpp"
#include "compiler/ptxas_report.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/error.hpp"

using namespace moejit;

namespace {

bool have_nvrtc() {
  if (driver::nvrtc_available()) return true;
  WARN("skipped: libnvrtc not found");
  return false;
}

KernelSource add_kernel() {
  KernelSource s;
  s.source = R"(
extern "C" __global__ void moejit_test_add(float* out, const float* a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b;
}
)";
  s.name_expression = "moejit_test_add";
  s.launch.block_threads = 128;
  return s;
}

KernelSource template_kernel() {
  KernelSource s;
  s.source = R"(
namespace t {
template <int N>
__global__ void scale(float* x, int n) {
  __shared__ float tile[N];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x % N] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) x[i] = tile[(threadIdx.x + 1) % N] * float(N);
}
}
)";
  s.name_expression = "t::scale<64>";
  return s;
}

}  // namespace

TEST_CASE("compiler: options list target, std, ptxas -v, then source options", "[compiler]") {
  KernelSource s = add_kernel();
  s.options = {"-DFOO=1"};
  auto o = compiler::nvrtc_options(s, Target{90, true});
  REQUIRE(o.size() == 4);
  CHECK(o[0] == "--gpu-architecture=sm_90a");
  CHECK(o[1] == "-std=c++17");
  CHECK(o[2] == "--ptxas-options=-v");
  CHECK(o[3] == "-DFOO=1");
  s.options = {"-std=c++20"};
  o = compiler::nvrtc_options(s, Target{90, false});
  CHECK(o[0] == "--gpu-architecture=sm_90");
  CHECK(std::count(o.begin(), o.end(), std::string("-std=c++17")) == 0);
}

TEST_CASE("compiler: extern C kernel compiles to a cubin with a ptxas report", "[compiler][nvrtc]") {
  if (!have_nvrtc()) return;
  auto out = compiler::compile(add_kernel(), Target{90, true}, "test-key add");
  CHECK(out.lowered_name == "moejit_test_add");
  REQUIRE(out.cubin.size() > 64);
  CHECK(out.cubin.compare(0, 4, "\x7f" "ELF") == 0);
  CHECK(out.resources.registers > 0);
  CHECK(out.resources.spill_store_bytes == 0);
  CHECK(out.resources.spill_load_bytes == 0);
  CHECK(out.resources.stack_frame_bytes == 0);
  CHECK(out.resources.shared_bytes == 0);
  CHECK(out.compile_ms > 0.0);
  CHECK(out.log.find("moejit_test_add") != std::string::npos);
}

TEST_CASE("compiler: template kernel via name expression, static smem reported", "[compiler][nvrtc]") {
  if (!have_nvrtc()) return;
  auto out = compiler::compile(template_kernel(), Target{90, true}, "test-key tmpl");
  CHECK(out.lowered_name.rfind("_ZN1t5scaleILi64EEEvPfi", 0) == 0);
  CHECK(out.resources.registers > 0);
  CHECK(out.resources.shared_bytes == 256);
}

TEST_CASE("compiler: syntax error throws CompileError with key text and log", "[compiler][nvrtc]") {
  if (!have_nvrtc()) return;
  KernelSource s = add_kernel();
  s.source += "\n__global__ void broken( { this is not C++ }\n";
  try {
    compiler::compile(s, Target{90, true}, "op=gate_up tokens=7 broken-key");
    FAIL("expected CompileError");
  } catch (const CompileError& e) {
    CHECK(e.key_text() == "op=gate_up tokens=7 broken-key");
    CHECK(e.log().find("error") != std::string::npos);
    CHECK(e.log().find("moejit_kernel.cu") != std::string::npos);
    CHECK(std::string(e.what()).find("op=gate_up tokens=7 broken-key") != std::string::npos);
  }
}

TEST_CASE("compiler: unknown name expression is a CompileError", "[compiler][nvrtc]") {
  if (!have_nvrtc()) return;
  KernelSource s = add_kernel();
  s.name_expression = "no_such_kernel";
  CHECK_THROWS_AS(compiler::compile(s, Target{90, true}, "k"), CompileError);
  s.name_expression.clear();
  CHECK_THROWS_AS(compiler::compile(s, Target{90, true}, "k"), InvalidArgument);
}

TEST_CASE("compiler: NVRTC version text", "[compiler][nvrtc]") {
  if (!have_nvrtc()) return;
  std::string v = compiler::nvrtc_version_text();
  CHECK(v.find('.') != std::string::npos);
  CHECK(std::stoi(v) >= 11);
}

TEST_CASE("ptxas report parser: picks the named entry, reads spills and smem", "[compiler]") {
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z5otherv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z5otherv\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers, 352 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z4mainPf' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z4mainPf\n"
      "    48 bytes stack frame, 16 bytes spill stores, 24 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]\n";
  auto r = compiler::parse_ptxas_report(log, "_Z4mainPf");
  CHECK(r.registers == 255);
  CHECK(r.stack_frame_bytes == 48);
  CHECK(r.spill_store_bytes == 16);
  CHECK(r.spill_load_bytes == 24);
  CHECK(r.shared_bytes == 2048);
  auto f = compiler::parse_ptxas_report(log);
  CHECK(f.registers == 12);
  CHECK(f.shared_bytes == 0);
  auto none = compiler::parse_ptxas_report("no report here");
  CHECK(none.registers == -1);
  CHECK(none.shared_bytes == -1);
}
