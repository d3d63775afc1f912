// SPDX-License-Identifier: Apache-2.0
#include "topology/ifname_filter.h"

namespace mesh::topology {

IfnameFilter IfnameFilter::parse(std::string_view spec) {
  IfnameFilter f;
  f.spec_ = spec;
  if (!spec.empty() && spec.front() == '^') {
    f.exclude_ = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    f.exact_ = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) f.names_.emplace_back(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return f;
}

bool IfnameFilter::accepts(std::string_view ifname) const {
  if (names_.empty()) return true;
  bool listed = false;
  for (const std::string& n : names_) {
    if (exact_ ? ifname == n : ifname.substr(0, n.size()) == n) {
      listed = true;
      break;
    }
  }
  return exclude_ ? !listed : listed;
}

}  // namespace mesh::topology
