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
std::atomic<uint64_t> g_syscalls{0};

constexpr uint8_t kEstablished = 1;  // TCP_ESTABLISHED in the kernel's state numbering

// One TCP_INFO snapshot of an established socket that reports `field_end` bytes of it (fields
// newer than the kernel are missing, not zero).
bool tcp_info_of(int fd, size_t field_end, struct tcp_info* info) {
  g_syscalls.fetch_add(1, std::memory_order_relaxed);
  *info = {};
  socklen_t len = sizeof(*info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &len) != 0) return false;
  return len >= field_end && info->tcpi_state == kEstablished;
}

constexpr size_t kWindowEnd = offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(uint32_t);
// tcpi_bytes_acked (Linux 4.1) comes before tcpi_snd_wnd (5.4): a kernel that has the window
// has it too.
static_assert(offsetof(struct tcp_info, tcpi_bytes_acked) < kWindowEnd);

// The queue first, the window second: an acknowledgement between the two calls then shrinks
// the queue we already counted and can only make the answer smaller than the truth (the other
// order could count the acknowledged bytes as room twice).
bool queue_and_window(int fd, uint64_t* queued, struct tcp_info* info) {
  g_queries.fetch_add(1, std::memory_order_relaxed);
  g_syscalls.fetch_add(1, std::memory_order_relaxed);
  int q = 0;
  if (ioctl(fd, SIOCOUTQ, &q) != 0 || q < 0) return false;
  if (!tcp_info_of(fd, kWindowEnd, info)) return false;
  *queued = static_cast<uint64_t>(q);
  return true;
}

// The window less what the socket still holds (unsent or unacknowledged).
uint64_t room_left(const struct tcp_info& info, uint64_t queued) {
  const uint64_t window = info.tcpi_snd_wnd;
  return window > queued ? window - queued : 0;
}

}  // namespace

uint64_t peer_window_queries() {
  return g_queries.load(std::memory_order_relaxed);
}

uint64_t peer_window_syscalls() {
  return g_syscalls.load(std::memory_order_relaxed);
}

bool peer_window_room(int fd, uint64_t* room) {
  uint64_t queued = 0;
  struct tcp_info info {};
  if (!queue_and_window(fd, &queued, &info)) return false;
  *room = room_left(info, queued);
  return true;
}

bool WindowEdge::measure(int fd, uint64_t sent, uint64_t* room, bool exact) {
  struct tcp_info info {};
  uint64_t queued = 0;
  if (calibrated_) {
    g_queries.fetch_add(1, std::memory_order_relaxed);
    known_ = tcp_info_of(fd, kWindowEnd, &info);
  } else {
    known_ = queue_and_window(fd, &queued, &info);
  }
  if (!known_) {
    edge_ = 0;
    return false;
  }
  if (calibrated_) {
    // The right edge in the stream's count; never below what it had when first learnt, since
    // neither the acknowledged bytes nor (tcp_shrink_window off) the right edge move back.
    const uint64_t right = info.tcpi_bytes_acked + info.tcpi_snd_wnd;
    edge_ = right > offset_ ? right - offset_ : 0;
  } else {
    edge_ = sent + room_left(info, queued);
    // Nothing unacknowledged: every byte the socket took (its handshake's and the stream's
    // `sent`) is in tcpi_bytes_acked, read after the queue with no acknowledgement possible in
    // between.
    if (exact && queued == 0 && info.tcpi_bytes_acked >= sent) {
      offset_ = info.tcpi_bytes_acked - sent;
      calibrated_ = true;
    }
  }
  *room = edge_ > sent ? edge_ - sent : 0;
  return true;
}

}  // namespace mesh::tcp
