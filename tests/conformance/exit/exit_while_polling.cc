// SPDX-License-Identifier: Apache-2.0
// An application that exits without destroying its communicators: NCCL's proxy thread is still
// inside isend/irecv/test while the process runs its static destructors. The plugin must not
// free what that thread is using (it did before: the exit hook deleted every comm).
//
//   mesh_exit_while_polling PLUGIN.so [ROUNDS]
// Each round forks a child that opens a loopback connection to itself through ncclNetPlugin_v9,
// starts a thread that sends and receives in a loop, and returns from main after 100 ms. The
// round passes if the child exits with status 0 (no signal, no sanitizer report). Prints one
// line per round; exit status 1 if any round failed.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "nccl/net_v9.h"

namespace {

void quiet_logger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

int child(const char* plugin_path) {
  void* lib = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", plugin_path, dlerror());
    return 10;
  }
  auto* net = static_cast<ncclNet_v9_t*>(dlsym(lib, "ncclNetPlugin_v9"));
  if (net == nullptr || net->init(quiet_logger) != ncclSuccess) return 11;
  int ndev = 0;
  if (net->devices(&ndev) != ncclSuccess || ndev < 1) return 12;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  if (net->listen(0, handle, &listen_comm) != ncclSuccess) return 13;
  void* send_comm = nullptr;
  void* recv_comm = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (send_comm == nullptr || recv_comm == nullptr) {
    ncclNetDeviceHandle_v9_t* dev = nullptr;
    if (send_comm == nullptr && net->connect(0, handle, &send_comm, &dev) != ncclSuccess) return 14;
    if (recv_comm == nullptr && net->accept(listen_comm, &recv_comm, &dev) != ncclSuccess)
      return 15;
    if (std::chrono::steady_clock::now() > deadline) return 16;
  }
  constexpr size_t kSize = 1 << 20;
  // Never freed, like NCCL's buffers: the polling thread uses them until the process is gone.
  static char* const out = new char[kSize]();
  static char* const in = new char[kSize]();
  void* smr = nullptr;
  void* rmr = nullptr;
  if (net->regMr(send_comm, out, kSize, NCCL_PTR_HOST, &smr) != ncclSuccess) return 17;
  if (net->regMr(recv_comm, in, kSize, NCCL_PTR_HOST, &rmr) != ncclSuccess) return 18;
  static std::atomic<bool> running{false};
  // The "proxy thread": never joined, still polling when main returns. Errors are ignored:
  // what is tested is that the process exits cleanly, not what the calls return meanwhile.
  std::thread([=] {
    for (;;) {
      void* rreq = nullptr;
      void* sreq = nullptr;
      void* data = in;
      size_t size = kSize;
      int tag = 0;
      void* mr = rmr;
      while (rreq == nullptr) {
        if (net->irecv(recv_comm, 1, &data, &size, &tag, &mr, &rreq) != ncclSuccess) break;
      }
      while (sreq == nullptr) {
        if (net->isend(send_comm, out, kSize, 0, smr, &sreq) != ncclSuccess) break;
      }
      running.store(true);
      int sdone = sreq == nullptr, rdone = rreq == nullptr, n = 0;
      while (!sdone || !rdone) {
        if (!sdone && net->test(sreq, &sdone, &n) != ncclSuccess) sdone = 1;
        if (!rdone && net->test(rreq, &rdone, &n) != ncclSuccess) rdone = 1;
      }
    }
  }).detach();
  while (!running.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return 0;  // exit() with the thread still inside the plugin
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PLUGIN.so [ROUNDS]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  if (argc > 3) return child(argv[1]);  // internal: "child" mode, used by the rounds below
  int failed = 0;
  for (int i = 0; i < rounds; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl(argv[0], argv[0], argv[1], "1", "child", static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (WIFSIGNALED(status)) {
      std::printf("round %d: FAILED, killed by signal %d\n", i, WTERMSIG(status));
    } else {
      std::printf("round %d: %s (exit status %d)\n", i, ok ? "ok" : "FAILED", WEXITSTATUS(status));
    }
    failed += ok ? 0 : 1;
  }
  std::printf("%d of %d rounds exited cleanly\n", rounds - failed, rounds);
  return failed == 0 ? 0 : 1;
}
