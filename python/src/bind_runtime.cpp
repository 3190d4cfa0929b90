// The kernel runtime: cache directory, prewarm, seal, statistics, AOT pack.
#include <nanobind/nanobind.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "moejit/aot_pack.hpp"
#include "moejit/error.hpp"
#include "moejit/prewarm.hpp"
#include "moejit/runtime.hpp"
#include "moejit/stats.hpp"
#include "moejit/tuning.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {
namespace {

std::optional<SealPolicy> parse_policy(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  if (*s == "warn") return SealPolicy::warn;
  if (*s == "strict") return SealPolicy::strict;
  throw InvalidArgument("seal_policy: expected 'warn' or 'strict', got '" + *s + "'");
}

// Every counter by its stable string id (moejit/stats.hpp), then compile_ms_total.
nb::dict stats_dict(const Stats& s) {
  nb::dict d;
  for (StatId id : kAllStats) d[nb::str(std::string(to_string(id)).c_str())] = s[id];
  d[nb::str(std::string(kCompileMsTotalId).c_str())] = s.compile_ms_total;
  return d;
}

const char* origin_text(CompiledKernel::Origin o) {
  switch (o) {
    case CompiledKernel::Origin::memory: return "memory";
    case CompiledKernel::Origin::disk: return "disk";
    default: return "compiled";
  }
}

}  // namespace

void bind_runtime(nb::module_& m) {
  nb::class_<PrewarmFailure>(m, "PrewarmFailure")
      .def_ro("key_text", &PrewarmFailure::key_text)
      .def_ro("message", &PrewarmFailure::message)
      .def_prop_ro("kind", [](const PrewarmFailure& f) { return std::string(to_string(f.kind)); })
      .def("__repr__", [](const PrewarmFailure& f) {
        return "PrewarmFailure(kind=" + std::string(to_string(f.kind)) + ", key='" + f.key_text + "')";
      });

  nb::class_<PrewarmReport>(m, "PrewarmReport",
                            "What prewarm did, per distinct kernel: compiled + disk_hits + memory_hits + failed\n"
                            "+ missing == distinct_kernels; persisted + memory_only == compiled + disk_hits +\n"
                            "memory_hits (memory_only: could not be written to the cache); keys counts\n"
                            "specialization keys; compile_ms_total sums the compiles' wall times.")
      .def_ro("model_name", &PrewarmReport::model_name)
      .def_ro("max_num_tokens", &PrewarmReport::max_num_tokens)
      .def_ro("target", &PrewarmReport::target)
      .def_ro("buckets", &PrewarmReport::buckets)
      .def_ro("keys", &PrewarmReport::keys)
      .def_ro("distinct_kernels", &PrewarmReport::distinct_kernels)
      .def_ro("compiled", &PrewarmReport::compiled)
      .def_ro("disk_hits", &PrewarmReport::disk_hits)
      .def_ro("memory_hits", &PrewarmReport::memory_hits)
      .def_ro("failed", &PrewarmReport::failed)
      .def_ro("missing", &PrewarmReport::missing)
      .def_ro("persisted", &PrewarmReport::persisted)
      .def_ro("memory_only", &PrewarmReport::memory_only)
      .def_ro("loaded", &PrewarmReport::loaded)
      .def_ro("load_failed", &PrewarmReport::load_failed)
      .def_ro("failures", &PrewarmReport::failures)
      .def_ro("wall_ms", &PrewarmReport::wall_ms)
      .def_ro("compile_ms_total", &PrewarmReport::compile_ms_total)
      .def("to_json", &PrewarmReport::to_json, "The report as one JSON object (the C++ to_json()).")
      .def("__repr__", [](const PrewarmReport& r) {
        return "PrewarmReport(keys=" + std::to_string(r.keys) + ", distinct_kernels=" +
               std::to_string(r.distinct_kernels) + ", compiled=" + std::to_string(r.compiled) +
               ", disk_hits=" + std::to_string(r.disk_hits) + ", memory_hits=" + std::to_string(r.memory_hits) +
               ", failed=" + std::to_string(r.failed) + ", loaded=" + std::to_string(r.loaded) +
               ", load_failed=" + std::to_string(r.load_failed) + ")";
      });

  m.def(
      "default_cache_dir", [] { return default_cache_dir().string(); },
      "The cache directory of a runtime with default options: $MOEJIT_CACHE_DIR, else\n"
      "$XDG_CACHE_HOME/moejit, else ~/.cache/moejit. Creates nothing.");
  m.def(
      "stat_ids",
      [] {
        nb::list out;
        for (StatId id : kAllStats)
          out.append(nb::make_tuple(std::string(to_string(id)), std::string(describe(id)), is_persisted(id)));
        return out;
      },
      "Every counter of Runtime.stats() as (id, meaning, persisted in the cache directory's stats.json), in\n"
      "numeric id order (the C++ StatId); ids are stable.");

  nb::class_<Runtime>(m, "Runtime",
                      "Specialization key -> compiled, loaded kernel (memory -> disk cache or AOT pack -> NVRTC).\n\n"
                      "Every argument None takes the C++ default and its environment variable:\n"
                      "cache_dir $MOEJIT_CACHE_DIR (else $XDG_CACHE_HOME/moejit, else ~/.cache/moejit),\n"
                      "seal_policy 'strict' if MOEJIT_STRICT=1 else 'warn', pack $MOEJIT_CACHE_PACK,\n"
                      "allow_shared_cache MOEJIT_CACHE_ALLOW_SHARED=1, max_cache_bytes $MOEJIT_CACHE_MAX_BYTES,\n"
                      "gemm_tuning $MOEJIT_GEMM_TUNE (its text form, e.g. 'decode.kw=2,prefill.stages=4';\n"
                      "C++ GemmTuning). A bad value raises InvalidArgument naming the field or item.")
      .def("__init__",
           [](Runtime* self, const std::optional<std::filesystem::path>& cache_dir, bool use_disk_cache,
              const std::optional<std::string>& seal_policy, const std::optional<std::filesystem::path>& pack,
              const std::string& pack_target, std::optional<bool> allow_shared_cache,
              std::optional<std::int64_t> max_cache_bytes, const std::optional<std::string>& gemm_tuning) {
             RuntimeOptions o;
             if (cache_dir) o.cache_dir = *cache_dir;
             o.use_disk_cache = use_disk_cache;
             o.seal_policy = parse_policy(seal_policy);
             if (pack) o.pack = *pack;
             o.pack_target = pack_target;
             o.allow_shared_cache = allow_shared_cache;
             if (max_cache_bytes) {
               if (*max_cache_bytes < 0)
                 throw InvalidArgument("max_cache_bytes=" + std::to_string(*max_cache_bytes) + ": must be >= 0");
               o.max_cache_bytes = static_cast<std::uint64_t>(*max_cache_bytes);
             }
             if (gemm_tuning) o.gemm_tuning = parse_gemm_tuning(*gemm_tuning);
             new (self) Runtime(std::move(o));
           },
           "cache_dir"_a = nb::none(), "use_disk_cache"_a = true, "seal_policy"_a = nb::none(), "pack"_a = nb::none(),
           "pack_target"_a = "", "allow_shared_cache"_a = nb::none(), "max_cache_bytes"_a = nb::none(),
           "gemm_tuning"_a = nb::none())
      .def_static("global_runtime", &Runtime::global, nb::rv_policy::reference,
                  "The process-wide runtime built from the environment on first use.")
      .def_prop_ro("cache_dir", [](const Runtime& r) { return r.cache_dir(); })
      .def_prop_ro("gemm_tuning", [](const Runtime& r) { return to_string(r.gemm_tuning()); },
                   "The GEMM tuning its kernels follow, as MOEJIT_GEMM_TUNE text ('' = the heuristic's own).")
      .def("seal", &Runtime::seal,
           "From now on a kernel not yet in memory is a miss after seal: counted and logged (strict: raised).")
      .def_prop_ro("sealed", &Runtime::sealed)
      .def_prop_ro("seal_policy",
                   [](const Runtime& r) { return std::string(r.seal_policy() == SealPolicy::strict ? "strict" : "warn"); })
      .def("stats", [](const Runtime& r) { return stats_dict(r.stats()); },
           "This runtime's counters by their stable ids (stat_ids()), plus compile_ms_total.")
      .def(
          "prewarm",
          [](Runtime& r, const PrewarmPlan& plan, int jobs, bool load_on_gpu,
             std::function<void(std::size_t, std::size_t)> on_progress) {
            PrewarmOptions o;
            o.jobs = jobs;
            o.load_on_gpu = load_on_gpu;
            // The callback runs on prewarm's worker threads: an exception it raises
            // (or a callable of the wrong arity) is kept, stops further reports, and is
            // raised here once prewarm has finished; it never unwinds a worker thread.
            struct Relay {
              std::function<void(std::size_t, std::size_t)> cb;
              std::optional<nb::python_error> error;
            };
            auto relay = std::make_shared<Relay>();
            relay->cb = std::move(on_progress);
            if (relay->cb)
              o.on_progress = [relay](std::size_t done, std::size_t total) {
                nb::gil_scoped_acquire gil;
                if (relay->error) return;
                try {
                  relay->cb(done, total);
                } catch (nb::python_error& e) {
                  relay->error.emplace(std::move(e));
                }
              };
            PrewarmReport report;
            {
              nb::gil_scoped_release release;
              report = prewarm(r, plan, o);
            }
            if (relay->error) throw std::move(*relay->error);
            return report;
          },
          "plan"_a, "jobs"_a = 0, "load_on_gpu"_a = false, "on_progress"_a = nb::none(),
          "Compiles (or loads from disk) every kernel of the plan on `jobs` threads (0: all cores).\n"
          "Failures are in the report, never raised; load_on_gpu also loads each kernel in the current context.\n"
          "on_progress(done, total) is called after each kernel (from a worker thread, with the GIL); an\n"
          "exception it raises stops the calls and is raised once every kernel is done.")
      .def(
          "write_pack",
          [](Runtime& r, const PrewarmPlan& plan, const std::filesystem::path& out) {
            nb::gil_scoped_release release;
            return write_aot_pack(r, plan, out);
          },
          "plan"_a, "path"_a,
          "Writes the plan's kernels as one immutable AOT pack file (moejit-prewarm --pack); returns the key count.")
      .def(
          "compiled",
          [](Runtime& r, const SpecKey& key) {
            CompiledLookup l;
            {
              nb::gil_scoped_release release;
              l = r.lookup_compiled(key);
            }
            const CompiledKernel& k = *l.kernel;
            nb::dict d;
            d["content_hash"] = k.content_hash.hex();
            d["lowered_name"] = k.lowered_name;
            d["cubin_bytes"] = k.cubin.size();
            d["registers"] = k.resources.registers;
            d["spill_store_bytes"] = k.resources.spill_store_bytes;
            d["spill_load_bytes"] = k.resources.spill_load_bytes;
            d["shared_bytes"] = k.resources.shared_bytes;
            d["block_threads"] = k.launch.block_threads;
            d["dynamic_smem_bytes"] = k.launch.dynamic_smem_bytes;
            d["compile_ms"] = k.compile_ms;
            d["origin"] = origin_text(l.origin);
            return d;
          },
          "key"_a, "The compiled kernel of a key (memory -> disk -> NVRTC), as a dict; needs no GPU.");
}

}  // namespace moejit::python
