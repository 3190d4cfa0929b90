#pragma once
// Prewarm: compile, before traffic, every kernel a plan can ever launch.
// The key set is finite: quant modes x layer shapes x prewarm_set(max_num_tokens)
// x the kernels one MoE layer launches (moe_layer_keys in moejit/moe_layer.hpp).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "moejit/moe_shape.hpp"
#include "moejit/runtime.hpp"
#include "moejit/tuning.hpp"

namespace moejit {

struct PrewarmPlan {
  std::string model_name;               // for reports only
  std::vector<MoeLayerShape> layers;    // distinct layer shapes (one for most models)
  std::vector<QuantMode> quant_modes;   // usually one
  // Weight-scale layouts to cover (fp8_per_token serves per_expert and
  // per_channel weights, which are different kernels). Empty = each mode's
  // default_weight_scale. A listed layout applies to the modes that accept it;
  // one that no listed mode accepts is an InvalidArgument naming it.
  std::vector<WeightScale> weight_scales;
  std::uint64_t max_num_tokens = 8192;  // per-step token budget of the server
  int bucket_exponent = 3;             // buckets per octave = 2^bucket_exponent
  Target target{};
};

struct PrewarmOptions {
  int jobs = 0;                 // compile threads; 0 = hardware concurrency; < 0 is InvalidArgument
  // Also load every kernel in the calling thread's current CUDA context (after
  // the compiles, on the calling thread; get() needs a current context).
  bool load_on_gpu = false;
  // Called after each distinct kernel finishes (done, total = distinct kernels);
  // from worker threads, but never two calls at once (serialized by prewarm).
  std::function<void(std::size_t done, std::size_t total)> on_progress;
  // Check only: look every kernel up (memory, AOT pack, cache directory:
  // Runtime::lookup_cached) without compiling; PrewarmReport::missing counts
  // the kernels that are not there. With RuntimeOptions::read_only_cache
  // nothing is written. Implies no load_on_gpu.
  bool check_only = false;
};

// Why a kernel is missing; lets a tool tell "the environment is broken"
// (exit code 3) from "a kernel is broken" (exit code 1).
enum class PrewarmFailureKind : std::uint8_t {
  rejected,  // the code generator rejected the key (InvalidArgument)
  compile,   // NVRTC rejected the generated source (CompileError)
  driver,    // NVRTC or libcuda missing or failing (DriverError)
  load,      // the GPU load failed (load_on_gpu only)
  other,     // any other exception (message says which)
};
std::string_view to_string(PrewarmFailureKind);

struct PrewarmFailure {
  std::string key_text;
  std::string message;
  PrewarmFailureKind kind = PrewarmFailureKind::other;
};

// Counts are per distinct kernel (one content address), except `keys`,
// `loaded` and `load_failed`: compiled + disk_hits + memory_hits + failed +
// missing == distinct_kernels.
struct PrewarmReport {
  std::string model_name;            // PrewarmPlan::model_name
  std::uint64_t max_num_tokens = 0;  // PrewarmPlan::max_num_tokens
  std::string target;                // "sm_90a"
  std::size_t buckets = 0;           // |prewarm_set(max_num_tokens)|
  std::size_t keys = 0;              // distinct specialization keys
  // Distinct generated kernels (source + NVRTC options + target + launch
  // contract: the content address within one NVRTC version); a key the code
  // generator rejects counts as one.
  std::size_t distinct_kernels = 0;
  std::size_t compiled = 0;          // compiled by NVRTC in this run
  std::size_t disk_hits = 0;         // loaded from the cache directory or the AOT pack (Stats::pack_hits splits them)
  std::size_t memory_hits = 0;       // already in this process
  std::size_t failed = 0;            // distinct kernels that could not be produced
  std::size_t missing = 0;           // check_only: distinct kernels neither in memory, the pack nor the directory
  // Of the kernels produced (compiled + disk_hits + memory_hits): on disk or in
  // the pack, so a restarted process finds them, and only in this process's
  // memory (their publish failed: disk full, no inodes, quota, read-only file
  // system, or no usable cache directory). persisted + memory_only ==
  // compiled + disk_hits + memory_hits.
  std::size_t persisted = 0;
  std::size_t memory_only = 0;
  std::size_t loaded = 0;            // keys loaded on the GPU (load_on_gpu only)
  std::size_t load_failed = 0;       // keys whose GPU load failed (load_on_gpu only)
  // One entry per failing key (a failing kernel names its first key), in
  // enumerate_keys order. Non-empty iff failed + load_failed > 0 (or a key
  // sharing an already-compiled kernel failed, which the cache should never do).
  std::vector<PrewarmFailure> failures;
  double wall_ms = 0.0;
  // Sum of the wall times of this run's NVRTC compiles (each measured around
  // its own nvrtcCompileProgram on its thread); with -j N it can exceed wall_ms
  // up to N times. Not CPU time.
  double compile_ms_total = 0.0;
  // The fields above as one JSON object (2-space indented), failures as
  // [{"key": text, "kind": to_string(kind), "message": text}]; field names as in this struct, model_name as "model".
  std::string to_json() const;
};

// Every key the plan can launch, de-duplicated, in a stable order: for each
// quant mode, each layer shape, each bucket of prewarm_set(max_num_tokens,
// bucket_exponent) ascending, the keys of moe_layer_keys() in launch order,
// keeping the first occurrence of a repeated key. Needs no NVRTC and no GPU.
// Throws InvalidArgument naming the field for an invalid plan (max_num_tokens
// == 0 or > kMaxBucketedTokens, no layers, no quant modes, bucket_exponent
// outside [0, 16]) and whatever moe_layer_keys throws for a shape it cannot run.
// Keys follow the process's MOEJIT_GEMM_TUNE (see moe_layer_keys); the
// overload with a tuning follows that one (prewarm passes its Runtime's).
std::vector<SpecKey> enumerate_keys(const PrewarmPlan& plan);
std::vector<SpecKey> enumerate_keys(const PrewarmPlan& plan, const GemmTuning& tuning);

// Compiles (or loads from disk) every kernel of the plan on a thread pool of
// options.jobs threads: one compile per distinct kernel, then every key is
// requested once, so that after prewarm (and runtime.seal()) the plan's keys are
// all memory hits. Failures (code generator rejects a key, CompileError,
// DriverError such as NVRTC missing, GPU load) are collected in the report,
// never thrown; InvalidArgument is thrown only for an invalid plan (see
// enumerate_keys) or options.jobs < 0. The caller seals the runtime if it wants.
// Keys and kernels follow runtime.gemm_tuning().
PrewarmReport prewarm(Runtime& runtime, const PrewarmPlan& plan, const PrewarmOptions& options = {});

}  // namespace moejit
