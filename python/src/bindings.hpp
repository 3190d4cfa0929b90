#pragma once
// One function per part of the Python module moejit._moejit.
#include <nanobind/nanobind.h>

namespace moejit::python {
void bind_errors(nanobind::module_& m);
void bind_plan(nanobind::module_& m);
void bind_runtime(nanobind::module_& m);
void bind_layer(nanobind::module_& m);
void bind_quant(nanobind::module_& m);
void bind_device(nanobind::module_& m);
void bind_wgrad(nanobind::module_& m);
void bind_grouped_gemm(nanobind::module_& m);
}  // namespace moejit::python
