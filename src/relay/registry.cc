// SPDX-License-Identifier: Apache-2.0
#include "relay/registry.h"

#include <netinet/tcp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "relay/fail.h"
#include "util/byte_order.h"
#include "util/ipv4.h"

namespace mesh::relay {

std::string local_socket_name(uint16_t port, uint32_t scope_id) {
  char buf[64];
  if (scope_id == 0) {
    std::snprintf(buf, sizeof(buf), "nccl-mesh-relay.%u", static_cast<unsigned>(port));
  } else {
    std::snprintf(buf, sizeof(buf), "nccl-mesh-relay.%u.%08x", static_cast<unsigned>(port),
                  scope_id);
  }
  return std::string(1, '\0') + buf;
}

void encode_registration(const Registration& r, uint8_t* out) {
  std::memset(out, 0, kRegistrationSize);
  out[0] = r.add ? 1 : 2;
  put_u16(out + 2, r.port);
  std::memcpy(out + 4, r.tag.data(), r.tag.size());
  if (r.add) std::memcpy(out + 12, r.key.data(), r.key.size());
}

bool decode_registration(const uint8_t* in, size_t len, Registration* out, std::string* why) {
  if (len != kRegistrationSize)
    return fail(why, "registration of " + std::to_string(len) + " bytes");
  if ((in[0] != 1 && in[0] != 2) || in[1] != 0) return fail(why, "unknown registration op");
  Registration r;
  r.add = in[0] == 1;
  r.port = get_u16(in + 2);
  if (r.port == 0) return fail(why, "registration of port 0");
  std::memcpy(r.tag.data(), in + 4, r.tag.size());
  std::memcpy(r.key.data(), in + 12, r.key.size());
  *out = r;
  return true;
}

void encode_route_query(const RouteQuery& q, uint8_t* out) {
  std::memset(out, 0, kRouteQuerySize);
  const size_t n = std::min(q.dest.size(), kMaxRequestAddrs);
  out[0] = 3;
  out[1] = static_cast<uint8_t>(n);
  put_u16(out + 2, q.stream);
  put_u32(out + 4, q.id);
  put_u32(out + 8, q.age_ms);
  for (size_t i = 0; i < n; ++i) {
    put_u32(out + 12 + 5 * i, q.dest[i].addr);
    out[12 + 5 * i + 4] = q.dest[i].prefix;
  }
}

bool decode_route_query(const uint8_t* in, size_t len, RouteQuery* out, std::string* why) {
  if (len != kRouteQuerySize || in[0] != 3) return fail(why, "not a route query");
  const size_t n = in[1];
  if (n == 0 || n > kMaxRequestAddrs)
    return fail(why, "route query with " + std::to_string(n) + " addresses");
  RouteQuery q;
  q.stream = get_u16(in + 2);
  q.id = get_u32(in + 4);
  q.age_ms = get_u32(in + 8);
  for (size_t i = 0; i < n; ++i) {
    Ipv4Prefix p{get_u32(in + 12 + 5 * i), in[12 + 5 * i + 4]};
    if (p.prefix == 0 || p.prefix > 32 || p.addr == 0)
      return fail(why, "route query for an invalid address");
    q.dest.push_back(p);
  }
  *out = std::move(q);
  return true;
}

std::vector<uint8_t> encode_route_answer(const RouteAnswer& a) {
  const std::string w = a.why.substr(0, kMaxRouteText), p = a.path.substr(0, kMaxRouteText);
  uint8_t h[kRouteAnswerHeader] = {};
  h[0] = 4;
  h[1] = a.status;
  put_u16(h + 2, a.cables);
  put_u32(h + 4, a.id);
  put_u32(h + 8, a.local.addr);
  h[12] = a.local.prefix;
  put_u16(h + 14, a.port);
  put_u32(h + 16, a.peer);
  put_u16(h + 20, static_cast<uint16_t>(w.size()));
  put_u16(h + 22, static_cast<uint16_t>(p.size()));
  std::string bytes(reinterpret_cast<const char*>(h), sizeof(h));
  bytes += w;
  bytes += p;
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

bool decode_route_answer(const uint8_t* in, size_t len, RouteAnswer* out, std::string* why) {
  if (len < kRouteAnswerHeader || in[0] != 4 || in[1] > 2) return fail(why, "not a route answer");
  const size_t w = get_u16(in + 20), p = get_u16(in + 22);
  if (w > kMaxRouteText || p > kMaxRouteText || len != kRouteAnswerHeader + w + p)
    return fail(why, "route answer of a wrong length");
  RouteAnswer a;
  a.status = in[1];
  a.cables = get_u16(in + 2);
  a.id = get_u32(in + 4);
  a.local = Ipv4Prefix{get_u32(in + 8), in[12]};
  a.port = get_u16(in + 14);
  a.peer = get_u32(in + 16);
  if (a.local.prefix > 32) return fail(why, "route answer with an invalid prefix");
  a.why.assign(reinterpret_cast<const char*>(in + kRouteAnswerHeader), w);
  a.path.assign(reinterpret_cast<const char*>(in + kRouteAnswerHeader + w), p);
  *out = std::move(a);
  return true;
}

bool peer_allowed(uid_t peer_uid, gid_t peer_gid, uid_t self_uid, long allowed_gid) {
  return peer_uid == self_uid || peer_uid == 0 ||
         (allowed_gid >= 0 && static_cast<long>(peer_gid) == allowed_gid);
}

std::vector<uint32_t> registration_addresses(const std::vector<uint32_t>& agent,
                                             const std::vector<uint32_t>& host) {
  std::vector<uint32_t> out = agent;
  for (uint32_t a : host) {
    const bool loopback = (a >> 24) == 127;
    if (!loopback && std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

ListenerCheck check_listener(const std::vector<TcpSocketInfo>& listeners, uint16_t port, uid_t uid,
                             const std::vector<uint32_t>& addrs, std::string* why) {
  const std::string on = "port " + std::to_string(port);
  std::string foreign;
  for (uint32_t a : addrs) {
    bool reached = false, all_own = true;
    for (const TcpSocketInfo& l : listeners) {
      if (l.local_port != port || (l.local_addr != a && l.local_addr != 0)) continue;
      reached = true;
      if (l.uid != uid) {
        all_own = false;
        if (foreign.empty())
          foreign = "the TCP listener on " + on + " at " + format_ipv4(l.local_addr) +
                    " belongs to user " + std::to_string(l.uid) + ", not to the registering user " +
                    std::to_string(uid);
      }
    }
    if (reached && all_own) return ListenerCheck::kOk;
  }
  if (!foreign.empty()) {
    *why = foreign;
    return ListenerCheck::kOtherUser;
  }
  std::string here, there;
  for (uint32_t a : addrs) here += format_ipv4(a) + ", ";
  for (const TcpSocketInfo& l : listeners) {
    if (l.local_port == port) there += (there.empty() ? "" : ", ") + format_ipv4(l.local_addr);
  }
  if (there.empty()) {
    *why = "no TCP listener on " + on;
    return ListenerCheck::kNone;
  }
  *why = "no TCP listener on " + on + " at these addresses (" + here + "0.0.0.0), only at " + there;
  return ListenerCheck::kElsewhere;
}

ListenerCheck check_listener_now(uint16_t port, uid_t uid, const std::vector<uint32_t>& addrs,
                                 std::string* why) {
  std::vector<TcpSocketInfo> listeners;
  std::string err;
  // A port has a handful of listeners (one per address, or a SO_REUSEPORT group), so the dump,
  // filtered by the kernel, is one part; a kernel that ignores the filter sends every listener
  // of the namespace (a part holds hundreds): 64 parts bound it.
  if (!dump_tcp_sockets(
          1u << TCP_LISTEN, port, 64,
          [&](const TcpSocketInfo& l) {
            if (listeners.size() < 4096) listeners.push_back(l);
          },
          &err)) {
    *why = "cannot read this host's TCP listeners (" + err + ")";
    return ListenerCheck::kUnreadable;
  }
  return check_listener(listeners, port, uid, addrs, why);
}

bool Registry::add(int client, const Registration& r, std::string* why) {
  auto it = entries_.find(r.tag);
  if (it != entries_.end()) {
    if (it->second.client != client) return fail(why, "listener tag registered by another process");
    it->second.port = r.port;
    it->second.key = r.key;
    return true;
  }
  size_t& n = per_client_[client];
  if (n >= kMaxRegistrationsPerClient)
    return fail(why, std::to_string(n) + " listeners registered by this process already");
  entries_[r.tag] = Entry{r.port, r.key, client};
  ++n;
  return true;
}

void Registry::remove(int client, const ListenerTag& tag) {
  auto it = entries_.find(tag);
  if (it == entries_.end() || it->second.client != client) return;
  entries_.erase(it);
  if (--per_client_[client] == 0) per_client_.erase(client);
}

void Registry::drop_client(int client) {
  std::erase_if(entries_, [client](const auto& e) { return e.second.client == client; });
  per_client_.erase(client);
}

const Registry::Entry* Registry::find(const ListenerTag& tag) const {
  auto it = entries_.find(tag);
  return it == entries_.end() ? nullptr : &it->second;
}

bool ReplayCache::insert(const std::array<uint8_t, kProofSize>& proof, int64_t now_ms,
                         int64_t ttl_ms) {
  while (!by_expiry_.empty() &&
         (by_expiry_.begin()->first <= now_ms || by_expiry_.size() >= cap_)) {
    seen_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
  if (!seen_.emplace(proof, now_ms + ttl_ms).second) return false;
  by_expiry_.emplace(now_ms + ttl_ms, proof);
  return true;
}

}  // namespace mesh::relay
