#include "handshake/service.h"

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "util/byte_order.h"
#include "util/clock.h"
#include "util/device_binding.h"
#include "util/log.h"
#include "util/random.h"

namespace mesh::handshake {

namespace {
constexpr int kBacklog = 1024;
constexpr int64_t kRetryMinMs = 20;
constexpr int64_t kRetryMaxMs = 500;
// Backoff after a "busy" reply: the listener made room by closing this socket (or an attacker
// holds its slots), so come back soon, spread out by jitter so that retrying connectors do not
// arrive together.
constexpr int64_t kBusyRetryMinMs = 50;
constexpr int64_t kBusyRetryMaxMs = 200;

// Causes of the WARNs about other hosts' sockets, each rate-limited on its own (warn_limiter.h)
// so that a flood of one kind does not hide the first event of another (a stale handle during
// a garbage flood still gets its full WARN).
enum WarnCause : size_t {
  kWarnMalformed,
  kWarnWrongNonce,
  kWarnSetupFailed,
  kWarnNoHello,
  kWarnHalfEstablished,
  kWarnEvicted,
};
constexpr int64_t kWarnWindowMs = 10000;

std::vector<WarnLimiter::Cause> warn_causes() {
  return {
      {"refused", "malformed handshakes"},
      {"refused", "handshakes with an unknown nonce"},
      {"refused", "handshakes whose transport setup failed"},
      {"closed", "handshake sockets that sent no complete hello in time"},
      {"dropped", "half-established connections"},
      {"closed", "unauthenticated sockets to make room (pending cap)"},
  };
}

size_t refusal_cause(HelloReply reply) {
  switch (reply) {
    case HelloReply::kWrongNonce:
      return kWarnWrongNonce;
    case HelloReply::kSetupFailed:
      return kWarnSetupFailed;
    default:
      return kWarnMalformed;
  }
}

// Compares two nonces in time independent of where they differ.
bool nonce_equal(const Nonce& a, const Nonce& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < kNonceSize; ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}
}  // namespace

struct Service::Watch {
  enum class Type { kWake, kListener, kIncoming, kOutgoing };
  Type type;
  int fd = -1;
  explicit Watch(Type t) : type(t) {}
};

struct Service::Incoming : Watch {
  UniqueFd sock;
  sockaddr_in peer{};
  uint8_t buf[kHelloSize] = {};
  size_t got = 0;
  bool have_hello = false;
  Hello hello;
  std::vector<uint8_t> ext;  // extension bytes (hello.ext_len, bounded by kMaxExtension)
  size_t ext_got = 0;
  int64_t since_ms = 0;
  uint32_t source = 0;                   // the peer's address, host order
  std::list<Incoming*>::iterator order;  // its place in pending_order_
  Incoming() : Watch(Type::kIncoming) {}
};

struct Service::Outgoing : Watch {
  enum class Phase { kBackoff, kConnecting, kSending, kAwaitingReply, kDone };
  UniqueFd sock;
  Role role = Role::kControl;
  uint16_t index = 0;
  size_t rail = 0;
  Phase phase = Phase::kBackoff;
  std::vector<uint8_t> hello;  // the hello, plus the extension on the control socket
  size_t sent = 0;
  bool expect_ext = false;  // an accepted reply is followed by u16 length + extension
  std::vector<uint8_t> reply = std::vector<uint8_t>(kReplySize);
  size_t got = 0;
  int64_t retry_at_ms = 0;
  int64_t backoff_ms = kRetryMinMs;
  std::string last_error;
  bool last_busy = false;  // the last try got a "busy" reply (last_error says so)
  Attempt* owner = nullptr;
  Outgoing() : Watch(Type::kOutgoing) {}
};

struct Service::Attempt {
  std::shared_ptr<OutgoingConnect> pub;
  ConnectRequest req;
  uint64_t conn_id = 0;
  int64_t deadline_ms = 0;
  uint32_t busy_replies = 0;
  std::vector<std::unique_ptr<Outgoing>> socks;
  bool finished = false;  // failed, done or cancelled: removed after the current event batch
};

struct Service::Group {
  std::shared_ptr<ListenEndpoint> ep;
  UniqueFd control;
  std::vector<UniqueFd> data;
  size_t arrived = 0;
  int64_t since_ms = 0;
  uint32_t source = 0;  // address of the first socket that arrived
  std::string peer;
  std::string local;
  std::shared_ptr<void> transport_state;
};

Service::Service() : warns_(warn_causes(), kWarnWindowMs) {}
Service::~Service() {
  stop();
}

bool Service::start(const std::vector<Ipv4Prefix>& addrs, uint16_t port, int64_t timeout_ms,
                    int64_t max_pending, std::string* why) {
  if (running()) return true;
  timeout_ms_ = timeout_ms;
  max_pending_ = static_cast<size_t>(max_pending);
  // A quarter of the slots per source address: one host flooding the port then only ever
  // evicts its own sockets (handle_listener), never other hosts' handshakes in progress.
  max_pending_per_source_ = std::max<size_t>(1, max_pending_ / 4);
  stop_.store(false);
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_fd_.valid()) {
    *why = "epoll/eventfd creation failed: " + errno_text(errno);
    return false;
  }
  std::vector<uint32_t> unique;
  for (const Ipv4Prefix& a : addrs) {
    if (std::find(unique.begin(), unique.end(), a.addr) == unique.end()) unique.push_back(a.addr);
  }
  // One port on every mesh address, so the handle carries a single port. With an ephemeral
  // port the first bind picks it and the others follow; a clash on another address retries.
  std::string last;
  for (int attempt = 0; attempt < 32 && listeners_.empty(); ++attempt) {
    uint16_t chosen = port;
    std::vector<UniqueFd> socks;
    bool ok = true;
    for (uint32_t addr : unique) {
      UniqueFd s(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      int one = 1;
      setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      bind_to_rail_device(s.get(), addr);  // accepted sockets inherit it: replies leave here too
      sockaddr_in sa = make_sockaddr(addr, chosen);
      if (!s.valid() || bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
          ::listen(s.get(), kBacklog) != 0) {
        last = format_ipv4(addr) + ":" + std::to_string(chosen) + ": " + errno_text(errno);
        ok = false;
        break;
      }
      if (chosen == 0) {
        socklen_t len = sizeof(sa);
        getsockname(s.get(), reinterpret_cast<sockaddr*>(&sa), &len);
        chosen = ntohs(sa.sin_port);
      }
      socks.push_back(std::move(s));
    }
    if (ok) {
      listeners_ = std::move(socks);
      port_ = chosen;
    } else if (port != 0) {
      break;  // a fixed port that is taken will not become free by retrying now
    }
  }
  if (listeners_.empty()) {
    *why = "cannot bind the handshake port (" + last +
           "); check NCCL_MESH_HANDSHAKE_PORT and that the interface addresses are up";
    return false;
  }
  auto add = [&](int fd, Watch* w) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = w;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
  };
  wake_watch_ = std::make_unique<Watch>(Watch::Type::kWake);
  wake_watch_->fd = wake_fd_.get();
  add(wake_fd_.get(), wake_watch_.get());
  for (UniqueFd& l : listeners_) {
    auto w = std::make_unique<Watch>(Watch::Type::kListener);
    w->fd = l.get();
    add(l.get(), w.get());
    listener_watches_.push_back(std::move(w));
  }
  thread_ = std::thread([this] { loop(); });
  return true;
}

void Service::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  wake();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  listener_watches_.clear();
  listeners_.clear();
  dead_incoming_.clear();
  incoming_.clear();
  pending_order_.clear();
  pending_per_source_.clear();
  groups_.clear();
  for (auto& a : attempts_) {
    if (!a->finished) {
      a->pub->error = "plugin shut down during the handshake";
      a->pub->status.store(ConnectStatus::kFailed);
    }
  }
  attempts_.clear();
  for (auto& ep : listens_) {
    ep->ready.clear();
    ep->closed = true;
  }
  listens_.clear();
  epoll_.reset();
  wake_fd_.reset();
  port_ = 0;
}

void Service::wake() {
  uint64_t one = 1;
  if (wake_fd_.valid()) (void)!write(wake_fd_.get(), &one, sizeof(one));
}

std::shared_ptr<ListenEndpoint> Service::open_listen() {
  auto ep = std::make_shared<ListenEndpoint>();
  fill_random(ep->nonce.data(), ep->nonce.size());
  std::lock_guard<std::mutex> lock(mu_);
  listens_.push_back(ep);
  return ep;
}

void Service::close_listen(const std::shared_ptr<ListenEndpoint>& ep) {
  std::lock_guard<std::mutex> lock(mu_);
  ep->closed = true;
  ep->ready.clear();  // connections never accepted: their sockets close, the peer sees EOF
  std::erase(listens_, ep);
  for (auto it = groups_.begin(); it != groups_.end();) {
    it = it->first.first == ep.get() ? groups_.erase(it) : std::next(it);
  }
}

bool Service::take_ready(const std::shared_ptr<ListenEndpoint>& ep, ConnectedSockets* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ep->ready.empty()) return false;
  *out = std::move(ep->ready.front());
  ep->ready.pop_front();
  return true;
}

std::shared_ptr<OutgoingConnect> Service::start_connect(const ConnectRequest& req) {
  auto a = std::make_unique<Attempt>();
  a->pub = std::make_shared<OutgoingConnect>();
  a->req = req;
  fill_random(&a->conn_id, sizeof(a->conn_id));
  a->deadline_ms = monotonic_ms() + req.timeout_ms;
  const size_t nrails = req.rails.size();
  a->pub->description = "peer " + format_ipv4(req.rails[0].peer_addr) + ":" +
                        std::to_string(req.port) + " from " + format_ipv4(req.rails[0].local.addr) +
                        (nrails > 1 ? " (+" + std::to_string(nrails - 1) + " rails)" : "");
  for (uint16_t i = 0; i <= req.ndata; ++i) {
    auto out = std::make_unique<Outgoing>();
    out->role = i == 0 ? Role::kControl : Role::kData;
    out->index = static_cast<uint16_t>(i == 0 ? 0 : i - 1);
    out->rail = i == 0 ? 0 : out->index % nrails;
    out->owner = a.get();
    const bool ext = i == 0 && !req.extension.empty();
    Hello hello{out->role, out->index, req.ndata,
                req.nonce, a->conn_id, static_cast<uint16_t>(ext ? req.extension.size() : 0)};
    out->hello.resize(kHelloSize);
    encode_hello(hello, out->hello.data());
    if (ext) {
      out->hello.insert(out->hello.end(), req.extension.begin(), req.extension.end());
      out->expect_ext = true;
    }
    a->socks.push_back(std::move(out));
  }
  std::shared_ptr<OutgoingConnect> pub = a->pub;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running()) {
      pub->error = "handshake service is not running";
      pub->status.store(ConnectStatus::kFailed);
      return pub;
    }
    attempts_.push_back(std::move(a));  // sockets open on the service thread (kBackoff, due now)
  }
  wake();
  return pub;
}

void Service::cancel_connect(const std::shared_ptr<OutgoingConnect>& attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& a : attempts_) {
    if (a->pub == attempt && !a->finished) {
      close_attempt_sockets(a.get());
      a->finished = true;
    }
  }
}

void Service::loop() {
  epoll_event events[64];
  while (!stop_.load()) {
    const int n = epoll_wait(epoll_.get(), events, 64, 10);
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n; ++i) {
      auto* w = static_cast<Watch*>(events[i].data.ptr);
      switch (w->type) {
        case Watch::Type::kWake: {
          uint64_t v;
          while (read(wake_fd_.get(), &v, sizeof(v)) > 0) {
          }
          break;
        }
        case Watch::Type::kListener:
          handle_listener(w->fd);
          break;
        case Watch::Type::kIncoming:
          if (w->fd >= 0) handle_incoming(static_cast<Incoming*>(w));
          break;
        case Watch::Type::kOutgoing: {
          auto* out = static_cast<Outgoing*>(w);
          if (out->fd >= 0) handle_outgoing(out->owner, out, events[i].events);
          break;
        }
      }
    }
    expire(monotonic_ms());
    std::erase_if(attempts_, [](const std::unique_ptr<Attempt>& a) { return a->finished; });
    dead_incoming_.clear();
  }
}

void Service::handle_listener(int fd) {
  for (;;) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    int s = accept4(fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s < 0) return;  // EAGAIN: drained; other errors (EMFILE...) retried on the next event
    UniqueFd sock(s);
    const uint32_t source = ntohl(peer.sin_addr.s_addr);
    // The pending caps keep a flood of half-open sockets from growing memory or taking every
    // file descriptor. At a cap the newcomer is admitted and the oldest pending socket is
    // closed (with a "busy" reply), instead of refusing the newcomer: a real connector sends
    // its hello right after connecting, so it is read within moments of the accept (below,
    // often at once) and is rarely the oldest, while a socket that has sat silent longest is
    // the likely attacker. Refusing newcomers instead would let whoever holds the slots keep
    // every real connect out for as long as it likes. The per-source cap makes a single flooding
    // host evict only its own sockets; a connector that still gets "busy" retries until its
    // connect timeout (handle_outgoing).
    const auto per_source = pending_per_source_.find(source);
    if (per_source != pending_per_source_.end() && per_source->second >= max_pending_per_source_) {
      evict(eviction_victim(&source), peer, true);
    } else if (incoming_.size() >= max_pending_) {
      evict(eviction_victim(nullptr), peer, false);
    }
    auto in = std::make_unique<Incoming>();
    in->fd = s;
    in->peer = peer;
    in->source = source;
    in->since_ms = monotonic_ms();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = static_cast<Watch*>(in.get());
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, s, &ev) != 0) continue;
    in->sock = std::move(sock);
    Incoming* raw = in.get();
    raw->order = pending_order_.insert(pending_order_.end(), raw);
    ++pending_per_source_[source];
    incoming_[s] = std::move(in);
    // A hello that is already queued is taken now, before later accepts of this batch could
    // count this socket as pending (and evict it).
    handle_incoming(raw);
  }
}

// The oldest pending socket (of `*source`, or of any source) that has not sent a complete hello;
// failing that the oldest one (a complete hello waiting for its extension bytes).
Service::Incoming* Service::eviction_victim(const uint32_t* source) const {
  Incoming* oldest = nullptr;
  for (Incoming* in : pending_order_) {
    if (source != nullptr && in->source != *source) continue;
    if (!in->have_hello) return in;
    if (oldest == nullptr) oldest = in;
  }
  return oldest;
}

void Service::evict(Incoming* victim, const sockaddr_in& newcomer, bool per_source) {
  if (victim == nullptr) return;
  uint8_t reply[kReplySize];
  encode_reply(HelloReply::kBusy, reply);
  (void)!send(victim->fd, reply, sizeof(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
  const std::string who = format_endpoint(victim->peer);
  const int64_t age_ms = monotonic_ms() - victim->since_ms;
  const std::string detail = who + ": silent for " + std::to_string(age_ms) + " ms";
  std::string full = "handshake port saturated: ";
  if (per_source) {
    full.append(std::to_string(pending_per_source_[victim->source]))
        .append(" unauthenticated sockets pending from ")
        .append(format_ipv4(victim->source))
        .append(" (at most ")
        .append(std::to_string(max_pending_per_source_))
        .append(" per source address)");
  } else {
    full.append(std::to_string(incoming_.size()))
        .append(" unauthenticated sockets pending (NCCL_MESH_MAX_PENDING_HANDSHAKES=")
        .append(std::to_string(max_pending_))
        .append(")");
  }
  full.append("; closed the oldest, from ")
      .append(who)
      .append(" after ")
      .append(std::to_string(age_ms))
      .append(" ms without a complete hello, to admit ")
      .append(format_endpoint(newcomer))
      .append(
          ". Something is opening connections to this port without completing a handshake "
          "(a port scan or a flood): find it; if this is a real large job raise "
          "NCCL_MESH_MAX_PENDING_HANDSHAKES");
  report(kWarnEvicted, victim->source, detail, full);
  drop_incoming(victim);
}

void Service::report(size_t cause, uint32_t source, const std::string& detail,
                     const std::string& full) {
  std::string summary;
  const bool warn = warns_.note(cause, monotonic_ms(), source, detail, &summary);
  if (!summary.empty()) MESH_WARN("handshake service: %s", summary.c_str());
  if (warn) {
    MESH_WARN("%s (more of these within %lld s are summarised in one WARN)", full.c_str(),
              static_cast<long long>(warns_.window_ms() / 1000));
  } else {
    MESH_INFO(NCCL_NET, "%s", full.c_str());
  }
}

void Service::handle_incoming(Incoming* in) {
  for (;;) {
    ssize_t n;
    if (!in->have_hello) {
      n = recv(in->fd, in->buf + in->got, kHelloSize - in->got, 0);
    } else {
      n = recv(in->fd, in->ext.data() + in->ext_got, in->ext.size() - in->ext_got, 0);
    }
    if (n > 0) {
      if (in->have_hello) {
        in->ext_got += static_cast<size_t>(n);
        if (in->ext_got < in->ext.size()) continue;
        accept_hello(in, in->hello);
        return;
      }
      in->got += static_cast<size_t>(n);
      if (in->got < kHelloSize) continue;
      std::string why;
      if (!decode_hello(in->buf, &in->hello, &why)) {
        refuse(in, HelloReply::kMalformed, why);
        return;
      }
      if (in->hello.ext_len == 0) {
        accept_hello(in, in->hello);
        return;
      }
      // The length was validated (<= kMaxExtension) before anything is allocated from it.
      in->have_hello = true;
      in->ext.resize(in->hello.ext_len);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    // EOF or error before a whole hello: a port scan or a peer that gave up. Not worth a WARN.
    MESH_INFO(NCCL_NET, "handshake from %s closed after %zu of %zu bytes",
              format_endpoint(in->peer).c_str(), in->got, kHelloSize);
    drop_incoming(in);
    return;
  }
}

void Service::refuse(Incoming* in, HelloReply reply, const std::string& why) {
  uint8_t bytes[kReplySize];
  encode_reply(reply, bytes);
  (void)!send(in->fd, bytes, sizeof(bytes), MSG_NOSIGNAL | MSG_DONTWAIT);
  const std::string who = format_endpoint(in->peer);
  std::string full = "refused handshake from ";
  full.append(who).append(": ").append(why);
  if (reply == HelloReply::kSetupFailed) {
    full.append(" (the connector reports it too; check the transport on both hosts)");
  } else {
    full.append(
        " (a stale handle, a process from another job, or traffic that is not NCCL's; check "
        "what else reaches this port)");
  }
  report(refusal_cause(reply), in->source, who + ": " + why, full);
  drop_incoming(in);
}

void Service::drop_incoming(Incoming* in) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, in->fd, nullptr);
  auto it = incoming_.find(in->fd);
  in->fd = -1;
  if (it != incoming_.end()) {
    pending_order_.erase(in->order);
    auto count = pending_per_source_.find(in->source);
    if (count != pending_per_source_.end() && --count->second == 0) {
      pending_per_source_.erase(count);
    }
    dead_incoming_.push_back(std::move(it->second));  // freed after this event batch
    incoming_.erase(it);
  }
}

void Service::accept_hello(Incoming* in, const Hello& hello) {
  std::shared_ptr<ListenEndpoint> ep;
  for (const auto& l : listens_) {
    if (nonce_equal(l->nonce, hello.nonce)) ep = l;  // no early exit: constant time over listens
  }
  if (!ep) {
    refuse(in, HelloReply::kWrongNonce, "its nonce matches no open listen");
    return;
  }
  auto key = std::make_pair(ep.get(), hello.conn_id);
  auto& group = groups_[key];
  if (!group) {
    group = std::make_unique<Group>();
    group->ep = ep;
    group->data.resize(hello.ndata);
    group->since_ms = monotonic_ms();
    group->source = in->source;
  }
  Group& g = *group;
  const bool clash =
      hello.ndata != g.data.size() ||
      (hello.role == Role::kControl ? g.control.valid() : g.data[hello.index].valid());
  if (clash) {
    refuse(in, HelloReply::kMalformed,
           "stream " + std::to_string(hello.index) + " duplicated or inconsistent stream count");
    return;
  }
  std::vector<uint8_t> reply(kReplySize);
  if (hello.ext_len > 0) {
    std::vector<uint8_t> ext_reply;
    std::shared_ptr<void> state;
    std::string why = "this process does not support transport extensions";
    if (!extension_handler_ || !extension_handler_(in->ext, &ext_reply, &state, &why)) {
      groups_.erase(key);  // a control hello is the first of its group (no data sockets)
      refuse(in, HelloReply::kSetupFailed, why);
      return;
    }
    g.transport_state = std::move(state);
    reply.resize(kReplySize + 2);
    put_u16(reply.data() + kReplySize, static_cast<uint16_t>(ext_reply.size()));
    reply.insert(reply.end(), ext_reply.begin(), ext_reply.end());
  }
  encode_reply(HelloReply::kAccepted, reply.data());
  if (send(in->fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(reply.size())) {
    // A fresh socket always has room for a reply (at most ~1 KiB): the peer is gone.
    groups_.erase(key);
    drop_incoming(in);
    return;
  }
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, in->fd, nullptr);
  UniqueFd sock = std::move(in->sock);
  if (hello.role == Role::kControl) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    getsockname(sock.get(), reinterpret_cast<sockaddr*>(&local), &len);
    g.peer = format_endpoint(in->peer);
    g.local = format_endpoint(local);
    g.control = std::move(sock);
  } else {
    g.data[hello.index] = std::move(sock);
  }
  drop_incoming(in);
  if (++g.arrived == g.data.size() + 1) {
    ConnectedSockets c;
    c.control = std::move(g.control);
    c.data = std::move(g.data);
    c.peer = g.peer;
    c.local = g.local;
    c.transport_state = std::move(g.transport_state);
    MESH_INFO(NCCL_NET | NCCL_INIT, "accepted connection from %s on %s with %zu data streams",
              c.peer.c_str(), c.local.c_str(), c.data.size());
    ep->ready.push_back(std::move(c));
    groups_.erase(key);
  }
}

void Service::open_outgoing(Attempt* a, Outgoing* out) {
  const topology::Rail& rail = a->req.rails[out->rail];
  out->sock.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  out->fd = out->sock.get();
  out->sent = 0;
  out->got = 0;
  out->reply.assign(kReplySize, 0);
  sockaddr_in local = make_sockaddr(rail.local.addr, 0);
  sockaddr_in peer = make_sockaddr(rail.peer_addr, a->req.port);
  // Binding the source address puts the socket on the cable of that subnet; where two local
  // interfaces share that subnet (port halves), only binding the device picks the interface.
  if (out->sock.valid()) bind_to_rail_device(out->fd, rail.local.addr);
  if (!out->sock.valid() ||
      bind(out->fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    out->last_error = "bind to " + format_ipv4(rail.local.addr) + ": " + errno_text(errno);
    out->sock.reset();
    out->fd = -1;
    out->phase = Outgoing::Phase::kBackoff;
    out->retry_at_ms = monotonic_ms() + out->backoff_ms;
    return;
  }
  const int rc = ::connect(out->fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer));
  if (rc != 0 && errno != EINPROGRESS) {
    out->last_error = "connect: " + errno_text(errno);
    out->sock.reset();
    out->fd = -1;
    out->phase = Outgoing::Phase::kBackoff;
    out->retry_at_ms = monotonic_ms() + out->backoff_ms;
    out->backoff_ms = std::min(out->backoff_ms * 2, kRetryMaxMs);
    return;
  }
  out->phase = Outgoing::Phase::kConnecting;
  epoll_event ev{};
  ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
  ev.data.ptr = static_cast<Watch*>(out);
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, out->fd, &ev);
}

void Service::handle_outgoing(Attempt* a, Outgoing* out, uint32_t events) {
  if (a->finished) return;
  auto retry = [&](const std::string& why) {
    out->last_error = why;
    out->last_busy = false;
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, out->fd, nullptr);
    out->sock.reset();
    out->fd = -1;
    out->phase = Outgoing::Phase::kBackoff;
    out->retry_at_ms = monotonic_ms() + out->backoff_ms;
    out->backoff_ms = std::min(out->backoff_ms * 2, kRetryMaxMs);
  };
  // "Busy": the listener closed this socket to make room for newer ones (its pending cap is
  // full, most likely of someone else's half-open sockets). The peer is alive and the handle
  // valid, so try again with a fresh socket until the connect deadline (expire() then fails
  // the attempt naming the saturation).
  auto retry_busy = [&] {
    ++a->busy_replies;
    const int64_t base = std::clamp(out->backoff_ms, kBusyRetryMinMs, kBusyRetryMaxMs);
    uint32_t r = 0;
    fill_random(&r, sizeof(r));
    retry("the peer answered busy: its handshake port is saturated");
    out->last_busy = true;
    out->retry_at_ms = monotonic_ms() + base + static_cast<int64_t>(r % (base / 2 + 1));
    out->backoff_ms = std::min(base * 2, kBusyRetryMaxMs);
  };
  if (out->phase == Outgoing::Phase::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(out->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      // Refused or unreachable: the peer's interface may still be coming up; retry until the
      // deadline and report the last error then.
      retry("connect: " + errno_text(err));
      return;
    }
    if (!(events & EPOLLOUT)) return;
    out->phase = Outgoing::Phase::kSending;
  }
  if (out->phase == Outgoing::Phase::kSending) {
    const ssize_t n = send(out->fd, out->hello.data() + out->sent, out->hello.size() - out->sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      retry("sending the hello: " + errno_text(errno));
      return;
    }
    if (n > 0) out->sent += static_cast<size_t>(n);
    if (out->sent < out->hello.size()) return;
    out->phase = Outgoing::Phase::kAwaitingReply;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = static_cast<Watch*>(out);
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, out->fd, &ev);
  }
  if (out->phase == Outgoing::Phase::kAwaitingReply) {
    for (;;) {
      const ssize_t n =
          recv(out->fd, out->reply.data() + out->got, out->reply.size() - out->got, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (n <= 0) {
        fail_attempt(a, "the peer closed the handshake socket without answering (" +
                            (n == 0 ? std::string("EOF") : errno_text(errno)) +
                            "); is the peer process still alive and running the same plugin?");
        return;
      }
      out->got += static_cast<size_t>(n);
      if (out->got < out->reply.size()) continue;
      if (out->got == kReplySize) {
        HelloReply reply;
        if (!decode_reply(out->reply.data(), &reply)) {
          fail_attempt(a, "the peer answered with bytes that are not an nccl-mesh reply");
          return;
        }
        if (reply == HelloReply::kBusy) {
          retry_busy();
          return;
        }
        if (reply != HelloReply::kAccepted) {
          fail_attempt(a, std::string("the peer ") + reply_text(reply));
          return;
        }
        if (!out->expect_ext) break;
        out->reply.resize(kReplySize + 2);  // the extension's length
        continue;
      }
      if (out->got == kReplySize + 2) {
        const size_t len = get_u16(out->reply.data() + kReplySize);
        if (len == 0 || len > kMaxExtension) {
          fail_attempt(a, "the peer answered with an extension of " + std::to_string(len) +
                              " bytes (1.." + std::to_string(kMaxExtension) + " allowed)");
          return;
        }
        out->reply.resize(kReplySize + 2 + len);
        continue;
      }
      a->pub->result.peer_extension.assign(out->reply.begin() + kReplySize + 2, out->reply.end());
      break;
    }
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, out->fd, nullptr);
    out->phase = Outgoing::Phase::kDone;
    finish_attempt_if_ready(a);
  }
}

void Service::finish_attempt_if_ready(Attempt* a) {
  for (const auto& s : a->socks) {
    if (s->phase != Outgoing::Phase::kDone) return;
  }
  ConnectedSockets& c = a->pub->result;
  for (auto& s : a->socks) {
    s->fd = -1;
    if (s->role == Role::kControl) {
      sockaddr_in local{}, peer{};
      socklen_t len = sizeof(local);
      getsockname(s->sock.get(), reinterpret_cast<sockaddr*>(&local), &len);
      len = sizeof(peer);
      getpeername(s->sock.get(), reinterpret_cast<sockaddr*>(&peer), &len);
      c.local = format_endpoint(local);
      c.peer = format_endpoint(peer);
      c.control = std::move(s->sock);
    } else {
      c.data.push_back(std::move(s->sock));  // created in index order
    }
  }
  a->finished = true;
  a->pub->status.store(ConnectStatus::kDone, std::memory_order_release);
}

void Service::fail_attempt(Attempt* a, const std::string& why) {
  close_attempt_sockets(a);
  a->finished = true;
  a->pub->error = why;
  a->pub->status.store(ConnectStatus::kFailed, std::memory_order_release);
}

void Service::close_attempt_sockets(Attempt* a) {
  for (auto& s : a->socks) {
    if (s->fd >= 0) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->fd, nullptr);
    s->fd = -1;
    s->sock.reset();
  }
}

void Service::expire(int64_t now) {
  for (auto& a : attempts_) {
    if (a->finished) continue;
    if (now >= a->deadline_ms) {
      std::string last;
      bool busy = false;
      for (const auto& s : a->socks) {
        if (s->phase != Outgoing::Phase::kDone && !s->last_error.empty()) last = s->last_error;
        if (s->phase != Outgoing::Phase::kDone && s->last_busy) busy = true;
      }
      if (busy) {
        std::string why = "the peer's handshake port was saturated by unauthenticated connections";
        why.append(" for the whole NCCL_MESH_CONNECT_TIMEOUT_MS=")
            .append(std::to_string(a->req.timeout_ms))
            .append(" ms (")
            .append(std::to_string(a->busy_replies))
            .append(
                " busy replies); something on the network is opening connections to it "
                "without completing a handshake (see the peer's log for the source), or "
                "raise NCCL_MESH_MAX_PENDING_HANDSHAKES on the peer for a very large job");
        fail_attempt(a.get(), why);
        continue;
      }
      fail_attempt(a.get(), "no answer within NCCL_MESH_CONNECT_TIMEOUT_MS=" +
                                std::to_string(a->req.timeout_ms) + " ms" +
                                (last.empty() ? "" : " (last error: " + last + ")") +
                                "; check the cable, the peer process and firewalls");
      continue;
    }
    for (auto& s : a->socks) {
      if (s->phase == Outgoing::Phase::kBackoff && now >= s->retry_at_ms) {
        open_outgoing(a.get(), s.get());
      }
    }
  }
  // Unauthenticated sockets and half-assembled connections live at most one connect timeout.
  // pending_order_ is in arrival order, so the stale ones are at its front.
  while (!pending_order_.empty() && now - pending_order_.front()->since_ms > timeout_ms_) {
    Incoming* in = pending_order_.front();
    const std::string who = format_endpoint(in->peer);
    std::string full = "closing handshake socket from ";
    full.append(who)
        .append(": no complete hello within ")
        .append(std::to_string(timeout_ms_))
        .append(" ms (")
        .append(std::to_string(in->got))
        .append(" of ")
        .append(std::to_string(kHelloSize))
        .append(" bytes); a port scan, a stuck peer or a flood: check what reaches this port");
    report(kWarnNoHello, in->source, who + ": " + std::to_string(in->got) + " bytes", full);
    drop_incoming(in);
  }
  for (auto it = groups_.begin(); it != groups_.end();) {
    const Group& g = *it->second;
    if (now - g.since_ms > timeout_ms_) {
      const std::string who = g.peer.empty() ? format_ipv4(g.source) : g.peer;
      std::string full = "dropping half-established connection from ";
      full.append(who)
          .append(": ")
          .append(std::to_string(g.arrived))
          .append(" of ")
          .append(std::to_string(g.data.size() + 1))
          .append(" sockets arrived within ")
          .append(std::to_string(timeout_ms_))
          .append(" ms; the connector gave up or lost its cable during setup");
      report(kWarnHalfEstablished, g.source,
             who + ": " + std::to_string(g.arrived) + " of " + std::to_string(g.data.size() + 1) +
                 " sockets",
             full);
      it = groups_.erase(it);
    } else {
      ++it;
    }
  }
  for (const std::string& line : warns_.poll(now)) {
    MESH_WARN("handshake service: %s", line.c_str());
  }
}

}  // namespace mesh::handshake
