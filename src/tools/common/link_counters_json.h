// SPDX-License-Identifier: Apache-2.0
// One JSON form of an interface's byte counters (topology/link_counters.h) for both tools:
// nccl-mesh-bench's "cables" (deltas during a run) and nccl-mesh-doctor's
// "interfaces[].counters" (counters now). Unknown values are null.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "topology/link_counters.h"

namespace mesh::tools {

inline nlohmann::json optional_count(const std::optional<uint64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// {"tx_bytes", "rx_bytes", "rdma": [{"device", "port", "tx_bytes", "rx_bytes", "tx_packets",
// "rx_packets"}]}
inline nlohmann::json link_counters_json(const topology::LinkCounters& c) {
  nlohmann::json rdma = nlohmann::json::array();
  for (const topology::RdmaPortCounters& p : c.rdma) {
    rdma.push_back({{"device", p.device},
                    {"port", p.port},
                    {"tx_bytes", optional_count(p.tx_bytes)},
                    {"rx_bytes", optional_count(p.rx_bytes)},
                    {"tx_packets", optional_count(p.tx_packets)},
                    {"rx_packets", optional_count(p.rx_packets)}});
  }
  return {{"tx_bytes", optional_count(c.tx_bytes)},
          {"rx_bytes", optional_count(c.rx_bytes)},
          {"rdma", rdma}};
}

}  // namespace mesh::tools
