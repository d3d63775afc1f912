// SPDX-License-Identifier: Apache-2.0
// What the relay agent hands to the RDMA forwarder (transport/rdma/relay_forwarder.h) for a
// connection that asked for RDMA relay (request flag kRequestFlagRdma): both sockets, the
// request answered by no one yet (the forwarder sends the "ok" once it owns the sockets).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "util/socket_util.h"

namespace mesh::relay {

struct RdmaHandoff {
  UniqueFd up;              // from the connector, the relay request read off it
  UniqueFd down;            // connected to the destination's handshake port
  uint32_t down_local = 0;  // this host's address on the cable to the destination
  uint32_t down_peer = 0;   // the destination's address on it
  std::string what;         // "198.18.1.1:40000 -> 198.18.3.3:5000", for messages
};

// Takes the sockets (moves them out of the handoff) and returns true, or leaves them and
// returns false with *why (the agent then answers the connector kBusy).
using RdmaForwardHook = std::function<bool(RdmaHandoff& handoff, std::string* why)>;

}  // namespace mesh::relay
