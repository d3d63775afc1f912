// SPDX-License-Identifier: Apache-2.0
// The doctor's checks. Each is a pure function of the inventory (and, for peer checks, of the
// peer map and probe results) and returns findings: a verdict, what it is about, what was
// found and one concrete line that fixes it. A check that finds nothing wrong returns one "ok"
// finding saying what it verified, so the report shows that the check ran.
#pragma once

#include <string>
#include <vector>

#include "tools/doctor/inventory.h"
#include "tools/doctor/model.h"
#include "tools/doctor/peers.h"

namespace mesh::doctor {

enum class Verdict { kOk, kWarn, kFail };

struct Finding {
  std::string check;  // stable id, e.g. "rp-filter"
  Verdict verdict = Verdict::kOk;
  std::string subject;  // what it is about: an interface, a variable, a peer; may be empty
  std::string message;  // what was found and why it matters
  std::string fix;      // one concrete action; empty for ok
};

using Findings = std::vector<Finding>;

const char* verdict_name(Verdict v);  // "ok", "warn", "fail"
Verdict worst(const Findings& findings);

// The items for a finding's text: "a, b, c" (or another separator).
inline std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Local checks (checks_network.cc).
Findings check_mesh_interfaces(const Inventory& inv, const Model& m);  // anything usable at all
Findings check_ipv4_addresses(const Inventory& inv, const Model& m);   // netdevs without IPv4
Findings check_shared_subnets(const Inventory& inv, const Model& m);   // two netdevs, one subnet
Findings check_local_mtu(const Inventory& inv, const Model& m);        // jumbo frames on fast links
Findings check_rp_filter(const Inventory& inv, const Model& m);
Findings check_arp_halves(const Inventory& inv, const Model& m);  // arp_ignore/announce, halves
Findings check_accept_local(const Inventory& inv, const Model& m);

// RDMA checks (checks_rdma.cc).
Findings check_roce_gids(const Inventory& inv, const Model& m);  // RoCE v2 GID per address
Findings check_rdma_core(const Inventory& inv);                  // libibverbs, devices, uverbs
Findings check_gpudirect(const Inventory& inv);                  // nvidia_peermem / dma-buf

// Environment checks (checks_env.cc).
Findings check_nccl_env(const Inventory& inv);                // NCCL_NET, _PLUGIN, IB_HCA
Findings check_mesh_settings(const Inventory& inv);           // NCCL_MESH_* parse
Findings check_ifname(const Inventory& inv, const Model& m);  // filter matches something

// GIN/RMA (checks_gin.cc): exported tables, memory types, GPU gate, transport, NCCL version
// and the NCCL_* settings that turn GIN off. Never fails: a host without GPU still runs the net
// plugin.
Findings check_gin(const Inventory& inv);

// Peer checks (checks_peers.cc): cable per peer, probe results, MTU and netmask of both ends.
Findings check_peer_cables(const Inventory& inv, const Model& m,
                           const std::vector<PeerRoute>& routes);
Findings check_peer_probes(const Inventory& inv, const Model& m,
                           const std::vector<PeerRoute>& routes);

// Every local check, in report order.
Findings run_local_checks(const Inventory& inv, const Model& m);

}  // namespace mesh::doctor
