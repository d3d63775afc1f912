// SPDX-License-Identifier: Apache-2.0
#include "util/lingering_close.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "util/clock.h"
#include "util/log.h"

namespace mesh {
namespace {

// Acknowledgements and new sockets wake no poll(): the thread looks again this often, and only
// while it holds sockets.
constexpr int64_t kRecheckMs = 10;

struct Lingering {
  UniqueFd fd;
  int64_t deadline_ms = 0;
};

// Never destroyed: NCCL may close comms after static destructors ran.
struct Lingerer {
  std::mutex start_mu;  // starting and joining the thread; taken before mu
  std::thread thread;
  std::mutex mu;
  std::vector<Lingering> sockets;  // appended by any thread, removed by the thread only
  bool running = false;            // the thread has not decided to end yet
  bool stop = false;
};

Lingerer& lingerer() {
  static Lingerer* l = new Lingerer;
  return *l;
}

// A thread that ended with its last socket stays joinable until the next one starts; at exit
// it is joined (and one still running stopped), whether or not the plugin's own exit hook ran
// (the unit tests use the transport without it): a thread never joined is a leak to
// ThreadSanitizer. The Lingerer itself is never destroyed, so this may run in any order.
struct JoinAtExit {
  ~JoinAtExit() { stop_lingering(0); }
} join_at_exit;

// Bytes the peer's kernel has not acknowledged yet (the FIN counts one): while there are none,
// a reset loses nothing (the peer's receive queue stays readable after one). -1: unknown.
int64_t unacknowledged(int fd) {
  int n = 0;
  return ioctl(fd, SIOCOUTQ, &n) == 0 ? n : -1;
}

// Reads and drops what the socket holds. True once the peer is done (FIN, reset, error).
bool drain(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }
}

// The thread lives only while it holds sockets, so a process that closed its comms is back to
// its own threads and descriptors (the leak checks of the soak and conformance tests count them).
void run(Lingerer* l) {
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(l->mu);
      if (l->stop || l->sockets.empty()) {
        l->running = false;  // nothing of l is touched after this
        return;
      }
      fds.clear();
      for (const Lingering& s : l->sockets) fds.push_back({s.fd.get(), POLLIN | POLLRDHUP, 0});
    }
    poll(fds.data(), fds.size(), static_cast<int>(kRecheckMs));
    const int64_t now = monotonic_ms();
    std::lock_guard<std::mutex> lock(l->mu);
    // Only this thread removes sockets, so the first fds.size() are the ones polled.
    size_t kept = 0;
    for (size_t i = 0; i < l->sockets.size(); ++i) {
      const bool polled = i < fds.size();
      const int fd = l->sockets[i].fd.get();
      const bool done = polled && ((fds[i].revents != 0 && drain(fd)) || unacknowledged(fd) <= 0 ||
                                   now >= l->sockets[i].deadline_ms);
      if (done) continue;  // UniqueFd closes it
      if (kept != i) l->sockets[kept] = std::move(l->sockets[i]);
      ++kept;
    }
    l->sockets.resize(kept);
  }
}

}  // namespace

void close_when_peer_done(UniqueFd fd, int64_t linger_ms) {
  if (!fd.valid()) return;
  shutdown(fd.get(), SHUT_WR);  // FIN after the bytes still queued
  // The peer is done already, or has everything: closing loses nothing.
  if (drain(fd.get()) || unacknowledged(fd.get()) == 0) return;
  Lingerer& l = lingerer();
  std::lock_guard<std::mutex> start(l.start_mu);
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.sockets.size() >= kMaxLingeringSockets) {
      MESH_INFO(NCCL_NET, "%zu closed sockets already wait for their peers: closing one at once",
                l.sockets.size());
      return;
    }
    l.sockets.push_back({std::move(fd), monotonic_ms() + linger_ms});
    if (l.running) return;  // the thread takes it at its next look
    l.running = true;
  }
  if (l.thread.joinable()) l.thread.join();  // one that ended: it returns at once
  l.thread = std::thread(run, &l);
}

void stop_lingering(int64_t wait_ms) {
  Lingerer& l = lingerer();
  std::lock_guard<std::mutex> start(l.start_mu);
  const int64_t until = monotonic_ms() + wait_ms;
  while (lingering_sockets() > 0 && monotonic_ms() < until) usleep(10000);
  {
    std::lock_guard<std::mutex> lock(l.mu);
    l.stop = true;
  }
  if (l.thread.joinable()) l.thread.join();
  std::lock_guard<std::mutex> lock(l.mu);
  for (Lingering& s : l.sockets) drain(s.fd.get());
  l.sockets.clear();
  l.stop = false;
  l.running = false;
}

size_t lingering_sockets() {
  Lingerer& l = lingerer();
  std::lock_guard<std::mutex> lock(l.mu);
  return l.sockets.size();
}

}  // namespace mesh
