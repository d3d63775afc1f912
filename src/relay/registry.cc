#include "relay/registry.h"

#include <cstdio>
#include <cstring>

#include "relay/fail.h"
#include "util/byte_order.h"

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

bool peer_allowed(uid_t peer_uid, gid_t peer_gid, uid_t self_uid, long allowed_gid) {
  return peer_uid == self_uid || peer_uid == 0 ||
         (allowed_gid >= 0 && static_cast<long>(peer_gid) == allowed_gid);
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
