// SPDX-License-Identifier: Apache-2.0
// A beacon is any datagram that reaches the relay port: decode, and where it decodes, check that
// it re-encodes to the same bytes and that feeding it to a link-state table and routing over the
// result cannot fail in any other way than returning false.
#include <cstring>

#include "relay/beacon.h"
#include "relay/link_state.h"
#include "relay/routes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::relay;
  Beacon b;
  std::string why;
  if (!decode_beacon(data, size, &b, &why)) return 0;
  std::vector<uint8_t> again;
  if (!encode_beacon(b, &again, &why) || again.size() != size ||
      std::memcmp(again.data(), data, size) != 0)
    __builtin_trap();
  LinkState s({mesh::Ipv4Prefix{b.hosts[0].addrs[0].addr ^ 1u, b.hosts[0].addrs[0].prefix}}, 1);
  (void)s.receive(b, b.hosts[0].addrs[0].addr, 0, &why);
  Route r;
  for (const HostEntry& h : b.hosts)
    (void)find_route(s.hosts(), s.self_id(), h.addrs, {}, &r, &why);
  bool truncated = false;
  (void)s.next_beacon(0, &truncated);
  return 0;
}
