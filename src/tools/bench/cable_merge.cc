// SPDX-License-Identifier: Apache-2.0
#include "cable_merge.h"

#include <algorithm>

namespace mesh::bench {

std::vector<std::vector<size_t>> group_cable_ends(const std::vector<CableEnd>& ends) {
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < ends.size(); ++i) {
    std::vector<std::string> addrs = ends[i].addrs;
    std::sort(addrs.begin(), addrs.end());
    auto same = [&](const std::vector<size_t>& g) {
      const CableEnd& o = ends[g.front()];
      std::vector<std::string> oa = o.addrs;
      std::sort(oa.begin(), oa.end());
      return o.host == ends[i].host && o.interface == ends[i].interface && oa == addrs;
    };
    const auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end()) {
      groups.push_back({i});
    } else {
      it->push_back(i);
    }
  }
  return groups;
}

}  // namespace mesh::bench
