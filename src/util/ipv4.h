// SPDX-License-Identifier: Apache-2.0
// IPv4 addresses with prefix lengths: the unit every topology decision is made of.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mesh {

// An IPv4 address (host byte order) and the prefix length of its subnet.
struct Ipv4Prefix {
  uint32_t addr = 0;
  uint8_t prefix = 32;

  bool operator==(const Ipv4Prefix&) const = default;
};

// Netmask for a prefix length 0..32 (0 -> 0.0.0.0, 32 -> 255.255.255.255).
constexpr uint32_t netmask(unsigned prefix) {
  return prefix == 0 ? 0u : (prefix >= 32 ? 0xffffffffu : ~((1u << (32 - prefix)) - 1u));
}

// True when `addr` lies inside the subnet of `net` (net.addr / net.prefix).
constexpr bool in_subnet(const Ipv4Prefix& net, uint32_t addr) {
  const uint32_t mask = netmask(net.prefix);
  return (net.addr & mask) == (addr & mask);
}

std::string format_ipv4(uint32_t addr);
std::string format_prefix(const Ipv4Prefix& p);  // "10.0.0.1/24"
std::optional<uint32_t> parse_ipv4(std::string_view text);
// Prefix length of a contiguous netmask (host order); nullopt for a non-contiguous mask.
std::optional<uint8_t> prefix_from_netmask(uint32_t mask);

}  // namespace mesh
