#pragma once
// Test support: run a built command-line tool as a subprocess and capture its
// exit code, stdout and stderr; a self-deleting temporary directory.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace moejit::test {

namespace fs = std::filesystem;

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("moejit-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

// The built tool: build/tools/<name>/<name> or build/tools/<name> (the layout
// depends on the CMake version of tools/CMakeLists.txt). Empty if neither exists.
inline fs::path tool_path(const std::string& name) {
  for (const fs::path& p : {fs::path(MOEJIT_BINARY_DIR) / "tools" / name / name,
                            fs::path(MOEJIT_BINARY_DIR) / "tools" / name}) {
    if (fs::is_regular_file(p)) return p;
  }
  return {};
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

struct ToolResult {
  int exit_code = -1;
  std::string out, err;
  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::istringstream s(err);
    for (std::string l; std::getline(s, l);) lines.push_back(l);
    return lines;
  }
};

// Runs `tool args...` with extra environment assignments ("NAME=value") and
// stdin from /dev/null. Throws std::runtime_error when the tool is not built.
inline ToolResult run_tool(const std::string& name, const std::vector<std::string>& args,
                           const std::vector<std::string>& env = {}) {
  const fs::path exe = tool_path(name);
  if (exe.empty())
    throw std::runtime_error(name + " is not built under " MOEJIT_BINARY_DIR "/tools (build the target " + name + ")");
  TempDir tmp("tool-io");
  std::string cmd = "env";
  for (const std::string& e : env) cmd += " " + shell_quote(e);
  cmd += " " + shell_quote(exe.string());
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " </dev/null >" + shell_quote((tmp.path() / "out").string()) + " 2>" +
         shell_quote((tmp.path() / "err").string());
  const int status = std::system(cmd.c_str());
  ToolResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = read_text(tmp.path() / "out");
  r.err = read_text(tmp.path() / "err");
  return r;
}

}  // namespace moejit::test
