// bench_launch: host-side cost of one kernel launch on a cache hit, in ns.
//
// gpt-oss-120b MoE layer (MXFP4 random weights), T tokens (default 1). Rows:
//   key_from_T         round_up_tokens(T) + the combine's specialization key
//   lookup (memory)    the in-memory part of Runtime::get (hash, shared lock, find)
//   Runtime::get       full get() on a hit (context check + lookup)
//   key+get+pack+launch  what MoeLayer::combine does on a hit, without its argument
//                      checks: key from T, get, parameter struct, cuLaunchKernel
//   cuLaunchKernel alone the same combine kernel, prepared function and parameters
//   MoeLayer::combine  the library call (argument checks, workspace view, key, get, launch)
//   MoeLayer::gate_up  the library call for the grouped GEMM (adds the config choice)
//   MoeLayer::run      route + gate_up + down + combine (4 launches; 3 at <= 32 routes,
//                      where the decode GEMMs route themselves)
// Each row: batches of --batch calls timed with steady_clock (the GPU drains
// between batches, untimed), median over --batches batches, ns per call.
// Prints a Markdown table and one JSON line per row (--json appends them).
// Exit codes: 0 ok, 2 bad arguments, 3 driver error, 77 no GPU.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>

#include "bench_util.hpp"
#include "moejit/bucketing.hpp"
#include "ops/device_ptr.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/kernel_params.hpp"
#include "ops/launch_contracts.hpp"
#include "ops/moe_keys.hpp"
#include "runtime/runtime_access.hpp"

using namespace moejit;
using namespace moejit::bench;

namespace {
using ops::dptr;

volatile std::uint64_t g_sink = 0;

double median_ns(int batches, int batch, const std::function<void()>& fn, bool gpu) {
  std::vector<float> ns;
  for (int b = 0; b < batches + 1; ++b) {
    if (gpu) MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) fn();
    const auto t1 = std::chrono::steady_clock::now();
    if (b > 0) ns.push_back(static_cast<float>(std::chrono::duration<double, std::nano>(t1 - t0).count() / batch));
  }
  if (gpu) MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
  return median_of(ns);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_launch: host cost of a launch on a cache hit (ns)"};
  std::uint32_t T = 1;
  int batches = 21, batch = 256;
  std::string json_path, cache_dir;
  app.add_option("--tokens", T, "token count T")->check(CLI::Range(1, 1 << 20));
  app.add_option("--batches", batches, "batches (median)")->check(CLI::Range(3, 100000));
  app.add_option("--batch", batch, "calls per batch")->check(CLI::Range(1, 100000));
  app.add_option("--json", json_path, "append JSON lines here");
  app.add_option("--cache-dir", cache_dir, "kernel cache directory");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!driver::gpu_available()) {
    std::printf("SKIPPED: bench_launch: no usable GPU\n");
    return 77;
  }
  try {
    driver::ensure_context(0);
    RuntimeOptions ro;
    if (!cache_dir.empty()) ro.cache_dir = cache_dir;
    Runtime rt(ro);
    const QuantMode q = QuantMode::w4a16_mxfp4;
    const MoeLayerShape s = model_shape("gpt-oss-120b", q);
    MoeLayer layer(rt, s, q);
    const auto w = make_bench_weights(s, q, WeightScale::e8m0_block32, 42);
    const MoeWeights dw = w->device();
    const auto ids = make_routing(T, s.top_k, s.experts, false, 5);
    driver::DeviceBuffer x = random_device(Fill::bf16, s.hidden, std::size_t(T) * s.hidden * 2, 1, 1.7f);
    driver::DeviceBuffer gamma = random_device(Fill::f32_gamma, 0, std::size_t(T) * s.top_k * 4, 2);
    driver::DeviceBuffer dids(std::max<std::size_t>(256, ids.size() * 4));
    dids.upload(ids.data(), ids.size() * 4);
    driver::DeviceBuffer out(std::max<std::size_t>(256, std::size_t(T) * s.hidden * 2));
    driver::DeviceBuffer wsb(layer.workspace_size(T));
    MoeLayerArgs a;
    a.num_tokens = T, a.x = x.get(), a.topk_ids = dids.get(), a.topk_weights = gamma.get(), a.out = out.get();
    a.workspace = wsb.get(), a.workspace_bytes = wsb.bytes();
    layer.run(dw, a, nullptr);  // compiles/loads every kernel; fills the workspace
    MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());

    const Target target{};
    const std::uint32_t bucket = round_up_tokens(T);
    const MoeWorkspaceView v = layer.workspace_view(a);
    const SpecKey ckey = ops::combine_key(s, v.y_dtype, bucket, target);
    const KernelRef kref = rt.get(ckey);
    const int splits = ops::choose_config(ops::gemm_key(OpKind::down, s, q, bucket, target)).splits;
    auto pack = [&](CombineParams& p) {
      p.y = dptr(v.y);
      p.y_row_stride = s.hidden;
      p.y_split_stride = static_cast<std::int64_t>(T) * s.top_k * s.hidden;
      p.splits = splits;
      p.route_row = dptr(v.route_row);
      p.out = dptr(a.out);
      p.out_row_stride = s.hidden;
      p.hidden = static_cast<int>(s.hidden);
      p.top_k = static_cast<int>(s.top_k);
      p.num_tokens = static_cast<int>(T);
    };
    const unsigned gx = static_cast<unsigned>(
        ops::combine_ctas(T, s.hidden, ops::combine_cols(ckey.n, ckey.out_dtype == DType::bf16)));
    CombineParams fixed{};
    pack(fixed);
    void* fixed_args[] = {&fixed};
    const auto& cu = driver::cuda();

    struct Row {
      const char* name;
      double ns;
    };
    std::vector<Row> rows;
    rows.push_back({"key_from_T (round_up + key)", median_ns(batches, batch, [&] {
                      const SpecKey k = ops::combine_key(s, v.y_dtype, round_up_tokens(T), target);
                      g_sink = g_sink + k.token_bucket;
                    }, false)});
    rows.push_back({"lookup (memory, RuntimeAccess)", median_ns(batches, batch, [&] {
                      g_sink = g_sink + reinterpret_cast<std::uintptr_t>(RuntimeAccess::lookup(rt, ckey));
                    }, false)});
    rows.push_back({"Runtime::get (hit)", median_ns(batches, batch, [&] {
                      g_sink = g_sink + reinterpret_cast<std::uintptr_t>(rt.get(ckey).function);
                    }, false)});
    rows.push_back({"cuLaunchKernel alone (combine)", median_ns(batches, batch, [&] {
                      MOEJIT_CU_CHECK(cu.cuLaunchKernel(kref.function, gx, 1, 1, kref.launch.block_threads, 1, 1,
                                                        kref.launch.dynamic_smem_bytes, nullptr, fixed_args, nullptr));
                    }, true)});
    rows.push_back({"key+get+pack+cuLaunchKernel", median_ns(batches, batch, [&] {
                      const SpecKey k = ops::combine_key(s, v.y_dtype, round_up_tokens(T), target);
                      const KernelRef r = rt.get(k);
                      CombineParams p{};
                      pack(p);
                      void* args[] = {&p};
                      MOEJIT_CU_CHECK(cu.cuLaunchKernel(r.function, gx, 1, 1, r.launch.block_threads, 1, 1,
                                                        r.launch.dynamic_smem_bytes, nullptr, args, nullptr));
                    }, true)});
    rows.push_back({"MoeLayer::combine (library call)", median_ns(batches, batch, [&] { layer.combine(a, nullptr); }, true)});
    rows.push_back({"MoeLayer::gate_up (library call)",
                    median_ns(batches, std::min(batch, 64), [&] { layer.gate_up(dw, a, nullptr); }, true)});
    rows.push_back({"MoeLayer::run (3-4 launches)", median_ns(batches, std::min(batch, 32), [&] { layer.run(dw, a, nullptr); }, true)});

    const double launch_ns = rows[3].ns;
    std::printf("host cost per call on a cache hit, gpt-oss-120b w4a16_mxfp4, T=%u (GPU: %s)\n\n", T, gpu_name().c_str());
    std::printf("| step | ns per call | vs cuLaunchKernel alone |\n|---|---|---|\n");
    for (const auto& r : rows) std::printf("| %s | %.0f | %.2fx |\n", r.name, r.ns, r.ns / launch_ns);
    std::ofstream jf;
    if (!json_path.empty()) jf.open(json_path, std::ios::app);
    for (const auto& r : rows) {
      const std::string line = nlohmann::json{{"bench", "launch"}, {"gpu", gpu_name()}, {"T", T}, {"step", r.name},
                                              {"ns", r.ns}}.dump();
      std::printf("%s\n", line.c_str());
      if (jf.is_open()) jf << line << '\n';
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_launch: error: %s\n", e.what());
    return 3;
  }
}
