// The three tools behave alike: --version everywhere, every argument error one
// line prefixed with the tool's name, naming the flag the user typed (never an
// internal field), unknown options and subcommands named with the closest
// valid one; outputs (--json, --pack) checked before any work; prune's limits
// mean the same as MOEJIT_CACHE_MAX_BYTES.
#include <catch2/catch.hpp>

#include "cli/run_tool.hpp"

using moejit::test::run_tool;
using moejit::test::TempDir;
using moejit::test::ToolResult;
namespace fs = std::filesystem;

namespace {

// Exit code 2, exactly one line on stderr "<tool>: error: ..." containing each needle.
void check_usage_error(const std::string& tool, const ToolResult& r, std::initializer_list<std::string> needles) {
  INFO(tool << " stderr: " << r.err << "\nstdout: " << r.out);
  CHECK(r.exit_code == 2);
  const auto lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith(tool + ": error: "));
  for (const std::string& n : needles) CHECK_THAT(lines[0], Catch::Contains(n));
}

const std::vector<std::string> kSmall = {"--model", "gpt-oss-20b", "--max-num-tokens", "8", "--arch", "sm_90a"};

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> extra) {
  a.insert(a.end(), extra);
  return a;
}

}  // namespace

TEST_CASE("tools alike: --version on every tool", "[tools][cli][alike]") {
  for (const char* tool : {"moejit-prewarm", "moejit-cache", "moejit-run"}) {
    const ToolResult r = run_tool(tool, {"--version"});
    INFO(tool << ": " << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Matches("[0-9]+\\.[0-9]+\\.[0-9]+\\s*"));
  }
}

TEST_CASE("tools alike: an unknown option or subcommand is one line naming the closest valid one",
          "[tools][cli][alike]") {
  check_usage_error("moejit-prewarm", run_tool("moejit-prewarm", with(kSmall, {"--jsn", "r.json"})),
                    {"unknown option --jsn", "did you mean --json?"});
  check_usage_error("moejit-cache", run_tool("moejit-cache", {"lss"}), {"unknown subcommand 'lss'", "'ls'"});
  check_usage_error("moejit-cache", run_tool("moejit-cache", {"prune", "--max-sise", "1G"}),
                    {"unknown option --max-sise", "--max-size"});
  check_usage_error("moejit-run", run_tool("moejit-run", {"--tokns", "1"}), {"unknown option --tokns", "--tokens"});
  check_usage_error("moejit-cache", run_tool("moejit-cache", {}), {"subcommand", "ls", "verify"});
}

TEST_CASE("tools alike: errors name the flag the user typed, not the library's field", "[tools][cli][alike]") {
  // moejit-run --tokens 0: not max_num_tokens.
  const ToolResult t0 = run_tool("moejit-run", {"--tokens", "1,0"});
  check_usage_error("moejit-run", t0, {"--tokens", "got 0"});
  CHECK(t0.err.find("max_num_tokens") == std::string::npos);
  // --weight-scale per_channel on a w4a16_mxfp4 model: not PrewarmPlan.weight_scales.
  const ToolResult ws = run_tool("moejit-prewarm", with(kSmall, {"--weight-scale", "per_channel", "--list-keys"}));
  check_usage_error("moejit-prewarm", ws, {"--weight-scale per_channel", "--quant"});
  CHECK(ws.err.find("PrewarmPlan") == std::string::npos);
  // A model whose checkpoint quantization is not supported: names --quant and its choices.
  check_usage_error("moejit-prewarm",
                    run_tool("moejit-prewarm", {"--model", "deepseek-v3", "--arch", "sm_90a", "--list-keys"}),
                    {"--model deepseek-v3", "--quant", "bf16", "w4a16_mxfp4"});
  check_usage_error("moejit-run", run_tool("moejit-run", {"--model", "deepseek-v3"}),
                    {"--model deepseek-v3", "--quant", "bf16", "w4a16_mxfp4"});
  check_usage_error("moejit-prewarm", run_tool("moejit-prewarm", with(kSmall, {"--quant", "int3"})),
                    {"--quant", "int3"});
  // --weight-scale on a mode that does not choose its weight scales: a usage
  // error before any GPU work, naming the option, the choices and the mode.
  check_usage_error("moejit-run", run_tool("moejit-run", {"--quant", "mxfp8", "--weight-scale", "per_channel"}),
                    {"--weight-scale per_channel", "--quant mxfp8", "fixed weight scales", "fp8_per_token"});
  check_usage_error("moejit-run",
                    run_tool("moejit-run", {"--quant", "fp8_per_token", "--weight-scale", "e8m0_block32"}),
                    {"--weight-scale e8m0_block32", "per_expert or per_channel"});
  check_usage_error("moejit-run", run_tool("moejit-run", {"--quant", "fp8_per_token", "--weight-scale", "hourly"}),
                    {"--weight-scale hourly", "per_expert or per_channel"});
  // Both FP8 modes are runnable: not a usage error (without a GPU: exit 3,
  // "no usable GPU"; with one, the run itself).
  for (const char* q : {"mxfp8", "fp8_per_token"}) {
    const ToolResult r = run_tool("moejit-run", {"--quant", q, "--tokens", "1", "--iters", "5", "--check-tokens", "1"});
    INFO(q << ": exit " << r.exit_code << ", stderr: " << r.err);
    CHECK((r.exit_code == 0 || (r.exit_code == 3 && r.err.find("no usable GPU") != std::string::npos)));
  }
  // The floor's rates must be positive.
  check_usage_error("moejit-run", run_tool("moejit-run", {"--fp8-tflops", "0"}), {"--fp8-tflops"});
}

TEST_CASE("tools alike: --json and --pack to an unusable place fail at once with exit 2, before any compile",
          "[tools][cli][alike]") {
  TempDir dir("cli-outputs");
  const fs::path cache = dir.path() / "c";
  const auto missing_folder = (dir.path() / "no-such-folder" / "out").string();
  for (const char* flag : {"--json", "--pack"}) {
    for (const std::string& target : {missing_folder, dir.path().string()}) {
      const ToolResult r =
          run_tool("moejit-prewarm", with(kSmall, {flag, target, "--cache-dir", cache.string()}));
      check_usage_error("moejit-prewarm", r, {flag});
      CHECK(!fs::exists(cache));  // nothing was done: not even the cache directory
      CHECK(!fs::exists(dir.path() / "no-such-folder"));  // --pack never creates folders
    }
  }
}

TEST_CASE("tools alike: prune --max-size 0 and a bare --older-than number are refused", "[tools][cli][alike]") {
  TempDir dir("cli-prune-args");
  fs::create_directories(dir.path() / "entries");
  const std::string c = dir.path().string();
  check_usage_error("moejit-cache", run_tool("moejit-cache", {"prune", "--max-size", "0", "--cache-dir", c}),
                    {"--max-size 0", "clear"});
  check_usage_error("moejit-cache", run_tool("moejit-cache", {"prune", "--older-than", "7", "--cache-dir", c}),
                    {"--older-than", "no unit"});
  // MOEJIT_CACHE_MAX_BYTES=0 is "no cap" for a bare prune too: it needs a limit, and deletes nothing.
  check_usage_error("moejit-cache",
                    run_tool("moejit-cache", {"prune", "--cache-dir", c}, {"MOEJIT_CACHE_MAX_BYTES=0"}),
                    {"prune needs"});
}
