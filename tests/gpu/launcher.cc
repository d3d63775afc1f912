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

extern char** environ;

namespace e2e {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Once one rank has failed, the others are usually blocked in a collective with it: give them
// a moment to report their own error, then end them.
constexpr auto kGraceAfterFailure = std::chrono::seconds(10);

// The environment of one rank: ours, with the NCCL settings that make this rank its own "host"
// and route its traffic through the chosen network.
class Environment {
 public:
  Environment() {
    for (char** e = environ; *e != nullptr; ++e) vars_.emplace_back(*e);
  }
  const char* get(const std::string& key) const {
    for (const auto& v : vars_) {
      if (v.compare(0, key.size() + 1, key + "=") == 0) return v.c_str() + key.size() + 1;
    }
    return nullptr;
  }
  void set(const std::string& key, const std::string& value) {
    unset(key);
    vars_.push_back(key + "=" + value);
  }
  void unset(const std::string& key) {
    std::erase_if(
        vars_, [&](const std::string& v) { return v.compare(0, key.size() + 1, key + "=") == 0; });
  }
  const std::vector<std::string>& vars() const { return vars_; }

 private:
  std::vector<std::string> vars_;
};

Environment rankEnvironment(const SetSpec& spec, int rank, const std::string& plugin) {
  Environment env;
  // Distinct host ids: NCCL sees N one-GPU nodes, so P2P/SHM are off and all traffic goes
  // through the network transport (abi doc section 9).
  env.set("NCCL_HOSTID", "host" + std::to_string(rank));
  env.set("NCCL_SOCKET_IFNAME", "lo");
  env.set("NCCL_MNNVL_ENABLE", "0");
  // Keeps the plugin loaded across destroy + re-create (NCCL 2.28 unload bug, abi doc 5.5).
  env.set("NCCL_NET_PLUGIN_REF_COUNT", "1");
  // INFO with INIT,NET is what prints "via NET/<name>": the proof of the path taken.
  const char* level = env.get("NCCL_DEBUG");
  if (level == nullptr || (std::strcmp(level, "INFO") != 0 && std::strcmp(level, "TRACE") != 0)) {
    env.set("NCCL_DEBUG", "INFO");
  }
  if (env.get("NCCL_DEBUG_SUBSYS") == nullptr) env.set("NCCL_DEBUG_SUBSYS", "INIT,NET");
  env.unset("NCCL_DEBUG_FILE");
  if (spec.proto == "default") {
    env.unset("NCCL_PROTO");
  } else {
    env.set("NCCL_PROTO", spec.proto);
  }
  if (spec.net == "Mesh") {
    env.set("NCCL_NET_PLUGIN", plugin);
    // Naming the net makes a plugin load failure an error instead of a silent Socket fallback.
    env.set("NCCL_NET", "Mesh");
    env.set("NCCL_MESH_IFNAME", "lo");
  } else {
    env.set("NCCL_NET_PLUGIN", "none");
    env.set("NCCL_NET", "Socket");
  }
  return env;
}

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

// Reads one rank's log for the transport proof, the NCCL version and fatal errors. The proof is
// required only of ranks that exited cleanly: for the others the exit status says enough.
void scanLog(const std::string& path, int rank, bool exitedCleanly, const SetSpec& spec,
             SetOutcome& out) {
  std::ifstream in(path);
  const std::string good = "via NET/" + spec.net + "/";
  const std::string usingNet = "Using network " + spec.net;
  int via = 0;
  int badVia = 0;
  int warns = 0;
  bool usedNet = false;
  bool loaded = spec.net != "Mesh";
  std::string line;
  while (std::getline(in, line)) {
    const auto v = line.find("NCCL version ");
    if (v != std::string::npos && out.ncclVersion.empty()) {
      out.ncclVersion = line.substr(v + 13, line.find_first_of(" \t", v + 13) - (v + 13));
    }
    if (line.find("] via ") != std::string::npos &&
        (line.find("[send]") != std::string::npos || line.find("[receive]") != std::string::npos)) {
      if (line.find(good) != std::string::npos) {
        ++via;
      } else if (badVia++ == 0) {
        out.problems.push_back("rank " + std::to_string(rank) + ": traffic not via NET/" +
                               spec.net + ": " + line);
      }
    }
    if (line.find(usingNet) != std::string::npos) usedNet = true;
    if (line.find("Loaded net plugin Mesh") != std::string::npos) loaded = true;
    if (line.find("FATAL:") != std::string::npos) {
      out.problems.push_back("rank " + std::to_string(rank) + ": " + line);
    }
    if (line.find(" WARN ") != std::string::npos && warns++ < 3) {
      out.warnings.push_back("rank " + std::to_string(rank) + ": " + line);
    }
  }
  out.viaLines += via;
  if (!exitedCleanly) return;
  const std::string who = "rank " + std::to_string(rank) + ": ";
  if (!loaded) out.problems.push_back(who + "no \"Loaded net plugin Mesh\" line in " + path);
  if (!usedNet) out.problems.push_back(who + "no \"" + usingNet + "\" line in " + path);
  // A single rank has no peer and so no network connection; any other set must show one.
  if (spec.nranks > 1 && via == 0) {
    out.problems.push_back(who + "no \"" + good + "\" line in " + path);
  }
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
  for (int r = 0; r < spec.nranks; ++r) {
    Child& c = children[static_cast<size_t>(r)];
    c.argStrings = {selfExe};
    for (auto& a : rankArguments(o, r, spec.nranks, out.dir)) c.argStrings.push_back(a);
    c.envStrings = rankEnvironment(spec, r, plugin).vars();
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
    scanLog(c.log, r, c.pid > 0 && exitCode(c.status) == 0, spec, out);
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
