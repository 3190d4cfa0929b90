#pragma once
// Tuning of the MXFP4, bf16 and FP8 per-token decode grouped GEMM kernels:
// optional overrides of the tile parameters the heuristic picks for a key
// (src/ops/grouped_gemm_config.cpp, src/ops/fp8_gemm_config.cpp).
//
// An unset field keeps the heuristic's choice, so a default GemmTuning runs
// exactly the heuristic's kernels. A set field changes the generated kernel
// (and so its cache content address), never the specialization key: prewarm
// and serving must run with the same tuning (RuntimeOptions::gemm_tuning; the
// MoE layer and prewarm take it from their Runtime).
//
// The fields are those of the kernels' config structs (kernels/kernel_configs.cuh),
// documented in the "Tunable parameters" block at the top of
// kernels/grouped_gemm_mxfp4_decode_sm90.cuh (decode) and of
// kernels/grouped_gemm_mxfp4_wgmma_sm90.cuh, _wgmma_wa_sm90.cuh and
// _ws_sm90.cuh, and kernels/grouped_gemm_tma_ws_sm90.cuh (prefill; bf16 takes
// prefill.ws, wb and stages). The FP8 per-token decode kernel
// (kernels/grouped_gemm_fp8_decode_sm90.cuh) takes decode.wn, kw (1, 2 or 4),
// depth (units of 64 k in flight, 1..6), ctas and fr, and ignores the
// MXFP4-only mw, nt and xs; no other FP8 kernel takes a field. The same fields are spelled as text in
// MOEJIT_GEMM_TUNE (docs/environment.md): comma-separated decode.<field>=<n> and
// prefill.<field>=<n> items, prefill.split_tail as prefill.st, flags as 0 / 1;
// to_string() and parse_gemm_tuning() convert between the two.
//
// Errors: a number outside 1..16 is InvalidArgument from check_gemm_tuning()
// (and so from the Runtime constructor), naming the field and value. A
// combination that breaks a kernel's contract for some key (for example
// decode.kw that does not divide min(4, ceil(K / 256))) is InvalidArgument
// naming the tuning, the configuration and K when that key's configuration is
// chosen (MoeLayer::run, moe_layer_keys, prewarm's report for that key).
#include <optional>
#include <string>
#include <string_view>

namespace moejit {

struct GemmTuning {
  // The decode kernels (keys averaging <= 8 routed rows per expert hit;
  // mw, nt and xs: the MXFP4 decode kernel only).
  struct Decode {
    std::optional<int> wn;     // warps along N per CTA, 1..16; wn * kw <= 32
    std::optional<int> kw;     // warps along K per CTA, 1..16; MXFP4: must divide min(4, ceil(K / 256));
                               // FP8 per token: 1, 2 or 4, and 2 or 4 only where ceil(K / 64) >= 4
    std::optional<int> mw;     // 16-row weight groups per warp, 1..16
    std::optional<int> nt;     // n8 token tiles per CTA (8 * nt routed rows per m-tile), 1..16
    std::optional<int> depth;  // weights in flight per warp, 1..16: MXFP4 256-k super-steps;
                               // FP8 per token 64-k units, at most 6
    std::optional<int> ctas;   // resident CTAs per SM asked of ptxas (register cap), 1..16;
                               // ctas * threads per CTA <= 2048. Unset: MXFP4 6 where the
                               // heuristic's staged 128-thread CTAs allow it, else 1; FP8 per
                               // token 24 / (wn * kw) (24 warps per SM)
    std::optional<bool> xs;    // stage the activation rows in shared memory where they fit
                               // (nt = 1, at most 32 KB per CTA); unset = on
    std::optional<bool> fr;    // the GEMMs route topk_ids themselves (nt = 1, <= 32 routes,
                               // <= 256 experts; MoeLayer::run then launches no routing kernel); unset = on
    friend bool operator==(const Decode&, const Decode&) = default;
  };
  // The prefill kernels (keys past decode that run MXFP4 weights as the MMA's A operand).
  struct Prefill {
    std::optional<int> wg;      // wgmma kernels: warpgroups of 64 routed rows, 1..16;
                                // the kernels take 1..3 (weights-as-A: 1..2)
    std::optional<int> stages;  // ring depth (k-slices of 64) of whichever prefill kernel runs, 1..16;
                                // the kernels take >= 3 within 227 KB of shared memory
    std::optional<int> depth;   // dequantized-tile wgmma kernel: 2 = MMAs overlap the next slice's
                                // dequantization, 1 = they retire first; 1..16, the kernel takes 1 or 2
    std::optional<bool> split_tail;  // an expert's last 1..64 rows as one-warpgroup tiles of a smaller
                                     // bucket's kernel (two-warpgroup wgmma tiles only); unset = on
    std::optional<bool> wa;     // true: the weights-as-A wgmma kernel; false: the dequantized-tile
                                // kernel; unset = weights-as-A
    std::optional<bool> ws;     // the persistent warp-specialized kernels: true = at every key past
                                // decode (bf16: every key), false = never; unset = MXFP4: from 9 to
                                // 24 routed rows per expert hit and where 192-row tiles fit the
                                // experts, bf16: past 24 rows per expert
    std::optional<int> wb;      // bf16 warp-specialized kernel: weight rows per work item in blocks
                                // of 64, 1..16; the kernel takes 2 or 4
    friend bool operator==(const Prefill&, const Prefill&) = default;
  };
  Decode decode;
  Prefill prefill;

  bool empty() const noexcept { return *this == GemmTuning{}; }
  friend bool operator==(const GemmTuning&, const GemmTuning&) = default;
};

// The MOEJIT_GEMM_TUNE spelling of the set fields, in the order of the struct,
// e.g. "decode.kw=2,prefill.stages=4,prefill.ws=0"; "" when none is set.
std::string to_string(const GemmTuning& tuning);

// Throws InvalidArgument naming the first field outside its range and its
// value ("GemmTuning decode.kw=0: expected 1..16").
void check_gemm_tuning(const GemmTuning& tuning);

// Parses MOEJIT_GEMM_TUNE text: comma-separated items, a later item
// overriding an earlier one of the same field. Throws InvalidArgument naming
// the first bad item ("MOEJIT_GEMM_TUNE item 'decode.kw=0': expected ...").
// parse_gemm_tuning(to_string(t)) == t for every checked t.
GemmTuning parse_gemm_tuning(std::string_view text);

}  // namespace moejit
