// SPDX-License-Identifier: Apache-2.0
// The relay agent's configuration from the user's settings (NCCL_MESH_RELAY_*, the connect and
// TCP timeouts): one place for the plugin's in-process agent and for nccl-mesh-relayd, so both
// behave alike. The RDMA hand-off hook (AgentConfig::rdma_forward) is the caller's to add.
#pragma once

#include <string>
#include <vector>

#include "relay/agent.h"
#include "topology/interface.h"
#include "util/settings.h"

namespace mesh::relay {

// False (with *why) when the agent must not start: an unreadable or unsafe cluster key file (never
// run unauthenticated when a key was asked for), an unknown NCCL_MESH_RELAY_GROUP. A malformed
// NCCL_MESH_RELAY_VIA is ignored with a WARN.
bool agent_config_from_settings(const Settings& s, const std::vector<topology::Interface>& used,
                                AgentConfig* cfg, std::string* why);

// NCCL_MESH_RELAY_GROUP: a group name or number; -1 for empty. False for an unknown group.
bool parse_relay_group(const std::string& text, long* gid, std::string* why);

}  // namespace mesh::relay
