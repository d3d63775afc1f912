// SPDX-License-Identifier: Apache-2.0
#include "relay/connect_plan.h"

#include "util/log.h"

namespace mesh::relay {

namespace {

bool needs_rdma(const RelayNeeds& n) {
  return n.gpu || n.rdma_only;
}

ConnectPlan tcp_plan(const std::vector<Ipv4Prefix>& dest, const std::string& rdma_refused) {
  ConnectPlan p;
  p.kind = PlanKind::kTcp;
  p.message = "no common subnet with the peer (" + describe_prefixes(dest) +
              "): relaying over TCP through neighbours";
  if (!rdma_refused.empty()) p.message += " (RDMA relay impossible: " + rdma_refused + ")";
  return p;
}

// RDMA relay is impossible for `why`: the WARN when the connection needs it, else TCP.
ConnectPlan without_rdma(const RelayNeeds& n, const std::vector<Ipv4Prefix>& dest,
                         const std::string& why) {
  if (!needs_rdma(n)) return tcp_plan(dest, why);
  ConnectPlan p;
  p.kind = PlanKind::kFail;
  MESH_WARN(
      "connect: the peer (%s) shares no subnet with this host and RDMA relay is impossible: "
      "%s. %s",
      describe_prefixes(dest).c_str(), why.c_str(),
      n.gpu ? "TCP relay cannot carry GPU buffers: set NCCL_MESH_TRANSPORT=tcp on every rank, "
              "or cable the hosts directly"
            : "NCCL_MESH_TRANSPORT=rdma forbids TCP relay: set NCCL_MESH_TRANSPORT=auto, or "
              "cable the hosts directly");
  return p;
}

}  // namespace

std::string describe_prefixes(const std::vector<Ipv4Prefix>& addrs) {
  std::string s;
  for (const Ipv4Prefix& a : addrs) s += (s.empty() ? "" : ", ") + format_prefix(a);
  return s.empty() ? "(none)" : s;
}

ConnectPlan plan_relayed_connect(const RelayNeeds& n, const std::vector<Ipv4Prefix>& dest,
                                 const RouteSource& route, const RdmaUsableAt& rdma_usable_at) {
  ConnectPlan p;
  if (!n.relay_on) {
    p.kind = PlanKind::kFail;
    MESH_WARN(
        "connect: no common subnet with the peer (it advertises %s; local subnets: %s) and "
        "relaying is %s. Check the cabling and addresses or NCCL_MESH_IFNAME, or allow relaying "
        "through neighbours (NCCL_MESH_RELAY=1, docs/relay.md)",
        describe_prefixes(dest).c_str(), n.local_subnets.c_str(), n.relay_off.c_str());
    return p;
  }
  // TCP needs no route here: the handshake resolves each stream's first hop when it opens it.
  if (!needs_rdma(n) && !n.rdma_worth_trying) return tcp_plan(dest, "");
  std::string why;
  switch (route(&p.first, &why)) {
    case HopStatus::kWait:
      p.kind = PlanKind::kWait;
      return p;
    case HopStatus::kFail:
      p.kind = PlanKind::kFail;
      MESH_WARN("connect: no route to the peer (%s) through neighbours: %s",
                describe_prefixes(dest).c_str(), why.c_str());
      return p;
    case HopStatus::kOk:
      break;
  }
  // RDMA relay opens its QPs on the first cable; routes of any length (within the relay
  // request's hop limit) chain relay hosts, each of which checks its own next cable.
  if (p.first.via_local_agent)
    return without_rdma(n, dest,
                        "this process is not its host's relay agent (another plugin process is), "
                        "and the route, which RDMA needs to pick its cable, is known to the agent "
                        "only");
  if (!rdma_usable_at(p.first.local.addr))
    return without_rdma(n, dest,
                        "the cable to the relay host (local " + format_ipv4(p.first.local.addr) +
                            ") has no usable RDMA port");
  p.kind = PlanKind::kRdma;
  p.message = "no common subnet with the peer (" + describe_prefixes(dest) +
              "): relaying over RDMA through " + p.first.route + " (" + p.first.path + ")";
  return p;
}

ConnectPlan after_rdma_setup_failed(const RelayNeeds& n, const std::vector<Ipv4Prefix>& dest,
                                    const std::string& why) {
  return without_rdma(n, dest, "RDMA setup towards the relay host failed: " + why);
}

}  // namespace mesh::relay
