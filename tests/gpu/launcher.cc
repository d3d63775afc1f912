// SPDX-License-Identifier: Apache-2.0
#include "launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "log_checks.h"
#include "rank_env.h"

namespace e2e {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Once one rank has failed, the others are usually blocked in a collective with it: give them
// a moment to report their own error, then end them.
constexpr auto kGraceAfterFailure = std::chrono::seconds(10);

std::string exitDescription(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

int exitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

// Merges the ranks' "<label> PASS|FAIL" files. A label missing on some ranks is fine (ranks
// left out of a split never run its cases); one FAIL anywhere fails the case.
void collectResults(const std::string& dir, int nranks, SetOutcome& out) {
  std::map<std::string, bool> ok;
  for (int r = 0; r < nranks; ++r) {
    std::ifstream in(dir + "/results-rank" + std::to_string(r) + ".txt");
    std::string label;
    std::string verdict;
    while (in >> label >> verdict) {
      auto [it, inserted] = ok.emplace(label, true);
      if (verdict != "PASS") {
        if (it->second) out.failedCases.push_back(label + " (rank " + std::to_string(r) + ")");
        it->second = false;
      }
    }
  }
  out.cases = ok.size();
}

}  // namespace

std::string variantName(const SetSpec& spec) {
  return spec.net == "Mesh" && spec.emulate != "none" ? spec.net + "-" + spec.emulate : spec.net;
}

std::vector<SetSpec> planProcessSets(const Options& o) {
  std::vector<SetSpec> specs;
  for (int n : o.ranks) {
    // Appended, not "n" + to_string(n): GCC 12 warns falsely (-Wrestrict) on that operator+.
    std::string ranks = "n";
    ranks += std::to_string(n);
    for (const auto& shape : o.emulate) {
      const std::string topo = shape == "none" ? "" : shape + "-";
      auto add = [&](const std::string& net, const std::string& proto) {
        if (net != "Mesh" && shape != "none") return;
        const std::string name = o.mode == "check"
                                     ? "check-" + net + "-" + topo + ranks + "-" + proto
                                     : "bench-" + net + "-" + topo + ranks;
        specs.push_back({name, n, net, proto, shape, o.tuner});
      };
      if (o.mode == "check") {
        for (const auto& proto : o.protos) {
          for (const auto& net : o.nets) add(net, proto);
        }
      } else {
        for (const auto& net : o.nets) add(net, "default");
      }
    }
  }
  return specs;
}

SetOutcome runProcessSet(const Options& o, const SetSpec& spec, const std::string& selfExe,
                         const std::string& plugin) {
  SetOutcome out;
  out.spec = spec;
  out.dir = o.outDir + "/" + spec.name;
  // A fresh folder: a stale uid file from an earlier run would send ranks to a dead root.
  std::error_code ec;
  fs::remove_all(out.dir, ec);
  fs::create_directories(out.dir, ec);
  if (ec) {
    out.problems.push_back("cannot create " + out.dir + ": " + ec.message());
    return out;
  }

  // Everything the children need is built before fork(): after it, only async-signal-safe calls
  // (the CUDA runtime may have started threads in this process).
  struct Child {
    std::vector<std::string> argStrings;
    std::vector<std::string> envStrings;
    std::vector<char*> argv;
    std::vector<char*> envp;
    std::string log;
    pid_t pid = -1;
    int status = 0;
    bool done = false;
  };
  std::vector<Child> children(static_cast<size_t>(spec.nranks));
  const std::vector<std::string> inherited = inheritedEnvironment();
  for (int r = 0; r < spec.nranks; ++r) {
    Child& c = children[static_cast<size_t>(r)];
    c.argStrings = {selfExe};
    for (auto& a : rankArguments(o, r, spec.nranks, out.dir)) c.argStrings.push_back(a);
    c.envStrings = rankEnvironment(spec, r, plugin, inherited).vars();
    for (auto& s : c.argStrings) c.argv.push_back(s.data());
    c.argv.push_back(nullptr);
    for (auto& s : c.envStrings) c.envp.push_back(s.data());
    c.envp.push_back(nullptr);
    c.log = out.dir + "/rank" + std::to_string(r) + ".log";
  }

  const auto start = Clock::now();
  const pid_t parent = getpid();
  std::fflush(stdout);
  std::fflush(stderr);
  for (Child& c : children) {
    const int logFd = open(c.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (logFd < 0) {
      out.problems.push_back("cannot create " + c.log + ": " + std::strerror(errno));
      break;
    }
    c.pid = fork();
    if (c.pid == 0) {
      // If the launcher dies (killed by the script's timeout), the ranks die with it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(126);
      dup2(logFd, STDOUT_FILENO);
      dup2(logFd, STDERR_FILENO);
      execve(c.argv[0], c.argv.data(), c.envp.data());
      _exit(127);
    }
    close(logFd);
    if (c.pid < 0) {
      out.problems.push_back(std::string("fork: ") + std::strerror(errno));
      break;
    }
  }

  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(o.setTimeout));
  Clock::time_point firstFailure{};
  bool anyFailure = !out.problems.empty();
  if (anyFailure) firstFailure = Clock::now();
  for (;;) {
    int alive = 0;
    for (size_t r = 0; r < children.size(); ++r) {
      Child& c = children[r];
      if (c.pid <= 0 || c.done) continue;
      if (waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
        c.done = true;
        if (exitCode(c.status) != 0) {
          out.problems.push_back("rank " + std::to_string(r) + ": " + exitDescription(c.status) +
                                 " (log: " + c.log + ")");
          if (!anyFailure) firstFailure = Clock::now();
          anyFailure = true;
        }
      } else {
        ++alive;
      }
    }
    if (alive == 0) break;
    const auto now = Clock::now();
    const bool overTime = now > deadline;
    if (overTime || (anyFailure && now > firstFailure + kGraceAfterFailure)) {
      if (overTime) {
        out.timedOut = true;
        out.problems.push_back("timeout after " + std::to_string(static_cast<int>(o.setTimeout)) +
                               " s: killed the remaining ranks");
      } else {
        out.problems.push_back("killed the remaining ranks after a rank failed");
      }
      for (Child& c : children) {
        if (c.pid > 0 && !c.done) kill(c.pid, SIGKILL);
      }
      for (Child& c : children) {
        if (c.pid > 0 && !c.done) {
          waitpid(c.pid, &c.status, 0);
          c.done = true;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const Child& c : children) out.exitCodes.push_back(c.pid > 0 ? exitCode(c.status) : -1);

  for (int r = 0; r < spec.nranks; ++r) {
    const Child& c = children[static_cast<size_t>(r)];
    std::ifstream log(c.log);
    scanRankLog(log, c.log, r, c.pid > 0 && exitCode(c.status) == 0, spec, out);
  }
  if (o.mode == "check") {
    collectResults(out.dir, spec.nranks, out);
    if (out.cases == 0 && out.problems.empty()) {
      out.problems.push_back("no case results were written");
    }
  } else {
    std::ifstream tsv(out.dir + "/bench.tsv");
    if (!tsv || tsv.peek() == std::ifstream::traits_type::eof()) {
      out.problems.push_back("rank 0 wrote no benchmark results");
    }
  }
  out.passed = out.problems.empty() && out.failedCases.empty();
  return out;
}

}  // namespace e2e
