// SPDX-License-Identifier: Apache-2.0
#include "util/lingering_close.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/eventfd.h>
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

constexpr int64_t kRecheckMs = 10;

struct Lingering {
  UniqueFd fd;
  int64_t deadline_ms = 0;
};

// Never destroyed: NCCL may close comms after static destructors ran.
struct Lingerer {
  std::mutex mu;
  std::vector<Lingering> sockets;  // appended by any thread, removed by the thread only
  std::thread thread;              // started and joined under start_mu
  UniqueFd wake;                   // eventfd: a socket was added, or stop
  bool stop = false;
  std::mutex start_mu;
};

Lingerer& lingerer() {
  static Lingerer* l = new Lingerer;
  return *l;
}

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

void poke(int wake) {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake, &one, sizeof(one));
}

void run(Lingerer* l) {
  std::vector<pollfd> fds;
  for (;;) {
    int64_t timeout = -1;
    {
      std::lock_guard<std::mutex> lock(l->mu);
      if (l->stop) return;
      fds.assign(1, {l->wake.get(), POLLIN, 0});
      const int64_t now = monotonic_ms();
      for (const Lingering& s : l->sockets) {
        fds.push_back({s.fd.get(), POLLIN | POLLRDHUP, 0});
        // Acknowledgements wake no poll(): look again every kRecheckMs.
        const int64_t left = std::clamp<int64_t>(s.deadline_ms - now, 0, kRecheckMs);
        timeout = timeout < 0 ? left : std::min(timeout, left);
      }
    }
    poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(timeout, 1000000)));
    if (fds[0].revents != 0) {
      uint64_t n = 0;
      [[maybe_unused]] const ssize_t r = read(l->wake.get(), &n, sizeof(n));
    }
    const int64_t now = monotonic_ms();
    std::lock_guard<std::mutex> lock(l->mu);
    // Only this thread removes sockets, so the first fds.size() - 1 are the ones polled.
    size_t kept = 0;
    for (size_t i = 0; i < l->sockets.size(); ++i) {
      const bool polled = i + 1 < fds.size();
      const int fd = polled ? fds[i + 1].fd : -1;
      const bool done = polled && ((fds[i + 1].revents != 0 && drain(fd)) ||
                                   unacknowledged(fd) <= 0 || now >= l->sockets[i].deadline_ms);
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
  if (!l.thread.joinable()) {
    l.wake.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!l.wake.valid()) return;  // out of descriptors: closed at once, as without lingering
    l.stop = false;
    l.thread = std::thread(run, &l);
  }
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.sockets.size() >= kMaxLingeringSockets) {
    MESH_INFO(NCCL_NET, "%zu closed sockets already wait for their peers: closing one at once",
              l.sockets.size());
    return;
  }
  l.sockets.push_back({std::move(fd), monotonic_ms() + linger_ms});
  poke(l.wake.get());
}

void stop_lingering(int64_t wait_ms) {
  Lingerer& l = lingerer();
  std::lock_guard<std::mutex> start(l.start_mu);
  if (!l.thread.joinable()) return;
  const int64_t until = monotonic_ms() + wait_ms;
  while (lingering_sockets() > 0 && monotonic_ms() < until) usleep(10000);
  {
    std::lock_guard<std::mutex> lock(l.mu);
    l.stop = true;
  }
  poke(l.wake.get());
  l.thread.join();
  std::lock_guard<std::mutex> lock(l.mu);
  for (Lingering& s : l.sockets) drain(s.fd.get());
  l.sockets.clear();
  l.wake.reset();
}

size_t lingering_sockets() {
  Lingerer& l = lingerer();
  std::lock_guard<std::mutex> lock(l.mu);
  return l.sockets.size();
}

}  // namespace mesh
