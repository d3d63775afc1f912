// SPDX-License-Identifier: Apache-2.0
// Checks that need the peers: a cable to each, and (after --probe) reachability, MTU and
// netmask agreement of the two ends of every cable.
#include <algorithm>
#include <cmath>

#include "tools/doctor/checks.h"
#include "tools/doctor/relay_plan.h"

namespace mesh::doctor {
namespace {

std::string peer_label(const PeerRoute& r) {
  std::string addrs;
  for (uint32_t a : r.peer.addrs) addrs.append(addrs.empty() ? "" : ",").append(format_ipv4(a));
  return r.peer.name == addrs ? r.peer.name : r.peer.name + " (" + addrs + ")";
}

constexpr const char* kCableFix =
    "cable the two hosts and put both ends in one subnet (198.18.<n>.1/24 here, 198.18.<n>.2/24 "
    "there) for full speed";

// A peer without a cable: the plugin relays it through the hosts between (docs/relay.md) when
// the cable graph connects them. The route is known only where the doctor knows the cables
// between peers (after --probe); only NCCL_MESH_RELAY=0 makes it a failure.
Finding no_cable_finding(const Inventory& inv, const PeerRoute& r, const RelayPlan& plan,
                         bool probed) {
  const char* id = "peer-cable";
  if (inv.settings.relay == 0) {
    return {id, Verdict::kFail, peer_label(r),
            "no cable, and relaying is off (NCCL_MESH_RELAY=0): connections to this peer fail",
            std::string(kCableFix) + ", or unset NCCL_MESH_RELAY to relay through other hosts"};
  }
  if (plan.found) {
    return {id, Verdict::kWarn, peer_label(r), "no cable: " + describe_relay(plan),
            std::string(kCableFix) +
                "; relaying needs nccl-mesh-relayd or a plugin process on every host of the route "
                "(docs/relay.md)"};
  }
  // The doctor sees its own cables and, after --probe, its neighbours' interfaces: a route it
  // cannot find may still exist through hosts further away, so this is no failure.
  return {id, Verdict::kWarn, peer_label(r),
          std::string("no cable: the plugin relays it through other hosts if the cable graph "
                      "connects them; ") +
              (probed ? "no route through the cables known here (this host's and its probed "
                        "neighbours'): " +
                            plan.why
                      : "run with --probe to see the route (without it the cables between "
                        "peers are unknown)"),
          std::string(kCableFix) +
              "; relaying needs nccl-mesh-relayd or a plugin process on every host of the route "
              "(docs/relay.md)"};
}

}  // namespace

Findings check_peer_cables(const Inventory& inv, const Model& m,
                           const std::vector<PeerRoute>& routes) {
  const char* id = "peer-cable";
  const std::vector<RelayPlan> plans = plan_relays(m, routes);
  const bool probed = std::any_of(routes.begin(), routes.end(),
                                  [](const PeerRoute& r) { return !r.probes.empty(); });
  Findings out;
  for (size_t i = 0; i < routes.size(); ++i) {
    const PeerRoute& r = routes[i];
    if (r.self) {
      out.push_back({id, Verdict::kOk, peer_label(r), "this host", ""});
      continue;
    }
    if (r.rails.empty()) {
      std::string unused;
      for (const std::string& u : r.unused_reach) unused += (unused.empty() ? "" : "; ") + u;
      if (!unused.empty()) {
        out.push_back({id, Verdict::kFail, peer_label(r),
                       "no cable: no interface the plugin uses is on a subnet containing the "
                       "peer's address (reachable through unused " +
                           unused + ")",
                       "bring that interface up and include it in NCCL_MESH_IFNAME"});
        continue;
      }
      out.push_back(no_cable_finding(inv, r, plans[i], probed));
      continue;
    }
    out.push_back({id, Verdict::kOk, peer_label(r), describe_direct(m, r.rails), ""});
  }
  return out;
}

namespace {

// The settings every host must share (the tuner's): a host that differs makes NCCL's ranks pick
// different algorithms, so the plugin refuses connections between the two (handshake/agreement.h).
void check_shared_settings(const Inventory& inv, const PeerRoute& r, Findings* out) {
  const PeerInfo* info = nullptr;
  for (const CableProbe& p : r.probes) {
    if (p.ok && p.info) info = &*p.info;
  }
  if (info == nullptr || info->shared_settings.empty()) return;  // not probed, or an old doctor
  std::string differ;
  for (const auto& [name, mine] : shared_settings_of(inv.settings)) {
    const auto it = info->shared_settings.find(name);
    const std::string theirs = it == info->shared_settings.end() ? "(not reported)" : it->second;
    if (theirs != mine) {
      differ += (differ.empty() ? "" : "; ") + name + " is '" + mine + "' here but '" + theirs +
                "' on the peer";
    }
  }
  if (differ.empty()) {
    out->push_back({"shared-settings", Verdict::kOk, peer_label(r),
                    "the tuner settings agree (NCCL_MESH_TUNER, NCCL_MESH_TUNER_MIN_BYTES)", ""});
    return;
  }
  out->push_back({"shared-settings", Verdict::kFail, peer_label(r),
                  differ +
                      ": NCCL's ranks on the two hosts would pick different algorithms and hang, "
                      "so the plugin refuses every connection between them",
                  "set the same values on every host (environment, or /etc/nccl.conf)"});
}

}  // namespace

Findings check_peer_probes(const Inventory& inv, const Model& m,
                           const std::vector<PeerRoute>& routes) {
  Findings out;
  for (const PeerRoute& r : routes) {
    check_shared_settings(inv, r, &out);
    for (size_t i = 0; i < r.probes.size() && i < r.rails.size(); ++i) {
      const CableProbe& p = r.probes[i];
      const topology::Rail& rail = r.rails[i];
      const topology::Interface& local = m.selection.used[rail.local_index];
      const std::string subject = peer_label(r) + " via " + describe_rail(m, rail);
      if (!p.ok) {
        out.push_back({"peer-probe", Verdict::kFail, subject, p.error,
                       "run `nccl-mesh-doctor --serve` on the peer (same --port) and let that "
                       "TCP port through on this cable"});
        continue;
      }
      out.push_back({"peer-probe", Verdict::kOk, subject,
                     "rtt " + std::to_string(std::lround(p.rtt_median_us)) + " us (median), send " +
                         std::to_string(std::lround(p.send_mbytes_per_s)) + " MB/s, recv " +
                         std::to_string(std::lround(p.recv_mbytes_per_s)) + " MB/s",
                     ""});
      if (!p.info || !p.info->arrived_on) continue;
      const PeerInterface& far = *p.info->arrived_on;
      if (far.mtu > 0 && local.mtu > 0 && far.mtu != local.mtu) {
        const int want = std::max(far.mtu, local.mtu);
        out.push_back({"mtu", Verdict::kFail, subject,
                       "MTU " + std::to_string(local.mtu) + " here (" + local.name + "), " +
                           std::to_string(far.mtu) + " on the peer (" + far.name +
                           "): frames larger than the smaller MTU are dropped, so connections "
                           "stall after the handshake and RoCE QPs time out",
                       "ip link set dev " + local.name + " mtu " + std::to_string(want) +
                           " here and ip link set dev " + far.name + " mtu " +
                           std::to_string(want) + " on the peer"});
      } else if (far.mtu > 0 && local.mtu > 0) {
        out.push_back(
            {"mtu", Verdict::kOk, subject, "both ends use MTU " + std::to_string(local.mtu), ""});
      }
      if (far.addr.prefix != local.addr.prefix) {
        out.push_back({"netmask", Verdict::kWarn, subject,
                       "prefix /" + std::to_string(local.addr.prefix) + " here, /" +
                           std::to_string(far.addr.prefix) + " on the peer (" + far.name +
                           "): the ends disagree about which addresses are on this cable",
                       "use the same prefix length on both ends"});
      }
    }
  }
  return out;
}

}  // namespace mesh::doctor
