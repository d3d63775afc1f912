// SPDX-License-Identifier: Apache-2.0
// The handshake service's private types (service.h declares them, service.cc, inbound.cc and
// outbound.cc use them), and the constants those files share. Only the service thread touches
// these objects, always under the service mutex (service.h), and only the service thread frees
// them (Service::loop says when).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "handshake/hello.h"
#include "handshake/service.h"
#include "util/socket_util.h"

namespace mesh::handshake {

constexpr int64_t kRetryMinMs = 20;
constexpr int64_t kRetryMaxMs = 500;
// Backoff after a "busy" reply: the listener made room by closing this socket (or an attacker
// holds its slots), so come back soon, spread out by jitter so that retrying connectors do not
// arrive together.
constexpr int64_t kBusyRetryMinMs = 50;
constexpr int64_t kBusyRetryMaxMs = 200;
// A relayed connect with no route yet asks the relay agent again this often.
constexpr int64_t kRelayWaitMs = 250;
// The service thread's units of work under the mutex (service.h) stay small: a listener event
// accepts at most this many sockets (the listener is level-triggered, so the rest of the
// backlog comes back with the next epoll_wait), and one loop turn closes at most this many
// silent sockets at their deadline (the rest on the next turn, at most 10 ms later).
constexpr int kMaxAcceptsPerEvent = 16;
constexpr int kMaxExpiriesPerTurn = 32;

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

// What an epoll event's data.ptr points at: the wake eventfd, a listening socket, or one of the
// sockets below (which derive from it). fd is -1 once the socket is closed, so an event that
// arrives for it later in the same batch is ignored.
struct Service::EpollTarget {
  enum class Type { kWake, kListener, kIncoming, kOutgoing };
  Type type;
  int fd = -1;
  explicit EpollTarget(Type t) : type(t) {}
};

// An accepted socket that has not yet sent a whole hello (and extension): unauthenticated, so
// it counts against the pending caps until accept_hello() moves it into a PartialConnection or
// it is refused, evicted or expires.
struct Service::IncomingSocket : EpollTarget {
  UniqueFd sock;
  sockaddr_in peer{};
  uint8_t buf[kHelloSize] = {};
  size_t got = 0;
  bool have_hello = false;
  Hello hello;
  std::vector<uint8_t> ext;  // extension bytes (hello.ext_len, bounded by kMaxExtension)
  size_t ext_got = 0;
  uint32_t source = 0;  // the peer's address, host order
  IncomingSocket() : EpollTarget(Type::kIncoming) {}
};

// One socket of a connect(): the control stream (index 0) or data stream `index`, with its own
// phase, retry backoff and last error.
struct Service::OutgoingSocket : EpollTarget {
  // Relayed sockets (req.relay) pass through kRelaySending/kRelayAwaiting (the relay request and
  // the relay's status word) between kConnecting and kSending.
  enum class Phase {
    kBackoff,
    kConnecting,
    kRelaySending,
    kRelayAwaiting,
    kSending,
    kAwaitingReply,
    kDone
  };
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
  bool last_busy = false;              // the last try got a "busy" reply (last_error says so)
  bool last_busy_relay = false;        // from a relay agent on the route, not the listener
  std::vector<uint8_t> relay_request;  // relayed: the request for this stream
  size_t relay_sent = 0;
  uint8_t relay_reply[4] = {};
  size_t relay_got = 0;
  std::string relay_route;  // the first hop of the last try
  std::string relay_path;   // and the route it belongs to
  OutgoingState* owner = nullptr;
  OutgoingSocket() : EpollTarget(Type::kOutgoing) {}
};

// The service thread's state of one connect(): the request, its sockets and deadline. `shared`
// is what start_connect() returned to NCCL's thread, which polls its status.
struct Service::OutgoingState {
  std::shared_ptr<OutgoingConnect> shared;
  ConnectRequest req;
  uint64_t conn_id = 0;
  int64_t deadline_ms = 0;
  uint32_t busy_replies = 0;
  uint32_t relay_busy_replies = 0;  // of them from relay agents (their pairs or pending caps)
  std::vector<std::unique_ptr<OutgoingSocket>> sockets;
  bool finished = false;  // failed, done or cancelled: removed after the current event batch
};

// The authenticated sockets of one incoming connection (same listen, same conn_id) collected
// so far; once the control socket and every data socket have arrived they become a
// ConnectedSockets on the listen's ready queue.
struct Service::PartialConnection {
  std::shared_ptr<ListenEndpoint> ep;
  UniqueFd control;
  std::vector<UniqueFd> data;
  size_t arrived = 0;
  int64_t since_ms = 0;
  uint32_t source = 0;  // address of the first socket that arrived
  std::string peer;
  std::string local;
  std::shared_ptr<void> transport_state;
  uint32_t tcp_window = 0;  // the control hello's (hello.h)
};

}  // namespace mesh::handshake
