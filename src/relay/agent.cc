// SPDX-License-Identifier: Apache-2.0
#include "relay/agent.h"

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "relay/splice.h"
#include "util/clock.h"
#include "util/device_binding.h"
#include "util/log.h"

namespace mesh::relay {

namespace {

constexpr int64_t kBindRetryMs = 1000;
constexpr int64_t kRequestTimeoutMs = 10000;  // an accepted socket must send its request by then
constexpr int64_t kConvergeMs = 6000;         // after this long, a missing route is an error
// Routes are given out only this long after the agent bound its port: beacons travel one cable
// per interval, so a ring or line of a few hosts has then seen every equal-cost path.
constexpr int64_t kSettleMs = 2500;
constexpr int64_t kWarnEveryMs = 10000;

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

bool set_epoll(int ep, int op, int fd, uint32_t events, void* ptr) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = ptr;
  return epoll_ctl(ep, op, fd, &ev) == 0;
}

}  // namespace

struct Agent::Target {
  enum class Kind { kWake, kListener, kUdp, kUp, kDown, kSplice };
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
  bool last_hop = false;
  bool dead = false;
  int64_t deadline_ms = 0;
  std::string from;                        // upstream peer "addr:port"
  std::string to;                          // onward "addr:port"
  uint32_t down_local = 0, down_peer = 0;  // the onward socket's addresses
};

Agent::Agent() = default;
Agent::~Agent() {
  stop();
}

bool Agent::start(const AgentConfig& config, std::string* why) {
  if (running()) return true;
  config_ = config;
  std::vector<Ipv4Prefix> addrs;
  for (const auto& i : config_.interfaces) addrs.push_back(i.addr);
  if (addrs.empty()) {
    *why = "no mesh interface";
    return false;
  }
  state_ = std::make_unique<LinkState>(addrs, seq_floor());
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
  listeners_.clear();
  udp_recv_.clear();
  udp_send_.clear();
  targets_.clear();
  epoll_.reset();
  wake_.reset();
  bound_ = false;
  bound_ms_ = 0;
  npairs_ = 0;
}

bool Agent::try_bind() {
  last_bind_try_ms_ = monotonic_ms();
  std::vector<uint32_t> addrs;
  if (config_.bind_interface_addresses) {
    for (const auto& i : config_.interfaces) addrs.push_back(i.addr.addr);
  } else {
    addrs.push_back(0);
  }
  std::vector<UniqueFd> tcp, udp;
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
      if (bound_ms_ == 0 && last_bind_try_ms_ - started_ms_ < kBindRetryMs) {
        MESH_INFO(NCCL_INIT | NCCL_NET,
                  "relay: port %u on %s is taken (%s): another plugin process on this host is "
                  "its relay agent; this one stands by and takes over if it goes",
                  config_.port, a == 0 ? "0.0.0.0" : format_ipv4(a).c_str(),
                  errno_text(errno).c_str());
      }
      return false;
    }
    tcp.push_back(std::move(l));
    udp.push_back(std::move(u));
  }
  for (size_t i = 0; i < config_.interfaces.size(); ++i) {
    const Ipv4Prefix& a = config_.interfaces[i].addr;
    UniqueFd s(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) continue;
    const int one = 1;
    setsockopt(s.get(), SOL_SOCKET, SO_BROADCAST, &one, sizeof(one));
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
  MESH_INFO(NCCL_INIT | NCCL_NET, "relay: this process is %s on port %u (%s)",
            config_.bind_interface_addresses
                ? "a relay agent of its own, bound to its interfaces' addresses"
                : "the host's relay agent",
            config_.port, mine.c_str());
  return true;
}

void Agent::warn_limited(const std::string& key, const std::string& text, int64_t now) {
  auto it = warned_.find(key);
  if (it != warned_.end() && now - it->second < kWarnEveryMs) return;
  warned_[key] = now;
  MESH_WARN("relay: %s", text.c_str());
}

void Agent::send_beacons(int64_t now) {
  std::vector<uint8_t> bytes;
  std::string why;
  bool truncated = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_->expire(now);
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
    std::lock_guard<std::mutex> lock(mu_);
    if (!state_->receive(b, source, now, &why))
      warn_limited("beacon-source", "ignored a beacon: " + why, now);
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
    out->path = "through this host's relay agent (another plugin process)";
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
    return monotonic_ms() - std::max(bound_ms, since_ms) < kConvergeMs ? HopStatus::kWait
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

void Agent::loop() {
  Splice::block_sigpipe_in_this_thread();
  epoll_event evs[64];
  while (!stop_) {
    int64_t now = monotonic_ms();
    if (!bound_ && now - last_bind_try_ms_ >= kBindRetryMs) try_bind();
    if (bound_ && now >= next_beacon_ms_) {
      send_beacons(now);
      next_beacon_ms_ = now + kBeaconIntervalMs;
    }
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
    for (auto it = boxes_.begin(); it != boxes_.end();) {
      it = it->second->dead ? boxes_.erase(it) : std::next(it);
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      it = it->second->dead ? pending_.erase(it) : std::next(it);
    }
  }
}

void Agent::accept_requests(int fd) {
  for (int i = 0; i < 64; ++i) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    UniqueFd s(accept4(fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!s.valid()) return;
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
      warn_limited("busy",
                   "refused a relay request from " + format_endpoint(peer) + ": " +
                       std::to_string(config_.max_pairs) + " relayed sockets are open",
                   monotonic_ms());
      continue;
    }
    auto p = std::make_unique<Pending>();
    p->from = format_endpoint(peer);
    p->deadline_ms = monotonic_ms() + kRequestTimeoutMs;
    p->up = std::move(s);
    p->up_t.kind = Target::Kind::kUp;
    p->up_t.fd = p->up.get();
    p->up_t.pending = p.get();
    p->down_t.kind = Target::Kind::kDown;
    p->down_t.pending = p.get();
    set_epoll(epoll_.get(), EPOLL_CTL_ADD, p->up.get(), EPOLLIN | EPOLLRDHUP, &p->up_t);
    const int key = p->up.get();
    pending_[key] = std::move(p);
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
  if (code != ReplyCode::kOk && !why.empty())
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
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(p->down.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    finish_pending(p, ReplyCode::kConnectFailed, "connect to " + p->to + ": " + errno_text(err));
    return;
  }
  if (events & EPOLLOUT) start_splice(p);
}

void Agent::route_request(Pending* p, int64_t now) {
  const RelayRequest& req = p->req;
  Ipv4Prefix local{};
  uint32_t peer = 0;
  uint16_t port = 0;
  // Last hop: this host shares a subnet with the destination (or is it).
  for (const Ipv4Prefix& d : req.dest) {
    for (const auto& itf : config_.interfaces) {
      if (peer == 0 && itf.addr.prefix == d.prefix && in_subnet(itf.addr, d.addr)) {
        local = itf.addr;
        peer = d.addr;
      }
    }
  }
  if (peer != 0) {
    p->last_hop = true;
    port = req.port;
    if (req.rdma && !config_.rdma_forward) {
      finish_pending(p, ReplyCode::kNoRdmaRelay,
                     "RDMA relay asked, but this host has no usable RDMA port on the mesh "
                     "interfaces of its relay agent");
      return;
    }
  } else if (req.rdma) {
    // The forwarder writes to the destination itself: it must share a cable with it.
    finish_pending(p, ReplyCode::kNoRdmaRelay,
                   "RDMA relay asked for a destination this host has no cable to (RDMA relay "
                   "crosses one relay host)");
    return;
  } else {
    if (req.hop_limit == 0) {
      finish_pending(p, ReplyCode::kHopLimit, "hop limit reached before the destination");
      return;
    }
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
  h.what = p->from + " -> " + p->to;
  h.up = std::move(p->up);
  h.down = std::move(p->down);
  std::string why;
  if (!config_.rdma_forward(h, &why)) {
    p->up = std::move(h.up);
    p->down = std::move(h.down);
    finish_pending(p, ReplyCode::kBusy, "cannot forward over RDMA: " + why);
    return;
  }
  p->dead = true;
  MESH_INFO(NCCL_NET, "relay: forwarding %s over RDMA (origin host %08x)", h.what.c_str(),
            p->req.origin);
}

void Agent::start_splice(Pending* p) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->up.get(), nullptr);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->down.get(), nullptr);
  set_tcp_options(p->up.get(), config_.user_timeout_ms);
  set_tcp_options(p->down.get(), config_.user_timeout_ms);
  if (p->req.rdma) {
    hand_to_rdma(p);
    return;
  }
  auto owned = std::make_unique<Box>();
  Box* box = owned.get();
  box->what = "stream " + std::to_string(p->req.stream) + " " + p->from + " -> " + p->to +
              (p->last_hop ? " (destination)" : " (next relay)");
  box->splice =
      std::make_unique<Splice>(std::move(p->up), std::move(p->down), config_.buffer_bytes);
  if (p->last_hop) {
    uint8_t r[kRelayReplySize];
    encode_relay_reply(ReplyCode::kOk, r);
    box->splice->preload(0, r, sizeof(r));
  } else {
    RelayRequest next = p->req;
    next.hop_limit = static_cast<uint8_t>(p->req.hop_limit - 1);
    uint8_t b[kRequestSize];
    encode_request(next, b);
    box->splice->preload(1, b, sizeof(b));
  }
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
  for (auto& [fd, p] : pending_) {
    if (!p->dead && now >= p->deadline_ms)
      finish_pending(p.get(), p->have_request ? ReplyCode::kConnectFailed : ReplyCode::kMalformed,
                     p->have_request ? "onward connect to " + p->to + " timed out"
                                     : "no complete request within 10 s");
  }
}

}  // namespace mesh::relay
