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
  heard_[sender.id].beacon_ms = now_ms;
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
      // An entry this host expired comes back only with a newer sequence (its owner lives):
      // the same one is a copy that a neighbour still floods, and taking it again would let
      // copies of a dead host's entry bounce between hosts for ever.
      const auto g = gone_.find(e.id);
      if (g != gone_.end()) {
        if (!newer(e.seq, g->second.seq)) continue;
        gone_.erase(g);
      }
      if (known_.size() + 1 >= kMaxBeaconHosts) continue;  // next_beacon reports the cap
      known_[e.id] = Known{e, now_ms, sender.id};
    } else if (newer(e.seq, it->second.entry.seq)) {
      it->second = Known{e, now_ms, sender.id};
    }
  }
  if (dropped != nullptr) *dropped = n_dropped;
  return true;
}

void LinkState::expire(int64_t now_ms, const std::set<uint32_t>& held) {
  for (auto& [id, h] : heard_) {
    const int64_t silent = now_ms - h.beacon_ms;
    if (silent > kNeighbourTtlMs && silent <= kRetainMaxMs && held.count(id) != 0)
      h.held_ms = now_ms;
  }
  // Entries first, while the neighbours they came through are still in heard_: an entry is as
  // fresh as its last update or the last moment the neighbour that brought it was held.
  for (auto it = known_.begin(); it != known_.end();) {
    int64_t fresh = it->second.refreshed_ms;
    const auto via = heard_.find(it->second.via);
    if (via != heard_.end()) fresh = std::max(fresh, via->second.held_ms);
    if (now_ms - fresh <= kExpireMs) {
      ++it;
      continue;
    }
    gone_[it->first] = Gone{it->second.entry.seq, now_ms};
    it = known_.erase(it);
  }
  for (auto it = gone_.begin(); it != gone_.end();) {
    it = now_ms - it->second.at_ms > kGoneMs ? gone_.erase(it) : std::next(it);
  }
  while (gone_.size() > kMaxGone) {
    gone_.erase(std::min_element(gone_.begin(), gone_.end(), [](const auto& x, const auto& y) {
      return x.second.at_ms < y.second.at_ms;
    }));
  }
  // A neighbour: the TTL from its last beacon or from the end of its retention, the later.
  for (auto it = heard_.begin(); it != heard_.end();) {
    const int64_t fresh = std::max(it->second.beacon_ms, it->second.held_ms);
    it = now_ms - fresh > kNeighbourTtlMs ? heard_.erase(it) : std::next(it);
  }
}

std::vector<HostEntry> LinkState::silent_neighbours(int64_t now_ms) const {
  std::vector<HostEntry> out;
  for (const auto& [id, h] : heard_) {
    const int64_t silent = now_ms - h.beacon_ms;
    if (silent <= kNeighbourTtlMs || silent > kRetainMaxMs) continue;
    const auto k = known_.find(id);
    if (k != known_.end()) out.push_back(k->second.entry);
  }
  return out;
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
