// prewarm(): compile (or load from disk) every kernel of a plan on a thread pool.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/prewarm.hpp"
#include "prewarm/kernel_groups.hpp"
#include "prewarm/plan_check.hpp"

namespace moejit {
namespace {

using Clock = std::chrono::steady_clock;
using prewarm_detail::KernelGroup;

struct Failure {
  std::size_t key_index;
  std::string message;
  PrewarmFailureKind kind;
};

// Outcome of one kernel group, written by exactly one worker.
struct GroupResult {
  bool ok = false;
  bool missing = false;    // check_only: not in memory, pack or directory
  bool persisted = false;  // the kernel is on disk or in the pack
  CompiledKernel::Origin origin = CompiledKernel::Origin::compiled;
  Hash128 content_hash;
  double compile_ms = 0.0;
  std::vector<Failure> failures;
};

Failure make_failure(std::size_t index, const std::exception& e) {
  // A CompileError's what() repeats the key and holds the whole NVRTC log; the
  // report carries the key separately, so keep the log only.
  if (auto* ce = dynamic_cast<const CompileError*>(&e))
    return {index, "NVRTC compile failed:\n" + ce->log(), PrewarmFailureKind::compile};
  if (dynamic_cast<const DriverError*>(&e)) return {index, e.what(), PrewarmFailureKind::driver};
  if (dynamic_cast<const InvalidArgument*>(&e)) return {index, e.what(), PrewarmFailureKind::rejected};
  return {index, e.what(), PrewarmFailureKind::other};
}

// Compiles the representative, then requests every other member so that each
// key is in the runtime's memory before seal() (a sealed runtime never misses).
void run_group(Runtime& runtime, const std::vector<SpecKey>& keys, const KernelGroup& group, GroupResult& out,
               bool check_only) {
  if (check_only) {
    // Every member, not only the representative: the check answers "would a
    // server find each key's kernel", whatever generator the runtime uses.
    for (std::size_t m = 0; m < group.members.size(); ++m) {
      try {
        const CompiledLookup got = runtime.lookup_cached(keys[group.members[m]]);
        if (!got.kernel) {
          out.missing = true;
          out.ok = false;
          return;
        }
        if (m == 0) {
          out.ok = true;
          out.origin = got.origin;
          out.persisted = got.kernel->persisted;
          out.content_hash = got.kernel->content_hash;
        }
      } catch (const std::exception& e) {
        out.failures.push_back(make_failure(group.members[m], e));
        out.ok = false;
        return;
      }
    }
    return;
  }
  try {
    // Why lookup_compiled and not compiled()->origin: the kernel object is
    // shared, its origin is how it was first obtained; we need this call's.
    const CompiledLookup got = runtime.lookup_compiled(keys[group.members.front()]);
    out.ok = true;
    out.origin = got.origin;
    out.content_hash = got.kernel->content_hash;
    out.persisted = got.kernel->persisted;
    out.compile_ms = got.origin == CompiledKernel::Origin::compiled ? got.kernel->compile_ms : 0.0;
  } catch (const std::exception& e) {
    out.failures.push_back(make_failure(group.members.front(), e));
    return;  // the other members compile the same source: same failure, no retry
  }
  for (std::size_t m = 1; m < group.members.size(); ++m) {
    try {
      (void)runtime.compiled(keys[group.members[m]]);
    } catch (const std::exception& e) {
      out.failures.push_back(make_failure(group.members[m], e));
    }
  }
}

unsigned resolve_jobs(int jobs) {
  if (jobs < 0) throw InvalidArgument("PrewarmOptions.jobs must be >= 0 (got " + std::to_string(jobs) + ")");
  if (jobs > 0) return static_cast<unsigned>(jobs);
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

std::string_view to_string(PrewarmFailureKind kind) {
  switch (kind) {
    case PrewarmFailureKind::rejected: return "rejected";
    case PrewarmFailureKind::compile: return "compile";
    case PrewarmFailureKind::driver: return "driver";
    case PrewarmFailureKind::load: return "load";
    case PrewarmFailureKind::other: return "other";
  }
  return "other";
}

PrewarmReport prewarm(Runtime& runtime, const PrewarmPlan& plan, const PrewarmOptions& options) {
  const auto t0 = Clock::now();
  const unsigned jobs = resolve_jobs(options.jobs);
  const std::vector<SpecKey> keys = enumerate_keys(plan, runtime.gemm_tuning());  // validates the plan

  PrewarmReport report;
  report.model_name = plan.model_name;
  report.max_num_tokens = plan.max_num_tokens;
  report.target = to_string(plan.target);
  report.buckets = prewarm_set(plan.max_num_tokens, plan.bucket_exponent).size();
  report.keys = keys.size();

  const prewarm_detail::Grouping grouping = prewarm_detail::group_by_kernel(keys, runtime.gemm_tuning());
  const std::vector<KernelGroup>& groups = grouping.groups;
  const std::size_t total = groups.size();
  std::vector<GroupResult> results(total);

  // Why an atomic index over a vector and not a task queue: the work is known up
  // front, and each group's cost (one NVRTC compile) dwarfs the fetch_add.
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::mutex progress_mutex;
  auto worker = [&] {
    for (std::size_t g = next.fetch_add(1); g < total; g = next.fetch_add(1)) {
      run_group(runtime, keys, groups[g], results[g], options.check_only);
      const std::size_t d = done.fetch_add(1) + 1;
      if (options.on_progress) {
        std::lock_guard lock(progress_mutex);
        options.on_progress(d, total);
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    const std::size_t n = std::min<std::size_t>(jobs, std::max<std::size_t>(total, 1));
    pool.reserve(n);
    for (std::size_t i = 0; i < n; ++i) pool.emplace_back(worker);
  }  // jthreads join here

  std::vector<Failure> failures;
  std::unordered_set<std::size_t> failed_keys;
  for (std::size_t g = 0; g < total; ++g) {
    GroupResult& r = results[g];
    for (Failure& f : r.failures) failures.push_back(std::move(f));
    if (r.missing) ++report.missing;
    if (!r.ok) continue;
    ++(r.persisted ? report.persisted : report.memory_only);
    switch (r.origin) {
      case CompiledKernel::Origin::compiled:
        ++report.compiled;
        report.compile_ms_total += r.compile_ms;
        break;
      case CompiledKernel::Origin::disk: ++report.disk_hits; break;
      case CompiledKernel::Origin::memory: ++report.memory_hits; break;
    }
  }
  report.distinct_kernels = total;
  report.failed = 0;
  for (const GroupResult& r : results) report.failed += r.ok || r.missing ? 0 : 1;

  // Why on the calling thread: get() loads into the calling thread's current
  // CUDA context, and the pool's threads have none.
  if (options.load_on_gpu && !options.check_only) {
    for (const Failure& f : failures) failed_keys.insert(f.key_index);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (failed_keys.count(i)) continue;
      try {
        (void)runtime.get(keys[i]);
        ++report.loaded;
      } catch (const std::exception& e) {
        failures.push_back({i, "load on GPU failed: " + std::string(e.what()), PrewarmFailureKind::load});
        ++report.load_failed;
      }
    }
  }

  std::sort(failures.begin(), failures.end(),
            [](const Failure& a, const Failure& b) { return a.key_index < b.key_index; });
  report.failures.reserve(failures.size());
  for (Failure& f : failures) report.failures.push_back({keys[f.key_index].to_text(), std::move(f.message), f.kind});
  report.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return report;
}

}  // namespace moejit
