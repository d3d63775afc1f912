// SPDX-License-Identifier: Apache-2.0
// Peer mode: which local interface (cable) reaches each peer, which peers have no cable, and
// what each peer reported about itself when probed. The routing is the plugin's choose_rails
// over the interfaces the plugin would use, so the map shows the paths connect() would take.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/doctor/inventory.h"
#include "tools/doctor/model.h"
#include "topology/selection.h"
#include "util/ipv4.h"

namespace mesh::doctor {

struct PeerSpec {
  std::string name;             // label from the hosts file, or the address itself
  std::vector<uint32_t> addrs;  // host order; one per cable end the peer has
};

// "198.18.1.2,198.18.2.3": one peer per address. False with *error on a malformed entry.
bool parse_peer_list(std::string_view csv, std::vector<PeerSpec>* out, std::string* error);

// Hosts file: one peer per line, "ADDR" or "NAME ADDR[,ADDR...]" (addresses separated by commas
// or blanks); '#' starts a comment. Addresses must be IPv4 literals: a DNS name usually
// resolves to a management address, not to a cable's.
bool parse_hosts(std::istream& in, std::vector<PeerSpec>* out, std::string* error);

// One interface as a peer's --serve instance reports it.
struct PeerInterface {
  std::string name;
  Ipv4Prefix addr;
  int mtu = -1;
  int speed_mbps = -1;
  bool used = false;  // the peer's plugin would use it (under the peer's NCCL_MESH_IFNAME)
};

struct PeerInfo {
  std::string host;
  std::vector<PeerInterface> interfaces;
  std::optional<PeerInterface> arrived_on;  // the peer's interface the probe connection reached
  // The settings every host must share (the tuner's: handshake/agreement.h), name -> value as
  // the plugin reads them there; empty from a doctor that predates them.
  std::map<std::string, std::string> shared_settings = {};
};

// This host's values of the settings every host must share, for --serve's INFO reply.
std::map<std::string, std::string> shared_settings_of(const Settings& s);

// Result of probing one cable (rail) against a peer's --serve instance.
struct CableProbe {
  bool ok = false;
  std::string error;  // first failure, empty when ok
  std::optional<PeerInfo> info;
  double rtt_min_us = 0;
  double rtt_median_us = 0;
  double send_mbytes_per_s = 0;  // this host -> peer
  double recv_mbytes_per_s = 0;  // peer -> this host
};

struct PeerRoute {
  PeerSpec peer;
  bool self = false;  // one of the peer's addresses is a local address (hosts file lists us)
  std::vector<topology::Rail> rails;  // local_index indexes Model::selection.used
  // Local interfaces the plugin does not use that would reach the peer, with the reason
  // ("eth3 (10.0.3.1/24): excluded by NCCL_MESH_IFNAME").
  std::vector<std::string> unused_reach;
  std::vector<CableProbe> probes;  // parallel to rails; empty when not probed
};

std::vector<PeerRoute> map_peers(const std::vector<PeerSpec>& peers, const Inventory& inv,
                                 const Model& model);

// A cable between two peers, deduced from their reports (subnets both have an address in).
struct PeerLink {
  std::string a, b;  // peer names
  PeerInterface a_end, b_end;
  // b did not answer the probe (from here it is reachable over no cable: its --serve listens on
  // mesh addresses only): b_end is b's address from the hosts file on a subnet a's plugin uses.
  bool b_from_hosts_file = false;
};

// Cables between the peers (not involving this host) found in their --serve reports, so the
// client can print the whole mesh; a peer that did not answer contributes the addresses the
// hosts file lists for it (the far end of a line, probed from the other end, is such a peer).
std::vector<PeerLink> links_between_peers(const std::vector<PeerRoute>& routes);

}  // namespace mesh::doctor
