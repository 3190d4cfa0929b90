#pragma once
// Serving-step generator of a continuous-batching engine with chunked prefill
// (bench/trace_replay.cpp; bench/tests/test_trace_gen.cpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace moejit::bench {

struct Cell {
  std::uint32_t isl = 1024, osl = 1024, concurrency = 64;
  std::string name() const {
    auto k = [](std::uint32_t v) { return v % 1024 == 0 ? std::to_string(v / 1024) + "k" : std::to_string(v); };
    return k(isl) + "/" + k(osl) + " C=" + std::to_string(concurrency);
  }
};

struct TraceOptions {
  std::uint32_t max_num_tokens = 8192;
  std::uint32_t max_steps = 300;
  std::uint64_t seed = 1;
  bool cold_start = false;
};

// Token count T of every step of a continuous-batching engine with chunked prefill.
inline std::vector<std::uint32_t> make_trace(const Cell& c, const TraceOptions& o) {
  struct Req {
    std::uint32_t prompt = 0, prefilled = 0, generated = 0;
  };
  std::mt19937_64 rng(o.seed * 1000003ull + c.isl * 31ull + c.osl * 7ull + c.concurrency);
  const std::uint32_t lo = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::ceil(0.8 * c.isl)));
  std::uniform_int_distribution<std::uint32_t> prompt_len(lo, std::max(lo, c.isl));
  std::deque<Req> running;
  for (std::uint32_t i = 0; i < c.concurrency; ++i) {
    Req r;
    r.prompt = prompt_len(rng);
    if (!o.cold_start) {
      r.prefilled = r.prompt;
      r.generated = 1 + static_cast<std::uint32_t>(rng() % std::max<std::uint32_t>(1, c.osl));
      r.generated = std::min(r.generated, c.osl);
    }
    running.push_back(r);
  }
  std::vector<std::uint32_t> steps;
  while (steps.size() < o.max_steps) {
    std::uint32_t budget = o.max_num_tokens, T = 0;
    // Decode: one token per request past its prefill (and not finished).
    for (auto& r : running)
      if (r.prefilled == r.prompt && r.generated < c.osl && budget > 0) {
        ++r.generated;
        --budget;
        ++T;
      }
    // Prefill chunks, oldest request first.
    for (auto& r : running) {
      if (budget == 0) break;
      if (r.prefilled < r.prompt) {
        const std::uint32_t chunk = std::min(budget, r.prompt - r.prefilled);
        r.prefilled += chunk;
        budget -= chunk;
        T += chunk;
        if (r.prefilled == r.prompt) r.generated = 1;  // first token from the prefill step
      }
    }
    if (T == 0) break;
    steps.push_back(T);
    // Finished requests are replaced by new arrivals (closed loop, concurrency C).
    for (auto& r : running)
      if (r.prefilled == r.prompt && r.generated >= c.osl) {
        r = Req{};
        r.prompt = prompt_len(rng);
      }
  }
  return steps;
}

}  // namespace moejit::bench
