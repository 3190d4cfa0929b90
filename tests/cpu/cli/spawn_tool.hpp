#pragma once
// Test support: start several built tools at once (fork + execv behind a start
// barrier), kill one at a chosen moment, and collect exit statuses. Output of
// each child goes to files the caller names.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "run_tool.hpp"

namespace moejit::test {

struct SpawnSpec {
  std::string tool;                // e.g. "moejit-prewarm"
  std::vector<std::string> args;
  std::vector<std::string> env;    // extra "NAME=value" entries
  fs::path out, err;               // stdout / stderr files (empty: /dev/null)
};

// Children forked by spawn() wait on the barrier until release() (or the
// barrier's destruction), so that every child starts its work at the same moment.
class StartBarrier {
 public:
  StartBarrier() {
    if (::pipe(fd_) != 0) throw std::runtime_error("pipe failed");
  }
  ~StartBarrier() { release(); }
  StartBarrier(const StartBarrier&) = delete;
  StartBarrier& operator=(const StartBarrier&) = delete;
  void release() {
    if (fd_[1] >= 0) ::close(fd_[1]), fd_[1] = -1;
    if (fd_[0] >= 0) ::close(fd_[0]), fd_[0] = -1;
  }
  int read_end() const { return fd_[0]; }
  int write_end() const { return fd_[1]; }

 private:
  int fd_[2] = {-1, -1};
};

// Forks and execs spec.tool; with a barrier, the child blocks until it is released.
// Returns the child's pid. Throws std::runtime_error when the tool is not built.
inline pid_t spawn(const SpawnSpec& spec, StartBarrier* barrier = nullptr) {
  const fs::path exe = tool_path(spec.tool);
  if (exe.empty()) throw std::runtime_error(spec.tool + " is not built under " MOEJIT_BINARY_DIR "/tools");
  std::vector<std::string> argv_s{exe.string()};
  argv_s.insert(argv_s.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), spec.env.begin(), spec.env.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string out = spec.out.empty() ? "/dev/null" : spec.out.string();
  const std::string err = spec.err.empty() ? "/dev/null" : spec.err.string();

  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (barrier) {
      ::close(barrier->write_end());
      char c;
      while (::read(barrier->read_end(), &c, 1) < 0 && errno == EINTR) {
      }
      ::close(barrier->read_end());
    }
    int in = ::open("/dev/null", O_RDONLY);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || o < 0 || e < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

// Waits for pid; the exit code, or 128 + signal number when killed.
inline int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace moejit::test
