#include "dlpack_exchange.hpp"

#include <cstddef>
#include <initializer_list>

namespace moejit::python {
namespace {

// DLPackExchangeAPI (dlpack.h), version 1: the header, then five function
// pointers in this order. Only dltensor_from_py_object_no_sync is called.
struct ExchangeApi {
  std::uint32_t major, minor;
  const void* prev_api;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, DlTensor* out);
  void* current_work_stream;
};

PyObject* g_type = nullptr;  // strong reference (the GIL guards it)
const ExchangeApi* g_api = nullptr;

// The version-1 table the type publishes under either name, or null (no Python
// error left set).
const ExchangeApi* lookup(PyObject* type) {
  const ExchangeApi* api = nullptr;
  for (const char* name : {"__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"}) {
    PyObject* v = PyObject_GetAttrString(type, name);
    if (v == nullptr) {
      PyErr_Clear();
      continue;
    }
    if (PyCapsule_CheckExact(v)) {
      api = static_cast<const ExchangeApi*>(PyCapsule_GetPointer(v, "dlpack_exchange_api"));
    } else if (PyLong_Check(v)) {
      api = static_cast<const ExchangeApi*>(PyLong_AsVoidPtr(v));
    }
    Py_DECREF(v);
    PyErr_Clear();
    if (api != nullptr && api->major == 1 && api->dltensor_from_py_object_no_sync != nullptr) return api;
    api = nullptr;
  }
  return nullptr;
}

}  // namespace

bool set_exchange_tensor_type(PyObject* type) {
  const ExchangeApi* api = type != nullptr && PyType_Check(type) ? lookup(type) : nullptr;
  Py_XINCREF(api ? type : nullptr);
  PyObject* old = g_type;
  g_type = api ? type : nullptr;
  g_api = api;
  Py_XDECREF(old);
  return api != nullptr;
}

bool exchange_available() { return g_api != nullptr; }

bool exchange_read(PyObject* t, DlTensor& out) noexcept {
  if (g_api == nullptr || reinterpret_cast<PyObject*>(Py_TYPE(t)) != g_type) return false;
  if (g_api->dltensor_from_py_object_no_sync(t, &out) == 0) return true;
  PyErr_Clear();  // a tensor DLPack cannot describe: the attribute reads decide
  return false;
}

}  // namespace moejit::python
