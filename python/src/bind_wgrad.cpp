// The weight gradient of one MoE grouped GEMM (training).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_wgrad.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {
namespace {

WgradGather parse_gather(const std::string& s) {
  if (s == "by_token") return WgradGather::by_token;
  if (s == "by_row") return WgradGather::by_row;
  throw InvalidArgument("gather: expected 'by_token' or 'by_row', got '" + s + "'");
}

}  // namespace

void bind_wgrad(nb::module_& m) {
  nb::class_<MoeWgrad>(m, "MoeWgrad",
                       "dW[e] = sum over the routed rows r of expert e of grad[r]^T X[src(r)] (and db[e] = the\n"
                       "sum of grad[r]): fp32 accumulation, deterministic, asynchronous on the caller's stream.")
      .def(
          "__init__",
          [](MoeWgrad* self, Runtime& rt, std::uint32_t experts, std::uint32_t top_k, std::uint32_t n, std::uint32_t k,
             const std::string& out_dtype, const std::string& target) {
            MoeWgradShape s;
            s.experts = experts;
            s.top_k = top_k;
            s.n = n;
            s.k = k;
            s.out_dtype = parse_dtype(out_dtype);
            new (self) MoeWgrad(rt, s, parse_target(target));
          },
          "runtime"_a, "experts"_a, "top_k"_a, "n"_a, "k"_a, "out_dtype"_a = "f32", "target"_a = "sm_90a",
          nb::keep_alive<1, 2>(),
          "n (output channels: gate_up 2I, down D) and k (input features: gate_up D, down I) multiples of 8;\n"
          "out_dtype 'f32' or 'bf16' (db is always float32). Raises InvalidArgument naming the field.")
      .def_prop_ro("experts", [](const MoeWgrad& w) { return w.shape().experts; })
      .def_prop_ro("top_k", [](const MoeWgrad& w) { return w.shape().top_k; })
      .def_prop_ro("n", [](const MoeWgrad& w) { return w.shape().n; })
      .def_prop_ro("k", [](const MoeWgrad& w) { return w.shape().k; })
      .def_prop_ro("out_dtype", [](const MoeWgrad& w) { return std::string(to_string(w.shape().out_dtype)); })
      .def(
          "key",
          [](const MoeWgrad& w, std::uint64_t num_tokens) {
            return moe_wgrad_key(w.shape(), num_tokens ? round_up_tokens(num_tokens) : 1);
          },
          "num_tokens"_a, "The specialization key a call with num_tokens tokens requests.")
      .def(
          "run_ptr",
          [](const MoeWgrad& w, std::uint32_t T, std::uintptr_t grad, std::int64_t grad_row_stride, std::uintptr_t x,
             std::int64_t x_row_stride, const std::string& gather, std::uintptr_t expert_offsets,
             std::uintptr_t sorted_route, std::uintptr_t dw, std::uintptr_t db, std::uintptr_t stream) {
            MoeWgradArgs a;
            a.num_tokens = T;
            a.grad = grad;
            a.grad_row_stride = grad_row_stride;
            a.x = x;
            a.x_row_stride = x_row_stride;
            a.gather = parse_gather(gather);
            a.expert_offsets = expert_offsets;
            a.sorted_route = sorted_route;
            a.dw = dw;
            a.db = db;
            nb::gil_scoped_release release;
            w.run(a, to_stream(stream));
          },
          "num_tokens"_a, "grad"_a, "grad_row_stride"_a, "x"_a, "x_row_stride"_a, "gather"_a, "expert_offsets"_a,
          "sorted_route"_a, "dw"_a, "db"_a, "stream"_a,
          "Device addresses: grad bf16 [rows, n], x bf16 [T, k] (gather 'by_token') or [rows, k] ('by_row'),\n"
          "expert_offsets int32 [E + 1], sorted_route int32 [rows] (by_token), dw [E, n, k] out_dtype, db float32\n"
          "[E, n] or 0. Row strides in elements (0 = dense). The C++ checks (null, alignment, strides) run.");
}

}  // namespace moejit::python
