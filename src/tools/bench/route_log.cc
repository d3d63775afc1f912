// SPDX-License-Identifier: Apache-2.0
#include "route_log.h"

#include <algorithm>

namespace mesh::bench {
namespace {

constexpr const char* kPrefix = "NET/Mesh : ";

std::string strip_prefix(const std::string& line) {
  const size_t at = line.find(kPrefix);
  return at == std::string::npos ? line : line.substr(at + std::char_traits<char>::length(kPrefix));
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

// "connected: send connection L -> P (T, D)" / "accepted: receive connection L <- P (T, D)".
bool parse_connection_line(const std::string& text, ConnectionRoute* out) {
  std::string rest;
  if (starts_with(text, "connected: send connection ")) {
    out->sender = true;
    rest = text.substr(std::char_traits<char>::length("connected: send connection "));
  } else if (starts_with(text, "accepted: receive connection ")) {
    out->sender = false;
    rest = text.substr(std::char_traits<char>::length("accepted: receive connection "));
  } else {
    return false;
  }
  const std::string arrow = out->sender ? " -> " : " <- ";
  const size_t a = rest.find(arrow);
  const size_t open = rest.find(" (", a == std::string::npos ? 0 : a);
  if (a == std::string::npos || open == std::string::npos || rest.back() != ')') return false;
  out->local = rest.substr(0, a);
  out->peer = rest.substr(a + arrow.size(), open - a - arrow.size());
  const std::string inner = rest.substr(open + 2, rest.size() - open - 3);
  const size_t comma = inner.find(", ");
  out->transport = inner.substr(0, comma);
  out->detail = comma == std::string::npos ? "" : inner.substr(comma + 2);
  out->known = true;
  return true;
}

// "connect to X: relayed over TCP; <path>" where <path> holds "relays through H1 -> H2; first
// hops: ...".
void parse_relay_line(const std::string& text, ConnectionRoute* out) {
  const std::string key = ": relayed over ";
  const size_t at = text.find(key);
  if (!starts_with(text, "connect to ") || at == std::string::npos) return;
  out->relayed = true;
  const std::string rest = text.substr(at + key.size());
  const size_t semi = rest.find("; ");
  out->relay_transport = rest.substr(0, semi);
  out->relay_path = semi == std::string::npos ? "" : rest.substr(semi + 2);
  const size_t one = out->relay_path.find("; one shortest path");
  if (one != std::string::npos) out->relay_summary = out->relay_path.substr(0, one);
  const std::string hops = "first hops: ";
  const size_t fh = out->relay_path.find(hops);
  if (fh != std::string::npos) out->first_hops = out->relay_path.substr(fh + hops.size());
  const std::string through = "relays through ";
  const size_t t = out->relay_path.find(through);
  if (t == std::string::npos) return;
  std::string hosts = out->relay_path.substr(t + through.size());
  hosts = hosts.substr(0, hosts.find(';'));
  for (size_t pos = 0; pos <= hosts.size();) {
    const size_t next = hosts.find(" -> ", pos);
    const std::string h =
        hosts.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    if (!h.empty()) out->relay_hosts.push_back(h);
    if (next == std::string::npos) break;
    pos = next + 4;
  }
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

bool rank_has(const std::vector<std::vector<std::string>>& rank_addrs, int r,
              const std::string& addr) {
  if (r < 0 || static_cast<size_t>(r) >= rank_addrs.size()) return false;
  const auto& a = rank_addrs[static_cast<size_t>(r)];
  return std::find(a.begin(), a.end(), addr) != a.end();
}

int rank_of_addr(const std::string& addr, const std::vector<std::vector<std::string>>& rank_addrs) {
  for (size_t r = 0; r < rank_addrs.size(); ++r) {
    if (rank_has(rank_addrs, static_cast<int>(r), addr)) return static_cast<int>(r);
  }
  return -1;
}

std::string on_if(const std::string& ifname) {
  return ifname.empty() ? "" : ifname + " ";
}

std::string detail_text(const ConnectionRoute& c) {
  return c.detail.empty() ? "" : " (" + c.detail + ")";
}

// The relayed connection's sockets may take several equal-cost routes: say how many, and where
// each socket went first (the plugin's text).
std::string relay_ways(const ConnectionRoute& c) {
  if (c.relay_summary.empty() && c.first_hops.empty()) return "";
  std::string s = " [" + c.relay_summary;
  if (!c.first_hops.empty()) {
    s += (c.relay_summary.empty() ? "" : "; ") + ("first hops: " + c.first_hops);
  }
  return s + "]";
}

}  // namespace

ConnectionRoute parse_connection_log(const std::vector<std::string>& lines) {
  ConnectionRoute out;
  for (const auto& line : lines) {
    const std::string text = strip_prefix(line);
    if (!parse_connection_line(text, &out)) parse_relay_line(text, &out);
  }
  return out;
}

std::string endpoint_addr(const std::string& endpoint) {
  return endpoint.substr(0, endpoint.rfind(':'));
}

std::string label_relay_host(const std::string& token,
                             const std::vector<std::vector<std::string>>& rank_addrs) {
  for (size_t pos = 0; pos <= token.size();) {
    const size_t plus = token.find('+', pos);
    const int r = rank_of_addr(
        token.substr(pos, plus == std::string::npos ? std::string::npos : plus - pos), rank_addrs);
    if (r >= 0) return "rank " + std::to_string(r) + " (" + token + ")";
    if (plus == std::string::npos) break;
    pos = plus + 1;
  }
  return token;
}

std::string describe_pair_route(int src, int dst, const ConnectionRoute& send,
                                const std::string& src_if, const ConnectionRoute& recv,
                                const std::string& dst_if,
                                const std::vector<std::vector<std::string>>& rank_addrs) {
  std::string s = "rank " + std::to_string(src) + " -> rank " + std::to_string(dst) + ": ";
  if (!send.known) return s + "route unknown (the plugin logged no \"connected:\" line)";
  if (send.relayed) {
    std::vector<std::string> via;
    for (const auto& h : send.relay_hosts) via.push_back(label_relay_host(h, rank_addrs));
    s += "relayed over " + (send.relay_transport.empty() ? send.transport : send.relay_transport) +
         " " + (via.empty() ? send.relay_path : "via " + join(via, " -> ") + relay_ways(send)) +
         "; leaves " + on_if(src_if) + send.local + " -> " + send.peer + detail_text(send);
  } else {
    s += "direct over " + send.transport + ", " + on_if(src_if) + send.local + " -> " + send.peer +
         detail_text(send);
  }
  if (recv.known) {
    s += "; arrives on " + on_if(dst_if) + recv.local + " from " + recv.peer;
    // Not one of the sender's addresses: the last relay's end of the last cable.
    const std::string from = endpoint_addr(recv.peer);
    if (!rank_has(rank_addrs, src, from)) {
      const int r = rank_of_addr(from, rank_addrs);
      s += r >= 0 ? " (relay rank " + std::to_string(r) + ")" : std::string(" (a relay host)");
    }
  }
  return s;
}

}  // namespace mesh::bench
