#pragma once
// The tools' argument errors, alike in all three: one line, and an unknown
// option or subcommand named with the closest valid one.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace moejit::tools {

// Levenshtein distance (small strings: option and subcommand names).
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

inline std::string closest(std::string_view typed, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = ~std::size_t{0};
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(typed, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

// "--name" / "-n" spellings of every option of `app` (and of the subcommand the
// user chose, when there is one); the subcommand names.
inline void collect_names(const CLI::App& app, std::vector<std::string>& options, std::vector<std::string>& subs) {
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) options.push_back("--" + l);
    for (const std::string& n : o->get_snames()) options.push_back("-" + n);
  }
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) {
    subs.push_back(s->get_name());
    if (s->parsed()) {
      std::vector<std::string> ignored;
      collect_names(*s, options, ignored);
    }
  }
}

// One line for a CLI11 parse error: unknown options and subcommands named with
// the closest valid spelling, everything else CLI11's own text.
inline std::string usage_error_text(const CLI::App& app, const CLI::ParseError& e) {
  std::string msg = e.what();
  std::vector<std::string> options, subs;
  collect_names(app, options, subs);
  bool chose_sub = false;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) chose_sub |= s->parsed();
  const std::string_view marker = "not expected: ";
  if (const std::size_t at = msg.find(marker); at != std::string::npos) {
    std::string out;
    const std::string rest = msg.substr(at + marker.size());
    std::vector<std::string> words;  // CLI11 lists them last first
    for (std::size_t pos = 0; pos < rest.size();) {
      std::size_t sp = rest.find(' ', pos);
      if (sp == std::string::npos) sp = rest.size();
      if (sp > pos) words.insert(words.begin(), rest.substr(pos, sp - pos));
      pos = sp + 1;
    }
    // Why drop plain words after an unknown option: they are most likely its value.
    const bool any_option = std::any_of(words.begin(), words.end(), [](const std::string& w) { return w[0] == '-'; });
    for (const std::string& word : words) {
      if (any_option && word[0] != '-') continue;
      std::string one;
      if (word[0] == '-') {
        const std::string name = word.substr(0, word.find('='));
        one = "unknown option " + name;
        if (!options.empty()) one += " (did you mean " + closest(name, options) + "?)";
      } else if (!subs.empty() && !chose_sub) {
        one = "unknown subcommand '" + word + "' (did you mean '" + closest(word, subs) + "'?)";
      } else {
        one = "unexpected argument '" + word + "'";
      }
      out += (out.empty() ? "" : "; ") + one;
      if (word[0] != '-' && !subs.empty() && !chose_sub) break;  // the rest belongs to the unknown subcommand
    }
    return out;
  }
  // CLI11: "Could not convert: --max-num-tokens = abc": name the flag, the value and what it takes.
  if (const std::string_view conv = "Could not convert: "; msg.rfind(conv, 0) == 0) {
    const std::string rest = msg.substr(conv.size());
    const std::size_t eq = rest.find(" = ");
    if (eq != std::string::npos) {
      const std::string flag = rest.substr(0, eq), value = rest.substr(eq + 3);
      std::string expected = "a value of its type";
      for (const CLI::Option* o : app.get_options())
        for (const std::string& l : o->get_lnames())
          if ("--" + l == flag) {
            const std::string t = o->get_type_name();
            expected = t == "UINT" ? "a whole number >= 0" : t == "INT" ? "a whole number" : t == "FLOAT" ? "a number" : t;
          }
      return flag + " " + value + ": not " + expected;
    }
  }
    if (!subs.empty() && !chose_sub && msg.find("subcommand is required") != std::string::npos) {
    // A word that was not taken is the mistyped subcommand.
    for (const std::string& w : app.remaining())
      if (!w.empty() && w[0] != '-') return "unknown subcommand '" + w + "' (did you mean '" + closest(w, subs) + "'?)";
    std::string list;
    for (const std::string& s : subs) list += (list.empty() ? "" : ", ") + s;
    return "a subcommand is required: " + list;
  }
  for (char& c : msg)
    if (c == '\n') c = ' ';
  return msg;
}

}  // namespace moejit::tools
