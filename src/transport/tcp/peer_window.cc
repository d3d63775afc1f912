// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/peer_window.h"

// linux/tcp.h, not netinet/tcp.h: glibc's struct tcp_info stops before tcpi_snd_wnd.
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstddef>

namespace mesh::tcp {

bool peer_window_room(int fd, uint64_t* room) {
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

}  // namespace mesh::tcp
