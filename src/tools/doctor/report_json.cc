// SPDX-License-Identifier: Apache-2.0
// The --json report: the same content as the text report, as one document for scripts.
#include "tools/common/link_counters_json.h"
#include "tools/doctor/host_order.h"
#include "tools/doctor/relay_plan.h"
#include "tools/doctor/report.h"

#ifndef MESH_DOCTOR_VERSION
#define MESH_DOCTOR_VERSION "dev"
#endif

namespace mesh::doctor {
namespace {

using nlohmann::json;
using topology::Interface;
using topology::RdmaPort;

json optional_int(int v) {
  return v < 0 ? json(nullptr) : json(v);
}

json gid_json(const topology::GidChoice& g) {
  return {
      {"index", g.index ? json(*g.index) : json(nullptr)}, {"use_lid", g.use_lid}, {"why", g.why}};
}

// The netdev's byte counters now (since it came up) and its RDMA ports' own; null when unread.
json counters_json(const Inventory& inv, const std::string& name) {
  const auto it = inv.link_counters.find(name);
  return it == inv.link_counters.end() ? json(nullptr) : tools::link_counters_json(it->second);
}

json interfaces_json(const Report& r) {
  json out = json::array();
  for (const InterfaceView& v : r.model.interfaces) {
    const Interface& itf = r.inv.interfaces[v.interface];
    const Netdev* nd = r.inv.netdev(itf.name);
    json rdma = json::array();
    for (const RdmaBinding& b : v.rdma) {
      const RdmaPort& p = r.inv.rdma_ports[b.port];
      rdma.push_back({{"device", p.device},
                      {"port", p.port},
                      {"link_layer", topology::link_layer_name(p.link_layer)},
                      {"gid", gid_json(b.gid)}});
    }
    out.push_back({{"name", itf.name},
                   {"addr", format_ipv4(itf.addr.addr)},
                   {"prefix", itf.addr.prefix},
                   {"up", itf.up},
                   {"loopback", itf.loopback},
                   {"operstate", nd != nullptr ? nd->operstate : ""},
                   {"mtu", optional_int(itf.mtu)},
                   {"speed_mbps", optional_int(itf.speed_mbps)},
                   {"pci_path", itf.pci_path},
                   {"numa_node", optional_int(itf.numa_node)},
                   {"used", v.used},
                   {"excluded_why", v.excluded_why},
                   {"excluded_reason", v.excluded_reason},
                   {"include_hint", v.include_hint},
                   {"rdma", rdma},
                   {"counters", counters_json(r.inv, itf.name)}});
  }
  return out;
}

json netdevs_json(const Inventory& inv) {
  json out = json::array();
  for (const Netdev& n : inv.netdevs) {
    out.push_back({{"name", n.name},
                   {"operstate", n.operstate},
                   {"loopback", n.loopback},
                   {"enslaved", n.enslaved},
                   {"mtu", optional_int(n.mtu)},
                   {"speed_mbps", optional_int(n.speed_mbps)},
                   {"pci_path", n.pci_path},
                   {"numa_node", optional_int(n.numa_node)},
                   {"driver", n.driver}});
  }
  return out;
}

json rdma_json(const Inventory& inv) {
  json out = json::array();
  for (const RdmaPort& p : inv.rdma_ports) {
    json gids = json::array();
    for (const topology::GidEntry& g : p.gids) {
      gids.push_back({{"index", g.index},
                      {"gid", topology::format_gid(g.gid)},
                      {"type", topology::gid_type_name(g.type)},
                      {"ndev", g.ndev}});
    }
    out.push_back({{"device", p.device},
                   {"port", p.port},
                   {"state", p.state},
                   {"phys_state", p.phys_state},
                   {"link_layer", topology::link_layer_name(p.link_layer)},
                   {"rate", p.rate},
                   {"active_mtu", optional_int(p.active_mtu)},
                   {"lid", optional_int(p.lid)},
                   {"netdevs", p.netdevs},
                   {"gids", gids}});
  }
  return out;
}

json selection_json(const Report& r) {
  json used = json::array();
  for (const Interface& itf : r.model.selection.used) {
    used.push_back({{"name", itf.name}, {"addr", format_prefix(itf.addr)}});
  }
  json devices = json::array();
  for (const topology::NetDevice& d : r.model.devices) {
    json members = json::array();
    for (size_t m : d.members) {
      const Interface& itf = r.model.selection.used[m];
      members.push_back({{"name", itf.name}, {"addr", format_prefix(itf.addr)}});
    }
    devices.push_back({{"name", d.name},
                       {"pci_path", d.pci_path},
                       {"numa_node", d.numa_node},
                       {"speed_mbps", d.speed_mbps},
                       {"members", members}});
  }
  // Every interface left out, why (a stable reason code and the text) and how to use it anyway.
  json left_out = json::array();
  for (const topology::Exclusion& e : r.model.selection.left_out) {
    left_out.push_back({{"name", e.itf.name},
                        {"addr", format_prefix(e.itf.addr)},
                        {"reason", topology::left_out_name(e.reason)},
                        {"why", e.why},
                        {"include", e.include}});
  }
  return {{"ifname", r.inv.settings.ifname},
          {"used", used},
          {"left_out", left_out},
          {"missing_cables", topology::describe_missing_cables(r.model.selection)},
          {"notes", r.model.selection.notes},
          {"loopback_fallback", r.model.selection.loopback_fallback},
          {"devices", devices}};
}

json peer_interface_json(const PeerInterface& i) {
  return {{"name", i.name},
          {"addr", format_prefix(i.addr)},
          {"mtu", optional_int(i.mtu)},
          {"speed_mbps", optional_int(i.speed_mbps)},
          {"used", i.used}};
}

json peers_json(const Report& r) {
  json out = json::array();
  const std::vector<RelayPlan> plans = plan_relays(r.model, r.routes);
  for (size_t ri = 0; ri < r.routes.size(); ++ri) {
    const PeerRoute& route = r.routes[ri];
    json addrs = json::array();
    for (uint32_t a : route.peer.addrs) addrs.push_back(format_ipv4(a));
    json rails = json::array();
    for (size_t i = 0; i < route.rails.size(); ++i) {
      const topology::Rail& rail = route.rails[i];
      json jr = {{"local_interface", r.model.selection.used[rail.local_index].name},
                 {"local_addr", format_prefix(rail.local)},
                 {"peer_addr", format_ipv4(rail.peer_addr)}};
      if (i < route.probes.size()) {
        const CableProbe& p = route.probes[i];
        json probe = {{"ok", p.ok},
                      {"error", p.error},
                      {"rtt_min_us", p.rtt_min_us},
                      {"rtt_median_us", p.rtt_median_us},
                      {"send_mbytes_per_s", p.send_mbytes_per_s},
                      {"recv_mbytes_per_s", p.recv_mbytes_per_s}};
        if (p.info) {
          probe["peer_host"] = p.info->host;
          if (p.info->arrived_on)
            probe["peer_interface"] = peer_interface_json(*p.info->arrived_on);
          json ifs = json::array();
          for (const PeerInterface& pi : p.info->interfaces) ifs.push_back(peer_interface_json(pi));
          probe["peer_interfaces"] = ifs;
        }
        jr["probe"] = probe;
      }
      rails.push_back(jr);
    }
    out.push_back({{"name", route.peer.name},
                   {"addrs", addrs},
                   {"self", route.self},
                   {"rails", rails},
                   {"route", route.self             ? "this host"
                             : !route.rails.empty() ? describe_direct(r.model, route.rails)
                             : plans[ri].found      ? describe_relay(plans[ri])
                                                    : "no cable and no route known here"},
                   {"relay_via", plans[ri].via},
                   {"unused_reach", route.unused_reach}});
  }
  return out;
}

// The facts behind the `gin` findings, for scripts: null where the doctor could not tell.
json gin_json(const GinFacts& g) {
  json gpus = json::array();
  for (const GpuGinFacts& gpu : g.gpus) {
    gpus.push_back(
        {{"index", gpu.index},
         {"compute_capability", std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor)},
         {"vmm_gpudirect_rdma", gpu.vmm_gdr ? json(*gpu.vmm_gdr) : json(nullptr)}});
  }
  return {
      {"plugin", g.plugin_path.empty() ? json(nullptr) : json(g.plugin_path)},
      {"exported", g.exported},
      {"cuda_driver", g.cuda_loaded},
      {"memory", g.cuda_loaded ? json::array({"host", "cuda"}) : json::array({"host"})},
      {"gpus", gpus},
      {"nccl_version", g.nccl_version ? json(nccl_version_text(*g.nccl_version)) : json(nullptr)},
      {"nccl_library", g.nccl_path.empty() ? json(nullptr) : json(g.nccl_path)}};
}

}  // namespace

json to_json(const Report& r) {
  json findings = json::array();
  int counts[3] = {0, 0, 0};
  for (const Finding& f : r.findings) {
    ++counts[static_cast<int>(f.verdict)];
    findings.push_back({{"check", f.check},
                        {"verdict", verdict_name(f.verdict)},
                        {"subject", f.subject},
                        {"message", f.message},
                        {"fix", f.fix}});
  }
  json doc = {{"tool", "nccl-mesh-doctor"},
              {"version", MESH_DOCTOR_VERSION},
              {"host", r.inv.hostname},
              {"kernel", r.inv.kernel_release},
              {"interfaces", interfaces_json(r)},
              {"netdevs", netdevs_json(r.inv)},
              {"rdma_ports", rdma_json(r.inv)},
              {"selection", selection_json(r)},
              {"gin", gin_json(r.inv.gin)},
              {"checks", findings},
              {"summary", {{"ok", counts[0]}, {"warn", counts[1]}, {"fail", counts[2]}}},
              {"exit_code", exit_code(r.findings)}};
  if (r.peer_mode) {
    doc["peers"] = peers_json(r);
    json links = json::array();
    for (const PeerLink& l : r.links) {
      links.push_back({{"a", l.a},
                       {"a_end", peer_interface_json(l.a_end)},
                       {"b", l.b},
                       {"b_end", peer_interface_json(l.b_end)},
                       {"b_from_hosts_file", l.b_from_hosts_file}});
    }
    doc["links_between_peers"] = links;
    const HostOrderHint order = ring_host_order(
        r.routes, r.links, r.probed, r.inv.hostname.empty() ? "(this host)" : r.inv.hostname);
    static constexpr const char* kKinds[] = {"cycle", "path", "none"};
    doc["ring_order"] = {{"known", order.known},
                         {"kind", kKinds[order.kind]},
                         {"hosts", order.hosts},
                         {"message", order.message}};
  }
  return doc;
}

}  // namespace mesh::doctor
