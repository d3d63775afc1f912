// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/checks.h"

namespace mesh::doctor {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kWarn:
      return "warn";
    case Verdict::kFail:
      return "fail";
  }
  return "?";
}

Verdict worst(const Findings& findings) {
  Verdict w = Verdict::kOk;
  for (const Finding& f : findings) {
    if (static_cast<int>(f.verdict) > static_cast<int>(w)) w = f.verdict;
  }
  return w;
}

Findings run_local_checks(const Inventory& inv, const Model& m) {
  Findings all;
  const auto add = [&all](Findings f) { all.insert(all.end(), f.begin(), f.end()); };
  add(check_mesh_interfaces(inv, m));
  add(check_ifname(inv, m));
  add(check_ipv4_addresses(inv, m));
  add(check_shared_subnets(inv, m));
  add(check_local_mtu(inv, m));
  add(check_rp_filter(inv, m));
  add(check_arp_halves(inv, m));
  add(check_accept_local(inv, m));
  add(check_rdma_core(inv));
  add(check_roce_gids(inv, m));
  add(check_gpudirect(inv));
  add(check_nccl_env(inv));
  add(check_mesh_settings(inv));
  add(check_gin(inv));
  return all;
}

}  // namespace mesh::doctor
