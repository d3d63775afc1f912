// SPDX-License-Identifier: Apache-2.0
// nccl-mesh-relayd's optional configuration file: NCCL_MESH_* settings, one KEY=VALUE a line
// (# comments, blank lines), applied where the environment does not set the key already (the
// unit's Environment= and the command line's environment win).
#pragma once

#include <string>
#include <vector>

namespace mesh::relayd {

inline constexpr const char* kDefaultConfigFile = "/etc/nccl-mesh/relayd.conf";

// False (with *why) for an unreadable file (`required`: also a missing one) or a line that is
// not NCCL_MESH_*=VALUE or NCCL_DEBUG=VALUE; *applied lists the keys it set.
bool apply_config_file(const std::string& path, bool required, std::vector<std::string>* applied,
                       std::string* why);

}  // namespace mesh::relayd
