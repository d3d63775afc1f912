// SPDX-License-Identifier: Apache-2.0
#include "topology/rdma_sysfs.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "topology/sysfs_files.h"
#include "util/ipv4.h"

namespace mesh::topology {
namespace {

namespace fs = std::filesystem;

std::optional<long> parse_long(const std::string& text, int base) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, base);
  if (end == text.c_str()) return std::nullopt;
  return v;
}

// Names of the numeric entries of a directory ("0", "1", ...), sorted numerically.
std::vector<int> numeric_entries(const std::string& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool numeric =
        !name.empty() && name.size() <= 6 &&
        std::all_of(name.begin(), name.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!numeric) continue;
    out.push_back(std::atoi(name.c_str()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

GidType parse_gid_type(const std::optional<std::string>& text) {
  if (!text) return GidType::kUnknown;
  if (*text == "RoCE v2") return GidType::kRoceV2;
  if (*text == "IB/RoCE v1" || *text == "RoCE v1" || *text == "IB") return GidType::kIbOrRoceV1;
  return GidType::kUnknown;
}

// active_mtu is not a standard sysfs attribute; some stacks export it as bytes ("4096"), others
// as the verbs enum (1..5 = 256..4096).
int parse_active_mtu(const std::optional<std::string>& text) {
  if (!text) return -1;
  const auto v = parse_long(*text, 10);
  if (!v || *v <= 0) return -1;
  if (*v <= 5) return 256 << (*v - 1);
  return static_cast<int>(std::min<long>(*v, 1 << 20));
}

std::string describe_entry(const GidEntry& e) {
  return std::to_string(e.index) + " " + format_gid(e.gid) + " (" + gid_type_name(e.type) + ")";
}

}  // namespace

std::optional<Gid> parse_gid(const std::string& text) {
  Gid gid{};
  // sysfs prints 8 groups of 4 hex digits, which inet_pton also accepts.
  in6_addr a{};
  if (inet_pton(AF_INET6, text.c_str(), &a) != 1) return std::nullopt;
  std::copy(std::begin(a.s6_addr), std::end(a.s6_addr), gid.begin());
  return gid;
}

std::string format_gid(const Gid& gid) {
  in6_addr a{};
  std::copy(gid.begin(), gid.end(), std::begin(a.s6_addr));
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, &a, buf, sizeof(buf));
  return buf;
}

bool is_zero_gid(const Gid& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

std::optional<uint32_t> gid_ipv4(const Gid& gid) {
  for (size_t i = 0; i < 10; ++i) {
    if (gid[i] != 0) return std::nullopt;
  }
  if (gid[10] != 0xff || gid[11] != 0xff) return std::nullopt;
  return (uint32_t{gid[12]} << 24) | (uint32_t{gid[13]} << 16) | (uint32_t{gid[14]} << 8) |
         uint32_t{gid[15]};
}

const char* gid_type_name(GidType type) {
  switch (type) {
    case GidType::kIbOrRoceV1:
      return "IB/RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
    case GidType::kUnknown:
      break;
  }
  return "type unreadable";
}

const char* link_layer_name(LinkLayer ll) {
  switch (ll) {
    case LinkLayer::kEthernet:
      return "Ethernet";
    case LinkLayer::kInfiniBand:
      return "InfiniBand";
    case LinkLayer::kUnknown:
      break;
  }
  return "unknown";
}

int rate_gbps(const std::string& rate) {
  const auto v = parse_long(rate, 10);
  return v && *v > 0 ? static_cast<int>(*v) : -1;
}

RdmaPort read_rdma_port(const std::string& device_dir, const std::string& device, int port) {
  RdmaPort p;
  p.device = device;
  p.port = port;
  const std::string dir = device_dir + "/ports/" + std::to_string(port);
  p.state = read_first_line(dir + "/state").value_or("");
  p.phys_state = read_first_line(dir + "/phys_state").value_or("");
  p.rate = read_first_line(dir + "/rate").value_or("");
  p.active_mtu = parse_active_mtu(read_first_line(dir + "/active_mtu"));
  const std::string ll = read_first_line(dir + "/link_layer").value_or("");
  if (ll == "Ethernet") p.link_layer = LinkLayer::kEthernet;
  if (ll == "InfiniBand") p.link_layer = LinkLayer::kInfiniBand;
  if (const auto lid = read_first_line(dir + "/lid")) {
    if (const auto v = parse_long(*lid, 16)) p.lid = static_cast<int>(*v);
  }

  for (int i : numeric_entries(dir + "/gids")) {
    const std::string n = std::to_string(i);
    const auto text = read_first_line(dir + "/gids/" + n);
    if (!text) continue;
    const auto gid = parse_gid(*text);
    // Unused slots read as all zeros; they are not entries a connection can use.
    if (!gid || is_zero_gid(*gid)) continue;
    GidEntry e;
    e.index = i;
    e.gid = *gid;
    e.type = parse_gid_type(read_first_line(dir + "/gid_attrs/types/" + n));
    e.ndev = read_first_line(dir + "/gid_attrs/ndevs/" + n).value_or("");
    add_unique(p.netdevs, e.ndev);
    p.gids.push_back(std::move(e));
  }

  // The PCI function's netdevs (also the only mapping for IB ports, whose GIDs have no ndev).
  // On a multi-port device, dev_port (0-based) says which port a netdev belongs to.
  const std::string net_dir = device_dir + "/device/net";
  const size_t nports = numeric_entries(device_dir + "/ports").size();
  for (const std::string& nd : directory_entries(net_dir)) {
    if (nports > 1) {
      const auto dev_port = read_first_line(net_dir + "/" + nd + "/dev_port");
      const auto v = dev_port ? parse_long(*dev_port, 10) : std::nullopt;
      if (v && *v + 1 != port) continue;
    }
    add_unique(p.netdevs, nd);
  }
  return p;
}

std::vector<RdmaPort> discover_rdma_ports(const std::string& sysfs_root) {
  std::vector<RdmaPort> out;
  const std::string class_dir = sysfs_root + "/class/infiniband";
  for (const std::string& dev : directory_entries(class_dir)) {
    const std::string dev_dir = class_dir + "/" + dev;
    for (int port : numeric_entries(dev_dir + "/ports")) {
      out.push_back(read_rdma_port(dev_dir, dev, port));
    }
  }
  return out;
}

std::vector<const RdmaPort*> ports_for_netdev(const std::vector<RdmaPort>& ports,
                                              const std::string& netdev) {
  std::vector<const RdmaPort*> out;
  for (const RdmaPort& p : ports) {
    if (std::find(p.netdevs.begin(), p.netdevs.end(), netdev) != p.netdevs.end()) {
      out.push_back(&p);
    }
  }
  return out;
}

GidChoice select_gid(const RdmaPort& port, uint32_t ipv4, std::optional<int> override_index) {
  GidChoice c;
  const std::string addr = format_ipv4(ipv4);
  if (port.link_layer == LinkLayer::kInfiniBand) {
    c.use_lid = true;
    c.why = "InfiniBand link layer: addressed by LID";
    if (port.lid >= 0) c.why += " " + std::to_string(port.lid);
    c.why += ", no GID needed";
    if (override_index) {
      c.why += " (NCCL_MESH_GID_INDEX=" + std::to_string(*override_index) + " ignored)";
    }
    return c;
  }

  // The automatic choice, computed even with an override so the override can be judged.
  const GidEntry* v2 = nullptr;
  const GidEntry* untyped = nullptr;
  std::vector<const GidEntry*> v1;
  for (const GidEntry& e : port.gids) {
    if (gid_ipv4(e.gid) != ipv4) continue;
    if (e.type == GidType::kRoceV2 && v2 == nullptr) v2 = &e;
    if (e.type == GidType::kUnknown && untyped == nullptr) untyped = &e;
    if (e.type == GidType::kIbOrRoceV1) v1.push_back(&e);
  }

  if (override_index) {
    const std::string label = "NCCL_MESH_GID_INDEX=" + std::to_string(*override_index);
    const auto it = std::find_if(port.gids.begin(), port.gids.end(),
                                 [&](const GidEntry& e) { return e.index == *override_index; });
    if (it == port.gids.end()) {
      c.why = label + ": no such non-zero entry on " + port.device + " port " +
              std::to_string(port.port);
      if (v2 != nullptr)
        c.why += " (the RoCE v2 entry of " + addr + " is " + std::to_string(v2->index) + ")";
      return c;
    }
    c.index = it->index;
    c.why = label + " (override): " + format_gid(it->gid) + ", " + gid_type_name(it->type);
    if (&*it != v2) {
      c.why += v2 != nullptr ? "; the RoCE v2 entry of " + addr + " is " + std::to_string(v2->index)
                             : "; not a RoCE v2 entry of " + addr;
    }
    return c;
  }

  const GidEntry* pick = v2 != nullptr ? v2 : untyped;
  if (pick != nullptr) {
    c.index = pick->index;
    c.why = "RoCE v2 entry of " + addr + " (" + format_gid(pick->gid);
    if (pick == untyped) c.why += ", type unreadable: assumed RoCE v2";
    if (!pick->ndev.empty()) c.why += ", on " + pick->ndev;
    c.why += ")";
    return c;
  }
  if (!v1.empty()) {
    c.why = "only RoCE v1 entries for " + addr + " (index";
    // append(), not " " + std::string: GCC 12 -O3 warns falsely (-Wrestrict) on the latter.
    for (const GidEntry* e : v1) c.why.append(" ").append(std::to_string(e->index));
    c.why += "): RoCE v1 is not routable and is not used";
    return c;
  }
  c.why = "no GID for " + addr;
  if (port.gids.empty()) {
    c.why += " (GID table empty)";
  } else {
    c.why += " (entries:";
    const size_t shown = std::min<size_t>(port.gids.size(), 6);
    for (size_t i = 0; i < shown; ++i) c.why += (i ? "; " : " ") + describe_entry(port.gids[i]);
    if (shown < port.gids.size()) c.why += "; ...";
    c.why += ")";
  }
  return c;
}

}  // namespace mesh::topology
