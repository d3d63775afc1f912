// SPDX-License-Identifier: Apache-2.0
// `nccl-mesh-doctor --probe`: measures one cable against the peer's --serve instance. Every
// connection is bound to the local address of the cable, so the numbers are that cable's.
#pragma once

#include <cstdint>

#include "tools/doctor/peers.h"

namespace mesh::doctor::probe {

struct ProbeParams {
  uint16_t port = 0;
  double seconds = 1.0;  // per direction; the server clamps it to kMaxDurationMs
  int streams = 4;       // parallel TCP connections per direction, like the plugin's data sockets
  int pings = 20;
  int connect_timeout_ms = 3000;
};

// INFO, then PING (round-trip times), then SINK and SOURCE (MB/s each way). Stops at the first
// failure and reports it in CableProbe::error.
CableProbe probe_cable(uint32_t local_addr, uint32_t peer_addr, const ProbeParams& params);

}  // namespace mesh::doctor::probe
