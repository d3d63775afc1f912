// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/peer_window.h"

// linux/tcp.h, not netinet/tcp.h: glibc's struct tcp_info stops before tcpi_snd_wnd.
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>

namespace mesh::tcp {
namespace {
std::atomic<uint64_t> g_queries{0};
}  // namespace

uint64_t peer_window_queries() {
  return g_queries.load(std::memory_order_relaxed);
}

bool peer_window_room(int fd, uint64_t* room) {
  g_queries.fetch_add(1, std::memory_order_relaxed);
  constexpr uint8_t kEstablished = 1;  // TCP_ESTABLISHED in the kernel's state numbering
  // The queue first, the window second: an acknowledgement between the two calls then shrinks
  // the queue we already counted and can only make the answer smaller than the truth (the other
  // order could count the acknowledged bytes as room twice).
  int queued = 0;
  if (ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return false;
  struct tcp_info info = {};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  if (len < offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(info.tcpi_snd_wnd)) return false;
  if (info.tcpi_state != kEstablished) return false;
  const uint64_t window = info.tcpi_snd_wnd;
  const auto held = static_cast<uint64_t>(queued);
  *room = window > held ? window - held : 0;
  return true;
}

bool WindowEdge::measure(int fd, uint64_t sent, uint64_t* room) {
  known_ = peer_window_room(fd, room);
  edge_ = known_ ? sent + *room : 0;
  return known_;
}

}  // namespace mesh::tcp
