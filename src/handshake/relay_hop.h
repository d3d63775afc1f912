// SPDX-License-Identifier: Apache-2.0
// The handshake's view of a relayed route (service.h RelayResolver) made from the relay layer's
// first hop: for TCP relay the hop is resolved each time the handshake opens a stream (the agent
// may spread streams over equal-cost relay hosts, and a route can change between attempts); for
// RDMA relay it is the one cable the sender's QPs were opened on.
#pragma once

#include <cstdint>
#include <vector>

#include "handshake/service.h"
#include "relay/agent.h"

namespace mesh::handshake {

// Resolves through `agent` (which outlives the connect attempt: the plugin's agent lives until
// the process exits) towards `dest`, waiting for a route no longer than the connect deadline
// counted from `since_ms` (Agent::first_hop).
RelayResolver tcp_relay_resolver(relay::Agent* agent, std::vector<Ipv4Prefix> dest,
                                 int64_t since_ms);
// Always `first` (every attempt goes to the relay host the RDMA QPs are on), marked rdma.
RelayResolver rdma_relay_resolver(const relay::FirstHop& first);

}  // namespace mesh::handshake
