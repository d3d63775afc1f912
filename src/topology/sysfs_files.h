// SPDX-License-Identifier: Apache-2.0
// Small readers for sysfs-style trees, shared by the topology layer and nccl-mesh-doctor.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mesh::topology {

// First line of a file, trailing whitespace removed; nullopt when unreadable (sysfs answers
// EINVAL for some attributes, e.g. unused GID slots' types).
std::optional<std::string> read_first_line(const std::string& path);

// Names of a directory's entries, sorted; empty when the directory cannot be read.
std::vector<std::string> directory_entries(const std::string& dir);

}  // namespace mesh::topology
