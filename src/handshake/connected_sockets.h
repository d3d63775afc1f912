// SPDX-License-Identifier: Apache-2.0
// The sockets of one connection once every one has been authenticated: what the handshake
// service hands to a transport (it never touches these fds again). A bundle of file
// descriptors and facts about them, not a transport::Connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/socket_util.h"

namespace mesh::handshake {

struct ConnectedSockets {
  UniqueFd control;
  std::vector<UniqueFd> data;  // index = stream index
  std::string peer;            // "addr:port" of the control socket's peer, for messages
  std::string local;           // local "addr:port" of the control socket
  // Transport extension (hello.h): the connector gets the listener's reply bytes; the listener
  // gets what its extension handler built (e.g. an RDMA endpoint with connected QPs).
  std::vector<uint8_t> peer_extension;
  std::shared_ptr<void> transport_state;
  // Listener: the connector's TCP eager window, from its control hello (hello.h); its receive
  // side sends clear-to-sends unasked by that bound (transport/tcp/wire.h).
  uint32_t peer_tcp_window = 0;
};

}  // namespace mesh::handshake
