// SPDX-License-Identifier: Apache-2.0
// Byte counters of the cables a host uses, as the kernel keeps them: the netdev's
// statistics/{tx,rx}_bytes, and for an RDMA port on that netdev the port's own data counters
// (RDMA traffic of hardware RoCE/IB NICs bypasses the netdev's software counters). Shared by
// nccl-mesh-bench (bytes per cable during a run) and nccl-mesh-doctor (current counters).
//
// Layout read (every file optional; an unreadable one leaves the value unknown):
//   <root>/class/net/<if>/statistics/{tx_bytes,rx_bytes}
//   <root>/class/infiniband/<dev>/ports/<p>/counters/{port_xmit_data,port_rcv_data}
//     in units of 4 bytes (IBA PortXmitData/PortRcvData), as mlx5 and other hardware exports
//   <root>/class/infiniband/<dev>/ports/<p>/hw_counters/{sent_pkts,rcvd_pkts}
//     packets only: what soft RoCE (rxe) exports; its traffic is in the netdev's bytes anyway
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topology/rdma_sysfs.h"

namespace mesh::topology {

struct RdmaPortCounters {
  std::string device;
  int port = 1;
  std::optional<uint64_t> tx_bytes, rx_bytes;  // counters/port_{xmit,rcv}_data x 4
  std::optional<uint64_t> tx_packets, rx_packets;
};

struct LinkCounters {
  std::string ifname;
  std::optional<uint64_t> tx_bytes, rx_bytes;  // statistics/{tx,rx}_bytes
  std::vector<RdmaPortCounters> rdma;          // the RDMA ports whose netdevs include ifname
};

// Reads the counters of `ifname` and of `ports` (the RDMA ports on it, from ports_for_netdev).
LinkCounters read_link_counters(const std::string& ifname,
                                const std::vector<const RdmaPort*>& ports,
                                const std::string& sysfs_root = "/sys");

// after - before, per value; unknown where either side is unknown or the counter went backwards
// (a driver reset: the difference would be meaningless). RDMA ports are matched by device/port.
LinkCounters counter_delta(const LinkCounters& before, const LinkCounters& after);

// "12.3 MiB" style, 1024-based, "-" when unknown.
std::string format_counter_bytes(std::optional<uint64_t> bytes);

// "sent 12.3 MiB, received 4.0 KiB" plus, per RDMA port, "; RDMA mlx5_0/1 sent ..., received
// ..." (packets where the port exports no byte counters).
std::string describe_link_counters(const LinkCounters& c);

}  // namespace mesh::topology
