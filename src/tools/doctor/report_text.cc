// SPDX-License-Identifier: Apache-2.0
// The human-readable report: inventory tables, the plugin's choices, the mesh map, then every
// check with its verdict and fix.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "tools/doctor/report.h"

#include "tools/doctor/host_order.h"
#include "tools/doctor/relay_plan.h"

#ifndef MESH_DOCTOR_VERSION
#define MESH_DOCTOR_VERSION "dev"
#endif

namespace mesh::doctor {
namespace {

using topology::Interface;
using topology::RdmaPort;

constexpr size_t kWidth = 100;

std::string or_dash(int v) {
  return v < 0 ? "-" : std::to_string(v);
}

std::string speed_text(int mbps) {
  if (mbps <= 0) return "-";
  return mbps % 1000 == 0 ? std::to_string(mbps / 1000) + "G" : std::to_string(mbps) + "M";
}

std::string pci_text(const std::string& path) {
  if (path.empty()) return "-";
  return path.substr(path.rfind('/') + 1);
}

std::string state_text(const Inventory& inv, const std::string& name, bool up) {
  const Netdev* n = inv.netdev(name);
  if (n != nullptr && !n->operstate.empty()) return n->operstate;
  return up ? "up" : "down";
}

std::string port_state(const RdmaPort& p) {
  // "4: ACTIVE" -> "ACTIVE"
  const size_t colon = p.state.find(": ");
  return colon == std::string::npos ? p.state : p.state.substr(colon + 2);
}

// Word-wraps `text` to kWidth columns, given that the first line starts at column `first_col`;
// continuation lines start with `indent` spaces.
std::string wrap(const std::string& text, size_t first_col, size_t indent) {
  std::istringstream words(text);
  std::string out, word;
  size_t col = first_col;
  bool line_empty = true;
  while (words >> word) {
    if (!line_empty && col + 1 + word.size() > kWidth) {
      out.append("\n").append(indent, ' ');
      col = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    line_empty = false;
  }
  return out;
}

// Prints rows with columns padded to their widest cell.
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t c = 0; c < row.size(); ++c) {
      line += " " + (c + 1 == row.size() ? row[c] : fmt::format("{:<{}}", row[c], widths[c]));
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  }
}

void print_interfaces(std::ostream& out, const Report& r) {
  const Inventory& inv = r.inv;
  out << "Interfaces\n";
  std::vector<std::vector<std::string>> rows = {
      {"INTERFACE", "ADDRESS", "MTU", "SPEED", "STATE", "PCI", "NUMA", "RDMA", "GID", "PLUGIN"}};
  for (const InterfaceView& v : r.model.interfaces) {
    const Interface& itf = inv.interfaces[v.interface];
    std::string rdma = "-", gid = "-";
    for (const RdmaBinding& b : v.rdma) {
      const RdmaPort& p = inv.rdma_ports[b.port];
      rdma = p.device + "/" + std::to_string(p.port) + " " +
             (p.link_layer == topology::LinkLayer::kInfiniBand ? "IB" : "Eth");
      gid = b.gid.use_lid ? "LID" : b.gid.index ? std::to_string(*b.gid.index) : "none";
    }
    rows.push_back({itf.name, format_prefix(itf.addr), or_dash(itf.mtu), speed_text(itf.speed_mbps),
                    state_text(inv, itf.name, itf.up), pci_text(itf.pci_path),
                    or_dash(itf.numa_node), rdma, gid, v.used ? "used" : "excluded"});
  }
  for (const Netdev& n : inv.netdevs) {
    const bool has_ipv4 = std::any_of(inv.interfaces.begin(), inv.interfaces.end(),
                                      [&](const Interface& i) { return i.name == n.name; });
    if (has_ipv4) continue;
    std::string rdma = "-";
    for (const RdmaPort& p : inv.rdma_ports) {
      if (std::find(p.netdevs.begin(), p.netdevs.end(), n.name) != p.netdevs.end()) {
        rdma = p.device + "/" + std::to_string(p.port);
      }
    }
    rows.push_back({n.name, "(no IPv4)", or_dash(n.mtu), speed_text(n.speed_mbps), n.operstate,
                    pci_text(n.pci_path), or_dash(n.numa_node), rdma, "-",
                    n.enslaved ? "(enslaved)" : "-"});
  }
  print_table(out, rows);

  bool header = false;
  for (const InterfaceView& v : r.model.interfaces) {
    const Interface& itf = inv.interfaces[v.interface];
    for (const RdmaBinding& b : v.rdma) {
      if (!header) out << "\nGID choice (what an RDMA connection from each address would use)\n";
      header = true;
      const RdmaPort& p = inv.rdma_ports[b.port];
      const std::string head = fmt::format("  {} {} on {} port {}: ", itf.name,
                                           format_ipv4(itf.addr.addr), p.device, p.port);
      const std::string what =
          b.gid.use_lid
              ? "LID. " + b.gid.why
              : (b.gid.index ? "index " + std::to_string(*b.gid.index) + ". " : "none. ") +
                    b.gid.why;
      out << head << wrap(what, head.size(), 6) << "\n";
    }
  }
}

void print_selection(std::ostream& out, const Report& r) {
  const Model& m = r.model;
  out << "\nPlugin selection (NCCL_MESH_IFNAME="
      << (r.inv.settings.ifname.empty() ? "unset" : r.inv.settings.ifname) << ")\n";
  for (const Interface& itf : m.selection.used) {
    out << "  uses   " << itf.name << " " << format_prefix(itf.addr)
        << (m.selection.loopback_fallback ? "  (loopback fallback: nothing else is usable)" : "")
        << "\n";
  }
  for (const topology::Exclusion& e : m.selection.left_out) {
    out << "  skips  " << wrap(e.itf.name + " " + format_prefix(e.itf.addr) + ": " + e.why, 9, 9)
        << "\n";
    out << "         " << wrap("to use it: " + e.include, 9, 9) << "\n";
  }

  // What each cable has carried: a relay host's cables count the traffic it relays too.
  out << "\nCable counters (bytes since each interface came up; RDMA ports' own counters where "
         "the NIC keeps RDMA off the netdev's)\n";
  std::vector<std::string> shown;
  for (const Interface& itf : m.selection.used) {
    if (std::find(shown.begin(), shown.end(), itf.name) != shown.end()) continue;
    shown.push_back(itf.name);
    const auto it = r.inv.link_counters.find(itf.name);
    const std::string head = "  " + itf.name + ": ";
    out << head
        << wrap(it == r.inv.link_counters.end() ? "not readable"
                                                : topology::describe_link_counters(it->second),
                head.size(), 6)
        << "\n";
  }

  out << "\nNCCL devices (one per NUMA-local group; connect() routes by peer address)\n";
  if (m.devices.empty()) out << "  none: NCCL would find no device of this plugin\n";
  for (const topology::NetDevice& d : m.devices) {
    std::string members;
    for (size_t idx : d.members) {
      const Interface& itf = m.selection.used[idx];
      members += (members.empty() ? "" : ", ") + itf.name + " " + format_prefix(itf.addr);
    }
    out << fmt::format("  {}  {}  numa {}  speed {} Gb/s  members: {}\n", d.name,
                       d.pci_path.empty() ? "virtual (no PCI path)" : "pci " + pci_text(d.pci_path),
                       d.numa_node, d.speed_mbps / 1000, members);
  }
}

void print_rdma(std::ostream& out, const Report& r) {
  out << "\nRDMA ports\n";
  if (r.inv.rdma_ports.empty()) {
    out << "  none (no device under /sys/class/infiniband)\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"DEVICE", "PORT", "STATE", "LINK", "RATE", "MTU", "NETDEVS", "GIDS"}};
  for (const RdmaPort& p : r.inv.rdma_ports) {
    std::string netdevs;
    for (const std::string& n : p.netdevs) netdevs += (netdevs.empty() ? "" : ",") + n;
    rows.push_back({p.device, std::to_string(p.port), port_state(p),
                    topology::link_layer_name(p.link_layer), p.rate.empty() ? "-" : p.rate,
                    or_dash(p.active_mtu), netdevs.empty() ? "-" : netdevs,
                    std::to_string(p.gids.size())});
  }
  print_table(out, rows);
}

std::string fmt_num(double v) {
  return v > 0 ? fmt::format("{:.0f}", v) : "-";
}

void print_peers(std::ostream& out, const Report& r) {
  if (!r.peer_mode) return;
  out << "\nMesh map (rails as the plugin's connect() would choose them)\n";
  std::vector<std::vector<std::string>> rows = {{"PEER", "PEER ADDR", "LOCAL INTERFACE", "PEER IF",
                                                 "MTU here/peer", "RTT us", "SEND MB/s",
                                                 "RECV MB/s"}};
  const std::vector<RelayPlan> plans = plan_relays(r.model, r.routes);
  for (size_t ri = 0; ri < r.routes.size(); ++ri) {
    const PeerRoute& route = r.routes[ri];
    std::string addrs;
    for (uint32_t a : route.peer.addrs)
      addrs.append(addrs.empty() ? "" : ",").append(format_ipv4(a));
    if (route.self) {
      rows.push_back({route.peer.name, addrs, "(this host)", "", "", "", "", ""});
      continue;
    }
    if (route.rails.empty()) {
      rows.push_back({route.peer.name, addrs,
                      "NO CABLE: " + (plans[ri].found ? describe_relay(plans[ri])
                                                      : std::string("no route known here")),
                      "", "", "", "", ""});
      continue;
    }
    for (size_t i = 0; i < route.rails.size(); ++i) {
      const topology::Rail& rail = route.rails[i];
      const Interface& local = r.model.selection.used[rail.local_index];
      std::string peer_if = "?", mtu = or_dash(local.mtu) + "/?", rtt = "", send = "", recv = "";
      if (i < route.probes.size()) {
        const CableProbe& p = route.probes[i];
        if (p.info && p.info->arrived_on) {
          peer_if = p.info->arrived_on->name;
          mtu = or_dash(local.mtu) + "/" + or_dash(p.info->arrived_on->mtu);
        }
        rtt = p.ok ? fmt::format("{:.0f}", p.rtt_median_us) : "FAILED";
        send = fmt_num(p.send_mbytes_per_s);
        recv = fmt_num(p.recv_mbytes_per_s);
      } else {
        peer_if = "";
        mtu = or_dash(local.mtu);
      }
      rows.push_back({i == 0 ? route.peer.name : "", format_ipv4(rail.peer_addr),
                      local.name + " " + format_prefix(rail.local), peer_if, mtu, rtt, send, recv});
    }
  }
  print_table(out, rows);
  const HostOrderHint order = ring_host_order(
      r.routes, r.links, r.probed, r.inv.hostname.empty() ? "(this host)" : r.inv.hostname);
  out << "\nHost order for NCCL's ring\n  " << wrap(order.message, 2, 2) << "\n";
  if (!r.probed) {
    out << "  (add --probe, with `nccl-mesh-doctor --serve` running on each peer, to measure each "
           "cable and compare MTUs)\n";
    return;
  }
  // The rest of the mesh, from the peers' own reports.
  std::vector<std::string> reported;
  for (const PeerRoute& route : r.routes) {
    for (const CableProbe& p : route.probes) {
      if (p.info) {
        reported.push_back(route.peer.name);
        break;
      }
    }
  }
  // Cables to peers that did not answer, from the hosts file (the far end of a line).
  std::string guessed;
  for (const PeerLink& l : r.links) {
    if (!l.b_from_hosts_file) continue;
    guessed += fmt::format(
        "  {} {} {} <-> {} {}  ({} did not answer: its address from the hosts "
        "file)\n",
        l.a, l.a_end.name, format_prefix(l.a_end.addr), l.b, format_prefix(l.b_end.addr), l.b);
  }
  if (reported.size() < 2 && guessed.empty()) return;
  out << "\nCables between peers (from their --serve reports)\n" << guessed;
  for (size_t i = 0; i < reported.size(); ++i) {
    for (size_t j = i + 1; j < reported.size(); ++j) {
      bool any = false;
      for (const PeerLink& l : r.links) {
        if (l.a != reported[i] || l.b != reported[j] || l.b_from_hosts_file) continue;
        any = true;
        out << fmt::format("  {} {} {} <-> {} {} {}  (MTU {}/{})\n", l.a, l.a_end.name,
                           format_prefix(l.a_end.addr), l.b, l.b_end.name,
                           format_prefix(l.b_end.addr), l.a_end.mtu, l.b_end.mtu);
      }
      if (!any) out << "  " << reported[i] << " <-> " << reported[j] << ": NO CABLE\n";
    }
  }
}

void print_findings(std::ostream& out, const Report& r) {
  out << "\nChecks\n";
  std::map<Verdict, int> counts;
  for (const Finding& f : r.findings) {
    ++counts[f.verdict];
    const std::string head = fmt::format("  {:<5} {:<16} ", verdict_name(f.verdict), f.check);
    const std::string body = f.subject.empty() ? f.message : f.subject + ": " + f.message;
    out << head << wrap(body, head.size(), head.size()) << "\n";
    if (!f.fix.empty()) {
      const std::string fix_head = std::string(head.size(), ' ') + "fix: ";
      out << fix_head << wrap(f.fix, fix_head.size(), fix_head.size()) << "\n";
    }
  }
  out << fmt::format("\n{} ok, {} warn, {} fail\n", counts[Verdict::kOk], counts[Verdict::kWarn],
                     counts[Verdict::kFail]);
}

}  // namespace

void print_text(std::ostream& out, const Report& r) {
  out << "nccl-mesh-doctor " << MESH_DOCTOR_VERSION << " on "
      << (r.inv.hostname.empty() ? "?" : r.inv.hostname)
      << (r.inv.kernel_release.empty() ? "" : " (Linux " + r.inv.kernel_release + ")") << "\n\n";
  print_interfaces(out, r);
  print_selection(out, r);
  print_rdma(out, r);
  print_peers(out, r);
  print_findings(out, r);
}

int exit_code(const Findings& findings) {
  return worst(findings) == Verdict::kFail ? 1 : 0;
}

void print_settings_table(std::ostream& out) {
  out << "| variable | default | range | meaning |\n|---|---|---|---|\n";
  for (const SettingInfo& s : setting_table()) {
    out << "| `" << s.env << "` | " << (s.default_value.empty() ? "(empty)" : s.default_value)
        << " | " << (s.range.empty() ? s.type : s.range) << " | " << s.help << " |\n";
  }
}

}  // namespace mesh::doctor
