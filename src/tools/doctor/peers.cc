// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/peers.h"

#include <algorithm>

namespace mesh::doctor {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits on commas and blanks, dropping empty pieces.
std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == ',' || ch == ' ' || ch == '\t') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool parse_unicast(const std::string& text, uint32_t* addr, std::string* error) {
  const auto a = parse_ipv4(text);
  if (!a) {
    *error = "'" + text + "' is not an IPv4 address (use the peer's address on the cable)";
    return false;
  }
  if (*a == 0 || *a == 0xffffffffu || (*a >> 28) == 0xe) {
    *error = "'" + text + "' is not a unicast address";
    return false;
  }
  *addr = *a;
  return true;
}

}  // namespace

bool parse_peer_list(std::string_view csv, std::vector<PeerSpec>* out, std::string* error) {
  for (const std::string& item : split_list(csv)) {
    uint32_t a = 0;
    if (!parse_unicast(item, &a, error)) return false;
    out->push_back({item, {a}});
  }
  if (out->empty()) {
    *error = "no peer address given";
    return false;
  }
  return true;
}

bool parse_hosts(std::istream& in, std::vector<PeerSpec>* out, std::string* error) {
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    std::string_view s = line;
    if (const size_t hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    s = trim(s);
    if (s.empty()) continue;
    std::vector<std::string> words = split_list(s);
    PeerSpec peer;
    // A line is "ADDR" or "NAME ADDR...": the first word is a name unless it is an address.
    if (!parse_ipv4(words.front())) {
      peer.name = words.front();
      words.erase(words.begin());
      if (words.empty()) {
        *error = "line " + std::to_string(lineno) + ": '" + peer.name + "' has no address";
        return false;
      }
    } else {
      peer.name = words.front();
    }
    for (const std::string& w : words) {
      uint32_t a = 0;
      if (!parse_unicast(w, &a, error)) {
        *error = "line " + std::to_string(lineno) + ": " + *error;
        return false;
      }
      peer.addrs.push_back(a);
    }
    out->push_back(std::move(peer));
  }
  if (out->empty()) {
    *error = "the hosts file lists no peer";
    return false;
  }
  return true;
}

std::vector<PeerRoute> map_peers(const std::vector<PeerSpec>& peers, const Inventory& inv,
                                 const Model& model) {
  std::vector<PeerRoute> out;
  for (const PeerSpec& peer : peers) {
    PeerRoute r;
    r.peer = peer;
    std::vector<Ipv4Prefix> addrs;
    for (uint32_t a : peer.addrs) {
      addrs.push_back({a, 32});  // the peer's prefix is unknown; only the local subnet matters
      for (const topology::Interface& itf : inv.interfaces) {
        // 127.0.0.1 is "us" only when loopback is not itself the mesh being tested.
        if (itf.addr.addr == a && !itf.loopback) r.self = true;
      }
    }
    r.rails = topology::choose_rails(model.selection.used, addrs);
    for (size_t i = 0; i < inv.interfaces.size(); ++i) {
      const InterfaceView& v = model.interfaces[i];
      if (v.used) continue;
      const topology::Interface& itf = inv.interfaces[i];
      const bool reaches = std::any_of(addrs.begin(), addrs.end(), [&](const Ipv4Prefix& p) {
        return in_subnet(itf.addr, p.addr);
      });
      if (reaches) {
        r.unused_reach.push_back(itf.name + " (" + format_prefix(itf.addr) +
                                 "): " + v.excluded_why);
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<PeerLink> links_between_peers(const std::vector<PeerRoute>& routes) {
  // The first successful report of each peer.
  std::vector<std::pair<std::string, const PeerInfo*>> reports;
  for (const PeerRoute& r : routes) {
    for (const CableProbe& p : r.probes) {
      if (p.info) {
        reports.emplace_back(r.peer.name, &*p.info);
        break;
      }
    }
  }
  std::vector<PeerLink> links;
  for (size_t i = 0; i < reports.size(); ++i) {
    for (size_t j = i + 1; j < reports.size(); ++j) {
      for (const PeerInterface& x : reports[i].second->interfaces) {
        for (const PeerInterface& y : reports[j].second->interfaces) {
          if (x.addr.addr == y.addr.addr) continue;  // same address: not two ends of a cable
          if (x.addr.addr >> 24 == 127) continue;    // loopback is no cable between hosts
          // Only what both plugins use is a cable: the management network (default route),
          // bridges and switched subnets are left out by their selection (topology/selection.h),
          // so counting them would put NCCL's ring on the office LAN.
          if (!x.used || !y.used) continue;
          if (in_subnet(x.addr, y.addr.addr) && in_subnet(y.addr, x.addr.addr)) {
            links.push_back({reports[i].first, reports[j].first, x, y});
          }
        }
      }
    }
  }
  // Peers that did not answer: the hosts file's addresses on a subnet a reporting peer uses.
  for (const PeerRoute& n : routes) {
    if (n.self || std::any_of(reports.begin(), reports.end(),
                              [&](const auto& r) { return r.first == n.peer.name; }))
      continue;
    for (const auto& [name, info] : reports) {
      for (const PeerInterface& x : info->interfaces) {
        if (!x.used || x.addr.addr >> 24 == 127) continue;
        for (uint32_t y : n.peer.addrs) {
          if (y == x.addr.addr || !in_subnet(x.addr, y)) continue;
          PeerInterface end;
          end.addr = {y, x.addr.prefix};
          end.used = true;
          links.push_back({name, n.peer.name, x, end, true});
        }
      }
    }
  }
  return links;
}

std::map<std::string, std::string> shared_settings_of(const Settings& s) {
  return {{"NCCL_MESH_TUNER", SettingEnum<TunerMode>::names[static_cast<size_t>(s.tuner)]},
          {"NCCL_MESH_TUNER_MIN_BYTES", std::to_string(s.tuner_min_bytes)}};
}

}  // namespace mesh::doctor
