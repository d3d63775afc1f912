// SPDX-License-Identifier: Apache-2.0
// The route each plugin connection took, read from the plugin's own log lines: the bench's
// logger (the one it hands to init(), as NCCL does) keeps every line logged while a connect()
// or accept() call runs on the bench's thread, whatever NCCL_DEBUG says. The plugin logs, in
// that call, "connected: send connection L -> P (TCP, 2 data streams)" (or "accepted: receive
// connection L <- P (RDMA, 1 QP: mlx5_0 port 1 QP 0x11)") and, for a relayed connect, "connect
// to ...: relayed over TCP; <path>; first hops: ...". So the route shown is what the plugin did,
// not a re-computation. Pure: no plugin, no sockets.
#pragma once

#include <string>
#include <vector>

namespace mesh::bench {

struct ConnectionRoute {
  bool known = false;           // a "connected:"/"accepted:" line was found
  bool sender = false;          // send connection (connect side)
  std::string transport;        // "TCP", "RDMA" (the connection's own transport)
  std::string local;            // "198.18.1.1:40123" (TCP: the control socket)
  std::string peer;             // "198.18.1.2:29500"; for a relayed connection the neighbour's end
  std::string detail;           // "2 data streams", "1 QP: mlx5_0 port 1 QP 0x11"
  bool relayed = false;         // the connect side logged "relayed over"
  std::string relay_transport;  // "TCP" in "relayed over TCP"
  std::string relay_path;       // the route text after "relayed over TCP; "
  std::vector<std::string> relay_hosts;  // "198.18.20.2+198.18.21.1" per relay host, in order
  std::string relay_summary;             // "2 cables, 2 equal-cost first hop(s)"
  std::string first_hops;                // "control via 198.18.20.2 data 0 via 198.18.23.1"
};

// Parses the lines one connection's connect() or accept() calls logged (prefix "NET/Mesh : "
// optional); lines of any other kind are ignored.
ConnectionRoute parse_connection_log(const std::vector<std::string>& lines);

// The address part of an "a.b.c.d:port" endpoint.
std::string endpoint_addr(const std::string& endpoint);

// A relay host token ("198.18.20.2+198.18.21.1", the plugin's host label) as "rank R (token)"
// when one of its addresses belongs to a rank (rank_addrs[r]: that rank's addresses), else the
// token itself (a host that runs no bench rank).
std::string label_relay_host(const std::string& token,
                             const std::vector<std::vector<std::string>>& rank_addrs);

// One ordered pair's line: how src's send connection to dst went (direct over which cable, or
// relayed via whom) and where dst's receive connection from src arrived. `src_if`/`dst_if` name
// the local interfaces of the two ends ("" when unknown).
std::string describe_pair_route(int src, int dst, const ConnectionRoute& send,
                                const std::string& src_if, const ConnectionRoute& recv,
                                const std::string& dst_if,
                                const std::vector<std::vector<std::string>>& rank_addrs);

}  // namespace mesh::bench
