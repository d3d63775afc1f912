// SPDX-License-Identifier: Apache-2.0
#include "config_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace mesh::relayd {

bool apply_config_file(const std::string& path, bool required, std::vector<std::string>* applied,
                       std::string* why) {
  std::ifstream in(path);
  if (!in) {
    if (!required && errno == ENOENT) return true;
    *why = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    const size_t e = line.find_last_not_of(" \t\r");
    line = line.substr(b, e - b + 1);
    const size_t eq = line.find('=');
    const std::string key = line.substr(0, eq);
    if (eq == std::string::npos || (key.rfind("NCCL_MESH_", 0) != 0 && key != "NCCL_DEBUG") ||
        key.find_first_of(" \t") != std::string::npos) {
      *why = path + ":" + std::to_string(n) + ": not NCCL_MESH_<NAME>=<value>: " + line;
      return false;
    }
    if (std::getenv(key.c_str()) != nullptr) continue;
    setenv(key.c_str(), line.substr(eq + 1).c_str(), 0);
    applied->push_back(key);
  }
  return true;
}

}  // namespace mesh::relayd
