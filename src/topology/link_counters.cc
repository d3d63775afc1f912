// SPDX-License-Identifier: Apache-2.0
#include "topology/link_counters.h"

#include <cstdio>

#include "topology/sysfs_files.h"

namespace mesh::topology {
namespace {

std::optional<uint64_t> read_u64(const std::string& path) {
  const auto line = read_first_line(path);
  if (!line || line->empty()) return std::nullopt;
  uint64_t v = 0;
  for (const char c : *line) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

// port_xmit_data / port_rcv_data count 4-byte words.
std::optional<uint64_t> words_to_bytes(std::optional<uint64_t> words) {
  if (!words || *words > UINT64_MAX / 4) return std::nullopt;
  return *words * 4;
}

std::optional<uint64_t> minus(std::optional<uint64_t> after, std::optional<uint64_t> before) {
  if (!after || !before || *after < *before) return std::nullopt;
  return *after - *before;
}

std::string sent_received(std::optional<uint64_t> tx, std::optional<uint64_t> rx) {
  return "sent " + format_counter_bytes(tx) + ", received " + format_counter_bytes(rx);
}

std::string packets(std::optional<uint64_t> v) {
  return v ? std::to_string(*v) + " packets" : std::string("-");
}

}  // namespace

LinkCounters read_link_counters(const std::string& ifname,
                                const std::vector<const RdmaPort*>& ports,
                                const std::string& sysfs_root) {
  LinkCounters c;
  c.ifname = ifname;
  const std::string stats = sysfs_root + "/class/net/" + ifname + "/statistics/";
  c.tx_bytes = read_u64(stats + "tx_bytes");
  c.rx_bytes = read_u64(stats + "rx_bytes");
  for (const RdmaPort* p : ports) {
    RdmaPortCounters r;
    r.device = p->device;
    r.port = p->port;
    const std::string dir =
        sysfs_root + "/class/infiniband/" + p->device + "/ports/" + std::to_string(p->port) + "/";
    r.tx_bytes = words_to_bytes(read_u64(dir + "counters/port_xmit_data"));
    r.rx_bytes = words_to_bytes(read_u64(dir + "counters/port_rcv_data"));
    r.tx_packets = read_u64(dir + "counters/port_xmit_packets");
    r.rx_packets = read_u64(dir + "counters/port_rcv_packets");
    if (!r.tx_packets) r.tx_packets = read_u64(dir + "hw_counters/sent_pkts");
    if (!r.rx_packets) r.rx_packets = read_u64(dir + "hw_counters/rcvd_pkts");
    c.rdma.push_back(r);
  }
  return c;
}

LinkCounters counter_delta(const LinkCounters& before, const LinkCounters& after) {
  LinkCounters d;
  d.ifname = after.ifname;
  d.tx_bytes = minus(after.tx_bytes, before.tx_bytes);
  d.rx_bytes = minus(after.rx_bytes, before.rx_bytes);
  for (const RdmaPortCounters& a : after.rdma) {
    RdmaPortCounters r;
    r.device = a.device;
    r.port = a.port;
    for (const RdmaPortCounters& b : before.rdma) {
      if (b.device != a.device || b.port != a.port) continue;
      r.tx_bytes = minus(a.tx_bytes, b.tx_bytes);
      r.rx_bytes = minus(a.rx_bytes, b.rx_bytes);
      r.tx_packets = minus(a.tx_packets, b.tx_packets);
      r.rx_packets = minus(a.rx_packets, b.rx_packets);
    }
    d.rdma.push_back(r);
  }
  return d;
}

std::string format_counter_bytes(std::optional<uint64_t> bytes) {
  if (!bytes) return "-";
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(*bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof kUnits / sizeof kUnits[0]) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string describe_link_counters(const LinkCounters& c) {
  std::string s = sent_received(c.tx_bytes, c.rx_bytes);
  for (const RdmaPortCounters& r : c.rdma) {
    s += "; RDMA " + r.device + "/" + std::to_string(r.port) + " ";
    if (r.tx_bytes || r.rx_bytes) {
      s += sent_received(r.tx_bytes, r.rx_bytes);
    } else if (r.tx_packets || r.rx_packets) {
      s += "sent " + packets(r.tx_packets) + ", received " + packets(r.rx_packets) +
           " (no byte counters; they are in the netdev's)";
    } else {
      s += "no counters";
    }
  }
  return s;
}

}  // namespace mesh::topology
