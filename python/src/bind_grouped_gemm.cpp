// The grouped GEMM over rows already sorted by expert (moejit/grouped_gemm.hpp).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/grouped_gemm.hpp"
#include "moejit/quant.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {
namespace {
// The op and the target it was built for (keys() and the Python side read it).
struct PyGroupedGemm {
  GroupedGemm op;
  Target target;
};
}  // namespace

void bind_grouped_gemm(nb::module_& m) {
  nb::class_<PyGroupedGemm>(m, "GroupedGemm",
                            "Y[r] = A[r] @ W[e]^T + b[e] for the rows r of group e, [expert_offsets[e],\n"
                            "expert_offsets[e + 1]): the grouped GEMM over rows already sorted by expert, Y bfloat16,\n"
                            "fp32 accumulation, asynchronous on the caller's stream (moejit/grouped_gemm.hpp).")
      .def(
          "__init__",
          [](PyGroupedGemm* self, Runtime& rt, std::uint32_t n, std::uint32_t k, std::uint32_t experts,
             const std::string& quant, const std::string& bias, const std::optional<std::string>& weight_scale,
             const std::string& target) {
            const QuantMode q = parse_quant_mode(quant);
            const WeightScale w = weight_scale ? parse_weight_scale(*weight_scale) : default_weight_scale(q);
            const Target t = parse_target(target);
            new (self) PyGroupedGemm{GroupedGemm(rt, GroupedGemmShape{n, k, experts, parse_bias_kind(bias)}, q, w, t), t};
          },
          "runtime"_a, "n"_a, "k"_a, "experts"_a, "quant"_a = "bf16", "bias"_a = "none", "weight_scale"_a = nb::none(),
          "target"_a = "sm_90a", nb::keep_alive<1, 2>(),
          "n (output columns) and k (reduction) positive multiples of 32, experts 1..4096; quant 'bf16',\n"
          "'w4a16_mxfp4', 'mxfp8' or 'fp8_per_token'; bias 'none', 'bf16' or 'f32'. Raises InvalidArgument\n"
          "naming the field.")
      .def_prop_ro("n", [](const PyGroupedGemm& g) { return g.op.shape().n; })
      .def_prop_ro("k", [](const PyGroupedGemm& g) { return g.op.shape().k; })
      .def_prop_ro("experts", [](const PyGroupedGemm& g) { return g.op.shape().experts; })
      .def_prop_ro("bias", [](const PyGroupedGemm& g) { return std::string(to_string(g.op.shape().bias)); })
      .def_prop_ro("quant", [](const PyGroupedGemm& g) { return std::string(to_string(g.op.quant())); })
      .def_prop_ro("weight_scale", [](const PyGroupedGemm& g) { return std::string(to_string(g.op.weight_scale())); })
      .def("workspace_size", [](const PyGroupedGemm& g, std::uint32_t max_rows) { return g.op.workspace_size(max_rows); },
           "max_rows"_a, "Bytes of workspace every call with up to max_rows rows fits in (monotonic).")
      .def("workspace_size_for",
           [](const PyGroupedGemm& g, std::uint32_t num_rows) { return g.op.workspace_size_for(num_rows); }, "num_rows"_a,
           "Bytes a call with exactly num_rows rows needs (<= workspace_size(num_rows)).")
      .def(
          "keys", [](const PyGroupedGemm& g, std::uint64_t num_rows) { return g.op.keys(round_up_tokens(num_rows)); },
          "num_rows"_a, "The keys a call with num_rows rows requests, in launch order.")
      .def(
          "prewarm",
          [](const PyGroupedGemm& g, std::uint32_t max_rows) {
            nb::gil_scoped_release release;
            return g.op.prewarm(max_rows);
          },
          "max_rows"_a,
          "Compiles (or loads from the cache) the kernels of every row bucket up to max_rows; returns the\n"
          "number of distinct keys. Needs no GPU.")
      .def(
          "run_ptr",
          [](const PyGroupedGemm& g, std::uint32_t M, std::uintptr_t a, std::int64_t a_row_stride,
             std::uintptr_t a_scales, std::uintptr_t expert_offsets, std::uintptr_t w, std::uintptr_t w_scales,
             std::uintptr_t bias, std::uintptr_t out, std::int64_t out_row_stride, std::uintptr_t ws,
             std::size_t ws_bytes, std::uintptr_t stream) {
            GroupedGemmArgs x;
            x.num_rows = M;
            x.a = a;
            x.a_row_stride = a_row_stride;
            x.a_scales = a_scales;
            x.expert_offsets = expert_offsets;
            x.w = w;
            x.w_scales = w_scales;
            x.bias = bias;
            x.out = out;
            x.out_row_stride = out_row_stride;
            x.workspace = ws;
            x.workspace_bytes = ws_bytes;
            nb::gil_scoped_release release;
            g.op.run(x, to_stream(stream));
          },
          "num_rows"_a, "a"_a, "a_row_stride"_a, "a_scales"_a, "expert_offsets"_a, "w"_a, "w_scales"_a, "bias"_a,
          "out"_a, "out_row_stride"_a, "workspace"_a, "workspace_bytes"_a, "stream"_a,
          "Device addresses as integers (0 for an unused operand), row strides in elements (bytes for e4m3\n"
          "A; 0 = dense). The C++ checks (null, alignment, strides, workspace size) run and raise\n"
          "InvalidArgument naming the argument.");
}

}  // namespace moejit::python
