// SPDX-License-Identifier: Apache-2.0
// NCCL_MESH_IFNAME: NCCL_SOCKET_IFNAME's syntax. A comma-separated list of name prefixes;
// a leading '^' turns the list into exclusions; a leading '=' (after any '^') makes every entry an
// exact name instead of a prefix. Examples: "enp1,enp2", "^docker,virbr", "=eth0", "^=lo".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mesh::topology {

class IfnameFilter {
 public:
  static IfnameFilter parse(std::string_view spec);

  bool empty() const { return names_.empty(); }
  const std::string& spec() const { return spec_; }  // the text parsed
  bool exclude() const { return exclude_; }
  bool exact() const { return exact_; }
  const std::vector<std::string>& names() const { return names_; }

  // True when the interface passes the filter (an empty filter passes everything).
  bool accepts(std::string_view ifname) const;

 private:
  std::string spec_;
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

}  // namespace mesh::topology
