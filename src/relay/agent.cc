// SPDX-License-Identifier: Apache-2.0
#include "relay/agent.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>

#include "relay/retention.h"
#include "relay/splice.h"
#include "util/clock.h"
#include "util/device_binding.h"
#include "util/log.h"

namespace mesh::relay {

namespace {

constexpr int64_t kBindRetryMs = 1000;
constexpr int64_t kRequestTimeoutMs = 10000;  // an accepted socket must send its request by then
// Routes are given out only this long after the agent bound its port: beacons travel one cable
// per interval, so a ring or line of a few hosts has then seen every equal-cost path.
constexpr int64_t kSettleMs = 2500;
constexpr int64_t kWarnEveryMs = 10000;
constexpr int kMaxBeaconsPerSecond = 20;

uint32_t seq_floor() {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return static_cast<uint32_t>(ms / 10);
}

// Where a beacon sent from `a` goes: the other end of a /30 or /31, else the subnet broadcast.
std::vector<uint32_t> beacon_targets(const Ipv4Prefix& a) {
  const uint32_t mask = netmask(a.prefix), net = a.addr & mask;
  if (a.prefix == 32) return {};
  if (a.prefix == 31) return {a.addr ^ 1u};
  if (a.prefix == 30) {
    const uint32_t other = (a.addr == net + 1) ? net + 2 : net + 1;
    return {other};
  }
  return {net | ~mask};
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Beacons share the cables with relayed TCP: on a saturated cable they must not wait behind it
// (docs/relay.md, "Timers"). DSCP CS6 (network control) for switches and NICs that honour it,
// then SO_PRIORITY 6 for this host's queueing disciplines (after IP_TOS, which may set the
// priority itself; 6 is the highest allowed without CAP_NET_ADMIN). Neither is needed for
// correctness: a failure is logged once, at INFO.
void set_beacon_priority(int fd, const std::string& ifname) {
  static std::atomic<bool> logged{false};
  const int tos = 0xc0;  // DSCP 48 (CS6) << 2
  const int prio = 6;
  const char* what = nullptr;
  int err = 0;
  if (setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) != 0) {
    what = "IP_TOS CS6";
    err = errno;
  }
  if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, sizeof(prio)) != 0) {
    what = "SO_PRIORITY 6";
    err = errno;
  }
  if (what != nullptr && !logged.exchange(true)) {
    MESH_INFO(NCCL_INIT | NCCL_NET,
              "relay: cannot set %s on the beacon socket of %s (%s): beacons go at normal "
              "priority and may queue behind relayed traffic",
              what, ifname.c_str(), errno_text(err).c_str());
  }
}

bool set_epoll(int ep, int op, int fd, uint32_t events, void* ptr) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = ptr;
  return epoll_ctl(ep, op, fd, &ev) == 0;
}

// Descriptors of a process with this soft limit that relaying leaves to everything else
// (pairs_for_fd_limit says why).
uint64_t fd_reserve(uint64_t soft_limit) {
  return std::max<uint64_t>(512, soft_limit / 2);
}

}  // namespace

struct Agent::Target {
  enum class Kind { kWake, kListener, kUdp, kUp, kDown, kSplice, kLocalListener, kLocal };
  Kind kind = Kind::kWake;
  int fd = -1;
  Pending* pending = nullptr;
  Box* box = nullptr;
  int side = 0;
};

// One relayed socket pair and its two epoll targets.
struct Agent::Box {
  std::unique_ptr<Splice> splice;
  Target targets[2];
  uint32_t events[2] = {0, 0};
  std::string what;
  bool dead = false;
};

struct Agent::Pending {
  UniqueFd up, down;
  Target up_t, down_t;
  uint8_t buf[kRequestSize] = {};
  size_t got = 0;
  RelayRequest req;
  bool have_request = false;
  bool last_hop = false;     // this host is the destination's: connecting to its listener
  bool await_reply = false;  // not the last hop: reading the next agent's answer
  bool down_relay = false;   // RDMA, not next to the destination: the next hop forwards too
  uint8_t reply[kRelayReplySize] = {};
  size_t reply_got = 0;
  bool dead = false;
  int64_t deadline_ms = 0;
  uint32_t source = 0;                     // upstream peer's address (pending_per_source_)
  std::string from;                        // upstream peer "addr:port"
  std::string to;                          // onward "addr:port"
  uint32_t down_local = 0, down_peer = 0;  // the onward socket's addresses
};

size_t pairs_for_fd_limit(uint64_t soft_limit, bool* below_minimum) {
  // The agent runs inside a rank's process (unless nccl-mesh-relayd runs), whose soft limit is
  // usually the default 1024. NCCL's own sockets share that limit: a host runs 8 ranks, each
  // rank's process connects to many peers over several channels with 1 + NCCL_MESH_TCP_STREAMS
  // sockets per connection, plus CUDA, verbs and the handshake service. Relaying must never take
  // the descriptors those need (the former floor of 512 pairs, 3072 descriptors, ran a
  // 1024-descriptor process out of them after 166 pairs), so it gets at most half the limit, and
  // never the first 512 descriptors.
  const uint64_t reserve = fd_reserve(soft_limit);
  const uint64_t usable = soft_limit > reserve ? (soft_limit - reserve) / 6 : 0;
  if (below_minimum != nullptr) *below_minimum = usable < kMinPairs;
  return static_cast<size_t>(std::clamp<uint64_t>(usable, kMinPairs, kMaxPairs));
}

size_t pending_per_source(size_t max_pairs) {
  // Without a share per source, one address could hold every pending slot (they count against
  // the pairs cap) for kRequestTimeoutMs at a time by opening sockets to the relay port and
  // sending nothing, and nobody else would be relayed. A quarter, as the handshake service's
  // admission queue gives a source: at least three other sources always fit beside one at its
  // share (a host has 2-4 cables: its neighbours' agents, one address per cable, and its own
  // address, from which standby processes hand over their sockets). A request is pending for
  // one round trip plus an onward connect (milliseconds on a cable), so even a neighbour that
  // relays hundreds of sockets has few pending at any instant: at the default fd limit (85
  // pairs) a source may have 21 pending, at the service's 4096 pairs 1024; a burst beyond the
  // share is answered "busy" and its connectors retry within their connect timeout.
  return std::max<size_t>(1, max_pairs / 4);
}

std::string agent_socket_name(const AgentConfig& config) {
  uint32_t scope = 0;
  if (config.bind_interface_addresses) {
    std::vector<Ipv4Prefix> addrs;
    for (const auto& i : config.interfaces) addrs.push_back(i.addr);
    scope = host_id_of(addrs);
  }
  return local_socket_name(config.port, scope);
}

Agent::Agent() = default;
Agent::~Agent() {
  stop();
}

bool Agent::start(const AgentConfig& config, std::string* why) {
  if (running()) return true;
  config_ = config;
  if (config_.max_pairs == 0) {
    rlimit l{};
    getrlimit(RLIMIT_NOFILE, &l);
    const uint64_t soft = l.rlim_cur == RLIM_INFINITY ? ~0ull : l.rlim_cur;
    bool below_minimum = false;
    config_.max_pairs = pairs_for_fd_limit(soft, &below_minimum);
    if (below_minimum) {
      // Once per start: the cap holds for the agent's life, and every busy answer WARNs anyway.
      MESH_WARN(
          "relay: this process's soft RLIMIT_NOFILE is %llu descriptors: after the %zu left to "
          "the rest of the process, relaying through this host is limited to %zu socket pairs "
          "(6 descriptors each) and may run the process out of descriptors; raise the limit "
          "before the process starts (ulimit -n, LimitNOFILE= for nccl-mesh-relayd)",
          static_cast<unsigned long long>(soft), static_cast<size_t>(fd_reserve(soft)),
          config_.max_pairs);
    }
  }
  std::vector<Ipv4Prefix> addrs;
  for (const auto& i : config_.interfaces) addrs.push_back(i.addr);
  if (addrs.empty()) {
    *why = "no mesh interface";
    return false;
  }
  state_ = std::make_unique<LinkState>(addrs, seq_floor());
  state_->set_key(config_.cluster_key);
  self_id_ = state_->self_id();
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid()) {
    *why = "epoll/eventfd: " + errno_text(errno);
    return false;
  }
  auto t = std::make_unique<Target>();
  t->kind = Target::Kind::kWake;
  t->fd = wake_.get();
  set_epoll(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), EPOLLIN, t.get());
  targets_.push_back(std::move(t));
  stop_ = false;
  started_ms_ = monotonic_ms();
  try_bind();
  thread_ = std::thread([this] { loop(); });
  return true;
}

void Agent::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
  thread_.join();
  for (auto& [p, box] : boxes_) box->splice->reset();
  boxes_.clear();
  pending_.clear();
  pending_per_source_.clear();
  listeners_.clear();
  udp_recv_.clear();
  udp_send_.clear();
  local_clients_.clear();
  local_.reset();
  registry_ = Registry();
  targets_.clear();
  retired_.clear();
  epoll_.reset();
  wake_.reset();
  bound_ = false;
  bound_ms_ = 0;
  npairs_ = 0;
  accept_pause_.reset();
}

bool Agent::try_bind() {
  last_bind_try_ms_ = monotonic_ms();
  // Only the mesh interfaces' addresses (never 0.0.0.0: the management network and every other
  // interface have no business with the relay port), and for UDP also their subnets' broadcast
  // addresses (beacons on subnets wider than /30 are broadcast). The first process to bind them
  // all (and the local socket) is the host's agent.
  std::vector<uint32_t> addrs, bcast;
  std::set<uint32_t> seen;
  for (const auto& i : config_.interfaces) {
    if (seen.insert(i.addr.addr).second) addrs.push_back(i.addr.addr);
  }
  for (const auto& i : config_.interfaces) {
    if (i.addr.prefix >= 30) continue;
    const uint32_t b = i.addr.addr | ~netmask(i.addr.prefix);
    if (seen.insert(b).second) bcast.push_back(b);
  }
  std::vector<UniqueFd> tcp, udp;
  auto taken = [&](uint32_t a, const char* what) {
    if (bound_ms_ == 0 && last_bind_try_ms_ - started_ms_ < kBindRetryMs) {
      MESH_INFO(NCCL_INIT | NCCL_NET,
                "relay: %s on %s is taken (%s): another plugin process (or nccl-mesh-relayd) on "
                "this host is its relay agent; this one stands by and takes over if it goes",
                what, a == 0 ? "the local socket" : format_ipv4(a).c_str(),
                errno_text(errno).c_str());
    }
    return false;
  };
  for (uint32_t a : addrs) {
    UniqueFd l(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    UniqueFd u(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!l.valid() || !u.valid()) return false;
    const int one = 1;
    // SO_REUSEADDR on the listener only lets it bind over TIME_WAIT leftovers; Linux still
    // refuses a second listener on the port. Never on the UDP socket (that would share it).
    setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const sockaddr_in sa = make_sockaddr(a, config_.port);
    if (bind(l.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0 ||
        listen(l.get(), 128) != 0 ||
        bind(u.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
      return taken(a, "the relay port");
    }
    tcp.push_back(std::move(l));
    udp.push_back(std::move(u));
  }
  for (uint32_t b : bcast) {
    UniqueFd u(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    const sockaddr_in sa = make_sockaddr(b, config_.port);
    if (!u.valid() || bind(u.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0)
      return taken(b, "the relay port (broadcast)");
    udp.push_back(std::move(u));
  }
  UniqueFd local(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  {
    const std::string name = agent_socket_name(config_);
    sockaddr_un un{};
    const socklen_t len = make_unix_address(name, &un);
    if (!local.valid() || bind(local.get(), reinterpret_cast<const sockaddr*>(&un), len) != 0 ||
        listen(local.get(), 64) != 0)
      return taken(0, "the local socket");
  }
  {
    auto t = std::make_unique<Target>();
    t->kind = Target::Kind::kLocalListener;
    t->fd = local.get();
    set_epoll(epoll_.get(), EPOLL_CTL_ADD, local.get(), EPOLLIN, t.get());
    targets_.push_back(std::move(t));
    local_ = std::move(local);
  }
  for (size_t i = 0; i < config_.interfaces.size(); ++i) {
    const Ipv4Prefix& a = config_.interfaces[i].addr;
    UniqueFd s(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) continue;
    const int one = 1;
    setsockopt(s.get(), SOL_SOCKET, SO_BROADCAST, &one, sizeof(one));
    set_beacon_priority(s.get(), config_.interfaces[i].name);
    bind_to_rail_device(s.get(), a.addr);  // a no-op unless another interface shares the subnet
    const sockaddr_in sa = make_sockaddr(a.addr, 0);
    if (bind(s.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) continue;
    udp_send_.emplace_back(std::move(s), i);
  }
  for (auto& l : tcp) {
    auto t = std::make_unique<Target>();
    t->kind = Target::Kind::kListener;
    t->fd = l.get();
    set_epoll(epoll_.get(), EPOLL_CTL_ADD, l.get(), EPOLLIN, t.get());
    targets_.push_back(std::move(t));
    listeners_.push_back(std::move(l));
  }
  for (auto& u : udp) {
    auto t = std::make_unique<Target>();
    t->kind = Target::Kind::kUdp;
    t->fd = u.get();
    set_epoll(epoll_.get(), EPOLL_CTL_ADD, u.get(), EPOLLIN, t.get());
    targets_.push_back(std::move(t));
    udp_recv_.push_back(std::move(u));
  }
  bound_ms_ = monotonic_ms();
  next_beacon_ms_ = 0;
  bound_ = true;
  std::string mine;
  for (const auto& i : config_.interfaces)
    mine += (mine.empty() ? "" : ", ") + i.name + " " + format_prefix(i.addr);
  MESH_INFO(
      NCCL_INIT | NCCL_NET, "relay: this process is %s on port %u of %s (local socket @%s)",
      config_.bind_interface_addresses ? "a relay agent of its own" : "the host's relay agent",
      config_.port, mine.c_str(), agent_socket_name(config_).c_str() + 1);
  return true;
}

void Agent::warn_limited(const std::string& key, const std::string& text, int64_t now) {
  auto it = warned_.find(key);
  if (it != warned_.end() && now - it->second < kWarnEveryMs) return;
  warned_[key] = now;
  MESH_WARN("relay: %s", text.c_str());
}

std::set<uint32_t> Agent::held_neighbours(int64_t now) {
  std::vector<HostEntry> silent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    silent = state_->silent_neighbours(now);
  }
  std::set<uint32_t> held, silent_ids;
  if (!silent.empty()) {
    // This host's own state only (relay/retention.h), read outside the mutex: first_hop() on
    // NCCL's threads never waits for these system calls.
    std::vector<LocalCable> cables;
    for (const auto& itf : config_.interfaces)
      cables.push_back({itf.addr, interface_has_carrier(itf.name)});
    std::set<uint32_t> peers;
    std::string why;
    if (!relay_socket_peers(config_.port, &peers, &why) && !warned_socket_table_) {
      warned_socket_table_ = true;
      MESH_INFO(NCCL_NET,
                "relay: cannot read this host's TCP socket table (%s): a neighbour whose beacons "
                "stop leaves the graph after %lld ms even while connections run through it",
                why.c_str(), static_cast<long long>(kNeighbourTtlMs));
    }
    for (const HostEntry& n : silent) {
      silent_ids.insert(n.id);
      if (!holds_neighbour(n, cables, peers)) continue;
      held.insert(n.id);
      const auto [at, first] = retained_.emplace(n.id, describe_host(n));
      if (first) {
        MESH_INFO(NCCL_NET,
                  "relay: no beacon from neighbour %s for over %lld ms, but its cable has "
                  "carrier and relayed connections run through it: kept in the graph (at most "
                  "%lld s without a beacon)",
                  at->second.c_str(), static_cast<long long>(kNeighbourTtlMs),
                  static_cast<long long>(kRetainMaxMs / 1000));
      }
    }
  }
  for (auto it = retained_.begin(); it != retained_.end();) {
    const uint32_t id = it->first;
    if (held.count(id) != 0) {
      ++it;
      continue;
    }
    MESH_INFO(NCCL_NET, "relay: neighbour %s is no longer held: %s", it->second.c_str(),
              silent_ids.count(id) != 0
                  ? "its cable lost carrier or no relayed connection runs through it now; it "
                    "leaves the graph 2 s after the last moment it was held"
                  : "its beacons came back, or 60 s passed without one (then it leaves the "
                    "graph 2 s later)");
    it = retained_.erase(it);
  }
  return held;
}

void Agent::send_beacons(int64_t now) {
  std::vector<uint8_t> bytes;
  std::string why;
  bool truncated = false;
  const std::set<uint32_t> held = held_neighbours(now);
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_->expire(now, held);
    Beacon b = state_->next_beacon(seq_floor(), &truncated);
    if (!encode_beacon(b, &bytes, &why)) {
      warn_limited("encode", "cannot build a beacon: " + why, now);
      return;
    }
  }
  if (truncated && !warned_truncated_) {
    warned_truncated_ = true;
    MESH_WARN(
        "relay: the cable graph has more than %zu hosts or a host more than %zu neighbours; "
        "beacons carry only the first ones, so some routes may be missing",
        kMaxBeaconHosts, kMaxNeighbours);
  }
  for (auto& [fd, idx] : udp_send_) {
    for (uint32_t to : beacon_targets(config_.interfaces[idx].addr)) {
      const sockaddr_in sa = make_sockaddr(to, config_.port);
      sendto(fd.get(), bytes.data(), bytes.size(), MSG_DONTWAIT,
             reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
    }
  }
}

void Agent::read_beacons(int fd, int64_t now) {
  std::vector<uint8_t> buf(kMaxBeaconSize + 1);
  for (int i = 0; i < 256; ++i) {
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    const ssize_t n = recvfrom(fd, buf.data(), buf.size(), MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) return;
    const uint32_t source = ntohl(from.sin_addr.s_addr);
    // At most kMaxBeaconsPerSecond from one address: a neighbour (or anything on a mesh
    // subnet) flooding the port costs a bounded amount of decoding, and the table never churns.
    if (beacon_rate_.size() > 1024) beacon_rate_.clear();  // bounded: spoofed sources
    auto& [second, count] = beacon_rate_[source];
    if (now / 1000 != second) {
      second = now / 1000;
      count = 0;
    }
    if (++count > kMaxBeaconsPerSecond) {
      warn_limited("beacon-rate",
                   "dropping beacons from " + format_ipv4(source) + ": more than " +
                       std::to_string(kMaxBeaconsPerSecond) + " a second (an agent sends 2)",
                   now);
      continue;
    }
    Beacon b;
    std::string why;
    if (!decode_beacon(buf.data(), static_cast<size_t>(n), &b, &why)) {
      warn_limited("beacon",
                   "dropped a datagram from " + format_ipv4(source) +
                       " on the relay "
                       "port: " +
                       why + " (further ones are counted silently for 10 s)",
                   now);
      continue;
    }
    size_t dropped = 0;
    bool ok;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ok = state_->receive(b, source, now, &why, &dropped);
    }
    if (!ok) {
      warn_limited("beacon-source", "ignored a beacon: " + why, now);
    } else if (dropped > 0) {
      warn_limited("beacon-entries",
                   "dropped " + std::to_string(dropped) + " entr" + (dropped == 1 ? "y" : "ies") +
                       " of a beacon from " + format_ipv4(source) +
                       (config_.cluster_key.empty()
                            ? ": they claim addresses of this host or of the sender"
                            : ": not signed with the cluster key, or claiming addresses of this "
                              "host or of the sender"),
                   now);
    }
  }
}

HopStatus Agent::first_hop(const std::vector<Ipv4Prefix>& dest, uint16_t stream, FirstHop* out,
                           std::string* why, int64_t since_ms) {
  if (!bound_) {
    if (config_.bind_interface_addresses || config_.interfaces.empty()) {
      *why = "this process's relay agent could not bind port " + std::to_string(config_.port) +
             " on its addresses (another process holds it?)";
      return HopStatus::kWait;
    }
    // Another process of this host is the agent: hand the socket to it.
    out->local = config_.interfaces[0].addr;
    out->peer_addr = config_.interfaces[0].addr.addr;
    out->port = config_.port;
    out->route = format_ipv4(out->peer_addr);
    out->path = "through this host's relay agent (nccl-mesh-relayd or another plugin process)";
    out->via_local_agent = true;
    return HopStatus::kOk;
  }
  const int64_t bound_ms = bound_ms_.load();  // set before bound_ became true
  if (monotonic_ms() - bound_ms < kSettleMs) {
    *why = "the relay agent is still learning the cable graph";
    return HopStatus::kWait;
  }
  Route r;
  std::vector<HostEntry> hosts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hosts = state_->hosts();
  }
  if (!find_route(hosts, self_id_, dest, config_.pins, &r, why)) {
    // A missing route is a failure only at the connect's deadline (NCCL_MESH_CONNECT_TIMEOUT_MS):
    // a relay host may start late, or beacons be lost behind a saturated cable for a while.
    return monotonic_ms() - std::max(bound_ms, since_ms) < config_.route_wait_ms ? HopStatus::kWait
                                                                                 : HopStatus::kFail;
  }
  if (r.hops > kDefaultHopLimit + 1) {
    *why = "the route is " + std::to_string(r.hops) + " cables long (at most " +
           std::to_string(kDefaultHopLimit + 1) + ")";
    return HopStatus::kFail;
  }
  const NextHop& hop = pick_next_hop(r, stream);
  out->local = hop.local;
  out->peer_addr = hop.peer_addr;
  out->port = config_.port;
  std::map<uint32_t, const HostEntry*> by_id;
  for (const HostEntry& h : hosts) by_id[h.id] = &h;
  std::string path;
  for (size_t i = 1; i + 1 < r.path.size(); ++i) {
    path += (path.empty() ? "" : " -> ") + describe_host(*by_id[r.path[i]]);
  }
  out->route = format_ipv4(hop.peer_addr);
  out->cables = r.hops;
  out->path = std::to_string(r.hops) + " cables, " + std::to_string(r.next.size()) +
              " equal-cost first hop(s); one shortest path relays through " + path;
  return HopStatus::kOk;
}

HopStatus Agent::route_for_rdma(const std::vector<Ipv4Prefix>& dest, uint16_t stream, FirstHop* out,
                                std::string* why, int64_t since_ms) {
  if (bound_ || local_client_ == nullptr) return first_hop(dest, stream, out, why, since_ms);
  RouteAnswer a;
  if (!local_client_->query(dest, stream, monotonic_ms() - since_ms, &a)) {
    *why = "asking this host's relay agent for the route (local socket)";
    // Without an answer by the connect's deadline the plan fails like a missing route.
    return monotonic_ms() - since_ms < config_.route_wait_ms ? HopStatus::kWait : HopStatus::kFail;
  }
  if (a.status != static_cast<uint8_t>(HopStatus::kOk)) {
    *why = a.why;
    return static_cast<HopStatus>(a.status);
  }
  out->local = a.local;
  out->peer_addr = a.peer;
  out->port = a.port;
  out->cables = a.cables;
  out->route = format_ipv4(a.peer);
  out->path = a.path + " (route from this host's relay agent)";
  out->via_local_agent = false;
  return HopStatus::kOk;
}

void Agent::loop() {
  Splice::block_sigpipe_in_this_thread();
  epoll_event evs[64];
  while (!stop_) {
    int64_t now = monotonic_ms();
    if (!bound_ && now - last_bind_try_ms_ >= kBindRetryMs) try_bind();
    if (accept_pause_.resume_due(now)) set_listeners_watched(true);
    if (bound_ && now >= next_beacon_ms_) {
      send_beacons(now);
      next_beacon_ms_ = now + kBeaconIntervalMs;
    }
    if (config_.before_wait) config_.before_wait();
    const int n = epoll_wait(epoll_.get(), evs, 64, 100);
    now = monotonic_ms();
    std::vector<Box*> touched;
    for (int i = 0; i < n; ++i) {
      auto* t = static_cast<Target*>(evs[i].data.ptr);
      switch (t->kind) {
        case Target::Kind::kWake: {
          uint64_t v;
          (void)!read(t->fd, &v, sizeof(v));
          break;
        }
        case Target::Kind::kListener:
          accept_requests(t->fd);
          break;
        case Target::Kind::kUdp:
          read_beacons(t->fd, now);
          break;
        case Target::Kind::kLocalListener:
          accept_local(t->fd);
          break;
        case Target::Kind::kLocal:
          read_local(t->fd);
          break;
        case Target::Kind::kUp:
        case Target::Kind::kDown:
          if (!t->pending->dead)
            on_pending(t->pending, t->kind == Target::Kind::kDown, evs[i].events, now);
          break;
        case Target::Kind::kSplice:
          if (!t->box->dead) on_splice(t);
          break;
      }
    }
    expire(now);
    // Only now, with no event of the batch left to refer to them (agent.h, pending_).
    std::erase_if(boxes_, [](const auto& b) { return b.second->dead; });
    std::erase_if(pending_, [this](const auto& p) {
      if (!p.second->dead) return false;
      const auto count = pending_per_source_.find(p.second->source);
      if (count != pending_per_source_.end() && --count->second == 0)
        pending_per_source_.erase(count);
      return true;
    });
    retired_.clear();
  }
}

void Agent::accept_local(int fd) {
  if (accept_pause_.paused()) return;  // paused earlier in this event batch
  for (int i = 0; i < 64; ++i) {
    UniqueFd c(accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c.valid()) {
      if (accept_failed(errno, monotonic_ms())) continue;
      return;
    }
    accepting_again();
    ucred cred{};
    socklen_t cl = sizeof(cred);
    if (getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
        !peer_allowed(cred.uid, cred.gid, geteuid(), config_.allowed_gid)) {
      warn_limited(
          "local-user",
          "refused a process of user " + std::to_string(cred.uid) + " (pid " +
              std::to_string(cred.pid) + ") on the local socket: only this user, root" +
              (config_.allowed_gid >= 0 ? " and group " + std::to_string(config_.allowed_gid)
                                        : std::string()) +
              " may register listeners",
          monotonic_ms());
      continue;
    }
    if (local_clients_.size() >= 4096) {
      warn_limited("local-cap", "refused a local client: 4096 plugin processes are registered",
                   monotonic_ms());
      continue;
    }
    auto t = std::make_unique<Target>();
    t->kind = Target::Kind::kLocal;
    t->fd = c.get();
    set_epoll(epoll_.get(), EPOLL_CTL_ADD, c.get(), EPOLLIN | EPOLLRDHUP, t.get());
    const int key = c.get();
    local_clients_[key] = LocalClient{std::move(c), t.get(), cred.uid, cred.pid};
    targets_.push_back(std::move(t));
    MESH_INFO(NCCL_NET, "relay: plugin process %d registers its listeners here",
              static_cast<int>(cred.pid));
  }
}

void Agent::read_local(int fd) {
  auto it = local_clients_.find(fd);
  if (it == local_clients_.end()) return;
  for (int i = 0; i < 256; ++i) {
    uint8_t m[64];
    const ssize_t n = recv(fd, m, sizeof(m), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    Registration r;
    std::string why;
    RouteQuery q;
    if (n > 0 && m[0] == 3 && decode_route_query(m, static_cast<size_t>(n), &q, &why)) {
      // A standby's route query: answered from this agent's graph, on the same socket.
      FirstHop hop;
      RouteAnswer a;
      a.id = q.id;
      a.status = static_cast<uint8_t>(
          first_hop(q.dest, q.stream, &hop, &a.why, monotonic_ms() - q.age_ms));
      a.cables = static_cast<uint16_t>(hop.cables);
      a.local = hop.local;
      a.port = hop.port;
      a.peer = hop.peer_addr;
      a.path = hop.path;
      const std::vector<uint8_t> b = encode_route_answer(a);
      (void)!send(fd, b.data(), b.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    if (n <= 0 || !decode_registration(m, static_cast<size_t>(n), &r, &why)) {
      if (n > 0) warn_limited("local-bad", "closed a local client: " + why, monotonic_ms());
      // The process exited (or misbehaved): its listeners are gone with it.
      registry_.drop_client(fd);
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
      Target* t = it->second.target;
      for (auto& owned : targets_) {
        if (owned.get() == t) retired_.push_back(std::move(owned));
      }
      std::erase_if(targets_, [](const auto& p) { return p == nullptr; });
      local_clients_.erase(it);
      return;
    }
    if (!r.add) {
      registry_.remove(fd, r.tag);
    } else if (!registration_allowed(r, it->second.uid, it->second.pid)) {
      continue;
    } else if (!registry_.add(fd, r, &why)) {
      warn_limited("local-reg", "a registration was refused: " + why, monotonic_ms());
    }
  }
}

bool Agent::registration_allowed(const Registration& r, uid_t uid, pid_t pid) {
  std::vector<uint32_t> agent_addrs, host_addrs;
  for (const auto& itf : config_.interfaces) agent_addrs.push_back(itf.addr.addr);
  for (const LocalAddress& a : read_local_addresses()) host_addrs.push_back(a.addr.addr);
  const std::vector<uint32_t> addrs = registration_addresses(agent_addrs, host_addrs);
  std::string why;
  const ListenerCheck c = check_listener_now(r.port, uid, addrs, &why);
  if (c == ListenerCheck::kOk) return true;
  if (c == ListenerCheck::kUnreadable) {
    // Fail open: refusing would stop all relaying to this host, which worked before the check
    // existed, for want of a kernel module (or under qemu-user, which does not carry
    // NETLINK_SOCK_DIAG); the check only narrows what an admitted local process could expose
    // (it could run a proxy of its own on a port of its own). An INFO once per process, not a
    // WARN: nothing is wrong with the job, and docs/relay.md tells the operator.
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      MESH_INFO(NCCL_NET | NCCL_INIT,
                "relay: registrations are accepted unchecked: %s; load the tcp_diag module "
                "(modprobe tcp_diag) so that a process can register only its own listeners",
                why.c_str());
    }
    return true;
  }
  warn_limited("local-listener-" + std::to_string(static_cast<int>(c)),
               "refused the registration of port " + std::to_string(r.port) + " by user " +
                   std::to_string(uid) + " (pid " + std::to_string(pid) +
                   ") on the local socket: " + why +
                   "; a process may register only a port on which a TCP listener of its "
                   "own user listens at one of this host's addresses" +
                   " (relay requests for it are refused \"not registered\")",
               monotonic_ms());
  return false;
}

bool Agent::admit_terminal(Pending* p, uint32_t local, int64_t now) {
  const RelayRequest& req = p->req;
  const Registry::Entry* e = registry_.find(req.tag);
  if (e == nullptr || e->port != req.port) {
    finish_pending(p, ReplyCode::kNotRegistered,
                   "refused a relay request for port " + std::to_string(req.port) +
                       ": no plugin listener of this host is registered for that port and "
                       "handle (a request for a port that is not an nccl-mesh listener, or for "
                       "a closed one)");
    return false;
  }
  const int64_t skew = static_cast<int64_t>(req.time_ms) - wall_ms();
  if (!verify_proof(p->buf, e->key)) {
    finish_pending(p, ReplyCode::kBadProof,
                   "refused a relay request for port " + std::to_string(req.port) +
                       ": its proof of the listener's handle does not verify");
    return false;
  }
  if (skew > kProofWindowMs || skew < -kProofWindowMs) {
    finish_pending(p, ReplyCode::kBadProof,
                   "refused a relay request for port " + std::to_string(req.port) +
                       ": its time is " + std::to_string(skew / 1000) +
                       " s from this host's clock (more than " +
                       std::to_string(kProofWindowMs / 1000) +
                       " s: a replay, or the hosts' clocks disagree: run NTP)");
    return false;
  }
  if (!replays_.insert(req.proof, now, 2 * kProofWindowMs)) {
    finish_pending(p, ReplyCode::kBadProof,
                   "refused a relay request for port " + std::to_string(req.port) +
                       ": a replay of a request already carried");
    return false;
  }
  // Checked at registration, and again here at the address the agent connects to (only for a
  // request with a valid proof: one bounded dump): the registrant may have closed its listener
  // since, and another user's service bound the port.
  const auto client = local_clients_.find(e->client);
  std::string why = "its registrant is gone";
  const ListenerCheck found = client == local_clients_.end()
                                  ? ListenerCheck::kNone
                                  : check_listener_now(req.port, client->second.uid, {local}, &why);
  // kUnreadable: accepted unchecked, as at registration (registration_allowed warned).
  if (found != ListenerCheck::kOk && found != ListenerCheck::kUnreadable) {
    finish_pending(p, ReplyCode::kNotRegistered,
                   "refused a relay request for port " + std::to_string(req.port) +
                       ": its registered listener is not there any more (" + why + ")");
    return false;
  }
  return true;
}

void Agent::on_down_reply(Pending* p) {
  for (;;) {
    const ssize_t n =
        recv(p->down.get(), p->reply + p->reply_got, sizeof(p->reply) - p->reply_got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      finish_pending(p, ReplyCode::kConnectFailed,
                     "the next relay agent at " + p->to + " closed without answering");
      return;
    }
    p->reply_got += static_cast<size_t>(n);
    if (p->reply_got == sizeof(p->reply)) break;
  }
  ReplyCode code;
  if (!decode_relay_reply(p->reply, &code)) {
    finish_pending(p, ReplyCode::kConnectFailed,
                   "the next relay port " + p->to + " answered bytes that are not a relay reply");
    return;
  }
  if (code != ReplyCode::kOk) {
    // Passed back unchanged: the connector retries or fails as if it had asked itself.
    finish_pending(p, code, "");
    return;
  }
  if (!p->req.rdma) {
    start_splice(p);
    return;
  }
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->up.get(), nullptr);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->down.get(), nullptr);
  set_tcp_options(p->up.get(), config_.user_timeout_ms);
  set_tcp_options(p->down.get(), config_.user_timeout_ms);
  hand_to_rdma(p);
}

void Agent::accept_requests(int fd) {
  if (accept_pause_.paused()) return;  // paused earlier in this event batch
  for (int i = 0; i < 64; ++i) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    UniqueFd s(accept4(fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!s.valid()) {
      if (accept_failed(errno, monotonic_ms())) continue;
      return;
    }
    accepting_again();
    // Only sockets that arrived on a mesh address: the management network has no business here.
    sockaddr_in local{};
    len = sizeof(local);
    getsockname(s.get(), reinterpret_cast<sockaddr*>(&local), &len);
    const uint32_t la = ntohl(local.sin_addr.s_addr);
    bool mesh = false;
    for (const auto& itf : config_.interfaces) mesh = mesh || itf.addr.addr == la;
    if (!mesh) continue;
    if (npairs_.load() + pending_.size() >= config_.max_pairs) {
      uint8_t r[kRelayReplySize];
      encode_relay_reply(ReplyCode::kBusy, r);
      (void)!send(s.get(), r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
      // The usual cause is the descriptor limit the cap was sized from (pairs_for_fd_limit):
      // a rank's process at ulimit -n 1024 relays 85 sockets, 17 TCP-relayed connections.
      warn_limited("busy",
                   "refused a relay request from " + format_endpoint(peer) + ": " +
                       std::to_string(config_.max_pairs) +
                       " relayed sockets are open, as many as this process carries (sized from "
                       "its descriptor limit, 6 descriptors each; a TCP-relayed connection "
                       "takes 1 + NCCL_MESH_TCP_STREAMS); answered busy, the connector retries. "
                       "For more, raise the limit before the process starts (ulimit -n of the "
                       "rank, LimitNOFILE= of nccl-mesh-relayd)",
                   monotonic_ms());
      continue;
    }
    const uint32_t source = ntohl(peer.sin_addr.s_addr);
    const size_t share = pending_per_source(config_.max_pairs);
    size_t& from_source = pending_per_source_[source];
    if (from_source >= share) {
      uint8_t r[kRelayReplySize];
      encode_relay_reply(ReplyCode::kBusy, r);
      (void)!send(s.get(), r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
      warn_limited("busy-source",
                   "refused a relay request from " + format_endpoint(peer) + ": " +
                       std::to_string(from_source) + " requests from " + format_ipv4(source) +
                       " are pending already, at most " + std::to_string(share) +
                       " pending per source address (a quarter of the " +
                       std::to_string(config_.max_pairs) +
                       " relayed sockets this agent carries); answered busy, the connector "
                       "retries (a burst of connects, or a flood of sockets that send no request)",
                   monotonic_ms());
      continue;
    }
    ++from_source;
    auto p = std::make_unique<Pending>();
    p->source = source;
    p->from = format_endpoint(peer);
    p->deadline_ms = monotonic_ms() + kRequestTimeoutMs;
    p->up = std::move(s);
    p->up_t.kind = Target::Kind::kUp;
    p->up_t.fd = p->up.get();
    p->up_t.pending = p.get();
    p->down_t.kind = Target::Kind::kDown;
    p->down_t.pending = p.get();
    set_epoll(epoll_.get(), EPOLL_CTL_ADD, p->up.get(), EPOLLIN | EPOLLRDHUP, &p->up_t);
    Pending* key = p.get();
    pending_[key] = std::move(p);
  }
}

// accept4 failed for want of a descriptor or kernel memory (or with an error that is not about
// one connection). The listeners are level-triggered and the connection stays in the backlog,
// so returning alone would wake this thread again at once: it spun at a whole core for as long
// as the shortage lasted (nccl-mesh-relayd, or a rank's process that is its host's agent, beside
// NCCL's threads), and beacons and splices went on only between failed accepts. Instead the
// relay port's listeners and the local socket leave the epoll set for AcceptPause::kPauseMs (a
// shortage hits them all) and loop() puts them back: relay requests and plugin processes wait in
// the backlogs meanwhile, within their connect timeouts, and are served once descriptors are
// free. The handshake service does the same (handshake/inbound.cc).
bool Agent::accept_failed(int err, int64_t now) {
  const AcceptPause::Next next = accept_pause_.on_error(err, now);
  if (next != AcceptPause::Next::kPause) return next == AcceptPause::Next::kRetry;
  set_listeners_watched(false);
  const std::string advice = accept_error_advice(
      err,
      "each relayed socket pair holds 6 (2 sockets, 2 pipes), and this agent takes up to " +
          std::to_string(config_.max_pairs) + " pairs",
      "relay fewer connections through this host");
  warn_limited("accept",
               "cannot accept relay requests on port " + std::to_string(config_.port) +
                   " or plugin processes on the local socket: " + errno_text(err) + "; " + advice +
                   ". Accepting pauses " + std::to_string(AcceptPause::kPauseMs) +
                   " ms at a time until it works again (requests wait in the listen backlogs up "
                   "to their connect timeout); paused " +
                   std::to_string(accept_pause_.pauses()) +
                   " times so far, this WARN repeats at most every " +
                   std::to_string(kWarnEveryMs / 1000) + " s",
               now);
  return false;
}

void Agent::set_listeners_watched(bool watched) {
  for (const auto& t : targets_) {
    if (t->kind != Target::Kind::kListener && t->kind != Target::Kind::kLocalListener) continue;
    if (watched) {
      set_epoll(epoll_.get(), EPOLL_CTL_ADD, t->fd, EPOLLIN, t.get());
    } else {
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, t->fd, nullptr);
    }
  }
}

void Agent::accepting_again() {
  // warn_limited's window stays: a limit hit over and over warns once.
  if (const uint64_t pauses = accept_pause_.accepted(); pauses != 0) {
    MESH_INFO(NCCL_NET | NCCL_INIT, "relay: accepting again (after %llu pauses)",
              static_cast<unsigned long long>(pauses));
  }
}

void Agent::finish_pending(Pending* p, ReplyCode code, const std::string& why) {
  if (p->up.valid()) {
    uint8_t r[kRelayReplySize];
    encode_relay_reply(code, r);
    (void)!send(p->up.get(), r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->up.get(), nullptr);
    p->up.reset();
  }
  if (p->down.valid()) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->down.get(), nullptr);
    p->down.reset();
  }
  p->dead = true;
  if (code == ReplyCode::kNoRoute) {
    // While beacons converge (a host that started late, lost beacons) a relay may not know a
    // route yet: the connector retries until its deadline and WARNs then, naming the route.
    MESH_INFO(NCCL_NET, "relay: relay request from %s: %s (the connector retries)", p->from.c_str(),
              why.c_str());
  } else if (code != ReplyCode::kOk && !why.empty())
    warn_limited(std::string("refuse-") + std::to_string(static_cast<int>(code)),
                 "relay request from " + p->from + ": " + why, monotonic_ms());
}

void Agent::on_pending(Pending* p, bool downstream, uint32_t events, int64_t now) {
  if (!downstream) {
    if (p->have_request) {
      // The upstream closed or sent early while the onward connect is in progress.
      if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        finish_pending(p, ReplyCode::kConnectFailed, "");
      return;
    }
    for (;;) {
      const ssize_t n = recv(p->up.get(), p->buf + p->got, kRequestSize - p->got, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (n <= 0) {
        finish_pending(p, ReplyCode::kMalformed, "");
        return;
      }
      p->got += static_cast<size_t>(n);
      if (p->got == kRequestSize) break;
    }
    std::string why;
    if (!decode_request(p->buf, &p->req, &why)) {
      finish_pending(p, ReplyCode::kMalformed, "malformed request: " + why);
      return;
    }
    p->have_request = true;
    // Bytes after the request wait in the socket until the splice starts: only a hang-up
    // matters now (level-triggered EPOLLIN would spin while the onward connect is pending).
    set_epoll(epoll_.get(), EPOLL_CTL_MOD, p->up.get(), EPOLLRDHUP, &p->up_t);
    route_request(p, now);
    return;
  }
  if (p->await_reply) {
    on_down_reply(p);
    return;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(p->down.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    finish_pending(p, ReplyCode::kConnectFailed, "connect to " + p->to + ": " + errno_text(err));
    return;
  }
  if (!(events & EPOLLOUT)) return;
  if (!p->last_hop) {
    // The next agent must answer first. Next to the destination, that is the destination host's
    // agent (registration, proof); on a chain, the next relay host (its forwarder for RDMA),
    // once everything beyond it answered. Its refusal goes back to the connector unchanged and
    // both sockets close here. A TCP relay once spliced before that answer: a refused request
    // then held a pair (6 descriptors) until its connector closed, so anyone who reaches the
    // relay port could fill the pair cap with requests that no destination admits.
    uint8_t b[kRequestSize];
    reencode_request(p->buf, static_cast<uint8_t>(p->req.hop_limit - 1), b);
    if (send(p->down.get(), b, sizeof(b), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(sizeof(b))) {
      finish_pending(p, ReplyCode::kConnectFailed, "sending the request to " + p->to + " failed");
      return;
    }
    p->await_reply = true;
    set_epoll(epoll_.get(), EPOLL_CTL_MOD, p->down.get(), EPOLLIN | EPOLLRDHUP, &p->down_t);
    return;
  }
  start_splice(p);
}

void Agent::route_request(Pending* p, int64_t now) {
  const RelayRequest& req = p->req;
  Ipv4Prefix local{};
  uint32_t peer = 0;
  uint16_t port = 0;
  // The destination is this host: the last hop, to a registered listener only.
  for (const Ipv4Prefix& d : req.dest) {
    for (const auto& itf : config_.interfaces) {
      if (peer == 0 && itf.addr.addr == d.addr) {
        local = itf.addr;
        peer = d.addr;
      }
    }
  }
  if (peer != 0) {
    if (!admit_terminal(p, local.addr, now)) return;
    p->last_hop = true;
    port = req.port;
  } else {
    // Next to the destination: its own host's agent (on the shared subnet) is the last hop.
    for (const Ipv4Prefix& d : req.dest) {
      for (const auto& itf : config_.interfaces) {
        if (peer == 0 && itf.addr.prefix == d.prefix && in_subnet(itf.addr, d.addr)) {
          local = itf.addr;
          peer = d.addr;
        }
      }
    }
    if (peer != 0) port = config_.port;
  }
  if (req.rdma && !p->last_hop && !config_.rdma_forward) {
    finish_pending(p, ReplyCode::kNoRdmaRelay,
                   "RDMA relay asked, but this host has no usable RDMA port on the mesh "
                   "interfaces of its relay agent");
    return;
  }
  if (req.hop_limit == 0 && !p->last_hop) {
    finish_pending(p, ReplyCode::kHopLimit, "hop limit reached before the destination");
    return;
  }
  if (peer == 0) {
    // A middle hop: a TCP splice, or a chained RDMA forward (this host's forwarder writes into
    // the next relay host's staging slots, docs/relay.md "RDMA relay").
    Route r;
    std::string why;
    std::vector<HostEntry> hosts;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hosts = state_->hosts();
    }
    if (!find_route(hosts, self_id_, req.dest, {}, &r, &why)) {
      finish_pending(p, ReplyCode::kNoRoute, why);
      return;
    }
    const NextHop& hop = pick_next_hop(r, req.stream);
    local = hop.local;
    peer = hop.peer_addr;
    port = config_.port;
    p->down_relay = req.rdma;
  }
  // The forward writes over this host's next cable: RDMA on the connector's cable alone is not
  // enough (issue 26 item 5, on every cable of a chain: say which cable has none).
  if (req.rdma && !p->last_hop && config_.rdma_usable_at && !config_.rdma_usable_at(local.addr)) {
    std::string name;
    for (const auto& itf : config_.interfaces) {
      if (itf.addr.addr == local.addr) name = itf.name + " ";
    }
    finish_pending(p, ReplyCode::kNoRdmaOnCable,
                   "RDMA relay asked, but this host's cable to the " +
                       std::string(p->down_relay ? "next relay host" : "destination") + " (local " +
                       name + format_ipv4(local.addr) + " -> " + format_ipv4(peer) +
                       ") has no usable RDMA port");
    return;
  }
  p->to = format_ipv4(peer) + ":" + std::to_string(port);
  p->down_local = local.addr;
  p->down_peer = peer;
  p->down.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!p->down.valid()) {
    finish_pending(p, ReplyCode::kBusy, "socket: " + errno_text(errno));
    return;
  }
  bind_to_rail_device(p->down.get(), local.addr);
  defer_port_choice(p->down.get());
  const sockaddr_in la = make_sockaddr(local.addr, 0), pa = make_sockaddr(peer, port);
  if (bind(p->down.get(), reinterpret_cast<const sockaddr*>(&la), sizeof(la)) != 0 ||
      (::connect(p->down.get(), reinterpret_cast<const sockaddr*>(&pa), sizeof(pa)) != 0 &&
       errno != EINPROGRESS)) {
    finish_pending(p, ReplyCode::kConnectFailed, "connect to " + p->to + ": " + errno_text(errno));
    return;
  }
  p->down_t.fd = p->down.get();
  p->deadline_ms = now + config_.connect_timeout_ms;
  set_epoll(epoll_.get(), EPOLL_CTL_ADD, p->down.get(), EPOLLOUT, &p->down_t);
}

void Agent::hand_to_rdma(Pending* p) {
  RdmaHandoff h;
  h.down_local = p->down_local;
  h.down_peer = p->down_peer;
  h.down_relay = p->down_relay;
  h.what = p->from + " -> " + p->to + (p->down_relay ? " (next relay)" : "");
  h.up = std::move(p->up);
  h.down = std::move(p->down);
  const std::string what = h.what;  // the forwarder takes the handoff, its text included
  std::string why;
  if (!config_.rdma_forward(h, &why)) {
    p->up = std::move(h.up);
    p->down = std::move(h.down);
    finish_pending(p, ReplyCode::kBusy, "cannot forward over RDMA: " + why);
    return;
  }
  p->dead = true;
  MESH_INFO(NCCL_NET, "relay: forwarding %s over RDMA (origin host %08x)", what.c_str(),
            p->req.origin);
}

void Agent::start_splice(Pending* p) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->up.get(), nullptr);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->down.get(), nullptr);
  set_tcp_options(p->up.get(), config_.user_timeout_ms);
  set_tcp_options(p->down.get(), config_.user_timeout_ms);
  auto owned = std::make_unique<Box>();
  Box* box = owned.get();
  box->what = "stream " + std::to_string(p->req.stream) + " " + p->from + " -> " + p->to +
              (p->last_hop ? " (destination)" : " (next relay)");
  box->splice =
      std::make_unique<Splice>(std::move(p->up), std::move(p->down), config_.buffer_bytes);
  // The destination's listener was reached (the last hop), or the next agent answered "ok"
  // (on_down_reply): the connector hears "ok" from this agent.
  uint8_t r[kRelayReplySize];
  encode_relay_reply(ReplyCode::kOk, r);
  box->splice->preload(0, r, sizeof(r));
  for (int side = 0; side < 2; ++side) {
    Target& t = box->targets[side];
    t.kind = Target::Kind::kSplice;
    t.fd = box->splice->fd(side);
    t.box = box;
    t.side = side;
    box->events[side] = EPOLLIN | EPOLLRDHUP;
    set_epoll(epoll_.get(), EPOLL_CTL_ADD, t.fd, box->events[side], &t);
  }
  p->dead = true;
  ++npairs_;
  MESH_INFO(NCCL_NET, "relay: carrying %s (origin host %08x)", box->what.c_str(), p->req.origin);
  boxes_[box] = std::move(owned);
  Target* first = &box->targets[0];
  on_splice(first);
}

void Agent::on_splice(Target* t) {
  Box* box = t->box;
  if (!box->splice->pump()) {
    const std::string& err = box->splice->error();
    if (err.empty()) {
      MESH_INFO(NCCL_NET, "relay: %s closed (%llu bytes down, %llu up)", box->what.c_str(),
                static_cast<unsigned long long>(box->splice->bytes(0)),
                static_cast<unsigned long long>(box->splice->bytes(1)));
    } else if (err.find(errno_text(ECONNRESET)) != std::string::npos ||
               err.find(errno_text(EPIPE)) != std::string::npos) {
      // One end reset its socket (a process exited, or its TCP connection failed): passed on.
      MESH_INFO(NCCL_NET, "relay: %s: %s; reset the other end too", box->what.c_str(), err.c_str());
    } else {
      warn_limited("splice", box->what + " failed: " + err + "; both ends were reset",
                   monotonic_ms());
    }
    for (int side = 0; side < 2; ++side) {
      if (box->splice->fd(side) >= 0)
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, box->splice->fd(side), nullptr);
    }
    box->splice->close();  // after an error pump() has already reset both
    box->dead = true;
    --npairs_;
    return;
  }
  for (int side = 0; side < 2; ++side) {
    const uint32_t ev = box->splice->events(side);
    if (ev != box->events[side]) {
      box->events[side] = ev;
      set_epoll(epoll_.get(), EPOLL_CTL_MOD, box->splice->fd(side), ev, &box->targets[side]);
    }
  }
}

void Agent::expire(int64_t now) {
  for (auto& [key, p] : pending_) {
    if (!p->dead && now >= p->deadline_ms)
      finish_pending(p.get(), p->have_request ? ReplyCode::kConnectFailed : ReplyCode::kMalformed,
                     !p->have_request ? "no complete request within 10 s"
                     : p->await_reply ? "the next relay agent at " + p->to + " did not answer"
                                      : "onward connect to " + p->to + " timed out");
  }
}

}  // namespace mesh::relay
