// Parsing and classification functions of the command-line tools.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "moejit/error.hpp"
#include "common/tool_support.hpp"

using namespace moejit;
using namespace moejit::tools;

TEST_CASE("parse_byte_size accepts plain bytes and binary suffixes", "[tools]") {
  CHECK(parse_byte_size("0") == 0);
  CHECK(parse_byte_size("4096") == 4096);
  CHECK(parse_byte_size("512K") == 512 * 1024);
  CHECK(parse_byte_size("512k") == 512 * 1024);
  CHECK(parse_byte_size("10M") == 10ull * 1024 * 1024);
  CHECK(parse_byte_size("10MB") == 10ull * 1024 * 1024);
  CHECK(parse_byte_size("10MiB") == 10ull * 1024 * 1024);
  CHECK(parse_byte_size("1.5G") == 3ull * 512 * 1024 * 1024);
  CHECK(parse_byte_size("2T") == 2ull << 40);
}

TEST_CASE("parse_byte_size rejects garbage with a UsageError naming the text", "[tools]") {
  for (const char* bad : {"", "G", "-5", "10X", "1.2.3M", "ten"}) {
    INFO(bad);
    try {
      parse_byte_size(bad, "--max-size");
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find("--max-size") != std::string::npos);
      CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
    }
  }
}

TEST_CASE("parse_duration understands s m h d w and refuses a bare number", "[tools]") {
  using std::chrono::seconds;
  CHECK_THROWS_WITH(parse_duration("90", "--older-than"), Catch::Contains("--older-than: '90' has no unit"));
  CHECK(parse_duration("90s") == seconds(90));
  CHECK(parse_duration("30m") == seconds(1800));
  CHECK(parse_duration("12h") == seconds(12 * 3600));
  CHECK(parse_duration("7d") == seconds(7 * 86400));
  CHECK(parse_duration("2w") == seconds(14 * 86400));
  CHECK(parse_duration("1.5h") == seconds(5400));
  CHECK_THROWS_AS(parse_duration("7y"), UsageError);
  CHECK_THROWS_AS(parse_duration("d"), UsageError);
  CHECK_THROWS_AS(parse_duration("-1d"), UsageError);
}

TEST_CASE("format_bytes and format_ms are human readable", "[tools]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(200ull << 20) == "200 MiB");
  CHECK(format_ms(950) == "950 ms");
  CHECK(format_ms(12500) == "12.5 s");
  CHECK(format_ms(125000) == "2 min 5 s");
}

TEST_CASE("exit_code_for maps exception types to the documented exit codes", "[tools]") {
  CHECK(exit_code_for(UsageError("x")) == ExitCode::usage);
  CHECK(exit_code_for(InvalidArgument("x")) == ExitCode::usage);
  CHECK(exit_code_for(EnvironmentError("x")) == ExitCode::environment);
  CHECK(exit_code_for(DriverError("x")) == ExitCode::environment);
  CHECK(exit_code_for(std::filesystem::filesystem_error("x", std::error_code())) == ExitCode::environment);
  CHECK(exit_code_for(Error("x")) == ExitCode::failed);
  CHECK(exit_code_for(std::runtime_error("x")) == ExitCode::failed);
  CHECK(one_line(Error("first line:\nsecond")) == "first line");
  CHECK(one_line(Error("single")) == "single");
  // A compiler log: the header and the first line that names an error.
  CHECK(one_line(Error("NVRTC compile failed:\nNVRTC_ERROR_COMPILATION\nmoejit_kernel.cu(635): error: identifier "
                       "\"xs_lane\" is undefined\n   lds128(...);\n1 error detected\n")) ==
        "NVRTC compile failed: moejit_kernel.cu(635): error: identifier \"xs_lane\" is undefined");
  CHECK(one_line(std::string_view("a\n\n  b error:  \n")) == "a: b error");
}

TEST_CASE("check_cache_dir_usable creates the directory and rejects a file", "[tools]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("moejit-test-dir-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path dir = root / "a" / "b";
  REQUIRE_NOTHROW(check_cache_dir_usable(dir));
  CHECK(fs::is_directory(dir));
  CHECK(fs::is_empty(dir));  // the probe file is gone
  const fs::path file = root / "plain-file";
  { std::FILE* f = std::fopen(file.c_str(), "w"); REQUIRE(f); std::fclose(f); }
  CHECK_THROWS_AS(check_cache_dir_usable(file), EnvironmentError);
  CHECK_THROWS_AS(check_cache_dir_usable(file / "sub"), EnvironmentError);
  fs::remove_all(root);
}
