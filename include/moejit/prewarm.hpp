#pragma once
// Prewarm: compile, before traffic, every kernel a plan can ever launch.
// The key set is finite: quant modes x layer shapes x prewarm_set(max_num_tokens)
// x the kernels one MoE layer launches (moe_layer_keys in moejit/moe_layer.hpp).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "moejit/moe_shape.hpp"
#include "moejit/runtime.hpp"

namespace moejit {

struct PrewarmPlan {
  std::string model_name;               // for reports only
  std::vector<MoeLayerShape> layers;    // distinct layer shapes (one for most models)
  std::vector<QuantMode> quant_modes;   // usually one
  std::uint64_t max_num_tokens = 8192;  // per-step token budget of the server
  int bucket_exponent = 3;             // buckets per octave = 2^bucket_exponent
  Target target{};
};

struct PrewarmOptions {
  int jobs = 0;                 // compile threads; 0 = hardware concurrency
  bool load_on_gpu = false;     // also load every kernel in the current CUDA context
  // Called after each distinct kernel finishes (done, total); from worker threads.
  std::function<void(std::size_t done, std::size_t total)> on_progress;
};

struct PrewarmFailure {
  std::string key_text;
  std::string message;
};

struct PrewarmReport {
  std::size_t buckets = 0;           // |prewarm_set(max_num_tokens)|
  std::size_t keys = 0;              // distinct specialization keys
  std::size_t distinct_kernels = 0;  // distinct content addresses
  std::size_t compiled = 0;          // compiled by NVRTC in this run
  std::size_t disk_hits = 0;         // loaded from disk
  std::size_t memory_hits = 0;       // already in this process
  std::size_t failed = 0;
  std::vector<PrewarmFailure> failures;
  double wall_ms = 0.0;
  double compile_ms_total = 0.0;     // sum over compiles (CPU time across threads)
  std::string to_json() const;       // fields above plus failures[]
};

// Every key the plan can launch, de-duplicated, in a stable order.
std::vector<SpecKey> enumerate_keys(const PrewarmPlan& plan);

// Compiles (or loads from disk) every kernel of the plan on a thread pool.
// Failures are collected in the report, never thrown; InvalidArgument is thrown
// only for an invalid plan (max_num_tokens == 0, empty layers, ...).
PrewarmReport prewarm(Runtime& runtime, const PrewarmPlan& plan, const PrewarmOptions& options = {});

}  // namespace moejit
