// SPDX-License-Identifier: Apache-2.0
#include "local_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cpu_pin.h"
#include "errors.h"
#include "plugin.h"
#include "socket_io.h"

namespace mesh::bench {
namespace {

int exit_priority(int code) {
  switch (code) {
    case kExitPlugin:
      return 5;
    case kExitVerify:
      return 4;
    case kExitTimeout:
      return 3;
    case kExitSetup:
      return 2;
    case 0:
      return 0;
    default:
      return 1;  // peer-failed, signals
  }
}

}  // namespace

int run_local_launcher(int argc, char** argv, const Options& opt) {
  const int nranks = opt.nranks > 0 ? opt.nranks : 2;
  // Fail once, here, rather than once per rank.
  resolve_plugin_path(opt.plugin);
  // Hard rule for local runs: the plugin only sees loopback.
  const char* old = std::getenv("NCCL_MESH_IFNAME");
  if (old != nullptr && std::string(old) != "lo") {
    fmt::print(stderr, "local mode: overriding NCCL_MESH_IFNAME={} with lo\n", old);
  }
  setenv("NCCL_MESH_IFNAME", "lo", 1);

  // Every listed CPU must be one this process may use: the kernel would refuse the pin in the
  // child, after the other ranks started.
  if (!opt.local_cpus.empty()) {
    const auto allowed = allowed_cpus();
    for (const int cpu : opt.local_cpus) {
      if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) {
        throw setup_error(
            fmt::format("--local-cpus: CPU {} is not one this process may run on (CPUs {})", cpu,
                        format_cpu_list(allowed)));
      }
    }
  }

  uint16_t port = 0;
  Fd listener = tcp_listen(0x7f000001u, 0, nranks + 8, &port);

  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw setup_error("cannot find my own executable: " + ec.message());

  if (!opt.quiet) {
    fmt::print(stderr,
               "local mode: {} ranks over loopback (NCCL_MESH_IFNAME=lo, rendezvous "
               "127.0.0.1:{})\n",
               nranks, port);
  }
  std::fflush(stdout);
  std::fflush(stderr);

  std::vector<pid_t> pids(static_cast<size_t>(nranks), -1);
  for (int r = 0; r < nranks; ++r) {
    std::vector<std::string> args(argv, argv + argc);
    args[0] = exe;
    args.push_back("--local-rank=" + std::to_string(r));
    args.push_back("--local-port=" + std::to_string(port));
    if (opt.nranks == 0) args.push_back("--nranks=" + std::to_string(nranks));
    if (r == 0) args.push_back("--local-listen-fd=" + std::to_string(listener.get()));
    const pid_t pid = fork();
    if (pid < 0) throw setup_error(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
      // Pinned before exec, so the rank's every thread (the plugin's included) inherits it.
      std::string why;
      if (!opt.local_cpus.empty() && !pin_to_cpu(cpu_for_rank(opt.local_cpus, r), &why)) {
        std::fprintf(stderr, "nccl-mesh-bench: rank %d: %s\n", r, why.c_str());
        _exit(kExitSetup);
      }
      if (r == 0) {
        // Only rank 0 keeps the rendezvous socket across exec.
        fcntl(listener.get(), F_SETFD, 0);
      }
      std::vector<char*> cargs;
      for (auto& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      execv(exe.c_str(), cargs.data());
      std::fprintf(stderr, "exec %s: %s\n", exe.c_str(), std::strerror(errno));
      _exit(kExitSetup);
    }
    pids[static_cast<size_t>(r)] = pid;
  }
  listener = Fd();  // rank 0 owns it now

  int running = nranks;
  int result = 0;
  bool failed = false;
  Clock::time_point kill_at{};
  bool killed = false;
  // After the first failure the others get this long to print their side before SIGTERM.
  const auto grace = std::chrono::seconds(static_cast<long>(std::min(opt.timeout, 10.0)) + 1);
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int rank = -1;
      for (int r = 0; r < nranks; ++r) {
        if (pids[static_cast<size_t>(r)] == pid) rank = r;
      }
      if (rank < 0) continue;
      pids[static_cast<size_t>(rank)] = -1;
      --running;
      int code = 0;
      if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
        if (!killed) {
          fmt::print(stderr, "local mode: rank {} was killed by signal {} ({})\n", rank,
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
        }
      }
      if (code != 0 && exit_priority(code) > exit_priority(result)) result = code;
      if (code != 0 && !failed) {
        failed = true;
        kill_at = Clock::now() + grace;
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (failed && Clock::now() >= kill_at) {
      for (pid_t p : pids) {
        if (p > 0) kill(p, killed ? SIGKILL : SIGTERM);
      }
      if (!killed) {
        fmt::print(stderr, "local mode: stopping the remaining ranks after a failure\n");
      }
      killed = true;
      kill_at = Clock::now() + std::chrono::seconds(2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

}  // namespace mesh::bench
