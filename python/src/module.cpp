// moejit._moejit: the C++ library's public API (include/moejit) for Python.
// Tensors cross as DLPack arrays (torch, numpy, cupy, jax ...); streams as
// integers (torch.cuda.current_stream().cuda_stream). The pure-Python package
// moejit wraps it; moejit.torch adds the torch.library custom ops.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <exception>

#include "bindings.hpp"
#include "moejit/error.hpp"
#include "moejit/version.hpp"

namespace nb = nanobind;

namespace moejit::python {
namespace {

PyObject* g_error = nullptr;
PyObject* g_invalid = nullptr;
PyObject* g_compile = nullptr;
PyObject* g_driver = nullptr;
PyObject* g_sealed = nullptr;

PyObject* new_exception(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("moejit.") + name;
  PyObject* e = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!e) throw nb::python_error();
  m.attr(name) = nb::handle(e);
  return e;
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_error = new_exception(m, "Error", PyExc_RuntimeError, "Base of every error moejit raises.");
  nb::object inv_bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_invalid = new_exception(m, "InvalidArgument", inv_bases.ptr(),
                            "A value outside the documented domain; the message names the argument and the value.");
  g_compile = new_exception(m, "CompileError", g_error, "NVRTC rejected a generated kernel (message: key and log).");
  g_driver = new_exception(m, "DriverError", g_error,
                           "libcuda or libnvrtc missing, or a driver call failed (message names the call).");
  g_sealed = new_exception(m, "SealedMiss", g_error, "A kernel was requested after seal() under the strict policy.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(g_invalid, e.what());
    } catch (const CompileError& e) {
      PyErr_SetString(g_compile, e.what());
    } catch (const DriverError& e) {
      PyErr_SetString(g_driver, e.what());
    } catch (const SealedMiss& e) {
      PyErr_SetString(g_sealed, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

}  // namespace moejit::python

NB_MODULE(_moejit, m) {
  m.doc() = "moejit C++ library bindings (use the moejit package, not this module directly)";
  m.attr("__version__") = std::string(moejit::version());
  // Why off: layers registered with moejit.torch and the process-wide Runtime
  // live until exit by design; nanobind would report them as leaks.
  nb::set_leak_warnings(false);
  const char* part = "errors";
  try {
    moejit::python::bind_errors(m);
    part = "plan";
    moejit::python::bind_plan(m);
    part = "runtime";
    moejit::python::bind_runtime(m);
    part = "layer";
    moejit::python::bind_layer(m);
    part = "quant";
    moejit::python::bind_quant(m);
    part = "device";
    moejit::python::bind_device(m);
    part = "wgrad";
    moejit::python::bind_wgrad(m);
    part = "grouped_gemm";
    moejit::python::bind_grouped_gemm(m);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("moejit._moejit: binding ") + part + ": " + e.what());
  }
}
