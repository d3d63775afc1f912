// SPDX-License-Identifier: Apache-2.0
// This network namespace's IPv4 TCP socket table, read with one NETLINK_SOCK_DIAG (inet_diag)
// dump: the relayed sockets to a neighbour (relay/retention.h) and the listeners a registration
// names (relay/registry.h, check_listener_now). The dump never waits: the kernel fills
// each part of it while it is read (MSG_DONTWAIT), and it is bounded in parts (a part holds
// dozens of sockets) and in buffer size. Agent thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace mesh::relay {

struct TcpSocketInfo {
  uint8_t state = 0;        // TCP_ESTABLISHED, TCP_LISTEN, ...
  uint32_t local_addr = 0;  // host byte order; 0 for a listener bound to 0.0.0.0
  uint16_t local_port = 0;
  uint32_t remote_addr = 0;
  uint16_t remote_port = 0;
  uint32_t uid = 0;  // the socket's owner
};

// Calls `each` for every IPv4 TCP socket whose state is in `states` (a mask of 1 << TCP_*),
// with local port `local_port` when it is not 0 (the kernel filters listeners by it; the
// caller must not rely on that). At most `max_parts` parts of the dump are read. False (with
// *why) when the table cannot be read or the dump did not end within the bound.
bool dump_tcp_sockets(uint32_t states, uint16_t local_port, size_t max_parts,
                      const std::function<void(const TcpSocketInfo&)>& each, std::string* why);

}  // namespace mesh::relay
