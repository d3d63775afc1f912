// SPDX-License-Identifier: Apache-2.0
#include "harness/env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "harness/timing.h"

namespace conformance {

namespace {
std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : fallback;
}

// Every comma-separated name is a virtual interface (veth, bridge: /sys/devices/virtual/net):
// the suite never sends its traffic (or takes down links) on a real NIC.
bool all_virtual(const std::string& list) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, end - start);
    std::error_code ec;
    const auto real = std::filesystem::canonical("/sys/class/net/" + name, ec);
    if (name.empty() || ec || real.string().find("/devices/virtual/net/") == std::string::npos)
      return false;
    start = end + 1;
  }
  return true;
}

std::string checked_ifname(const char* variable, const std::string& fallback) {
  const std::string v = env_or(variable, fallback);
  if (v == "lo" || all_virtual(v)) return v;
  static bool warned = false;
  if (!warned) {
    warned = true;
    std::fprintf(stderr,
                 "%s=%s names an interface that is not a virtual test link (veth); the "
                 "conformance suite stays on loopback\n",
                 variable, v.c_str());
  }
  return "lo";
}
}  // namespace

std::string rank_ifname(Rank rank) {
  const std::string test_if = checked_ifname("MESH_CONFORMANCE_IFNAME", "lo");
  return rank == Rank::kTest ? test_if : checked_ifname("MESH_CONFORMANCE_PEER_IFNAME", test_if);
}

bool on_loopback(Rank rank) {
  return rank_ifname(rank) == "lo";
}

std::string expected_transport() {
  std::string t = env_or("MESH_CONFORMANCE_EXPECT_TRANSPORT", "");
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t;
}

double time_scale() {
  static const double scale = [] {
    const char* v = std::getenv("MESH_CONF_TIME_SCALE");
    const double s = v != nullptr ? std::atof(v) : 1.0;
    return s >= 1.0 ? s : 1.0;
  }();
  return scale;
}

int connect_timeout_ms() {
  static const int ms = [] {
    const char* v = std::getenv("MESH_CONFORMANCE_CONNECT_TIMEOUT_MS");
    if (v == nullptr || *v == '\0') return kDefaultConnectTimeoutMs;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 100 || n > 3600000) {
      std::fprintf(stderr,
                   "MESH_CONFORMANCE_CONNECT_TIMEOUT_MS=%s is not a number of ms in 100..3600000; "
                   "using %d\n",
                   v, kDefaultConnectTimeoutMs);
      return kDefaultConnectTimeoutMs;
    }
    return static_cast<int>(n);
  }();
  return ms;
}

namespace {
bool caller_set_relay_port = true;

// A port no other process holds now: the kernel's pick for a TCP socket bound to port 0 on
// loopback, checked free for UDP too (the relay agent binds both). 0 if none could be had.
uint16_t free_loopback_port() {
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    uint16_t port = 0;
    if (tcp >= 0 && udp >= 0 && bind(tcp, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
        getsockname(tcp, reinterpret_cast<sockaddr*>(&sa), &len) == 0 &&
        bind(udp, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      port = ntohs(sa.sin_port);
    }
    if (tcp >= 0) close(tcp);
    if (udp >= 0) close(udp);
    if (port != 0) return port;
  }
  return 0;
}
}  // namespace

bool relay_port_from_caller() {
  return caller_set_relay_port;
}

void set_plugin_environment(Rank rank) {
  // Overwrite unconditionally: the caller's environment (and, for a peer, the test process's
  // NCCL_MESH_IFNAME it inherited) never decides where traffic goes.
  setenv("NCCL_MESH_IFNAME", rank_ifname(rank).c_str(), 1);
  setenv("NCCL_MESH_CONNECT_TIMEOUT_MS", std::to_string(connect_timeout_ms()).c_str(), 1);
  // On loopback every test process (and the peers it spawns, which inherit the variable) is a
  // host of its own: with the default relay port, test processes that ctest runs side by side
  // (-j) share one host's relay agent, and a standby's retried binds and take-overs open and
  // close sockets in the middle of another process's test (descriptor counts, logs).
  if (rank == Rank::kTest && on_loopback(rank) && std::getenv("NCCL_MESH_RELAY_PORT") == nullptr) {
    caller_set_relay_port = false;
    if (const uint16_t port = free_loopback_port(); port != 0)
      setenv("NCCL_MESH_RELAY_PORT", std::to_string(port).c_str(), 1);
  }
}

}  // namespace conformance
