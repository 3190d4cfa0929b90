// Microbenchmark of the Runtime's in-memory lookup on a hit (the part of get()
// that needs no GPU: key hash, shared lock, find, key compare), and, on a GPU
// machine, of the full get() (plus cuCtxGetCurrent and the per-context scan).
//
//   bench_cache_get [iterations=10000000] [keys=64]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "driver/cuda_api.hpp"
#include "driver/nvrtc_api.hpp"
#include "runtime/runtime_access.hpp"

using namespace moejit;

namespace {

// Eight tiny kernels; key.n selects one, so several keys share a kernel.
KernelSource tiny(const SpecKey& key) {
  KernelSource s;
  s.source = "template <int C> __global__ void add_const(float* x, int n) {\n"
             "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += float(C); }\n";
  s.name_expression = "add_const<" + std::to_string(key.n % 8) + ">";
  s.launch.block_threads = 128;
  return s;
}

SpecKey key_for(std::uint32_t i) {
  SpecKey k;
  k.op = OpKind::gate_up;
  k.quant = QuantMode::w4a16_mxfp4;
  k.token_bucket = 1 + i;
  k.n = 5760 + i;  // n % 8 picks the kernel
  k.k = 2880;
  k.n_align = alignment_of(k.n);
  k.k_align = alignment_of(k.k);
  return k;
}

template <class F>
double time_ns_per_op(std::uint64_t iterations, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iterations);
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t iterations = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000ull;
  const std::uint32_t n_keys = argc > 2 ? static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 10)) : 64u;
  if (iterations == 0 || n_keys == 0) {
    std::fprintf(stderr, "usage: bench_cache_get [iterations>0] [keys>0]\n");
    return 2;
  }
  if (!driver::nvrtc_available()) {
    std::printf("skipped: libnvrtc not found (the bench compiles its tiny kernels once)\n");
    return 0;
  }
  RuntimeOptions opts;
  opts.use_disk_cache = false;  // never touch the user's cache
  opts.generator = tiny;
  Runtime rt(opts);
  std::vector<SpecKey> keys;
  for (std::uint32_t i = 0; i < n_keys; ++i) {
    keys.push_back(key_for(i));
    rt.compiled(keys.back());
  }
  std::printf("keys: %u, distinct kernels: %zu, compiles: %llu\n", n_keys, RuntimeAccess::kernel_count(rt),
              static_cast<unsigned long long>(rt.stats().compiles));

  const CompiledKernel* sink = nullptr;
  std::uint64_t misses = 0;
  double ns = time_ns_per_op(iterations, [&] {
    for (std::uint64_t i = 0; i < iterations; ++i) {
      const CompiledKernel* k = RuntimeAccess::lookup(rt, keys[i % n_keys]);
      misses += (k == nullptr);
      sink = k;
    }
  });
  std::printf("memory lookup on a hit: %.1f ns/op over %llu iterations (%llu misses)\n", ns,
              static_cast<unsigned long long>(iterations), static_cast<unsigned long long>(misses));

  double hash_ns = time_ns_per_op(iterations, [&] {
    std::uint64_t acc = 0;
    for (std::uint64_t i = 0; i < iterations; ++i) acc += keys[i % n_keys].hash().lo;
    if (acc == 42) std::printf(" ");
  });
  std::printf("  of which SpecKey::hash(): %.1f ns/op\n", hash_ns);

  if (driver::gpu_available()) {
    driver::ensure_context(0);
    for (const auto& k : keys) rt.get(k);  // load modules once
    CUfunction last = nullptr;
    double get_ns = time_ns_per_op(iterations, [&] {
      for (std::uint64_t i = 0; i < iterations; ++i) last = rt.get(keys[i % n_keys]).function;
    });
    std::printf("Runtime::get() on a hit (GPU, module loaded): %.1f ns/op (function %p)\n", get_ns,
                static_cast<void*>(last));
  } else {
    std::printf("Runtime::get(): skipped (no GPU: %s)\n", "libcuda/device not available");
  }
  return sink == nullptr && misses == iterations ? 1 : 0;
}
