// scripts/gpu-suite.sh on a machine without a GPU: prints SKIPPED, exits 77
// (ctest's skip code) and writes nothing where it runs (its logs go to $OUT or
// under $TMPDIR, never into the source tree).
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli/run_tool.hpp"

using moejit::test::read_text;
using moejit::test::shell_quote;
using moejit::test::TempDir;
using moejit::test::write_text;
namespace fs = std::filesystem;

TEST_CASE("gpu-suite.sh without a GPU prints SKIPPED, exits 77 and writes nothing in its working directory",
          "[scripts]") {
  TempDir dir("gpu-suite");
  // An nvidia-smi that finds no GPU (as on a machine with the tools but no device),
  // first on PATH, so that the test means the same on every machine.
  const fs::path bin = dir.path() / "bin";
  fs::create_directories(bin);
  write_text(bin / "nvidia-smi", "#!/bin/sh\necho 'No devices were found' >&2\nexit 6\n");
  ::chmod((bin / "nvidia-smi").c_str(), 0755);
  const fs::path work = dir.path() / "work";
  fs::create_directories(work);
  const std::string cmd = "cd " + shell_quote(work.string()) + " && env -u OUT PATH=" + shell_quote(bin.string()) +
                          ":\"$PATH\" bash " + shell_quote(MOEJIT_SOURCE_DIR "/scripts/gpu-suite.sh") + " " +
                          shell_quote(MOEJIT_BINARY_DIR) + " >" + shell_quote((dir.path() / "out").string()) + " 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string out = read_text(dir.path() / "out");
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 77);
  CHECK_THAT(out, Catch::StartsWith("SKIPPED"));
  CHECK(fs::is_empty(work));
}
