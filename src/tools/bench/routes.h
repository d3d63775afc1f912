// SPDX-License-Identifier: Apache-2.0
// "Visible" (docs/relay.md): the route every plugin connection of this run took and the bytes
// each mesh cable of each rank carried during the measurement. Each rank reports its own (the
// connections' routes parsed from the plugin's log lines, its interfaces' counter deltas); rank
// 0 prints one route line per ordered pair and one line per cable, and adds both to --json.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/link_counters.h"

namespace mesh::bench {

struct Context;

// Counters of every interface this rank's plugin uses (NCCL_MESH_IFNAME applied), with the
// RDMA ports on each. Taken just before and just after the pattern runs.
class CableSampler {
 public:
  explicit CableSampler(const Context& ctx);
  std::vector<topology::LinkCounters> sample() const;

 private:
  std::vector<std::string> ifnames_;
  std::vector<topology::RdmaPort> rdma_ports_;
};

// This rank's part of the run's JSON: {"routes": [per peer: send and recv connection], "cables":
// [per interface: the deltas]}.
nlohmann::json routes_json(const Context& ctx);
nlohmann::json cables_json(const Context& ctx, const std::vector<topology::LinkCounters>& before,
                           const std::vector<topology::LinkCounters>& after);

// Rank 0: every rank's routes_json() (index = rank) as one entry per ordered pair
// {"src", "dst", "relayed", "transport", "via", "text"}; and the lines printed for it.
nlohmann::json pair_routes(const std::vector<nlohmann::json>& per_rank,
                           const std::vector<std::vector<std::string>>& rank_addrs);
// Rank 0: every rank's cables_json() (index = rank) with each host's interface once, however many
// of its ranks reported it: {"rank" (the first), "ranks": [all], ...}; and the lines printed.
nlohmann::json merge_cables(const std::vector<nlohmann::json>& per_rank_cables);
std::vector<std::string> cable_lines(const nlohmann::json& cables);

}  // namespace mesh::bench
