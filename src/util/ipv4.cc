// SPDX-License-Identifier: Apache-2.0
#include "util/ipv4.h"

#include <arpa/inet.h>

#include <bit>

namespace mesh {

std::string format_ipv4(uint32_t addr) {
  char buf[INET_ADDRSTRLEN] = {};
  const uint32_t net = htonl(addr);
  inet_ntop(AF_INET, &net, buf, sizeof(buf));
  return buf;
}

std::string format_prefix(const Ipv4Prefix& p) {
  return format_ipv4(p.addr) + "/" + std::to_string(p.prefix);
}

std::optional<uint32_t> parse_ipv4(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return std::nullopt;  // inet_pton stops at NUL
  std::string s(text);
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::optional<uint8_t> prefix_from_netmask(uint32_t mask) {
  const int ones = std::popcount(mask);
  if (netmask(static_cast<unsigned>(ones)) != mask) return std::nullopt;
  return static_cast<uint8_t>(ones);
}

}  // namespace mesh
