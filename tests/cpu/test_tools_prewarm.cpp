// moejit-prewarm as a subprocess: bad input gives exit code 2 and exactly one
// line on stderr; --list-keys prints the plan's keys; a real prewarm twice.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include <map>

#include "cli/run_tool.hpp"
#include "moejit/model.hpp"
#include "moejit/prewarm.hpp"

using namespace moejit;
using moejit::test::run_tool;
using moejit::test::TempDir;
using moejit::test::ToolResult;

namespace {

// Exit code 2, one line on stderr, "moejit-prewarm: error: ..." containing `needle`.
void check_usage_error(const ToolResult& r, const std::string& needle) {
  INFO("stderr: " << r.err << "\nstdout: " << r.out);
  CHECK(r.exit_code == 2);
  const auto lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith("moejit-prewarm: error: "));
  CHECK_THAT(lines[0], Catch::Contains(needle));
  CHECK(r.out.empty());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("moejit-prewarm: a nonexistent config path is one line and exit code 2", "[tools][cli]") {
  TempDir dir("cli-noconfig");
  const std::string missing = (dir.path() / "no-such-dir" / "config.json").string();
  check_usage_error(run_tool("moejit-prewarm", {"--hf-config", missing, "--cache-dir", dir.path().string()}),
                    missing);
}

TEST_CASE("moejit-prewarm: a config of an unknown model_type is one line and exit code 2", "[tools][cli]") {
  TempDir dir("cli-llama");
  const auto cfg = dir.path() / "config.json";
  test::write_text(cfg, R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                            "num_hidden_layers": 32, "hidden_act": "silu"})");
  check_usage_error(run_tool("moejit-prewarm", {"--hf-config", cfg.string(), "--cache-dir", dir.path().string()}),
                    "llama");
}

TEST_CASE("moejit-prewarm: a config that is not JSON is one line and exit code 2", "[tools][cli]") {
  TempDir dir("cli-notjson");
  const auto cfg = dir.path() / "config.json";
  test::write_text(cfg, "{ \"model_type\": \"gpt_oss\", \n  this is not json");
  check_usage_error(run_tool("moejit-prewarm", {"--hf-config", cfg.string(), "--cache-dir", dir.path().string()}),
                    "config.json");
}

TEST_CASE("moejit-prewarm: --max-num-tokens 0 is one line and exit code 2", "[tools][cli]") {
  TempDir dir("cli-zero");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--max-num-tokens", "0", "--cache-dir",
                                                dir.path().string()}),
                    "max-num-tokens");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--max-num-tokens", "-3", "--cache-dir",
                                                dir.path().string()}),
                    "max-num-tokens");
}

TEST_CASE("moejit-prewarm: other bad arguments are one line and exit code 2", "[tools][cli]") {
  TempDir dir("cli-args");
  const std::string cd = dir.path().string();
  check_usage_error(run_tool("moejit-prewarm", {"--cache-dir", cd}), "--model");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "no-such-model", "--cache-dir", cd}), "no-such-model");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--no-such-flag"}), "--no-such-flag");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--quant", "int3", "--cache-dir", cd}),
                    "int3");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--arch", "sm_9x", "--cache-dir", cd}),
                    "sm_9x");
  // A valid target the kernels cannot be built for (wgmma is sm_90a-only).
  for (const char* arch : {"sm_90", "sm_80", "sm_100a"})
    check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--arch", arch, "--cache-dir", cd}),
                      "sm_90a");
  // The flags as typed, with the value (not the library's field names, not CLI11's text).
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--tp", "7", "--cache-dir", cd}), "--tp 7: ");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--ep", "3", "--cache-dir", cd}), "--ep 3: ");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--max-num-tokens", "lots"}),
                    "--max-num-tokens lots: not a whole number");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--tp", "x"}), "--tp x: not a whole number");
  check_usage_error(run_tool("moejit-prewarm", {"--hf-config", cd, "--cache-dir", cd}), "--hf-config '");
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--weight-scale", "per_row"}), "per_row");
  // per_channel exists, but no mode of this plan (w4a16_mxfp4) uses it.
  check_usage_error(run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--weight-scale", "per_channel",
                                                "--list-keys"}),
                    "per_channel");
}

TEST_CASE("moejit-prewarm: --weight-scale lists the fp8_per_token kernels of both scale layouts", "[tools][cli]") {
  auto wscales = [](std::vector<std::string> args) {
    std::map<std::string, int> count;
    const ToolResult r = run_tool("moejit-prewarm", args);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    for (const std::string& line : lines_of(r.out)) {
      const auto at = line.find("wscale=");
      if (at != std::string::npos) ++count[line.substr(at, line.find(' ', at) - at)];
    }
    return count;
  };
  const std::vector<std::string> base = {"--model", "gpt-oss-120b", "--quant", "fp8_per_token", "--max-num-tokens",
                                         "8", "--list-keys"};
  const auto one = wscales(base);
  CHECK(one.count("wscale=per_channel") == 0);
  auto both_args = base;
  both_args.insert(both_args.end(), {"--weight-scale", "per_expert,per_channel"});
  const auto both = wscales(both_args);
  REQUIRE(both.count("wscale=per_channel") == 1);
  // Every GEMM key gets its per_channel twin; the per_expert keys stay as they were.
  CHECK(both.at("wscale=per_channel") > 0);
  CHECK(both.at("wscale=per_channel") <= both.at("wscale=per_expert"));
  CHECK(both.at("wscale=per_expert") == one.at("wscale=per_expert"));
}

TEST_CASE("moejit-prewarm: an unusable cache directory is one line and exit code 3", "[tools][cli]") {
  TempDir dir("cli-badcache");
  const auto file = dir.path() / "plain-file";
  test::write_text(file, "not a directory");
  const ToolResult r = run_tool("moejit-prewarm", {"--model", "gpt-oss-20b", "--max-num-tokens", "1",
                                                   "--cache-dir", file.string()});
  INFO(r.err);
  CHECK(r.exit_code == 3);
  REQUIRE(r.err_lines().size() == 1);
  CHECK_THAT(r.err, Catch::StartsWith("moejit-prewarm: error: ") && Catch::Contains(file.string()));
}

TEST_CASE("moejit-prewarm --list-keys prints enumerate_keys() in canonical text", "[tools][cli]") {
  const ToolResult r = run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--max-num-tokens", "20000",
                                                   "--arch", "sm_90a", "--list-keys"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  PlanOptions o;
  o.max_num_tokens = 20000;
  o.target = parse_target("sm_90a");
  const std::vector<SpecKey> keys = enumerate_keys(make_plan(embedded_model("gpt-oss-120b"), o));
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    CHECK(lines[i] == keys[i].to_text());
    CHECK(parse_key(lines[i]) == keys[i]);
  }
  // --tp 2 halves the expert intermediate size: gate_up N = 2 * 2880 / 2.
  const ToolResult tp2 = run_tool("moejit-prewarm", {"--model", "gpt-oss-120b", "--max-num-tokens", "1", "--tp",
                                                     "2", "--arch", "sm_90a", "--list-keys"});
  REQUIRE(tp2.exit_code == 0);
  bool found = false;
  for (const std::string& l : lines_of(tp2.out)) {
    const SpecKey k = parse_key(l);
    if (k.op == OpKind::gate_up) {
      CHECK(k.n == 2880);
      found = true;
    }
  }
  CHECK(found);
}

TEST_CASE("moejit-prewarm twice: the second run compiles nothing; --json and --seal-check", "[tools][cli][nvrtc]") {
  TempDir dir("cli-twice");
  const auto cache = dir.path() / "cache";
  const auto json1 = dir.path() / "r1.json", json2 = dir.path() / "r2.json";
  const std::vector<std::string> common = {"--model", "gpt-oss-20b", "--max-num-tokens", "8", "--arch", "sm_90a",
                                           "-j", "2", "--cache-dir", cache.string()};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const ToolResult r1 = run_tool("moejit-prewarm", with({"--json", json1.string()}));
  INFO("run 1 stderr: " << r1.err << "\nstdout: " << r1.out);
  REQUIRE(r1.exit_code == 0);
  CHECK_THAT(r1.out, Catch::Contains("distinct kernels") && Catch::Contains("disk hits") &&
                         Catch::Contains("wall time") && Catch::Contains(cache.string()));
  const auto j1 = nlohmann::json::parse(test::read_text(json1));
  CHECK(j1["keys"].get<int>() > 0);
  CHECK(j1["compiled"] == j1["distinct_kernels"]);
  CHECK(j1["failed"] == 0);
  CHECK(j1["plan"]["model"] == "gpt-oss-20b");

  const ToolResult r2 = run_tool("moejit-prewarm", with({"--json", json2.string(), "--seal-check"}));
  INFO("run 2 stderr: " << r2.err);
  REQUIRE(r2.exit_code == 0);
  const auto j2 = nlohmann::json::parse(test::read_text(json2));
  CHECK(j2["compiled"] == 0);
  CHECK(j2["disk_hits"] == j1["distinct_kernels"]);
  CHECK(j2["keys"] == j1["keys"]);
  CHECK(j2["seal_check"]["keys"] == j1["keys"]);
  CHECK(j2["seal_check"]["misses"] == 0);
}
