// SPDX-License-Identifier: Apache-2.0
#include "relay/beacon.h"

#include <algorithm>
#include <set>

#include "relay/fail.h"
#include "util/byte_order.h"
#include "util/fnv1a.h"
#include "util/hmac.h"

namespace mesh::relay {

namespace {

// The bytes of an entry as encoded, without its MAC.
void append_entry(const HostEntry& h, std::vector<uint8_t>* out) {
  uint8_t b[10];
  put_u32(b, h.id);
  put_u32(b + 4, h.seq);
  b[8] = static_cast<uint8_t>(h.addrs.size());
  b[9] = static_cast<uint8_t>(h.neighbours.size());
  out->insert(out->end(), b, b + 10);
  for (const Ipv4Prefix& a : h.addrs) {
    uint8_t e[5];
    put_u32(e, a.addr);
    e[4] = a.prefix;
    out->insert(out->end(), e, e + 5);
  }
  for (uint32_t n : h.neighbours) {
    uint8_t e[4];
    put_u32(e, n);
    out->insert(out->end(), e, e + 4);
  }
}

std::array<uint8_t, kEntryMacSize> entry_mac(const HostEntry& h, const ClusterKey& key) {
  std::vector<uint8_t> bytes;
  append_entry(h, &bytes);
  const Sha256 m = hmac_sha256(key.data(), key.size(), bytes.data(), bytes.size());
  std::array<uint8_t, kEntryMacSize> out{};
  std::copy(m.begin(), m.begin() + kEntryMacSize, out.begin());
  return out;
}

}  // namespace

void sign_entry(HostEntry* entry, const ClusterKey& key) {
  if (key.empty()) {
    entry->mac = {};
    return;
  }
  entry->mac = entry_mac(*entry, key);
}

bool entry_verifies(const HostEntry& entry, const ClusterKey& key) {
  if (key.empty()) return true;
  const auto m = entry_mac(entry, key);
  return equal_constant_time(m.data(), entry.mac.data(), kEntryMacSize);
}

uint32_t host_id_of(std::vector<Ipv4Prefix> addrs) {
  std::sort(addrs.begin(), addrs.end(), [](const Ipv4Prefix& a, const Ipv4Prefix& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.prefix < b.prefix;
  });
  uint32_t h = 2166136261u;
  for (const Ipv4Prefix& a : addrs) {
    uint8_t b[5];
    put_u32(b, a.addr);
    b[4] = a.prefix;
    h = fnv1a(b, sizeof(b), h);
  }
  return h == 0 ? 1 : h;
}

bool encode_beacon(const Beacon& beacon, std::vector<uint8_t>* out, std::string* why) {
  if (beacon.hosts.empty()) return fail(why, "no host entry");
  if (beacon.hosts.size() > kMaxBeaconHosts)
    return fail(why, std::to_string(beacon.hosts.size()) + " hosts (at most " +
                         std::to_string(kMaxBeaconHosts) + ")");
  out->assign(kBeaconHeaderSize, 0);
  put_u32(out->data(), kBeaconMagic);
  (*out)[4] = kBeaconVersion;
  (*out)[5] = static_cast<uint8_t>(beacon.hosts.size());
  for (const HostEntry& h : beacon.hosts) {
    if (h.addrs.empty() || h.addrs.size() > kMaxHostAddrs)
      return fail(why, "host entry with " + std::to_string(h.addrs.size()) + " addresses");
    if (h.neighbours.size() > kMaxNeighbours)
      return fail(why, "host entry with " + std::to_string(h.neighbours.size()) + " neighbours");
    for (const Ipv4Prefix& a : h.addrs) {
      if (a.prefix > 32) return fail(why, "prefix length above 32");
    }
    append_entry(h, out);
    out->insert(out->end(), h.mac.begin(), h.mac.end());
  }
  put_u32(out->data() + 8, static_cast<uint32_t>(out->size() + 4));
  uint8_t sum[4];
  put_u32(sum, fnv1a(out->data(), out->size()));
  out->insert(out->end(), sum, sum + 4);
  return true;
}

bool decode_beacon(const uint8_t* in, size_t len, Beacon* out, std::string* why) {
  if (len < kBeaconHeaderSize + 4)
    return fail(why, "truncated (" + std::to_string(len) + " bytes)");
  if (len > kMaxBeaconSize) return fail(why, "oversize (" + std::to_string(len) + " bytes)");
  if (get_u32(in) != kBeaconMagic) return fail(why, "not a beacon (bad magic)");
  if (in[4] != kBeaconVersion)
    return fail(why, "version " + std::to_string(in[4]) + " (expected " +
                         std::to_string(kBeaconVersion) + ")");
  const size_t nhosts = in[5];
  if (nhosts == 0 || nhosts > kMaxBeaconHosts)
    return fail(why, "host count " + std::to_string(nhosts));
  if (get_u16(in + 6) != 0) return fail(why, "reserved bytes not zero");
  if (get_u32(in + 8) != len)
    return fail(why, "length field " + std::to_string(get_u32(in + 8)) + " but " +
                         std::to_string(len) + " bytes received");
  if (fnv1a(in, len - 4) != get_u32(in + len - 4)) return fail(why, "bad checksum");
  const size_t end = len - 4;
  size_t pos = kBeaconHeaderSize;
  Beacon b;
  std::set<uint32_t> ids;
  for (size_t i = 0; i < nhosts; ++i) {
    if (end - pos < 10) return fail(why, "entry " + std::to_string(i) + " truncated");
    HostEntry h;
    h.id = get_u32(in + pos);
    h.seq = get_u32(in + pos + 4);
    const size_t na = in[pos + 8], nn = in[pos + 9];
    pos += 10;
    if (h.id == 0 || !ids.insert(h.id).second)
      return fail(why, "entry " + std::to_string(i) + ": zero or repeated host id");
    if (na == 0 || na > kMaxHostAddrs || nn > kMaxNeighbours)
      return fail(why, "entry " + std::to_string(i) + ": " + std::to_string(na) + " addresses, " +
                           std::to_string(nn) + " neighbours");
    if (end - pos < na * 5 + nn * 4 + kEntryMacSize)
      return fail(why, "entry " + std::to_string(i) + " truncated");
    for (size_t a = 0; a < na; ++a, pos += 5) {
      Ipv4Prefix p{get_u32(in + pos), in[pos + 4]};
      if (p.prefix > 32 || p.prefix == 0 || p.addr == 0 || p.addr == 0xffffffffu)
        return fail(why, "entry " + std::to_string(i) + ": invalid address " + format_prefix(p));
      h.addrs.push_back(p);
    }
    for (size_t n = 0; n < nn; ++n, pos += 4) {
      const uint32_t id = get_u32(in + pos);
      if (id == 0) return fail(why, "entry " + std::to_string(i) + ": zero neighbour id");
      h.neighbours.push_back(id);
    }
    std::copy(in + pos, in + pos + kEntryMacSize, h.mac.begin());
    pos += kEntryMacSize;
    if (i == 0 && host_id_of(h.addrs) != h.id)
      return fail(why, "the sender's id does not match its addresses");
    b.hosts.push_back(std::move(h));
  }
  if (pos != end) return fail(why, std::to_string(end - pos) + " trailing bytes");
  *out = std::move(b);
  return true;
}

}  // namespace mesh::relay
