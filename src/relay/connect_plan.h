// SPDX-License-Identifier: Apache-2.0
// How to reach a peer that shares no subnet with this host (docs/relay.md): RDMA through the
// route's relay hosts where the first cable allows it (each relay host checks its own next
// cable and refuses otherwise), else TCP through the relay agents, or
// no way at all. The plugin (the orchestrator) fills RelayNeeds from its settings and the
// peer's handle, asks plan_relayed_connect, and only carries the plan out: it opens the RDMA
// sender on the first cable (transport layer) or gives the handshake the TCP hop resolver.
// Logic over a route query (the agent's route_for_rdma in the plugin, a fake in
// tests/unit/relay_connect_plan_test.cc), no I/O. A kFail is logged here, as the one WARN of
// the failed connect (its format is a row of docs/deploy.md's troubleshooting table); kRdma
// and kTcp carry the INFO line the caller logs once the plan is carried out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "relay/agent.h"
#include "util/ipv4.h"

namespace mesh::relay {

struct RelayNeeds {
  // NCCL_MESH_RELAY is on and this process's relay agent (own or the host's) is running; else
  // `relay_off` says which ("off (NCCL_MESH_RELAY=0)", "unavailable (...)").
  bool relay_on = true;
  std::string relay_off;
  std::string local_subnets;  // this host's mesh interfaces, for the WARN of a dead end
  bool gpu = false;           // the device advertised GPU memory: only RDMA can carry it
  bool rdma_only = false;     // NCCL_MESH_TRANSPORT=rdma: TCP relay is not allowed
  // NCCL_MESH_TRANSPORT=auto, this host has a usable RDMA port, and every address the peer
  // advertises has RDMA (so its cable to the relay host does): RDMA relay is worth trying.
  bool rdma_worth_trying = false;
};

enum class PlanKind {
  kWait,  // no route yet: connect() returns no comm and NCCL calls again
  kFail,  // the WARN is logged (see the top of this file)
  kRdma,  // open the RDMA sender on `first` (its local address and relay host)
  kTcp,   // relay over TCP through the agents (the hop is resolved per stream)
};

struct ConnectPlan {
  PlanKind kind = PlanKind::kFail;
  FirstHop first;       // kRdma: the first cable and relay host
  std::string message;  // kRdma/kTcp: the INFO line the caller logs
};

// The route towards `dest` for an RDMA relay (Agent::route_for_rdma with the connection's
// spread and start time bound in).
using RouteSource = std::function<HopStatus(FirstHop* out, std::string* why)>;
// Whether this host has a usable RDMA port on the interface with this local address.
using RdmaUsableAt = std::function<bool(uint32_t local_addr)>;

// The plan for a peer advertising `dest` (none of them on a subnet of this host).
ConnectPlan plan_relayed_connect(const RelayNeeds& needs, const std::vector<Ipv4Prefix>& dest,
                                 const RouteSource& route, const RdmaUsableAt& rdma_usable_at);

// kRdma was planned but the sender's QPs towards the relay host could not be set up (`why`):
// TCP relay where the connection allows it, else kFail.
ConnectPlan after_rdma_setup_failed(const RelayNeeds& needs, const std::vector<Ipv4Prefix>& dest,
                                    const std::string& why);

// "198.18.1.2/30, 198.18.2.2/30", or "(none)".
std::string describe_prefixes(const std::vector<Ipv4Prefix>& addrs);

}  // namespace mesh::relay
