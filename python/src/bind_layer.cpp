// The MoE layer: weights checked once, then one call per step of the model.
//   run():     DLPack arrays, every argument checked (device, dtype, shape, strides)
//   run_ptr(): device addresses as integers, for callers that checked their
//              tensors already; MoeLayer::run still checks null pointers,
//              alignment and the workspace size.
//   TorchLayerCall: moejit.torch's launch path: reads and checks the torch
//              tensors in C++ (torch_args.hpp), then runs the layer.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "dlpack_exchange.hpp"
#include "torch_args.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/device.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {
namespace {

using OptArray = std::optional<AnyArray>;

// Call stamps: while enabled (_stamp_layer_calls), each layer launch made
// through this module (run, run_ptr, TorchLayerCall) records, in the calling
// thread, four steady_clock times (ns): entry (the binding's C++ entered, its
// arguments converted), start and end (around the C++ MoeLayer::run, the GIL
// released), exit (the GIL held again, about to return to Python).
// _last_layer_call_ns returns them. A benchmark reads them after a call it
// timed from Python, so that what the Python path adds over the C++ call is
// measured inside one call, piece by piece. steady_clock is CLOCK_MONOTONIC on
// Linux, the clock of Python's time.perf_counter_ns and time.monotonic_ns.
std::atomic<bool> g_stamp_calls{false};
thread_local std::int64_t t_call_ns[4] = {0, 0, 0, 0};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One layer launch from Python: MoeLayer::run with the GIL released, stamped
// while stamps are enabled. Construct it first thing in the binding (entry).
class PythonLaunch {
 public:
  // While stamps are on, the thread's stamps are cleared first: a launch that
  // raises or launches nothing leaves zeros, never the previous launch's times.
  PythonLaunch() : on_(g_stamp_calls.load(std::memory_order_relaxed)), entry_(on_ ? steady_ns() : 0) {
    if (on_)
      for (std::int64_t& t : t_call_ns) t = 0;
  }

  void run(const MoeLayer& layer, const MoeWeights& w, const MoeLayerArgs& a, CUstream stream) const {
    std::int64_t start = 0, end = 0;
    {
      nb::gil_scoped_release release;
      if (on_) start = steady_ns();
      layer.run(w, a, stream);
      if (on_) end = steady_ns();
    }
    if (on_) {
      t_call_ns[0] = entry_;
      t_call_ns[1] = start;
      t_call_ns[2] = end;
      t_call_ns[3] = steady_ns();
    }
  }

 private:
  bool on_;
  std::int64_t entry_;
};

struct Layer {
  Layer(Runtime& rt, const MoeLayerShape& s, QuantMode q, WeightScale w, Target t)
      : layer(rt, s, q, w, t), target(t) {}
  MoeLayer layer;
  Target target;
  MoeWeights weights{};
  bool has_weights = false;

  std::int64_t n1() const {
    const auto& s = layer.shape();
    return s.act == Activation::none ? s.intermediate : 2 * std::int64_t(s.intermediate);
  }

  // A weight [E, N, K] in the quant mode's layout. MXFP4 data also as the
  // gpt-oss checkpoint stores it: *_blocks [E, N, K/32, 16].
  DevicePtr weight(const AnyArray& a, const char* name, std::int64_t E, std::int64_t N, std::int64_t K) const {
    switch (layer.quant()) {
      case QuantMode::bf16: check_array(a, name, Where::cuda, {DType::bf16}, {E, N, K}); break;
      case QuantMode::w4a16_mxfp4:
        if (a.ndim() == 4) check_array(a, name, Where::cuda, {DType::u8}, {E, N, K / 32, 16});
        else check_array(a, name, Where::cuda, {DType::u8}, {E, N, K / 2});
        break;
      default: check_array(a, name, Where::cuda, {DType::e4m3}, {E, N, K}); break;
    }
    return device_ptr(a);
  }
  DevicePtr scales(const OptArray& a, const char* name, std::int64_t E, std::int64_t N, std::int64_t K) const {
    const QuantMode q = layer.quant();
    if (q == QuantMode::bf16) {
      if (a) throw InvalidArgument(std::string(name) + ": bf16 weights have no scales, pass None");
      return 0;
    }
    if (!a) throw InvalidArgument(std::string(name) + ": required for quant " + std::string(to_string(q)));
    if (q == QuantMode::fp8_per_token) {
      if (layer.weight_scale() == WeightScale::per_channel) check_array(*a, name, Where::cuda, {DType::f32}, {E, N});
      else check_array(*a, name, Where::cuda, {DType::f32}, {E});
    } else {
      check_array(*a, name, Where::cuda, {DType::u8}, {E, N, K / 32});
    }
    return device_ptr(*a);
  }
  static DevicePtr bias(const OptArray& a, const char* name, BiasKind kind, std::int64_t E, std::int64_t N,
                        const char* field) {
    if (kind == BiasKind::none) {
      if (a) throw InvalidArgument(std::string(name) + ": the layer shape has " + field + "=none, pass None");
      return 0;
    }
    if (!a) throw InvalidArgument(std::string(name) + ": required (the layer shape has " + field + "=" +
                                  std::string(to_string(kind)) + ")");
    check_array(*a, name, Where::cuda, {kind == BiasKind::f32 ? DType::f32 : DType::bf16}, {E, N});
    return device_ptr(*a);
  }

  void set_weights(const AnyArray& w1, const OptArray& w1_scales, const OptArray& b1, const AnyArray& w2,
                   const OptArray& w2_scales, const OptArray& b2) {
    const auto& s = layer.shape();
    const std::int64_t E = s.experts, D = s.hidden, I = s.intermediate, N1 = n1();
    MoeWeights w;
    w.w1 = weight(w1, "w1", E, N1, D);
    w.w1_scales = scales(w1_scales, "w1_scales", E, N1, D);
    w.b1 = bias(b1, "b1", s.gate_up_bias, E, N1, "gate_up_bias");
    w.w2 = weight(w2, "w2", E, D, I);
    w.w2_scales = scales(w2_scales, "w2_scales", E, D, I);
    w.b2 = bias(b2, "b2", s.down_bias, E, D, "down_bias");
    weights = w;
    has_weights = true;
  }

  const MoeWeights& checked_weights() const {
    if (!has_weights) throw InvalidArgument("MoeLayer: no weights: call set_weights() first");
    return weights;
  }

  MoeLayerArgs args_of(const AnyArray& x, const AnyArray& ids, const AnyArray& gamma, const AnyArray& out,
                       const AnyArray& ws) const {
    const auto& s = layer.shape();
    check_array(x, "x", Where::cuda, {DType::bf16}, {-1, s.hidden}, false);
    const std::int64_t T = static_cast<std::int64_t>(x.shape(0));
    if (T > std::int64_t(kMaxBucketedTokens))
      throw InvalidArgument("x: " + std::to_string(T) + " tokens exceed the largest bucketed count");
    check_array(ids, "topk_ids", Where::cuda, {DType::i32}, {T, s.top_k});
    check_array(gamma, "topk_weights", Where::cuda, {DType::f32}, {T, s.top_k});
    check_array(out, "out", Where::cuda, {DType::bf16}, {T, s.hidden}, false);
    check_array(ws, "workspace", Where::cuda, {DType::u8}, {-1});
    const std::pair<const AnyArray*, const char*> others[] = {
        {&ids, "topk_ids"}, {&gamma, "topk_weights"}, {&out, "out"}, {&ws, "workspace"}};
    for (const auto& [a, name] : others)
      if (a->device_id() != x.device_id())
        throw InvalidArgument(std::string(name) + ": on device " + std::to_string(a->device_id()) + ", x on device " +
                              std::to_string(x.device_id()));
    MoeLayerArgs a;
    a.num_tokens = static_cast<std::uint32_t>(T);
    a.x = device_ptr(x);
    a.x_row_stride = row_stride(x, "x");
    a.topk_ids = device_ptr(ids);
    a.topk_weights = device_ptr(gamma);
    a.out = device_ptr(out);
    a.out_row_stride = row_stride(out, "out");
    a.workspace = device_ptr(ws);
    a.workspace_bytes = ws.size();
    return a;
  }
};

MoeLayerArgs raw_args(std::uint32_t T, std::uintptr_t x, std::int64_t xs, std::uintptr_t ids, std::uintptr_t gamma,
                      std::uintptr_t out, std::int64_t os, std::uintptr_t ws, std::size_t ws_bytes) {
  MoeLayerArgs a;
  a.num_tokens = T;
  a.x = x;
  a.x_row_stride = xs;
  a.topk_ids = ids;
  a.topk_weights = gamma;
  a.out = out;
  a.out_row_stride = os;
  a.workspace = ws;
  a.workspace_bytes = ws_bytes;
  return a;
}

void run_step(const Layer& l, const std::string& step, const MoeLayerArgs& a, CUstream s) {
  if (step == "route") l.layer.route(a, s);
  else if (step == "gate_up") l.layer.gate_up(l.checked_weights(), a, s);
  else if (step == "down") l.layer.down(l.checked_weights(), a, s);
  else if (step == "combine") l.layer.combine(a, s);
  else throw InvalidArgument("step: expected 'route', 'gate_up', 'down' or 'combine', got '" + step + "'");
}

// moejit.torch.MoeLayer's call: the layer with its device, token limit and
// workspace fixed, taking torch tensors.
struct TorchLayerCall {
  const Layer* layer;
  long device;
  std::int64_t max_tokens;
  std::uintptr_t workspace;
  std::size_t workspace_bytes;

  // False (nothing launched) when a tensor is not what the layer takes.
  bool operator()(nb::handle x, nb::handle ids, nb::handle gamma, nb::handle out, std::uintptr_t stream) const {
    const PythonLaunch launch;
    const auto& s = layer->layer.shape();
    TorchLayerArgs t;
    const ReadResult r = read_layer_args(x.ptr(), ids.ptr(), gamma.ptr(), out.ptr(), s.hidden, s.top_k, max_tokens,
                                         device, t);
    if (r == ReadResult::error) throw nb::python_error();
    if (r == ReadResult::mismatch || t.out == 0) return false;
    const MoeWeights& w = layer->checked_weights();
    const MoeLayerArgs a = raw_args(static_cast<std::uint32_t>(t.tokens), t.x, t.x_row_stride, t.topk_ids,
                                    t.topk_weights, t.out, t.out_row_stride, workspace, workspace_bytes);
    launch.run(layer->layer, w, a, to_stream(stream));
    return true;
  }
};

}  // namespace

void bind_layer(nb::module_& m) {
  m.def(
      "_stamp_layer_calls", [](bool enabled) { g_stamp_calls.store(enabled, std::memory_order_relaxed); },
      "enabled"_a,
      "Whether each layer launch made through this module (MoeLayer.run, run_ptr, TorchLayerCall) records\n"
      "its host times (_last_layer_call_ns, per thread). One switch for the process, off by default: a\n"
      "benchmark hook (four clock reads per call while on).");
  m.def(
      "_last_layer_call_ns",
      [] { return nb::make_tuple(t_call_ns[0], t_call_ns[1], t_call_ns[2], t_call_ns[3]); },
      "(entry, start, end, exit) of this thread's last stamped layer launch, in ns of steady_clock\n"
      "(CLOCK_MONOTONIC on Linux: time.perf_counter_ns() and time.monotonic_ns() read the same clock):\n"
      "the binding entered (arguments converted), the C++ MoeLayer::run started and ended (GIL released),\n"
      "the GIL held again before returning. Zeros before the thread's first stamped launch, and after a\n"
      "stamped call that raised or launched nothing. _steady_clock_ns reads that clock. A benchmark hook.");
  m.def("_steady_clock_ns", &steady_ns, "steady_clock now, ns (the clock of _last_layer_call_ns).");
  m.def(
      "_set_torch_dtypes",
      [](nb::handle bf16, nb::handle i32, nb::handle f32) { set_torch_dtypes(bf16.ptr(), i32.ptr(), f32.ptr()); },
      "bf16"_a, "i32"_a, "f32"_a, "The torch dtypes TorchLayerCall and _torch_layer_args compare against (set by moejit.torch).");
  m.def(
      "_set_torch_tensor_type", [](nb::handle type) { return set_exchange_tensor_type(type.ptr()); }, "type"_a.none(),
      "The tensor type (torch.Tensor, set by moejit.torch) whose DLPack exchange API TorchLayerCall and\n"
      "_torch_layer_args read tensors through; returns whether the type publishes one (else they read the\n"
      "tensors' Python attributes).");
  m.def("_torch_dlpack_exchange", &exchange_available,
        "Whether TorchLayerCall reads torch tensors through the DLPack exchange API (one C call per tensor).");
  m.def(
      "_torch_layer_args",
      [](nb::handle x, nb::handle ids, nb::handle gamma, nb::handle out, std::int64_t D, std::int64_t k,
         std::int64_t max_tokens, long device) -> nb::object {
        TorchLayerArgs t;
        const ReadResult r = read_layer_args(x.ptr(), ids.ptr(), gamma.ptr(), out.ptr(), D, k, max_tokens, device, t);
        if (r == ReadResult::error) throw nb::python_error();
        if (r == ReadResult::mismatch) return nb::none();
        return nb::make_tuple(t.tokens, t.x_row_stride, t.out_row_stride, t.x, t.topk_ids, t.topk_weights, t.out);
      },
      "x"_a, "topk_ids"_a, "topk_weights"_a, "out"_a.none(), "hidden"_a, "top_k"_a, "max_tokens"_a, "device"_a,
      "TorchLayerCall's check alone: (T, x row stride, out row stride, x, topk_ids, topk_weights, out addresses;\n"
      "out 0 and its stride hidden when out is None; a one-token batch's strides hidden) when x bfloat16\n"
      "[T, hidden] (unit column stride, row stride >= hidden when T > 1, 1 <= T <= max_tokens), topk_ids int32 /\n"
      "topk_weights float32 [T, top_k] contiguous and out None or bfloat16 [T, hidden] laid out as x are all on\n"
      "CUDA device `device` (get_device()), else None. Exceptions other than the ones a non-tensor raises propagate.");
  nb::class_<TorchLayerCall>(m, "TorchLayerCall",
                             "A layer's launch from torch tensors, with its device index, token limit and workspace fixed.")
      .def(
          "__init__",
          [](TorchLayerCall* self, const Layer& l, long device, std::int64_t max_tokens, std::uintptr_t ws,
             std::size_t ws_bytes) { new (self) TorchLayerCall{&l, device, max_tokens, ws, ws_bytes}; },
          "layer"_a, "device"_a, "max_tokens"_a, "workspace"_a, "workspace_bytes"_a, nb::keep_alive<1, 2>())
      .def("__call__", &TorchLayerCall::operator(), "x"_a, "topk_ids"_a, "topk_weights"_a, "out"_a, "stream"_a,
           "Runs the layer into `out` (bfloat16 [T, D], required) on `stream` and returns True when every tensor\n"
           "passes _torch_layer_args' check; returns False and launches nothing otherwise. Raises what\n"
           "MoeLayer.run_ptr raises (DriverError, SealedMiss, InvalidArgument for the workspace or alignment).");
  nb::class_<Layer>(m, "MoeLayer",
                    "One MoE layer on the GPU: route -> gate_up grouped GEMM -> down grouped GEMM -> combine,\n"
                    "asynchronous on the caller's stream. Nothing allocates on the launch path: the caller\n"
                    "passes a workspace of workspace_size(max_tokens) bytes. Weight layouts: set_weights().")
      .def(
          "__init__",
          [](Layer* self, Runtime& rt, const MoeLayerShape& shape, const std::string& quant,
             const std::optional<std::string>& weight_scale, const std::string& target) {
            const QuantMode q = parse_quant_mode(quant);
            const WeightScale w = weight_scale ? parse_weight_scale(*weight_scale) : default_weight_scale(q);
            new (self) Layer(rt, shape, q, w, parse_target(target));
          },
          "runtime"_a, "shape"_a, "quant"_a, "weight_scale"_a = nb::none(), "target"_a = "sm_90a",
          nb::keep_alive<1, 2>(),
          "Checks the shape for the kernels (InvalidArgument names the field).")
      .def_prop_ro("shape", [](const Layer& l) { return l.layer.shape(); })
      .def_prop_ro("quant", [](const Layer& l) { return std::string(to_string(l.layer.quant())); })
      .def_prop_ro("weight_scale", [](const Layer& l) { return std::string(to_string(l.layer.weight_scale())); })
      .def_prop_ro("target", [](const Layer& l) { return to_string(l.target); })
      .def_prop_ro("has_weights", [](const Layer& l) { return l.has_weights; })
      .def("workspace_size", [](const Layer& l, std::uint32_t max_tokens) { return l.layer.workspace_size(max_tokens); },
           "max_tokens"_a, "Bytes of workspace for up to max_tokens tokens (monotonic).")
      .def(
          "keys",
          [](const Layer& l, std::uint64_t num_tokens) {
            return moe_layer_keys(l.layer.shape(), l.layer.quant(), l.layer.weight_scale(), round_up_tokens(num_tokens),
                                  l.target, l.layer.runtime().gemm_tuning());
          },
          "num_tokens"_a, "The keys a call with num_tokens tokens requests, in launch order.")
      .def("set_weights", &Layer::set_weights, "w1"_a, "w1_scales"_a.none(), "b1"_a.none(), "w2"_a,
           "w2_scales"_a.none(), "b2"_a.none(),
           "Checks and records the expert weights (CUDA arrays, C-contiguous; the caller keeps them alive):\n"
           "  bf16:          w1 bfloat16 [E, 2I, D], w2 [E, D, I]; scales None\n"
           "  w4a16_mxfp4:   w1 uint8 [E, 2I, D/2] or [E, 2I, D/32, 16] (gpt-oss *_blocks), w1_scales uint8\n"
           "                 [E, 2I, D/32] (E8M0); w2 [E, D, I/2] or [E, D, I/32, 16], w2_scales [E, D, I/32]\n"
           "  mxfp8:         w1 float8_e4m3fn/uint8 [E, 2I, D], w1_scales uint8 [E, 2I, D/32]; w2 likewise\n"
           "  fp8_per_token: w1 e4m3 [E, 2I, D], w1_scales float32 [E] (per_expert) or [E, 2I] (per_channel)\n"
           "  b1 [E, 2I], b2 [E, D] in the shape's bias dtype, or None when the shape has none.\n"
           "With act 'none' 2I is I. Raises InvalidArgument naming the argument.")
      .def(
          "run",
          [](const Layer& l, const AnyArray& x, const AnyArray& ids, const AnyArray& gamma, const AnyArray& out,
             const AnyArray& ws, std::uintptr_t stream) {
            const PythonLaunch launch;
            const MoeWeights& w = l.checked_weights();
            const MoeLayerArgs a = l.args_of(x, ids, gamma, out, ws);
            launch.run(l.layer, w, a, to_stream(stream));
          },
          "x"_a, "topk_ids"_a, "topk_weights"_a, "out"_a, "workspace"_a, "stream"_a = 0,
          "The whole layer on `stream` (an integer CUstream; 0 = the legacy default stream):\n"
          "  x bfloat16 [T, D] (rows contiguous), topk_ids int32 [T, top_k] (-1 drops a route),\n"
          "  topk_weights float32 [T, top_k], out bfloat16 [T, D] (written), workspace uint8\n"
          "  [>= workspace_size(T)]. Raises InvalidArgument naming the argument, DriverError,\n"
          "  SealedMiss (strict seal).")
      .def(
          "run_ptr",
          [](const Layer& l, std::uint32_t T, std::uintptr_t x, std::int64_t xs, std::uintptr_t ids,
             std::uintptr_t gamma, std::uintptr_t out, std::int64_t os, std::uintptr_t ws, std::size_t ws_bytes,
             std::uintptr_t stream) {
            const PythonLaunch launch;
            const MoeWeights& w = l.checked_weights();
            launch.run(l.layer, w, raw_args(T, x, xs, ids, gamma, out, os, ws, ws_bytes), to_stream(stream));
          },
          "num_tokens"_a, "x"_a, "x_row_stride"_a, "topk_ids"_a, "topk_weights"_a, "out"_a, "out_row_stride"_a,
          "workspace"_a, "workspace_bytes"_a, "stream"_a,
          "run() with device addresses as integers (row strides in elements, 0 = D), for callers that\n"
          "checked dtypes and shapes already; the C++ checks (null, alignment, workspace size) still run.")
      .def(
          "run_step",
          [](const Layer& l, const std::string& step, std::uint32_t T, std::uintptr_t x, std::int64_t xs,
             std::uintptr_t ids, std::uintptr_t gamma, std::uintptr_t out, std::int64_t os, std::uintptr_t ws,
             std::size_t ws_bytes, std::uintptr_t stream) {
            const MoeLayerArgs a = raw_args(T, x, xs, ids, gamma, out, os, ws, ws_bytes);
            nb::gil_scoped_release release;
            run_step(l, step, a, to_stream(stream));
          },
          "step"_a, "num_tokens"_a, "x"_a, "x_row_stride"_a, "topk_ids"_a, "topk_weights"_a, "out"_a,
          "out_row_stride"_a, "workspace"_a, "workspace_bytes"_a, "stream"_a,
          "One step ('route', 'gate_up', 'down', 'combine') on the workspace; each needs the previous.")
      .def(
          "workspace_view",
          [](const Layer& l, std::uint32_t T, std::uintptr_t ws, std::size_t ws_bytes) {
            MoeLayerArgs a;
            a.num_tokens = T;
            a.workspace = ws;
            a.workspace_bytes = ws_bytes;
            const MoeWorkspaceView v = l.layer.workspace_view(a);
            nb::dict d;
            d["expert_offsets"] = v.expert_offsets;
            d["sorted_route"] = v.sorted_route;
            d["route_row"] = v.route_row;
            d["h"] = v.h;
            d["h_fragment_order"] = v.h_fragment_order;
            d["xk"] = v.xk;
            d["y"] = v.y;
            d["y_dtype"] = std::string(to_string(v.y_dtype));
            d["y_splits"] = v.y_splits;
            return d;
          },
          "num_tokens"_a, "workspace"_a, "workspace_bytes"_a,
          "Device addresses of the routing metadata and intermediates inside a workspace for T tokens.")
      .def(
          "host_time_us",
          [](const Layer& l, std::uint32_t T, std::uintptr_t x, std::int64_t xs, std::uintptr_t ids,
             std::uintptr_t gamma, std::uintptr_t out, std::int64_t os, std::uintptr_t ws, std::size_t ws_bytes,
             std::uintptr_t stream, int iters, bool sync_each, double settle_us, bool synchronize_first,
             const std::string& wait) {
            if (wait != "stream" && wait != "context")
              throw InvalidArgument("wait: expected 'stream' or 'context', got '" + wait + "'");
            const bool context = wait == "context";
            const MoeWeights& w = l.checked_weights();
            const MoeLayerArgs a = raw_args(T, x, xs, ids, gamma, out, os, ws, ws_bytes);
            std::vector<double> us;
            us.reserve(iters > 0 ? iters : 0);
            nb::gil_scoped_release release;
            // Busy-waits settle_us after a synchronize (the thread stays on its core).
            auto settle = [settle_us] {
              const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(settle_us);
              while (std::chrono::steady_clock::now() < until) {
              }
            };
            auto synchronize = [&] {
              if (context)
                device::synchronize();
              else
                device::synchronize(to_stream(stream));
            };
            if (synchronize_first) synchronize();
            settle();
            for (int i = 0; i < iters; ++i) {
              if (sync_each) {
                synchronize();
                settle();
              }
              const auto t0 = std::chrono::steady_clock::now();
              l.layer.run(w, a, to_stream(stream));
              const auto t1 = std::chrono::steady_clock::now();
              us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            }
            device::synchronize(to_stream(stream));
            return us;
          },
          "num_tokens"_a, "x"_a, "x_row_stride"_a, "topk_ids"_a, "topk_weights"_a, "out"_a, "out_row_stride"_a,
          "workspace"_a, "workspace_bytes"_a, "stream"_a, "iters"_a, "sync_each"_a = true, "settle_us"_a = 0.0,
          "synchronize_first"_a = true, "wait"_a = "stream",
          "Host time (microseconds) of each of `iters` MoeLayer::run calls made from C++: the baseline for\n"
          "the Python call overhead. sync_each: each call on an idle stream; else the calls back to back\n"
          "(the GPU still busy with the previous ones, as in a serving loop), the stream idle before the first.\n"
          "settle_us: microseconds of busy waiting after each synchronize, before the timed call.\n"
          "synchronize_first=False: no synchronize before the first call (the caller waited, in the way it\n"
          "chose, so that a Python call and this one can follow the same wait); settle_us still applies.\n"
          "wait: how this function synchronizes: 'stream' (cuStreamSynchronize of `stream`) or 'context'\n"
          "(cuCtxSynchronize, what torch.cuda.synchronize() makes). Raises InvalidArgument naming wait.");
}

}  // namespace moejit::python
