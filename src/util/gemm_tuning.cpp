// GemmTuning's text form (the MOEJIT_GEMM_TUNE grammar) and its range checks.
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "moejit/error.hpp"
#include "moejit/tuning.hpp"

namespace moejit {
namespace {

// One tunable: its side and name as MOEJIT_GEMM_TUNE spells them, and either a
// number (1..16) or a 0/1 flag.
struct Field {
  std::string_view side, name;
  std::optional<int>* number = nullptr;
  std::optional<bool>* flag = nullptr;
};

// Every field in the order of the struct (to_string's order).
std::array<Field, 15> fields(GemmTuning& t) {
  GemmTuning::Decode& d = t.decode;
  GemmTuning::Prefill& p = t.prefill;
  return {{{"decode", "wn", &d.wn},         {"decode", "kw", &d.kw},
           {"decode", "mw", &d.mw},         {"decode", "nt", &d.nt},
           {"decode", "depth", &d.depth},   {"decode", "ctas", &d.ctas},
           {"decode", "xs", nullptr, &d.xs}, {"decode", "fr", nullptr, &d.fr},
           {"prefill", "wg", &p.wg},        {"prefill", "stages", &p.stages},
           {"prefill", "depth", &p.depth},  {"prefill", "st", nullptr, &p.split_tail},
           {"prefill", "wa", nullptr, &p.wa}, {"prefill", "ws", nullptr, &p.ws},
           {"prefill", "wb", &p.wb}}};
}

constexpr int kMin = 1, kMax = 16;

// The typed name of a field (prefill.st is the member split_tail).
std::string member_name(const Field& f) {
  return std::string(f.side) + "." + (f.name == "st" ? std::string("split_tail") : std::string(f.name));
}

}  // namespace

std::string to_string(const GemmTuning& tuning) {
  GemmTuning t = tuning;
  std::string out;
  for (const Field& f : fields(t)) {
    std::string value;
    if (f.number && *f.number) value = std::to_string(**f.number);
    if (f.flag && *f.flag) value.assign(1, **f.flag ? '1' : '0');
    if (value.empty()) continue;
    if (!out.empty()) out += ',';
    out += std::string(f.side) + "." + std::string(f.name) + "=" + value;
  }
  return out;
}

void check_gemm_tuning(const GemmTuning& tuning) {
  GemmTuning t = tuning;
  for (const Field& f : fields(t)) {
    if (!f.number || !*f.number) continue;
    const int v = **f.number;
    if (v < kMin || v > kMax)
      throw InvalidArgument("GemmTuning " + member_name(f) + "=" + std::to_string(v) + ": expected " +
                            std::to_string(kMin) + ".." + std::to_string(kMax));
  }
}

GemmTuning parse_gemm_tuning(std::string_view text) {
  GemmTuning out;
  if (text.empty()) return out;
  std::array<Field, 15> table = fields(out);
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string item(text.substr(at, end - at));
    const std::size_t dot = item.find('.'), eq = item.find('=');
    const Field* field = nullptr;
    int value = 0;
    if (dot != std::string::npos && eq != std::string::npos && dot < eq) {
      // Only the fields each kernel takes: any other would be a silent no-op.
      const std::string_view side = std::string_view(item).substr(0, dot);
      const std::string_view name = std::string_view(item).substr(dot + 1, eq - dot - 1);
      for (const Field& f : table)
        if (f.side == side && f.name == name) field = &f;
      std::size_t used = 0;
      try {
        value = std::stoi(item.substr(eq + 1), &used);
      } catch (const std::exception&) {
        field = nullptr;
      }
      if (field && (used != item.size() - eq - 1 ||
                    (field->flag ? value != 0 && value != 1 : value < kMin || value > kMax)))
        field = nullptr;
    }
    if (!field)
      throw InvalidArgument("MOEJIT_GEMM_TUNE item '" + item +
                            "': expected decode.<f>=<n> (f in wn|kw|mw|nt|depth|ctas) or prefill.<f>=<n> (f in "
                            "wg|stages|depth), n in 1..16, or decode.xs|fr=<0|1> or prefill.st|wa|ws=<0|1>");
    if (field->flag)
      *field->flag = value != 0;
    else
      *field->number = value;
    at = end + 1;
  }
  return out;
}

}  // namespace moejit
