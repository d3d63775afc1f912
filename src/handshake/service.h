// SPDX-License-Identifier: Apache-2.0
// The process-wide handshake service: one background thread (epoll) that
//  - listens on the handshake port of every mesh interface and authenticates incoming sockets
//    (hello with the listen's nonce), grouping them into connections for accept(); and
//  - drives outgoing connection attempts for connect(): non-blocking TCP connects from the
//    right local address, hello, reply, retries until the connect timeout.
// NCCL's threads never block on it: listen/connect/accept only register work or collect results
// under the service mutex. Two ranks connecting to each other at once cannot deadlock because
// neither side's progress depends on NCCL calling back into the plugin.
//
// The mutex: the service thread takes it for one bounded unit of work at a time (one epoll
// event, which accepts at most kMaxAcceptsPerEvent sockets; one deadline stage, which closes
// at most kMaxExpiriesPerTurn silent sockets; one connect's retries), never across a batch or
// epoll_wait, and not while the transport's extension handler runs (RDMA QP setup). Before each
// unit it lets NCCL's threads that are waiting for the mutex go first (caller_lock and
// service_lock, service.cc): std::mutex is not fair, and a service thread that relocks at once
// would otherwise keep a waiting connect()/accept() out for a whole flood.
//
// Threads: the service thread owns every socket until a connection is complete, then hands the
// file descriptors over (ConnectedSockets, connected_sockets.h) and never touches them again.
//
// Files: this class's public calls and loop are in service.cc, the listening side in
// inbound.cc (its admission policy: admission_queue.h), the connecting side in outbound.cc, the
// private types in service_state.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "handshake/admission_queue.h"
#include "handshake/agreement.h"
#include "handshake/connected_sockets.h"
#include "handshake/handle.h"
#include "handshake/hello.h"
#include "handshake/warn_limiter.h"
#include "relay/registrar.h"
#include "topology/selection.h"
#include "util/accept_errors.h"
#include "util/ipv4.h"
#include "util/socket_util.h"

namespace mesh::handshake {

// Runs on the service thread for a control hello that carries an extension: builds the
// listener's side of the transport from the connector's bytes, returns the reply bytes
// (1..kMaxExtension) and the state handed to accept(). False (with *why) refuses the connection.
using ExtensionHandler =
    std::function<bool(const std::vector<uint8_t>& extension, std::vector<uint8_t>* reply,
                       std::shared_ptr<void>* state, std::string* why)>;

// One open listen comm's state inside the service (guarded by the service mutex).
struct ListenEndpoint {
  Nonce nonce{};
  std::deque<ConnectedSockets> ready;
  bool closed = false;
  // Set when a connector that holds this listen's nonce runs with other shared settings
  // (agreement.h): accept() fails with it rather than wait for a connection that cannot come.
  std::string failure;
};

enum class ConnectStatus { kPending, kDone, kFailed };

// One connect() in progress, shared between NCCL's thread (reads status) and the service thread.
struct OutgoingConnect {
  std::atomic<ConnectStatus> status{ConnectStatus::kPending};
  std::string error;             // set before status becomes kFailed
  ConnectedSockets result;       // filled before status becomes kDone
  std::string description;       // "peer 10.0.0.2:5000 via 10.0.0.1 (+1 rail)"
  std::string route;             // relayed: each socket's first hop and route (set before kDone)
  bool settings_differ = false;  // refused with kSettingsDiffer (set before kFailed)
};

// A relayed connect (docs/relay.md): where each socket goes first. kWait: no route yet (the
// cable graph may still be converging), retried until the deadline; kFail: fail the connect now.
struct RelayHop {
  Ipv4Prefix local;        // bind here
  uint32_t peer_addr = 0;  // the first relay agent (or this host's agent)
  uint16_t port = 0;       // its relay port
  std::string route;       // the first hop, for messages
  std::string path;        // the whole route, for the log
  bool rdma = false;       // ask the relay to forward the connection's RDMA writes itself
};
enum class RelayResolve { kOk, kWait, kFail };
using RelayResolver = std::function<RelayResolve(uint16_t stream, RelayHop* hop, std::string* why)>;

struct ConnectRequest {
  Nonce nonce{};
  uint16_t port = 0;
  std::vector<topology::Rail> rails;  // control on rails[0]; data stream i on rails[i % n]
  uint16_t ndata = 1;                 // 0 only with an extension
  std::vector<uint8_t> extension;     // sent after the control hello (empty: plain TCP)
  uint32_t tcp_window = 0;            // the sender's TCP eager window, for its hellos (hello.h)
  int64_t timeout_ms = 30000;
  // Set for a peer without a common subnet: every socket reaches the peer's handshake port
  // through relay agents (rails are then unused); relay_dest are the peer's addresses.
  RelayResolver relay;
  std::vector<Ipv4Prefix> relay_dest;
  uint32_t relay_origin = 0;
};

class Service {
 public:
  Service();
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Binds the handshake port on every address (same port on all) and starts the thread.
  bool start(const std::vector<Ipv4Prefix>& addrs, uint16_t port, int64_t timeout_ms,
             int64_t max_pending, std::string* why);
  // Closes every socket (pending handshakes, unclaimed connections) and joins the thread.
  void stop();
  bool running() const { return thread_.joinable(); }
  uint16_t port() const { return port_; }
  // The local socket of the host's relay agent (relay::agent_socket_name): every open listen is
  // registered there, so relayed connections can reach it (docs/relay.md). Empty: none.
  void set_relay_registration(const std::string& name) { registrar_.configure(name); }
  // The same local socket, for a standby's route queries (relay::Agent::route_for_rdma).
  relay::Registrar& relay_registrar() { return registrar_; }
  // Set before start(); without one, hellos with an extension are refused.
  void set_extension_handler(ExtensionHandler handler) { extension_handler_ = std::move(handler); }
  // The shared settings this process sends in its hellos and expects in others' (agreement.h);
  // local_agreement() unless a test sets it before start().
  void set_agreement(const Agreement& a) { agreement_ = a; }

  std::shared_ptr<ListenEndpoint> open_listen();
  void close_listen(const std::shared_ptr<ListenEndpoint>& ep);
  // Pops a completed connection for this listen, if any (never blocks). False with *failure set
  // once a connector's shared settings differed (ListenEndpoint::failure).
  bool take_ready(const std::shared_ptr<ListenEndpoint>& ep, ConnectedSockets* out,
                  std::string* failure = nullptr);

  std::shared_ptr<OutgoingConnect> start_connect(const ConnectRequest& req);
  // Abandons a connect that start_connect returned (its sockets are closed by the service thread).
  void cancel_connect(const std::shared_ptr<OutgoingConnect>& which);

 private:
  struct EpollTarget;
  struct IncomingSocket;
  struct OutgoingSocket;
  struct OutgoingState;
  struct PartialConnection;

  // service.cc: the loop and the deadlines (private types: service_state.h).
  void loop();
  void wake();
  // Runs every deadline once per loop turn, one function per kind:
  void expire(int64_t now_ms);

  // inbound.cc: listening sockets, hello reading, grouping sockets into connections.
  bool bind_listeners(const std::vector<Ipv4Prefix>& addrs, uint16_t port, std::string* why);
  void handle_listener(int fd, std::unique_lock<std::mutex>& lock);
  // accept4 failed for lack of descriptors or memory: take the listeners out of epoll for a
  // moment (one WARN); resume_accepting() puts them back when the pause is over.
  void pause_accepting(int err);
  void resume_accepting(int64_t now_ms);
  // Closes the pending socket that admission_ chose (with a "busy" reply) to admit `newcomer`.
  void evict(const AdmissionQueue::Eviction& eviction, const sockaddr_in& newcomer);
  // `lock` holds mu_; accept_hello releases it while the extension handler runs.
  void handle_incoming(IncomingSocket* in, std::unique_lock<std::mutex>& lock);
  void accept_hello(IncomingSocket* in, const Hello& hello, std::unique_lock<std::mutex>& lock);
  void refuse(IncomingSocket* in, HelloReply reply, const std::string& why);
  void drop_incoming(IncomingSocket* in);
  // A WARN about another host's socket, through warns_ (rate-limited per cause).
  void report(size_t cause, uint32_t source, const std::string& detail, const std::string& full);
  void expire_incoming(int64_t now_ms);
  void expire_partial_connections(int64_t now_ms);

  // outbound.cc: the connect state machine.
  void open_outgoing(OutgoingState* outgoing, OutgoingSocket* out);
  void handle_outgoing(OutgoingState* outgoing, OutgoingSocket* out, uint32_t events);
  void fail_outgoing(OutgoingState* outgoing, const std::string& why);
  void finish_outgoing_if_ready(OutgoingState* outgoing);
  void close_outgoing_sockets(OutgoingState* outgoing);
  void expire_outgoing(int64_t now_ms);
  void retry_outgoing(OutgoingState* outgoing, int64_t now_ms);

  // mu_ for NCCL's threads (the public calls) and for the service thread's units of work: the
  // service waits, before it locks, until every caller that was waiting has had its turn.
  std::unique_lock<std::mutex> caller_lock();
  std::unique_lock<std::mutex> service_lock();

  std::mutex mu_;
  std::atomic<uint64_t> callers_arrived_{0};  // caller_lock() calls begun
  std::atomic<uint64_t> callers_entered_{0};  // of those, the ones that hold or held mu_
  std::thread thread_;
  std::atomic<bool> stop_{false};
  UniqueFd epoll_;
  UniqueFd wake_fd_;
  std::vector<UniqueFd> listeners_;
  std::vector<std::unique_ptr<EpollTarget>> listener_targets_;
  std::unique_ptr<EpollTarget> wake_target_;
  std::vector<std::unique_ptr<IncomingSocket>> dead_incoming_;  // freed after each event batch
  uint16_t port_ = 0;
  ExtensionHandler extension_handler_;
  Agreement agreement_ = local_agreement();
  relay::Registrar registrar_;
  int64_t timeout_ms_ = 30000;
  WarnLimiter warns_;
  AcceptPause accept_pause_;       // listeners out of the epoll set for want of a resource
  int64_t accept_warned_ms_ = -1;  // the last WARN about a failing accept4 (-1: none)

  // The unauthenticated sockets of incoming_ (keyed by fd) in arrival order: the pending caps,
  // the eviction victim and the no-hello deadline (expire).
  AdmissionQueue admission_{256};

  std::vector<std::shared_ptr<ListenEndpoint>> listens_;
  std::unordered_map<int, std::unique_ptr<IncomingSocket>> incoming_;
  std::map<std::pair<ListenEndpoint*, uint64_t>, std::unique_ptr<PartialConnection>> partial_;
  std::vector<std::unique_ptr<OutgoingState>> outgoing_;
};

}  // namespace mesh::handshake
