// SPDX-License-Identifier: Apache-2.0
#include "ranks.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

namespace gintest {

namespace {
int sanitizer_scale() {
#if defined(__SANITIZE_THREAD__)
  return 5;
#elif defined(__SANITIZE_ADDRESS__)
  return 3;
#else
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return 5;
#elif __has_feature(address_sanitizer)
  return 3;
#endif
#endif
  return 1;
#endif
}
}  // namespace

int time_scale() {
  // MESH_GIN_TIME_SCALE: slow machines (the Soft-RoCE VM under TCG) stretch every bound too.
  static const int scale = [] {
    const char* v = std::getenv("MESH_GIN_TIME_SCALE");
    const int env = v != nullptr ? std::atoi(v) : 0;
    return std::max(sanitizer_scale(), std::clamp(env, 1, 100));
  }();
  return scale;
}

// Entry `rank` (mod the list's length) of the `sep`-separated list in variable `var`, or "".
std::string rank_entry(const char* var, char sep, int rank) {
  const char* list = std::getenv(var);
  if (list == nullptr || *list == '\0') return "";
  std::vector<std::string> names;
  std::string cur;
  for (const char* p = list;; ++p) {
    if (*p == sep || *p == '\0') {
      if (!cur.empty()) names.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return names.empty() ? "" : names[static_cast<size_t>(rank) % names.size()];
}

bool RankEnv::barrier(int timeout_ms) {
  const int gen = shared_->generation.load(std::memory_order_acquire);
  if (shared_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == nranks_) {
    shared_->arrived.store(0, std::memory_order_release);
    shared_->generation.fetch_add(1, std::memory_order_acq_rel);
    return true;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms * time_scale());
  while (shared_->generation.load(std::memory_order_acquire) == gen) {
    if (shared_->dead.load(std::memory_order_acquire) != 0)
      return fail("barrier: another rank exited");
    if (std::chrono::steady_clock::now() > deadline) return fail("barrier: timed out");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

bool RankEnv::allgather_handles(const void* mine, void** all) {
  std::memcpy(shared_->handles[rank_], mine, 128);
  if (!barrier()) return false;
  for (int r = 0; r < nranks_; ++r) all[r] = shared_->handles[r];
  return true;
}

bool RankEnv::fail(const std::string& why) {
  char* slot = shared_->error[rank_];
  if (slot[0] == '\0') std::snprintf(slot, sizeof(shared_->error[0]), "%s", why.c_str());
  return false;
}

std::string run_ranks(int nranks, int timeout_s, const std::function<bool(RankEnv&)>& body) {
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return "mmap failed";
  auto* shared = new (mem) Shared;
  shared->comm_id = 0x6d65736800000000ULL | static_cast<uint64_t>(getpid());
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      RankEnv env(shared, r, nranks);
      // MESH_GIN_NETNS=ns0,ns1,...: rank r runs in namespace r (mod the list), a host of a
      // namespace mesh (netns.sh); its cables are MESH_GIN_IFNAME and relaying stays on.
      const std::string netns = rank_entry("MESH_GIN_NETNS", ',', r);
      if (!netns.empty()) {
        const int fd = open(("/var/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
          env.fail("cannot enter network namespace " + netns);
          _exit(1);
        }
        close(fd);
      }
      // MESH_GIN_IFNAMES=a0,a1;b0;c0: rank r's own cables (entry r), as the hosts of the
      // Soft-RoCE VM share one namespace; else MESH_GIN_IFNAME for every rank.
      const char* ifname = std::getenv("MESH_GIN_IFNAME");
      const std::string own = rank_entry("MESH_GIN_IFNAMES", ';', r);
      setenv("NCCL_MESH_IFNAME",
             !own.empty()                           ? own.c_str()
             : ifname != nullptr && *ifname != '\0' ? ifname
                                                    : "lo",
             1);
      if (netns.empty()) setenv("NCCL_MESH_RELAY", "0", 1);  // one host: nothing to relay
      if (std::getenv("NCCL_MESH_CONNECT_TIMEOUT_MS") == nullptr)
        setenv("NCCL_MESH_CONNECT_TIMEOUT_MS", std::to_string(5000 * time_scale()).c_str(), 1);
      bool ok = false;
      try {
        ok = body(env);
      } catch (const std::exception& e) {
        ok = env.fail(std::string("exception: ") + e.what());
      }
      if (!ok) env.fail("failed (no reason given)");
      shared->dead.fetch_add(ok ? 0 : 1);
      std::fflush(nullptr);
      _exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  std::string errors;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s * time_scale());
  std::vector<bool> reaped(static_cast<size_t>(nranks), false);
  int left = nranks;
  while (left > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (reaped[static_cast<size_t>(r)]) continue;
      int status = 0;
      if (waitpid(pids[static_cast<size_t>(r)], &status, WNOHANG) == pids[static_cast<size_t>(r)]) {
        reaped[static_cast<size_t>(r)] = true;
        --left;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          shared->dead.fetch_add(1);
          errors += "rank " + std::to_string(r) +
                    (WIFSIGNALED(status) ? " killed by signal " + std::to_string(WTERMSIG(status))
                                         : " exited " + std::to_string(WEXITSTATUS(status))) +
                    ": " + shared->error[r] + "\n";
        }
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (reaped[static_cast<size_t>(r)]) continue;
        kill(pids[static_cast<size_t>(r)], SIGKILL);
        waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
        errors += "rank " + std::to_string(r) + " timed out after " +
                  std::to_string(timeout_s * time_scale()) + " s: " + shared->error[r] + "\n";
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  shared->~Shared();
  munmap(mem, sizeof(Shared));
  return errors;
}

}  // namespace gintest
