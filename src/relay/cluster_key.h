// SPDX-License-Identifier: Apache-2.0
// The relay agents' cluster key (NCCL_MESH_RELAY_KEY_FILE; docs/relay.md, threat model): read
// once at the agent's start from a file only its owner can read.
#pragma once

#include <string>

#include "relay/beacon.h"

namespace mesh::relay {

inline constexpr size_t kMinClusterKeyBytes = 16;
inline constexpr size_t kMaxClusterKeyBytes = 4096;

// False (with *why) unless `path` is a regular file (no symlink), owned by this user or root,
// not readable or writable by group or others, holding kMinClusterKeyBytes..kMaxClusterKeyBytes
// bytes (trailing whitespace is not part of the key).
bool load_cluster_key(const std::string& path, ClusterKey* out, std::string* why);

}  // namespace mesh::relay
