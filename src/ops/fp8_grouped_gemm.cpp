// FP8 grouped GEMM: key -> NVRTC unit (codegen) and the launch.
#include "ops/fp8_grouped_gemm.hpp"

#include <algorithm>
#include <string>

#include "codegen/families.hpp"
#include "driver/cuda_api.hpp"
#include "driver/programmatic_launch.hpp"
#include "moejit/error.hpp"
#include "ops/device_ptr.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/kernel_configs.hpp"
#include "ops/kernel_params.hpp"
#include "ops/tensor_map.hpp"

namespace moejit {
namespace {
using ops::dptr;

int wscale_code(WeightScale w) {
  return w == WeightScale::per_channel ? 1 : w == WeightScale::e8m0_block32 ? 2 : 0;  // f8::kWs*
}

// The fields both parameter structs (f8::Fp8GemmParams, GroupedGemmParams)
// take from the args and the key, under the same names.
template <class Params>
void fill_common(Params& p, const SpecKey& key, const ops::Fp8GemmArgs& a) {
  p.a = dptr(a.a);
  p.a_row_stride = a.a_row_stride;  // e4m3: elements are bytes
  p.w = dptr(a.w);
  p.w_scales = dptr(a.w_scales);
  p.bias = dptr(key.bias != BiasKind::none ? a.bias : 0);
  p.gamma = dptr(a.gamma);
  p.out = dptr(a.out);
  p.out_row_stride = a.out_row_stride;
  p.sorted_route = dptr(a.sorted_route);
  p.tile_expert = dptr(a.tile_expert);
  p.tile_row_begin = dptr(a.tile_row_begin);
  p.tile_row_end = dptr(a.tile_row_end);
  p.num_tiles = dptr(a.num_tiles);
  p.n = static_cast<int>(key.n);
  p.k = static_cast<int>(key.k);
  p.top_k = static_cast<int>(key.top_k);
  p.act_alpha = key.act_alpha;
  p.act_limit = key.act_limit;
}

}  // namespace

namespace codegen {
KernelSource generate_grouped_gemm_fp8(const SpecKey& key, const GemmTuning& tuning) {
  return generate_grouped_gemm_fp8(key, ops::choose_fp8_config(key, tuning));
}

KernelSource generate_grouped_gemm_fp8(const SpecKey& key, const ops::Fp8GemmConfig& c) {
  const GemmEpilogue e = ops::gemm_epilogue(key);
  KernelSource ks;
  if (c.decode) {
    ks.source = config_unit(
        {"grouped_gemm_params.cuh", "mxfp4_fragments.cuh", "decode_routing.cuh", "grouped_gemm_fp8_decode_sm90.cuh"});
    ks.name_expression = ops::instantiation(
        "moejit::grouped_gemm_fp8_decode_kernel",
        Fp8DecodeKernel{.wn = c.wn, .kw = c.kw, .depth = c.depth, .ctas = c.ctas,
                        .wscale = key.weight_scale == WeightScale::per_channel ? 1 : 0, .epilogue = e});
  } else if (c.ws) {
    // The TMA warp-specialized mainloop with e4m3 operands; scale 1 per
    // expert, 2 per channel, 3 MXFP8 block scales (kTmaWsScale*).
    ks.source = config_unit({"grouped_gemm_params.cuh", "wgmma_sm90.cuh", "grouped_gemm_tma_ws_sm90.cuh"});
    const int scale = key.quant == QuantMode::mxfp8 ? 3 : key.weight_scale == WeightScale::per_channel ? 2 : 1;
    ks.name_expression = ops::instantiation(
        "moejit::grouped_gemm_tma_ws_kernel",
        TmaWsKernel{.elem = 1, .scale = scale, .bn = c.bn(), .stages = c.stages, .promote_slices = c.promote_slices,
                    .k_tail = c.k_tail, .epilogue = e});
  } else {
    ks.source = config_unit({"grouped_gemm_fp8_sm90.cuh"});
    ks.name_expression = ops::instantiation(
        "moejit::f8::grouped_gemm_fp8_kernel",
        Fp8MmaKernel{.warps_m = c.warps_m, .warps_n = c.warps_n, .mi = c.mi, .ni = c.ni, .stages = c.stages,
                     .quant = key.quant == QuantMode::mxfp8 ? 1 : 0, .wscale = wscale_code(key.weight_scale),
                     .k_tail = c.k_tail, .epilogue = e});
  }
  ks.options = kernel_config_options();
  ks.launch.block_threads = static_cast<std::uint32_t>(c.threads());
  ks.launch.dynamic_smem_bytes = c.smem_bytes(key.quant);
  ks.config_text = c.to_string();
  return ks;
}
}  // namespace codegen

namespace ops {
void launch_fp8_grouped_gemm(const KernelRef& kernel, const SpecKey& key, const Fp8GemmConfig& c, const Fp8GemmArgs& a,
                             CUstream stream) {
  if (kernel.launch.block_threads != static_cast<std::uint32_t>(c.threads()))
    throw InvalidArgument("launch_fp8_grouped_gemm: config " + c.to_string() + " runs " + std::to_string(c.threads()) +
                          " threads per CTA, the kernel was compiled for " +
                          std::to_string(kernel.launch.block_threads) + " (a config of another tuning)");
  auto bad = [](const char* f, std::uint64_t v, const std::string& why) {
    throw InvalidArgument(std::string("Fp8GemmArgs.") + f + "=" + std::to_string(v) + ": " + why);
  };
  if (!kernel.function) throw InvalidArgument("launch_fp8_grouped_gemm: kernel.function is null");
  if (!a.a || a.a % 16) bad("a", a.a, "must be non-null and 16-byte aligned");
  if (a.a_row_stride < std::int64_t(key.k) || a.a_row_stride % 16)
    bad("a_row_stride", static_cast<std::uint64_t>(a.a_row_stride), "must be >= K and a multiple of 16");
  if (!a.a_scales) bad("a_scales", a.a_scales, "null");
  if (!a.w || a.w % 16) bad("w", a.w, "must be non-null and 16-byte aligned");
  if (!a.w_scales) bad("w_scales", a.w_scales, "null");
  if (key.bias != BiasKind::none && !a.bias) bad("bias", a.bias, "null but the key has a bias");
  if (key.router_weight && !a.gamma) bad("gamma", a.gamma, "null but the key applies router weights");
  if (!a.out || a.out % 4) bad("out", a.out, "must be non-null and 4-byte aligned");
  // bf16 outputs are stored as pairs of adjacent columns (4-byte stores).
  const std::uint64_t out_cols = key.op == OpKind::gate_up && key.act != Activation::none ? key.n / 2 : key.n;
  if (a.out_row_stride < std::int64_t(out_cols) || (key.out_dtype == DType::bf16 && a.out_row_stride % 2))
    bad("out_row_stride", static_cast<std::uint64_t>(a.out_row_stride),
        "must be >= the output columns (" + std::to_string(out_cols) + ") and even for bf16 output");
  if (key.quant == QuantMode::fp8_per_token && a.w_scales % 4) bad("w_scales", a.w_scales, "must be 4-byte aligned (fp32)");
  if (key.quant == QuantMode::fp8_per_token && a.a_scales % 4) bad("a_scales", a.a_scales, "must be 4-byte aligned (fp32)");
  if (!a.topk_ids && (!a.sorted_route || !a.tile_expert || !a.tile_row_begin || !a.tile_row_end || !a.num_tiles))
    bad("sorted_route/tile_*", 0, "routing metadata pointer is null");
  if (a.topk_ids && key.router_weight && !a.sorted_route) bad("sorted_route", 0, "null (the router weights go through it)");
  if (a.max_tiles > 65535) bad("max_tiles", a.max_tiles, "too many m-tiles for one launch (> 65535)");
  if ((a.tiles_ready || a.topk_ids) && !c.decode)
    bad("tiles_ready/topk_ids", 1, "only the decode kernel takes them (" + c.to_string() + ")");
  if (a.topk_ids) {
    if (!c.fr) bad("topk_ids", a.topk_ids, "in-warp routing needs a decode bucket of <= 32 routes (" + c.to_string() + ")");
    if (a.topk_ids % 4) bad("topk_ids", a.topk_ids, "must be 4-byte aligned (int32)");
    if (a.num_routes == 0 || a.num_routes > 32 ||
        std::uint64_t(a.num_routes) > std::uint64_t(key.token_bucket) * key.top_k)
      bad("num_routes", a.num_routes, "must be 1..32 and fit the key's bucket (T * top_k)");
    // The kernel builds its own tile list: every tile of it needs a CTA row
    // (grid.y) and, in gate_up, a slot of route_tiles.
    const std::uint32_t tiles = max_m_tiles(a.num_routes, key.experts, c.bm());
    if (a.max_tiles < tiles)
      bad("max_tiles", a.max_tiles,
          "in-warp routing of " + std::to_string(a.num_routes) + " routes needs >= " + std::to_string(tiles));
    if (key.op == OpKind::gate_up) {
      const DevicePtr outs[] = {a.route_expert_offsets, a.route_sorted_route, a.route_route_row, a.route_tiles[0],
                                a.route_tiles[1],       a.route_tiles[2],     a.route_tiles[3]};
      for (DevicePtr o : outs)
        if (!o || o % 4) bad("route_*", o, "gate_up with in-warp routing writes the routing outputs: each must be "
                                           "non-null and 4-byte aligned (int32)");
    }
  }
  if (a.max_tiles == 0) return;
  const std::int64_t scale_stride = a.a_scale_row_stride ? a.a_scale_row_stride : std::int64_t(key.k / 32);
  if (key.quant == QuantMode::mxfp8 && scale_stride < std::int64_t(key.k / 32))
    bad("a_scale_row_stride", static_cast<std::uint64_t>(scale_stride), "must be >= K/32");
  if (c.decode) {
    GroupedGemmParams g{};
    fill_common(g, key, a);
    g.a_scales = dptr(a.a_scales);
    g.tiles_ready = a.tiles_ready ? 1 : 0;
    if (a.topk_ids) {
      g.topk_ids = dptr(a.topk_ids);
      g.num_routes = static_cast<int>(a.num_routes);
      g.num_experts = static_cast<int>(key.experts);
      g.route_expert_offsets = dptr(a.route_expert_offsets);
      g.route_sorted_route = dptr(a.route_sorted_route);
      g.route_route_row = dptr(a.route_route_row);
      for (int i = 0; i < 4; ++i) g.route_tiles[i] = dptr(a.route_tiles[i]);
    }
    // Programmatic stream serialization (as the layer's routing, quantizers,
    // bf16 / MXFP4 GEMMs and combine; the other FP8 GEMMs launch without it):
    // the kernel waits (griddepcontrol.wait) before its first read.
    void* args[] = {&g};
    driver::launch_programmatic(kernel.function,
                                {static_cast<unsigned>((key.n + c.bn() - 1) / c.bn()), a.max_tiles, 1,
                                 kernel.launch.block_threads, kernel.launch.dynamic_smem_bytes},
                                stream, args);
    return;
  }
  if (c.ws) {
    if (!a.expert_offsets) bad("expert_offsets", 0, "null (the warp-specialized kernel orders its work by expert)");
    GroupedGemmParams g{};
    fill_common(g, key, a);
    g.expert_offsets = dptr(a.expert_offsets);
    g.item_counter = dptr(a.item_counter);
    g.a_scales = dptr(a.a_scales);
    g.a_scale_row_stride = scale_stride;
    g.num_experts = static_cast<int>(key.experts);
    const CUtensorMap map = weight_map(a.w, key.experts, key.n, key.k, 1, key.act, c.bn());
    void* args[] = {&g, const_cast<CUtensorMap*>(&map)};
    const std::uint64_t blocks = (key.n + c.bn() - 1) / c.bn();
    const unsigned gx = static_cast<unsigned>(std::min<std::uint64_t>(kPersistentMaxCtas, blocks * a.max_tiles));
    MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernel(kernel.function, gx, 1, 1, kernel.launch.block_threads, 1, 1,
                                                  kernel.launch.dynamic_smem_bytes, stream, args, nullptr));
    return;
  }
  f8::Fp8GemmParams p{};
  fill_common(p, key, a);
  p.a_scales = dptr(a.a_scales);
  p.a_scale_row_stride = scale_stride;
  void* args[] = {&p};
  const unsigned gx = static_cast<unsigned>((key.n + c.bn() - 1) / c.bn());
  MOEJIT_CU_CHECK(driver::cuda().cuLaunchKernel(kernel.function, gx, a.max_tiles, 1, kernel.launch.block_threads, 1,
                                                1, kernel.launch.dynamic_smem_bytes, stream, args, nullptr));
}
}  // namespace ops

}  // namespace moejit
