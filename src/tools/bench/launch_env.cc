// SPDX-License-Identifier: Apache-2.0
#include "launch_env.h"

#include <arpa/inet.h>

#include <string>

namespace mesh::bench {

std::optional<int> parse_nonneg_int(std::string_view text) {
  if (text.empty() || text.size() > 10) return std::nullopt;
  long long v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > INT32_MAX) return std::nullopt;
  return static_cast<int>(v);
}

std::optional<LaunchEnv> detect_launcher(const GetEnv& getenv_fn, std::string* why) {
  static const char* const kPairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"},
                                          {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& pair : kPairs) {
    const char* r = getenv_fn(pair[0]);
    const char* s = getenv_fn(pair[1]);
    if (r == nullptr || s == nullptr) continue;
    const auto rank = parse_nonneg_int(r);
    const auto size = parse_nonneg_int(s);
    const std::string source = std::string(pair[0]) + "/" + pair[1];
    if (!rank || !size || *size < 1 || *rank >= *size) {
      if (why != nullptr) {
        *why = source + " = '" + r + "'/'" + s + "' is not a valid rank/size pair";
      }
      return std::nullopt;
    }
    return LaunchEnv{*rank, *size, source};
  }
  if (why != nullptr) why->clear();
  return std::nullopt;
}

std::optional<HostPort> parse_host_port(std::string_view text, std::string* why) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    // Built with append: GCC 12 -O3 warns falsely (-Wrestrict) on "literal" + std::string&&.
    if (why != nullptr) *why = std::string("'").append(text).append("' is not IP:PORT");
    return std::nullopt;
  }
  const std::string host(text.substr(0, colon));
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) {
    if (why != nullptr) *why = "'" + host + "' is not an IPv4 address";
    return std::nullopt;
  }
  const auto port = parse_nonneg_int(text.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535) {
    if (why != nullptr) {
      *why = std::string("'").append(text.substr(colon + 1)).append("' is not a TCP port");
    }
    return std::nullopt;
  }
  return HostPort{ntohl(a.s_addr), static_cast<uint16_t>(*port)};
}

}  // namespace mesh::bench
