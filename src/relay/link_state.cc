// SPDX-License-Identifier: Apache-2.0
#include "relay/link_state.h"

#include <algorithm>

namespace mesh::relay {

namespace {
// Serial-number order (RFC 1982): a is newer than b.
bool newer(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) > 0;
}
}  // namespace

LinkState::LinkState(std::vector<Ipv4Prefix> addrs, uint32_t first_seq) {
  std::sort(addrs.begin(), addrs.end(), [](const Ipv4Prefix& a, const Ipv4Prefix& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.prefix < b.prefix;
  });
  if (addrs.size() > kMaxHostAddrs) addrs.resize(kMaxHostAddrs);
  self_.id = host_id_of(addrs);
  self_.addrs = std::move(addrs);
  self_.seq = first_seq;
}

bool LinkState::receive(const Beacon& b, uint32_t source, int64_t now_ms, std::string* why,
                        size_t* dropped) {
  const HostEntry& sender = b.hosts[0];
  if (sender.id == self_.id) return true;
  if (!entry_verifies(sender, key_)) {
    *why = "beacon from " + format_ipv4(source) +
           " is not signed with this host's cluster key (NCCL_MESH_RELAY_KEY_FILE differs, or "
           "a forgery)";
    return false;
  }
  bool from_sender = false, neighbour = false;
  for (const Ipv4Prefix& a : sender.addrs) {
    if (a.addr != source) continue;
    from_sender = true;
    for (const Ipv4Prefix& mine : self_.addrs) {
      if (mine.prefix == a.prefix && mine.addr != a.addr && in_subnet(mine, a.addr))
        neighbour = true;
    }
  }
  if (!from_sender || !neighbour) {
    *why = "beacon from " + format_ipv4(source) +
           (from_sender ? " is not on a subnet of this host"
                        : " that does not list that "
                          "address as its own");
    return false;
  }
  heard_[sender.id] = now_ms;
  auto claims = [](const HostEntry& e, const std::vector<Ipv4Prefix>& addrs) {
    for (const Ipv4Prefix& a : e.addrs) {
      for (const Ipv4Prefix& o : addrs) {
        if (a.addr == o.addr) return true;
      }
    }
    return false;
  };
  size_t n_dropped = 0;
  for (size_t i = 0; i < b.hosts.size(); ++i) {
    const HostEntry& e = b.hosts[i];
    if (e.id == self_.id) continue;
    if (!entry_verifies(e, key_) ||
        (i > 0 && (claims(e, self_.addrs) || claims(e, sender.addrs)))) {
      ++n_dropped;
      continue;
    }
    auto it = known_.find(e.id);
    if (it == known_.end()) {
      if (known_.size() + 1 >= kMaxBeaconHosts) continue;  // next_beacon reports the cap
      known_[e.id] = Known{e, now_ms};
    } else if (newer(e.seq, it->second.entry.seq)) {
      it->second = Known{e, now_ms};
    }
  }
  if (dropped != nullptr) *dropped = n_dropped;
  return true;
}

void LinkState::expire(int64_t now_ms) {
  for (auto it = heard_.begin(); it != heard_.end();) {
    it = now_ms - it->second > kNeighbourTtlMs ? heard_.erase(it) : std::next(it);
  }
  for (auto it = known_.begin(); it != known_.end();) {
    it = now_ms - it->second.refreshed_ms > kExpireMs ? known_.erase(it) : std::next(it);
  }
}

Beacon LinkState::next_beacon(uint32_t seq_floor, bool* truncated) {
  self_.seq = newer(seq_floor, self_.seq) ? seq_floor : self_.seq + 1;
  self_.neighbours.clear();
  for (const auto& [id, t] : heard_) {
    if (self_.neighbours.size() < kMaxNeighbours) self_.neighbours.push_back(id);
  }
  *truncated = heard_.size() > kMaxNeighbours;
  sign_entry(&self_, key_);
  Beacon b;
  b.hosts.push_back(self_);
  for (const auto& [id, k] : known_) {
    if (b.hosts.size() >= kMaxBeaconHosts) {
      *truncated = true;
      break;
    }
    b.hosts.push_back(k.entry);
  }
  return b;
}

std::vector<HostEntry> LinkState::hosts() const {
  std::vector<HostEntry> out{self_};
  out.back().neighbours.clear();
  for (const auto& [id, t] : heard_) out.back().neighbours.push_back(id);
  for (const auto& [id, k] : known_) out.push_back(k.entry);
  return out;
}

}  // namespace mesh::relay
