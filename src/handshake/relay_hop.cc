// SPDX-License-Identifier: Apache-2.0
#include "handshake/relay_hop.h"

#include <utility>

namespace mesh::handshake {

namespace {

RelayHop to_hop(const relay::FirstHop& first, bool rdma) {
  RelayHop hop;
  hop.local = first.local;
  hop.peer_addr = first.peer_addr;
  hop.port = first.port;
  hop.route = first.route;
  hop.path = first.path;
  hop.rdma = rdma;
  return hop;
}

}  // namespace

RelayResolver tcp_relay_resolver(relay::Agent* agent, std::vector<Ipv4Prefix> dest,
                                 int64_t since_ms) {
  return
      [agent, dest = std::move(dest), since_ms](uint16_t stream, RelayHop* hop, std::string* why) {
        relay::FirstHop first;
        switch (agent->first_hop(dest, stream, &first, why, since_ms)) {
          case relay::HopStatus::kOk:
            *hop = to_hop(first, false);
            return RelayResolve::kOk;
          case relay::HopStatus::kWait:
            return RelayResolve::kWait;
          case relay::HopStatus::kFail:
            break;
        }
        return RelayResolve::kFail;
      };
}

RelayResolver rdma_relay_resolver(const relay::FirstHop& first) {
  return [hop = to_hop(first, true)](uint16_t, RelayHop* out, std::string*) {
    *out = hop;
    return RelayResolve::kOk;
  };
}

}  // namespace mesh::handshake
