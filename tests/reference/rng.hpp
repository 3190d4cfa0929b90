#pragma once
// Seeded random numbers for tests and benches. Every test run draws fresh data
// (seed from the clock) and prints the seed, so a failure can be replayed:
//   MOEJIT_TEST_SEED=<seed> build/tests/moejit_tests_gpu
// Header-only (tests/reference is included by the CPU and GPU suites and benches).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace moejit::ref {

// The seed of this process: $MOEJIT_TEST_SEED when set (decimal), else the
// clock. Computed once, printed once to stderr ("moejit test seed: N").
// Why an environment variable read here and not in src/util/env: this is test
// code, not the library, and it must work before any library call.
inline std::uint64_t process_seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t s = 0;
    const char* text = std::getenv("MOEJIT_TEST_SEED");
    if (text != nullptr && *text != '\0') {
      s = std::strtoull(text, nullptr, 10);
    } else {
      s = static_cast<std::uint64_t>(
          std::chrono::high_resolution_clock::now().time_since_epoch().count());
    }
    std::fprintf(stderr, "moejit test seed: %llu (replay with MOEJIT_TEST_SEED=%llu)\n",
                 static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// A 64-bit Mersenne twister seeded from process_seed() mixed with a stream id,
// so two tests in one process draw different but replayable data.
class TestRng {
 public:
  explicit TestRng(std::uint64_t stream = 0) : seed_(process_seed() ^ (stream * 0x9E3779B97F4A7C15ull)), gen_(seed_) {}
  static TestRng with_seed(std::uint64_t seed) {
    TestRng r;
    r.seed_ = seed;
    r.gen_.seed(seed);
    return r;
  }
  std::uint64_t seed() const { return seed_; }
  std::mt19937_64& engine() { return gen_; }

  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  double normal(double mean = 0.0, double stddev = 1.0) {
    return std::normal_distribution<double>(mean, stddev)(gen_);
  }
  // Uniform integer in [lo, hi] (inclusive).
  std::int64_t integer(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen_);
  }
  std::uint32_t bits32() { return static_cast<std::uint32_t>(gen_()); }
  std::uint64_t bits64() { return gen_(); }

 private:
  std::uint64_t seed_;
  std::mt19937_64 gen_;
};

}  // namespace moejit::ref
