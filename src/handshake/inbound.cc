// SPDX-License-Identifier: Apache-2.0
// The listening side of the handshake service (service.h): binds the handshake port, accepts
// sockets under the admission policy (admission_queue.h), reads and checks hellos, runs the
// transport extension, and groups authenticated sockets into connections for accept().
// Service thread only, under the service mutex.
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "handshake/service.h"
#include "handshake/service_state.h"
#include "util/accept_errors.h"
#include "util/byte_order.h"
#include "util/clock.h"
#include "util/device_binding.h"
#include "util/log.h"

namespace mesh::handshake {

namespace {
constexpr int kBacklog = 1024;

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

// accept4 failed for want of a descriptor or kernel memory (or with an error that is not
// about one connection: pausing is the safe answer to an unknown one too). The listener is
// level-triggered and the waiting connection stays in the backlog, so returning alone would make
// epoll_wait report it again at once: the service thread would spin at 100% CPU, taking the
// service mutex on every turn (which NCCL's connect/accept also take). Instead every listener
// leaves the epoll set for AcceptPause::kPauseMs; the loop's deadlines (resume_accepting) put
// them back, and accept4 is tried again. Connectors meanwhile wait in the listen backlog
// (kBacklog), within their connect timeout, and complete once descriptors are free.
// Not chosen: the known trick of keeping a spare descriptor to accept-and-close the waiting
// connection. It drains the backlog, but the other rank sees its socket closed without an answer
// and has to start over with a fresh socket and a backoff, where waiting lets the same connect
// succeed as soon as the shortage ends; it also costs a descriptor all the time and does nothing
// for ENFILE. One WARN per shortage (again only after kWarnWindowMs), since it repeats every pause.
void Service::pause_accepting(int err) {
  const int64_t now = monotonic_ms();
  for (const auto& target : listener_targets_) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, target->fd, nullptr);
  }
  if (accept_warned_ms_ >= 0 && now - accept_warned_ms_ < kWarnWindowMs) return;
  accept_warned_ms_ = now;
  const std::string advice = accept_error_advice(
      err, "every connection takes several (a control socket, its data streams, RDMA resources)",
      "open fewer communicators per process");
  MESH_WARN(
      "handshake service: cannot accept connections on port %u: %s; %s. Accepting pauses %lld ms "
      "at a time until it works again (peers wait in the listen backlog up to their "
      "NCCL_MESH_CONNECT_TIMEOUT_MS); paused %llu times so far, this WARN repeats at most every "
      "%lld s",
      static_cast<unsigned>(port_), errno_text(err).c_str(), advice.c_str(),
      static_cast<long long>(AcceptPause::kPauseMs),
      static_cast<unsigned long long>(accept_pause_.pauses()),
      static_cast<long long>(kWarnWindowMs / 1000));
}

void Service::resume_accepting(int64_t now) {
  if (!accept_pause_.resume_due(now)) return;
  for (const auto& target : listener_targets_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = target.get();
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, target->fd, &ev);
  }
}

// Binds the handshake port on every address (the same port on all) into listeners_ and sets
// port_.
bool Service::bind_listeners(const std::vector<Ipv4Prefix>& addrs, uint16_t port,
                             std::string* why) {
  std::vector<uint32_t> unique;
  for (const Ipv4Prefix& a : addrs) {
    if (std::find(unique.begin(), unique.end(), a.addr) == unique.end()) unique.push_back(a.addr);
  }
  // One port on every mesh address, so the handle carries a single port. With an ephemeral
  // port the first bind picks it and the others follow; a clash on another address retries.
  std::string last;
  int last_err = 0;
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
        last_err = errno;
        last = format_ipv4(addr) + ":" + std::to_string(chosen) + ": " + errno_text(last_err);
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
  if (listeners_.empty() && port != 0 && last_err == EADDRINUSE) {
    // Every rank binds the port on every mesh address, so with a fixed port the second rank on
    // a host always finds it taken (by the first). Init fails as before, saying so.
    *why = "cannot bind the handshake port (" + last +
           "): NCCL_MESH_HANDSHAKE_PORT=" + std::to_string(port) +
           " is in use on this host, most likely by another rank of this job (every rank "
           "listens on the port on every mesh address); with several ranks per host leave "
           "NCCL_MESH_HANDSHAKE_PORT unset (each rank then takes a free port and sends it in "
           "its handle) or give each rank its own port";
    return false;
  }
  if (listeners_.empty()) {
    *why = "cannot bind the handshake port (" + last +
           "); check NCCL_MESH_HANDSHAKE_PORT and that the interface addresses are up";
    return false;
  }
  return true;
}

// At most kMaxAcceptsPerEvent sockets per event: the caller holds the service mutex, and a
// flood would otherwise keep this loop (and NCCL's connect/accept) going until the backlog is
// empty. The listener is level-triggered, so the next epoll_wait reports the rest.
// accept4 itself runs without the mutex: it touches no service state (the listener belongs to
// this thread), and under a flood one call can take milliseconds in the kernel (measured up to
// 22 ms over loopback on 2 cores: the listener's lock and the packets queued behind it).
void Service::handle_listener(int fd, std::unique_lock<std::mutex>& lock) {
  if (accept_pause_.paused()) return;  // paused earlier in this event batch
  for (int accepted = 0; accepted < kMaxAcceptsPerEvent; ++accepted) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    lock.unlock();
    int s = accept4(fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    const int accept_errno = errno;
    lock = service_lock();
    if (s < 0) {
      const int err = accept_errno;
      const AcceptPause::Next next = accept_pause_.on_error(err, monotonic_ms());
      if (next == AcceptPause::Next::kRetry) continue;
      if (next == AcceptPause::Next::kPause) pause_accepting(err);
      return;
    }
    // The WARN's window stays: a limit hit over and over warns once.
    if (const uint64_t pauses = accept_pause_.accepted(); pauses != 0) {
      MESH_INFO(NCCL_NET | NCCL_INIT, "handshake service accepts again (after %llu pauses)",
                static_cast<unsigned long long>(pauses));
    }
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
    // admission_ (admission_queue.h) makes these decisions; this carries them out.
    if (const auto eviction = admission_.make_room(source)) evict(*eviction, peer);
    auto in = std::make_unique<IncomingSocket>();
    in->fd = s;
    in->peer = peer;
    in->source = source;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = static_cast<EpollTarget*>(in.get());
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, s, &ev) != 0) continue;
    in->sock = std::move(sock);
    IncomingSocket* raw = in.get();
    admission_.add(s, source, monotonic_ms());
    incoming_[s] = std::move(in);
    // A hello that is already queued is taken now, before later accepts of this batch could
    // count this socket as pending (and evict it).
    handle_incoming(raw, lock);
  }
}

void Service::evict(const AdmissionQueue::Eviction& eviction, const sockaddr_in& newcomer) {
  const auto found = incoming_.find(eviction.victim.id);
  if (found == incoming_.end()) return;
  IncomingSocket* victim = found->second.get();
  uint8_t reply[kReplySize];
  encode_reply(HelloReply::kBusy, reply);
  (void)!send(victim->fd, reply, sizeof(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
  const std::string who = format_endpoint(victim->peer);
  const int64_t age_ms = monotonic_ms() - eviction.victim.since_ms;
  const std::string detail = who + ": silent for " + std::to_string(age_ms) + " ms";
  std::string full = "handshake port saturated: ";
  if (eviction.per_source) {
    full.append(std::to_string(eviction.pending))
        .append(" unauthenticated sockets pending from ")
        .append(format_ipv4(victim->source))
        .append(" (at most ")
        .append(std::to_string(admission_.max_per_source()))
        .append(" per source address)");
  } else {
    full.append(std::to_string(eviction.pending))
        .append(" unauthenticated sockets pending (NCCL_MESH_MAX_PENDING_HANDSHAKES=")
        .append(std::to_string(admission_.max_pending()))
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

void Service::handle_incoming(IncomingSocket* in, std::unique_lock<std::mutex>& lock) {
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
        accept_hello(in, in->hello, lock);
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
        accept_hello(in, in->hello, lock);
        return;
      }
      // The length was validated (<= kMaxExtension) before anything is allocated from it.
      in->have_hello = true;
      admission_.hello_complete(in->fd);
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

void Service::refuse(IncomingSocket* in, HelloReply reply, const std::string& why) {
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

void Service::drop_incoming(IncomingSocket* in) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, in->fd, nullptr);
  auto it = incoming_.find(in->fd);
  in->fd = -1;
  if (it != incoming_.end()) {
    admission_.remove(it->first);
    dead_incoming_.push_back(std::move(it->second));  // freed after this event batch
    incoming_.erase(it);
  }
}

void Service::accept_hello(IncomingSocket* in, const Hello& hello,
                           std::unique_lock<std::mutex>& lock) {
  std::shared_ptr<ListenEndpoint> ep;
  for (const auto& l : listens_) {
    if (nonce_equal(l->nonce, hello.nonce)) ep = l;  // no early exit: constant time over listens
  }
  if (!ep) {
    refuse(in, HelloReply::kWrongNonce, "its nonce matches no open listen");
    return;
  }
  if (!(hello.agreement == agreement_)) {
    // The connector holds this listen's handle (the nonce matched): a rank of the same job whose
    // host runs other tuner settings. Fail this listen's accept and tell the connector.
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    getsockname(in->fd, reinterpret_cast<sockaddr*>(&local), &len);
    const std::string text = describe_disagreement(
        agreement_, "this host (" + format_endpoint(local) + ")", hello.agreement,
        "the connecting host (" + format_endpoint(in->peer) + ")");
    if (ep->failure.empty()) {
      ep->failure = text;  // the loop holds mu_; accept() fails with it and logs the one WARN
      MESH_INFO(NCCL_NET | NCCL_INIT, "refused a connection: the hosts' shared settings differ: %s",
                text.c_str());
    }
    uint8_t bytes[kReplySize];
    encode_reply(HelloReply::kSettingsDiffer, bytes);
    (void)!send(in->fd, bytes, sizeof(bytes), MSG_NOSIGNAL | MSG_DONTWAIT);
    drop_incoming(in);
    return;
  }
  auto key = std::make_pair(ep.get(), hello.conn_id);
  auto& slot = partial_[key];
  if (!slot) {
    slot = std::make_unique<PartialConnection>();
    slot->ep = ep;
    slot->data.resize(hello.ndata);
    slot->since_ms = monotonic_ms();
    slot->source = in->source;
  }
  PartialConnection* g = slot.get();  // not `slot`: see the extension below
  const bool clash =
      hello.ndata != g->data.size() ||
      (hello.role == Role::kControl ? g->control.valid() : g->data[hello.index].valid());
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
    // The handler (RDMA: creating and moving QPs, milliseconds) runs without the service mutex,
    // so NCCL's calls do not wait for it; it synchronises itself (RdmaTransport). `in` and `ep`
    // stay valid meanwhile (only this thread frees IncomingSockets; ep is shared), but
    // close_listen() may drop this PartialConnection, so it is looked up again (the key cannot
    // name a newer listen meanwhile: `ep`, held here, keeps its address taken).
    lock.unlock();
    const bool ok = extension_handler_ && extension_handler_(in->ext, &ext_reply, &state, &why);
    lock = service_lock();
    const auto found = partial_.find(key);
    if (found == partial_.end()) {
      refuse(in, HelloReply::kWrongNonce, "its listen closed during the transport setup");
      return;
    }
    g = found->second.get();
    if (!ok) {
      partial_.erase(found);  // a control hello is the first of its connection (no data yet)
      refuse(in, HelloReply::kSetupFailed, why);
      return;
    }
    g->transport_state = std::move(state);
    reply.resize(kReplySize + 2);
    put_u16(reply.data() + kReplySize, static_cast<uint16_t>(ext_reply.size()));
    reply.insert(reply.end(), ext_reply.begin(), ext_reply.end());
  }
  encode_reply(HelloReply::kAccepted, reply.data());
  if (send(in->fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(reply.size())) {
    // A fresh socket always has room for a reply (at most ~1 KiB): the peer is gone.
    partial_.erase(key);
    drop_incoming(in);
    return;
  }
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, in->fd, nullptr);
  UniqueFd sock = std::move(in->sock);
  if (hello.role == Role::kControl) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    getsockname(sock.get(), reinterpret_cast<sockaddr*>(&local), &len);
    g->peer = format_endpoint(in->peer);
    g->local = format_endpoint(local);
    g->tcp_window = hello.tcp_window;
    g->control = std::move(sock);
  } else {
    g->data[hello.index] = std::move(sock);
  }
  drop_incoming(in);
  if (++g->arrived == g->data.size() + 1) {
    ConnectedSockets c;
    c.control = std::move(g->control);
    c.data = std::move(g->data);
    c.peer = g->peer;
    c.local = g->local;
    c.transport_state = std::move(g->transport_state);
    c.peer_tcp_window = g->tcp_window;
    MESH_INFO(NCCL_NET | NCCL_INIT, "accepted connection from %s on %s with %zu data streams",
              c.peer.c_str(), c.local.c_str(), c.data.size());
    ep->ready.push_back(std::move(c));
    partial_.erase(key);
  }
}

// Closes the sockets that sent no complete hello within the connect timeout (a port scan, a
// stuck peer, a flood). admission_ is in arrival order, so the stale ones are at its front.
// At most kMaxExpiriesPerTurn per call (under the service mutex); the rest go on the next turn.
void Service::expire_incoming(int64_t now) {
  int expired = 0;
  for (const AdmissionQueue::Entry* oldest = admission_.oldest();
       oldest != nullptr && now - oldest->since_ms > timeout_ms_ && expired < kMaxExpiriesPerTurn;
       oldest = admission_.oldest(), ++expired) {
    IncomingSocket* in = incoming_.at(oldest->id).get();
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
}

// Drops the connections whose sockets did not all arrive within the connect timeout.
void Service::expire_partial_connections(int64_t now) {
  for (auto it = partial_.begin(); it != partial_.end();) {
    const PartialConnection& g = *it->second;
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
      it = partial_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace mesh::handshake
