#include "torch_args.hpp"

#include "dlpack_exchange.hpp"

namespace moejit::python {
namespace {

struct Names {
  PyObject *shape, *stride, *is_contiguous, *dtype, *get_device, *data_ptr;
};

// Null members when interning failed (out of memory): read() then refuses.
const Names& names() {
  static const Names n{PyUnicode_InternFromString("shape"),         PyUnicode_InternFromString("stride"),
                       PyUnicode_InternFromString("is_contiguous"), PyUnicode_InternFromString("dtype"),
                       PyUnicode_InternFromString("get_device"),    PyUnicode_InternFromString("data_ptr")};
  return n;
}

struct Dtypes {
  PyObject *bf16 = nullptr, *i32 = nullptr, *f32 = nullptr;
};
Dtypes g_dtypes;  // strong references (the GIL guards them)

// Calls the no-argument method `name` of `t`.
PyObject* call0(PyObject* t, PyObject* name) {
  PyObject* args[] = {t};
  return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

// A 2-tuple of ints (torch.Size, or the tuple stride() returns) into r0, r1.
bool pair_of(PyObject* seq, std::int64_t& r0, std::int64_t& r1) {
  if (seq == nullptr || !PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != 2) return false;
  r0 = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, 0));
  if (r0 == -1 && PyErr_Occurred()) return false;
  r1 = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, 1));
  return !(r1 == -1 && PyErr_Occurred());
}

// One tensor's layout, read once per property.
struct Read {
  std::int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 0;
  std::uintptr_t data = 0;
};

// Which layout property a tensor's check reads: its strides (x, out: the row
// stride is passed on), or only whether it is contiguous (topk_ids,
// topk_weights: is_contiguous() returns one bool where stride() builds a tuple).
enum class Layout { strides, contiguous };

// The DLPack dtype of the torch dtype object `dtype` (one of g_dtypes).
bool dl_dtype_is(const DlTensor& d, PyObject* dtype) {
  if (d.lanes != 1) return false;
  if (dtype == g_dtypes.bf16) return d.code == kDlBfloat && d.bits == 16;
  if (dtype == g_dtypes.i32) return d.code == kDlInt && d.bits == 32;
  if (dtype == g_dtypes.f32) return d.code == kDlFloat && d.bits == 32;
  return false;
}

// The same reads through the DLPack exchange API, in one C call. True only
// when the tensor is 2-D with the dtype, the device (get_device(): the CUDA
// index, -1 on the CPU) and, for Layout::contiguous, torch's is_contiguous()
// rule (the stride of a dimension of size 1 does not count); anything else
// returns false and the attribute reads decide, so both paths accept the same
// tensors.
bool read_exchange(PyObject* t, PyObject* dtype, long device, Layout layout, Read& r) {
  DlTensor d;
  if (!exchange_read(t, d)) return false;
  if (d.ndim != 2 || !dl_dtype_is(d, dtype)) return false;
  const long dv = d.device_type == kDlCuda ? long(d.device_id) : d.device_type == kDlCpu ? -1L : -2L;
  if (dv != device) return false;
  r.rows = d.shape[0];
  r.cols = d.shape[1];
  r.row_stride = d.strides ? d.strides[0] : r.cols;
  r.col_stride = d.strides ? d.strides[1] : 1;
  if (layout == Layout::contiguous) {
    if ((r.cols > 1 && r.col_stride != 1) || (r.rows > 1 && r.row_stride != r.cols)) return false;
    r.col_stride = 1;
    r.row_stride = r.cols;
  }
  r.data = reinterpret_cast<std::uintptr_t>(d.data) + d.byte_offset;
  return true;
}

bool read(PyObject* t, PyObject* dtype, long device, Layout layout, Read& r) {
  if (read_exchange(t, dtype, device, layout, r)) return true;
  const Names& n = names();
  if (!n.shape || !n.stride || !n.is_contiguous || !n.dtype || !n.get_device || !n.data_ptr) return false;
  PyObject* d = PyObject_GetAttr(t, n.dtype);
  if (d == nullptr) return false;
  const bool dtype_ok = d == dtype;
  Py_DECREF(d);
  if (!dtype_ok) return false;
  PyObject* shape = PyObject_GetAttr(t, n.shape);
  const bool shape_ok = pair_of(shape, r.rows, r.cols);
  Py_XDECREF(shape);
  if (!shape_ok) return false;
  if (layout == Layout::strides) {
    PyObject* stride = call0(t, n.stride);
    const bool stride_ok = pair_of(stride, r.row_stride, r.col_stride);
    Py_XDECREF(stride);
    if (!stride_ok) return false;
  } else {
    PyObject* c = call0(t, n.is_contiguous);
    const bool contiguous = c == Py_True;  // False, or not a bool, is a mismatch (an exception stays set)
    Py_XDECREF(c);
    if (!contiguous) return false;
    r.col_stride = 1;
    r.row_stride = r.cols;
  }
  PyObject* dev = call0(t, n.get_device);
  if (dev == nullptr) return false;
  const long dv = PyLong_AsLong(dev);
  Py_DECREF(dev);
  if (PyErr_Occurred() || dv != device) return false;
  PyObject* p = call0(t, n.data_ptr);
  if (p == nullptr) return false;
  r.data = static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(p));
  Py_DECREF(p);
  return !PyErr_Occurred();
}

bool read_all(PyObject* x, PyObject* ids, PyObject* w, PyObject* out, std::int64_t D, std::int64_t k,
              std::int64_t max_tokens, long device, TorchLayerArgs& a) {
  if (g_dtypes.bf16 == nullptr) return false;
  Read rx, ri, rw;
  if (!read(x, g_dtypes.bf16, device, Layout::strides, rx)) return false;
  const std::int64_t T = rx.rows;
  // Rows may not overlap (a broadcast row has stride 0); a one-token batch's
  // row stride means nothing and is passed as D.
  if (rx.cols != D || rx.col_stride != 1 || T < 1 || T > max_tokens || (T > 1 && rx.row_stride < D)) return false;
  if (!read(ids, g_dtypes.i32, device, Layout::contiguous, ri) || ri.rows != T || ri.cols != k) return false;
  if (!read(w, g_dtypes.f32, device, Layout::contiguous, rw) || rw.rows != T || rw.cols != k) return false;
  a.tokens = T;
  a.x_row_stride = T > 1 ? rx.row_stride : D;
  a.x = rx.data;
  a.topk_ids = ri.data;
  a.topk_weights = rw.data;
  a.out_row_stride = D;
  a.out = 0;
  if (out == Py_None) return true;
  Read ro;
  if (!read(out, g_dtypes.bf16, device, Layout::strides, ro) || ro.rows != T || ro.cols != D || ro.col_stride != 1 ||
      (T > 1 && ro.row_stride < D))
    return false;
  a.out_row_stride = T > 1 ? ro.row_stride : D;
  a.out = ro.data;
  return true;
}

}  // namespace

void set_torch_dtypes(PyObject* bf16, PyObject* i32, PyObject* f32) {
  Py_XINCREF(bf16);
  Py_XINCREF(i32);
  Py_XINCREF(f32);
  const Dtypes old = g_dtypes;
  g_dtypes = {bf16, i32, f32};
  Py_XDECREF(old.bf16);
  Py_XDECREF(old.i32);
  Py_XDECREF(old.f32);
}

ReadResult read_layer_args(PyObject* x, PyObject* topk_ids, PyObject* topk_weights, PyObject* out, std::int64_t D,
                           std::int64_t top_k, std::int64_t max_tokens, long device, TorchLayerArgs& a) noexcept {
  if (read_all(x, topk_ids, topk_weights, out, D, top_k, max_tokens, device, a)) return ReadResult::ok;
  // What a tensor-like object that is not the tensor the layer takes raises
  // is a mismatch; anything else (KeyboardInterrupt, MemoryError, ...) stays set.
  if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_TypeError) &&
      !PyErr_ExceptionMatches(PyExc_ValueError) && !PyErr_ExceptionMatches(PyExc_IndexError) &&
      !PyErr_ExceptionMatches(PyExc_OverflowError) && !PyErr_ExceptionMatches(PyExc_RuntimeError))
    return ReadResult::error;
  PyErr_Clear();
  return ReadResult::mismatch;
}

}  // namespace moejit::python
