// SPDX-License-Identifier: Apache-2.0
// How many more bytes a connected TCP socket can send that the peer's kernel has already
// promised to take: the receive window the peer last advertised, less what this socket still
// holds (unsent or unacknowledged). Bytes within that room land in the peer's socket buffer
// whether or not its process reads, so none of them can wait in this socket behind a zero
// window (where TCP_USER_TIMEOUT would kill a healthy connection, design.md "Eager sends").
// Linux never moves a window's right edge back (unless net.ipv4.tcp_shrink_window=1), so the
// answer stays true until the bytes are sent.
#pragma once

#include <cstdint>

namespace mesh::tcp {

// False when the kernel cannot tell: not a TCP socket, not connected, or a kernel whose
// TCP_INFO has no tcpi_snd_wnd (before Linux 5.4).
bool peer_window_room(int fd, uint64_t* room);

}  // namespace mesh::tcp
