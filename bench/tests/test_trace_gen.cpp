// The serving-step generator of bench/trace_replay: token budget, chunked
// prefill, closed-loop replacement, determinism.
#include <catch2/catch.hpp>

#include <numeric>

#include "trace_gen.hpp"

using moejit::bench::Cell;
using moejit::bench::make_trace;
using moejit::bench::TraceOptions;

TEST_CASE("trace: cold start, prefill in one step, decode, then new arrivals", "[bench][trace]") {
  Cell c;
  c.isl = 100, c.osl = 3, c.concurrency = 2;
  TraceOptions o;
  o.cold_start = true, o.max_num_tokens = 1000, o.max_steps = 8;
  const auto t = make_trace(c, o);
  REQUIRE(t.size() == 8);
  // Step 0: both prompts (lengths in [80, 100]) prefilled; each emits its first token.
  CHECK(t[0] >= 160);
  CHECK(t[0] <= 200);
  // Steps 1, 2: one decode token per request (tokens 2 and 3 of OSL = 3).
  CHECK(t[1] == 2);
  CHECK(t[2] == 2);
  // Both finished: two new requests prefill in step 3.
  CHECK(t[3] >= 160);
  CHECK(t[3] <= 200);
  CHECK(t[4] == 2);
}

TEST_CASE("trace: chunked prefill respects the token budget", "[bench][trace]") {
  Cell c;
  c.isl = 8192, c.osl = 4, c.concurrency = 1;
  TraceOptions o;
  o.cold_start = true, o.max_num_tokens = 4096, o.max_steps = 7;
  const auto t = make_trace(c, o);
  REQUIRE(t.size() == 7);
  CHECK(t[0] == 4096);                 // first chunk fills the budget
  CHECK(t[1] >= 6554 - 4096);          // rest of a prompt in [ceil(0.8 * 8192), 8192]
  CHECK(t[1] <= 8192 - 4096);
  CHECK(t[2] == 1);                    // decode of the single request
  CHECK(t[3] == 1);
  CHECK(t[4] == 1);                    // token 4 = OSL: the request finishes
  CHECK(t[5] == 4096);                 // a new prompt starts
}

TEST_CASE("trace: every step within [1, max_num_tokens]; steady state starts in decode", "[bench][trace]") {
  for (std::uint32_t budget : {512u, 8192u}) {
    Cell c;
    c.isl = 8192, c.osl = 1024, c.concurrency = 64;
    TraceOptions o;
    o.max_num_tokens = budget, o.max_steps = 400;
    const auto t = make_trace(c, o);
    REQUIRE(t.size() == 400);
    for (auto T : t) {
      CHECK(T >= 1);
      CHECK(T <= budget);
    }
    CHECK(t[0] <= 64);  // steady state: only decode tokens in the first step
    // Some request finishes within 400 steps and a prefill chunk fills the budget.
    CHECK(*std::max_element(t.begin(), t.end()) == budget);
  }
}

TEST_CASE("trace: deterministic per seed", "[bench][trace]") {
  Cell c;
  c.isl = 1024, c.osl = 1024, c.concurrency = 64;
  TraceOptions o;
  o.max_steps = 300;
  const auto a = make_trace(c, o), b = make_trace(c, o);
  CHECK(a == b);
  o.seed = 2;
  const auto d = make_trace(c, o);
  CHECK(a != d);
  const auto total = std::accumulate(a.begin(), a.end(), std::uint64_t(0));
  CHECK(total > 300u * 50);  // mostly ~64 decode tokens per step plus prefills
}
