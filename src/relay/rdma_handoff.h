// SPDX-License-Identifier: Apache-2.0
// What the relay agent hands to the RDMA forwarder (transport/rdma/relay_forwarder.h) for a
// connection that asked for RDMA relay (request flag kRequestFlagRdma): both sockets, the
// request answered by no one yet (the forwarder sends the "ok" once it owns the sockets).
// `down` goes to the destination's handshake port (this host is the last relay host), or to
// the next relay host's forwarder, which answered the request "ok" (a middle hop of a chain:
// `down_relay`; the forwarder then speaks the relay-hop setup downstream, as a connector).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "util/socket_util.h"

namespace mesh::relay {

struct RdmaHandoff {
  UniqueFd up;              // from the connector, the relay request read off it
  UniqueFd down;            // connected to the destination's handshake port, or the next relay
  uint32_t down_local = 0;  // this host's address on the cable to the destination
  uint32_t down_peer = 0;   // the destination's (or the next relay host's) address on it
  bool down_relay = false;  // `down` reaches the next relay host's forwarder (a middle hop)
  std::string what;         // "198.18.1.1:40000 -> 198.18.3.3:5000", for messages
};

// Takes the sockets (moves them out of the handoff) and returns true, or leaves them and
// returns false with *why (the agent then answers the connector kBusy).
using RdmaForwardHook = std::function<bool(RdmaHandoff& handoff, std::string* why)>;

}  // namespace mesh::relay
