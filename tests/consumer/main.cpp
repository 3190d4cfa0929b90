// The README's "API in ten lines": plan gpt-oss-120b, prewarm its kernels into
// the disk cache, seal. Built against the installed CMake package (or with
// add_subdirectory) by tests/consumer/run.cmake. Argument: the token budget.
#include <cstdio>
#include <string>
#include <moejit/model.hpp>
#include <moejit/prewarm.hpp>

int main(int argc, char** argv) {
  moejit::PlanOptions opts;
  opts.max_num_tokens = argc > 1 ? std::stoull(argv[1]) : 20000;  // the server's per-step token budget
  auto plan = moejit::make_plan(moejit::embedded_model("gpt-oss-120b"), opts);
  moejit::Runtime& rt = moejit::Runtime::global();  // cache dir from $MOEJIT_CACHE_DIR
  moejit::PrewarmReport report = moejit::prewarm(rt, plan, {.jobs = 8});
  std::puts(report.to_json().c_str());  // keys, distinct_kernels, compiled, disk_hits, failed, wall_ms
  rt.seal();  // from here on, a kernel not prewarmed is a warning (MOEJIT_STRICT=1: an error)
  return report.failed == 0 ? 0 : 1;
}
