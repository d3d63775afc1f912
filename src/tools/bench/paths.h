// SPDX-License-Identifier: Apache-2.0
// Which cable the TCP baseline uses to a peer: the same answer the plugin computes, from the same
// core code (interface discovery, the NCCL_MESH_IFNAME filter, interface selection, device
// grouping and choose_rails). The baseline takes the first rail, the one the plugin prefers for
// the device under test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/interface.h"
#include "topology/selection.h"
#include "util/ipv4.h"

namespace mesh::bench {

struct LocalNet {
  std::string filter_spec;  // NCCL_MESH_IFNAME as read
  std::vector<topology::Interface> used;
  std::vector<topology::NetDevice> devices;
  std::vector<std::string> notes;
  bool loopback_fallback = false;
};

// Reads the interfaces and applies NCCL_MESH_IFNAME exactly like the plugin.
LocalNet discover_local_net();

// The name of the used interface holding `addr` (host order), "" when none does.
std::string interface_of(const LocalNet& net, uint32_t addr);

struct BaselinePath {
  bool ok = false;
  std::string why;  // when !ok
  std::string local_ifname;
  Ipv4Prefix local;
  uint32_t peer_addr = 0;
  size_t rails = 0;  // cables to that peer (the baseline uses one)

  std::string describe() const;  // "lo 127.0.0.1/8 -> 127.0.0.1"
};

// `dev` is the plugin device under test: its member interfaces are preferred, as in the plugin.
BaselinePath choose_baseline_path(const LocalNet& me, const std::vector<Ipv4Prefix>& peer_addrs,
                                  int dev);

}  // namespace mesh::bench
