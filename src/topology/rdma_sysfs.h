// SPDX-License-Identifier: Apache-2.0
// RDMA devices as the kernel describes them in sysfs, and the choice of the GID an RDMA
// connection from a given IPv4 address must use. Shared by nccl-mesh-doctor and the RDMA
// transport, so both pick the same GID for the same address and explain it the same way.
//
// Layout read (every file optional; an unreadable one leaves the field unknown):
//   <root>/class/infiniband/<dev>/ports/<p>/{state,phys_state,link_layer,rate,lid,active_mtu}
//   <root>/class/infiniband/<dev>/ports/<p>/gids/<i>              "fe80:0000:...:0001"
//   <root>/class/infiniband/<dev>/ports/<p>/gid_attrs/types/<i>   "IB/RoCE v1" or "RoCE v2"
//   <root>/class/infiniband/<dev>/ports/<p>/gid_attrs/ndevs/<i>   netdev owning the entry
//   <root>/class/infiniband/<dev>/device/net/<netdev>              netdevs of the PCI function
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mesh::topology {

enum class LinkLayer { kUnknown, kEthernet, kInfiniBand };

// gid_attrs/types/<i>. The kernel prints IB and RoCE v1 entries with the same string
// ("IB/RoCE v1"); the port's link layer tells them apart. Unreadable types (containers
// sometimes answer EINVAL) stay kUnknown.
enum class GidType { kUnknown, kIbOrRoceV1, kRoceV2 };

using Gid = std::array<uint8_t, 16>;

struct GidEntry {
  int index = 0;
  Gid gid{};
  GidType type = GidType::kUnknown;
  std::string ndev;  // gid_attrs/ndevs/<i>, empty when unreadable (IB ports have none)
};

struct RdmaPort {
  std::string device;      // "mlx5_0", "rocep1s0f0", "rxe_ab"
  int port = 1;            // 1-based, as in sysfs
  std::string state;       // "4: ACTIVE"
  std::string phys_state;  // "5: LinkUp"
  LinkLayer link_layer = LinkLayer::kUnknown;
  std::string rate;                  // "200 Gb/sec (2X NDR)"
  int active_mtu = -1;               // bytes; -1 when the kernel does not export it
  int lid = -1;                      // IB only; -1 when unknown
  std::vector<std::string> netdevs;  // from gid_attrs/ndevs and device/net, no duplicates
  std::vector<GidEntry> gids;        // non-zero entries only, by index
};

// Every port of every device under <sysfs_root>/class/infiniband, sorted by device and port.
// Empty when the directory does not exist (no RDMA stack loaded).
std::vector<RdmaPort> discover_rdma_ports(const std::string& sysfs_root = "/sys");

// Reads port `port` of the device whose directory is `device_dir`
// (<root>/class/infiniband/<device>).
RdmaPort read_rdma_port(const std::string& device_dir, const std::string& device, int port);

// The ports whose netdevs include `netdev`.
std::vector<const RdmaPort*> ports_for_netdev(const std::vector<RdmaPort>& ports,
                                              const std::string& netdev);

// GID helpers. parse_gid accepts the sysfs form (8 groups of 4 hex digits) and inet_pton's
// IPv6 text forms.
std::optional<Gid> parse_gid(const std::string& text);
std::string format_gid(const Gid& gid);  // "::ffff:10.0.0.1", "fe80::1"
bool is_zero_gid(const Gid& gid);
std::optional<uint32_t> gid_ipv4(const Gid& gid);  // the address of a ::ffff:a.b.c.d GID
const char* gid_type_name(GidType type);
const char* link_layer_name(LinkLayer ll);
int rate_gbps(const std::string& rate);  // leading number of "200 Gb/sec (2X NDR)", -1 if none

// What a connection from `ipv4` (host order) through `port` must use.
struct GidChoice {
  std::optional<int> index;  // GID index; empty for IB (LID) or when nothing fits
  bool use_lid = false;      // InfiniBand link layer: addressed by LID, no GID needed
  std::string why;           // why this index, or what was found instead
};

// Selection rules, in order:
//  1. InfiniBand link layer: the LID addresses the port inside the subnet; no GID is used.
//  2. `override_index` (NCCL_MESH_GID_INDEX): that entry if it exists and is non-zero, with a
//     note when it is not the RoCE v2 entry of `ipv4`.
//  3. The lowest-indexed RoCE v2 entry whose IPv4-mapped GID (::ffff:a.b.c.d) is `ipv4`.
//     RoCE v1 cannot be routed between subnets and is absent on many NICs' peers; it is never
//     chosen automatically. An entry of unknown type is used only when no typed entry fits.
// Zero GIDs (unused slots) are never chosen.
GidChoice select_gid(const RdmaPort& port, uint32_t ipv4, std::optional<int> override_index = {});

}  // namespace mesh::topology
