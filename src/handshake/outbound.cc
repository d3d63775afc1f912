// SPDX-License-Identifier: Apache-2.0
// The connecting side of the handshake service (service.h): one OutgoingState per connect(),
// each socket through backoff -> connecting -> sending the hello -> awaiting the reply -> done,
// with retries until the connect deadline. Service thread only, under the service mutex.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "handshake/service.h"
#include "handshake/service_state.h"
#include "relay/request.h"
#include "util/byte_order.h"
#include "util/clock.h"
#include "util/device_binding.h"
#include "util/random.h"

namespace mesh::handshake {

void Service::open_outgoing(OutgoingState* outgoing, OutgoingSocket* out) {
  if (outgoing->finished) return;
  const ConnectRequest& req = outgoing->req;
  topology::Rail rail;
  uint16_t port = req.port;
  bool hello_in_request = false;  // relayed over TCP: the hello goes out with the relay request
  if (req.relay) {
    // The relay agents' view of the cable graph decides where this stream goes first; with no
    // route yet (beacons still converging) try again shortly, until the deadline.
    RelayHop hop;
    std::string why;
    switch (req.relay(out->index, &hop, &why)) {
      case RelayResolve::kFail:
        fail_outgoing(outgoing, why);
        return;
      case RelayResolve::kWait:
        out->last_error = why;
        out->phase = OutgoingSocket::Phase::kBackoff;
        out->retry_at_ms = monotonic_ms() + kRelayWaitMs;
        return;
      case RelayResolve::kOk:
        break;
    }
    rail.local = hop.local;
    rail.peer_addr = hop.peer_addr;
    port = hop.port;
    out->relay_route = hop.route;
    out->relay_path = hop.path;
    relay::RelayRequest rr;
    rr.stream = out->index;
    rr.port = req.port;
    rr.origin = req.relay_origin;
    rr.rdma = hop.rdma;
    rr.dest = req.relay_dest;
    if (rr.dest.size() > relay::kMaxRequestAddrs) rr.dest.resize(relay::kMaxRequestAddrs);
    // The proof that this connector holds the listener's handle (its nonce): the destination
    // host's agent connects only then (relay/request.h). Fresh time and random on every try.
    rr.tag = relay::relay_listener_tag(req.nonce.data(), req.nonce.size());
    out->relay_request.assign(relay::kRequestSize, 0);
    relay::encode_request(rr, relay::relay_listener_key(req.nonce.data(), req.nonce.size()),
                          out->relay_request.data());
    // Over a TCP relay the hello follows the request at once instead of after the relay's
    // "ok": every agent of the route leaves the bytes after its request in the socket until it
    // splices (relay/agent.cc), so the hello reaches the destination's listener right behind
    // the relayed connect. After "ok" it came a round trip to this host and back later, all
    // that time a socket without a hello at the destination: a burst of relayed sockets, which
    // all come from the relay host's one address, passed the listener's per-source pending cap
    // and evicted each other until the connect deadline (16 connections at once, 80 sockets:
    // tests/softroce/guest/lane.sh relay-line3 over TCP). An RDMA relay host hands the control
    // socket to its forwarder instead of splicing it, so there the hello waits for "ok".
    if (!hop.rdma) {
      out->relay_request.insert(out->relay_request.end(), out->hello.begin(), out->hello.end());
      hello_in_request = true;
    }
    out->relay_sent = 0;
    out->relay_got = 0;
  } else {
    rail = req.rails[out->rail];
  }
  out->sock.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  out->fd = out->sock.get();
  out->sent = hello_in_request ? out->hello.size() : 0;  // kSending has nothing left to send
  out->got = 0;
  out->reply.assign(kReplySize, 0);
  sockaddr_in local = make_sockaddr(rail.local.addr, 0);
  sockaddr_in peer = make_sockaddr(rail.peer_addr, port);
  // Binding the source address puts the socket on the cable of that subnet; where two local
  // interfaces share that subnet (port halves), only binding the device picks the interface.
  if (out->sock.valid()) {
    bind_to_rail_device(out->fd, rail.local.addr);
    defer_port_choice(out->fd);
  }
  if (!out->sock.valid() ||
      bind(out->fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    out->last_error = "bind to " + format_ipv4(rail.local.addr) + ": " + errno_text(errno);
    out->sock.reset();
    out->fd = -1;
    out->phase = OutgoingSocket::Phase::kBackoff;
    out->retry_at_ms = monotonic_ms() + out->backoff_ms;
    return;
  }
  const int rc = ::connect(out->fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer));
  if (rc != 0 && errno != EINPROGRESS) {
    out->last_error = "connect: " + errno_text(errno);
    out->sock.reset();
    out->fd = -1;
    out->phase = OutgoingSocket::Phase::kBackoff;
    out->retry_at_ms = monotonic_ms() + out->backoff_ms;
    out->backoff_ms = std::min(out->backoff_ms * 2, kRetryMaxMs);
    return;
  }
  out->phase = OutgoingSocket::Phase::kConnecting;
  epoll_event ev{};
  ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
  ev.data.ptr = static_cast<EpollTarget*>(out);
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, out->fd, &ev);
}

void Service::handle_outgoing(OutgoingState* outgoing, OutgoingSocket* out, uint32_t events) {
  if (outgoing->finished) return;
  auto retry = [&](const std::string& why) {
    out->last_error = why;
    out->last_busy = false;
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, out->fd, nullptr);
    out->sock.reset();
    out->fd = -1;
    out->phase = OutgoingSocket::Phase::kBackoff;
    out->retry_at_ms = monotonic_ms() + out->backoff_ms;
    out->backoff_ms = std::min(out->backoff_ms * 2, kRetryMaxMs);
  };
  // "Busy": the listener closed this socket to make room for newer ones (its pending cap is
  // full, most likely of someone else's half-open sockets). The peer is alive and the handle
  // valid, so try again with a fresh socket until the connect deadline (expire_outgoing() then
  // fails the connect naming the saturation).
  // A relay agent's "busy" is its own capacity (relayed pairs, sized from its descriptor limit,
  // or its per-source share of pending requests), not the listener's: said apart at the deadline.
  auto retry_busy = [&](bool relay) {
    ++outgoing->busy_replies;
    if (relay) ++outgoing->relay_busy_replies;
    const int64_t base = std::clamp(out->backoff_ms, kBusyRetryMinMs, kBusyRetryMaxMs);
    uint32_t r = 0;
    fill_random(&r, sizeof(r));
    retry(relay ? "a relay agent on the route (first hop " + out->relay_route + ") answered busy"
                : std::string("the peer answered busy: its handshake port is saturated"));
    out->last_busy = true;
    out->last_busy_relay = relay;
    out->retry_at_ms = monotonic_ms() + base + static_cast<int64_t>(r % (base / 2 + 1));
    out->backoff_ms = std::min(base * 2, kBusyRetryMaxMs);
  };
  if (out->phase == OutgoingSocket::Phase::kConnecting) {
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
    out->phase = outgoing->req.relay ? OutgoingSocket::Phase::kRelaySending
                                     : OutgoingSocket::Phase::kSending;
  }
  if (out->phase == OutgoingSocket::Phase::kRelaySending) {
    const ssize_t n =
        send(out->fd, out->relay_request.data() + out->relay_sent,
             out->relay_request.size() - out->relay_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      retry("sending the relay request (" + out->relay_route + "): " + errno_text(errno));
      return;
    }
    if (n > 0) out->relay_sent += static_cast<size_t>(n);
    if (out->relay_sent < out->relay_request.size()) return;
    out->phase = OutgoingSocket::Phase::kRelayAwaiting;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = static_cast<EpollTarget*>(out);
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, out->fd, &ev);
    return;
  }
  if (out->phase == OutgoingSocket::Phase::kRelayAwaiting) {
    // Exactly the 4-byte status: the listener's answer to a hello sent with the request may
    // follow it in the same segment, and is read in kAwaitingReply.
    const ssize_t n = recv(out->fd, out->relay_reply + out->relay_got,
                           sizeof(out->relay_reply) - out->relay_got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      retry("the relay (" + out->relay_route + ") closed the socket without answering (" +
            (n == 0 ? std::string("EOF") : errno_text(errno)) +
            "); is a plugin process running on every host of the route?");
      return;
    }
    out->relay_got += static_cast<size_t>(n);
    if (out->relay_got < sizeof(out->relay_reply)) return;
    relay::ReplyCode code;
    if (!relay::decode_relay_reply(out->relay_reply, &code)) {
      fail_outgoing(outgoing, "the relay port of " + out->relay_route +
                                  " answered with bytes that are not an nccl-mesh relay reply "
                                  "(is NCCL_MESH_RELAY_PORT the same on every host and free?)");
      return;
    }
    if (code == relay::ReplyCode::kBusy) {
      retry_busy(true);
      return;
    }
    if (code == relay::ReplyCode::kNoRdmaRelay || code == relay::ReplyCode::kNoRdmaOnCable) {
      // Not transient: the relay hosts' cables and RDMA ports do not change while the connect
      // waits, and an RDMA relay's QPs are on the cable to this relay host (every attempt goes
      // there). Fail now with the reason instead of at the connect deadline. On a chain the
      // refusal may come from a later relay host, passed back unchanged: its log names it.
      fail_outgoing(outgoing, "a relay host of the route (first hop " + out->relay_route + ") " +
                                  relay::relay_reply_text(code));
      return;
    }
    if (code != relay::ReplyCode::kOk) {
      retry(std::string("a relay agent on the route ") + relay::relay_reply_text(code) +
            " (first hop " + out->relay_route + "; see that host's log)");
      return;
    }
    out->phase = OutgoingSocket::Phase::kSending;
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = static_cast<EpollTarget*>(out);
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, out->fd, &ev);
  }
  if (out->phase == OutgoingSocket::Phase::kSending) {
    const ssize_t n = send(out->fd, out->hello.data() + out->sent, out->hello.size() - out->sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      retry("sending the hello: " + errno_text(errno));
      return;
    }
    if (n > 0) out->sent += static_cast<size_t>(n);
    if (out->sent < out->hello.size()) return;
    out->phase = OutgoingSocket::Phase::kAwaitingReply;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = static_cast<EpollTarget*>(out);
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, out->fd, &ev);
  }
  if (out->phase == OutgoingSocket::Phase::kAwaitingReply) {
    for (;;) {
      const ssize_t n =
          recv(out->fd, out->reply.data() + out->got, out->reply.size() - out->got, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (n <= 0) {
        // Tried again until the deadline, not failed at once: a listener that evicts a pending
        // socket (its per-source cap: many connects from one host, or every relayed socket, which
        // all come from the relay's one address) answers "busy" and closes, and when our hello
        // is still unread there the close is a reset that can overtake the "busy".
        retry("the peer closed the handshake socket without answering (" +
              (n == 0 ? std::string("EOF") : errno_text(errno)) +
              "; a busy listener, or the peer process (or a relay on the route) exited or does "
              "not run the same plugin)");
        return;
      }
      out->got += static_cast<size_t>(n);
      if (out->got < out->reply.size()) continue;
      if (out->got == kReplySize) {
        HelloReply reply;
        if (!decode_reply(out->reply.data(), &reply)) {
          fail_outgoing(outgoing, "the peer answered with bytes that are not an nccl-mesh reply");
          return;
        }
        if (reply == HelloReply::kBusy) {
          retry_busy(false);
          return;
        }
        if (reply != HelloReply::kAccepted) {
          if (reply == HelloReply::kSettingsDiffer) outgoing->shared->settings_differ = true;
          fail_outgoing(outgoing, std::string("the peer ") + reply_text(reply));
          return;
        }
        if (!out->expect_ext) break;
        out->reply.resize(kReplySize + 2);  // the extension's length
        continue;
      }
      if (out->got == kReplySize + 2) {
        const size_t len = get_u16(out->reply.data() + kReplySize);
        if (len == 0 || len > kMaxExtension) {
          fail_outgoing(outgoing, "the peer answered with an extension of " + std::to_string(len) +
                                      " bytes (1.." + std::to_string(kMaxExtension) + " allowed)");
          return;
        }
        out->reply.resize(kReplySize + 2 + len);
        continue;
      }
      outgoing->shared->result.peer_extension.assign(out->reply.begin() + kReplySize + 2,
                                                     out->reply.end());
      break;
    }
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, out->fd, nullptr);
    out->phase = OutgoingSocket::Phase::kDone;
    finish_outgoing_if_ready(outgoing);
  }
}

void Service::finish_outgoing_if_ready(OutgoingState* outgoing) {
  for (const auto& s : outgoing->sockets) {
    if (s->phase != OutgoingSocket::Phase::kDone) return;
  }
  ConnectedSockets& c = outgoing->shared->result;
  if (outgoing->req.relay) {
    std::string route = outgoing->sockets[0]->relay_path + "; first hops:";
    for (const auto& s : outgoing->sockets) {
      route +=
          s->role == Role::kControl ? std::string(" control") : " data " + std::to_string(s->index);
      route += " via ";
      route += s->relay_route;
    }
    outgoing->shared->route = route;
  }
  for (auto& s : outgoing->sockets) {
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
  outgoing->finished = true;
  outgoing->shared->status.store(ConnectStatus::kDone, std::memory_order_release);
}

void Service::fail_outgoing(OutgoingState* outgoing, const std::string& why) {
  close_outgoing_sockets(outgoing);
  outgoing->finished = true;
  outgoing->shared->error = why;
  outgoing->shared->status.store(ConnectStatus::kFailed, std::memory_order_release);
}

void Service::close_outgoing_sockets(OutgoingState* outgoing) {
  for (auto& s : outgoing->sockets) {
    if (s->fd >= 0) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->fd, nullptr);
    s->fd = -1;
    s->sock.reset();
  }
}

// Fails every connect still unfinished at its deadline, naming why: the peer's port answered
// "busy" throughout (saturated), or the last error of its sockets.
void Service::expire_outgoing(int64_t now) {
  for (auto& outgoing : outgoing_) {
    if (outgoing->finished || now < outgoing->deadline_ms) continue;
    std::string last, relay_busy;
    bool busy = false;
    for (const auto& s : outgoing->sockets) {
      if (s->phase != OutgoingSocket::Phase::kDone && !s->last_error.empty()) last = s->last_error;
      if (s->phase != OutgoingSocket::Phase::kDone && s->last_busy) busy = true;
      if (s->phase != OutgoingSocket::Phase::kDone && s->last_busy && s->last_busy_relay)
        relay_busy = s->relay_route;
    }
    if (!relay_busy.empty()) {
      std::string why = "the relay agents on the route (first hop ";
      why.append(relay_busy)
          .append(") answered busy for the whole NCCL_MESH_CONNECT_TIMEOUT_MS=")
          .append(std::to_string(outgoing->req.timeout_ms))
          .append(" ms (")
          .append(std::to_string(outgoing->relay_busy_replies))
          .append(" of ")
          .append(std::to_string(outgoing->busy_replies))
          .append(
              " busy replies from relays): a relay host carries as many relayed sockets as its "
              "descriptor limit allows (85 at ulimit -n 1024; a TCP-relayed connection takes "
              "1 + NCCL_MESH_TCP_STREAMS), and at most a quarter of them pending from one "
              "address. The relay host's log names the cap it hit: raise its descriptor limit "
              "(LimitNOFILE= of nccl-mesh-relayd, or ulimit -n of the rank that relays)");
      fail_outgoing(outgoing.get(), why);
      continue;
    }
    if (busy) {
      std::string why = "the peer's handshake port was saturated by unauthenticated connections";
      why.append(" for the whole NCCL_MESH_CONNECT_TIMEOUT_MS=")
          .append(std::to_string(outgoing->req.timeout_ms))
          .append(" ms (")
          .append(std::to_string(outgoing->busy_replies))
          .append(
              " busy replies); something on the network is opening connections to it "
              "without completing a handshake (see the peer's log for the source), or "
              "raise NCCL_MESH_MAX_PENDING_HANDSHAKES on the peer for a very large job");
      fail_outgoing(outgoing.get(), why);
      continue;
    }
    fail_outgoing(outgoing.get(), "no answer within NCCL_MESH_CONNECT_TIMEOUT_MS=" +
                                      std::to_string(outgoing->req.timeout_ms) + " ms" +
                                      (last.empty() ? "" : " (last error: " + last + ")") +
                                      "; check the cable, the peer process and firewalls");
  }
}

// Reopens the sockets of one connect whose backoff is over: after a refused connect, a "busy"
// reply or a failed socket/bind, and the first try of every socket (due at once, start_connect).
void Service::retry_outgoing(OutgoingState* outgoing, int64_t now) {
  if (outgoing->finished) return;
  for (auto& s : outgoing->sockets) {
    if (s->phase == OutgoingSocket::Phase::kBackoff && now >= s->retry_at_ms) {
      open_outgoing(outgoing, s.get());
    }
  }
}

}  // namespace mesh::handshake
