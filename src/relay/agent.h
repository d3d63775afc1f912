// SPDX-License-Identifier: Apache-2.0
// The host's relay agent (docs/relay.md). Every plugin process starts one; the process whose
// agent binds NCCL_MESH_RELAY_PORT (TCP and UDP, on each mesh interface's address, never on
// 0.0.0.0 nor the management network, without SO_REUSEPORT: one winner per host or namespace)
// and the local socket (relay/registry.h) is the host's agent, the others stand by and retry the
// bind every second, so a host relays while any plugin process lives on it. With
// bind_interface_addresses (NCCL_MESH_EMULATE, NCCL_MESH_RELAY_SCOPE=process) each process is an
// agent of its own (its local socket name carries its host id): one "host" per process, for
// tests that put several hosts into one network namespace.
//
// The agent's thread (epoll):
//  - sends a beacon (relay/beacon.h) every kBeaconIntervalMs on each mesh interface (SO_PRIORITY 6,
//    DSCP CS6) and keeps the cable graph it learns (relay/link_state.h), holding silent
//    neighbours while their cable has carrier and relayed sockets run over it
//    (relay/retention.h);
//  - accepts relay requests (relay/request.h) on the relay port, connects onward (the next agent;
//    the destination host's own agent when it shares a subnet with it) and splices the two
//    sockets (relay/splice.h), at most max_pairs pairs. As the destination host's agent (the
//    last hop) it connects only to a listener that a plugin process of its host registered on
//    the local socket, for a request that proves it holds that listener's handle. A request
//    with the RDMA flag, once the destination's agent answered "ok", goes to the RDMA forwarder
//    instead of a splice (config.rdma_forward);
//  - keeps the registrations of this host's plugin processes (relay/registry.h).
// first_hop() (any thread) says where a connection of this process to a non-adjacent peer goes
// first: the next hop of a shortest path when this process is the agent, else the host's agent.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "relay/link_state.h"
#include "relay/rdma_handoff.h"
#include "relay/registrar.h"
#include "relay/registry.h"
#include "relay/request.h"
#include "relay/routes.h"
#include "topology/interface.h"
#include "util/accept_errors.h"
#include "util/socket_util.h"

namespace mesh::relay {

struct AgentConfig {
  uint16_t port = 18515;
  std::vector<topology::Interface> interfaces;  // the plugin's selected mesh interfaces
  // Bind the relay port on each interface's address instead of 0.0.0.0: this process is then
  // an agent of its own (never a standby handing sockets to another process of the host).
  bool bind_interface_addresses = false;
  int64_t user_timeout_ms = 20000;    // TCP_USER_TIMEOUT on relayed sockets
  int64_t connect_timeout_ms = 5000;  // onward connect of one relayed socket
  // Relayed socket pairs at once ("busy" beyond); 0: pairs_for_fd_limit() of this process.
  size_t max_pairs = 0;
  // A missing route fails a connect only this long after it began asking (and after the agent
  // bound its port): NCCL_MESH_CONNECT_TIMEOUT_MS.
  int64_t route_wait_ms = 30000;
  size_t buffer_bytes = 256 * 1024;  // per direction of each pair
  std::vector<RoutePin> pins;        // NCCL_MESH_RELAY_VIA
  // RDMA relay: takes the sockets of a request with the RDMA flag once the agent, next to the
  // destination, has connected to it. Unset (no usable RDMA here): such requests are answered
  // kNoRdmaRelay.
  RdmaForwardHook rdma_forward;
  // Whether this local mesh address has a usable RDMA port (the cable an RDMA forward would
  // write to the destination on). Unset: every address of a host with rdma_forward has one.
  std::function<bool(uint32_t local_addr)> rdma_usable_at;
  // The local socket also admits processes of this group (-1: only this user and root).
  long allowed_gid = -1;
  // Cluster key (relay/cluster_key.h): beacons signed and verified with it. Empty: none.
  ClusterKey cluster_key;
  // Tests only: called on the agent's thread before each epoll_wait, so that a test can hold
  // the thread while several sockets become ready and so arrive in one batch of events.
  std::function<void()> before_wait;
};

// Relayed socket pairs a process with this RLIMIT_NOFILE soft limit can hold: each pair holds 6
// descriptors (2 sockets, 2 pipes), after a reserve for the rest of the process (half the
// limit, at least 512: NCCL's own sockets, docs/relay.md "Bounded memory"). At most kMaxPairs
// (2 GiB of pipe buffers at worst), at least kMinPairs; *below_minimum (when given) says that
// even kMinPairs do not fit beside the reserve (the agent then WARNs once at start).
constexpr size_t kMinPairs = 16;
constexpr size_t kMaxPairs = 4096;
size_t pairs_for_fd_limit(uint64_t soft_limit, bool* below_minimum = nullptr);

// Requests one source address may have pending (accepted, not yet answered nor admitted) with
// a cap of `max_pairs` pairs; beyond it they are answered "busy" at once (docs/relay.md,
// "Bounded memory"). A quarter of the cap, at least 1 (agent.cc says why).
size_t pending_per_source(size_t max_pairs);

// The local socket name of the agent a process with this config registers with.
std::string agent_socket_name(const AgentConfig& config);

struct FirstHop {
  Ipv4Prefix local;              // bind here
  bool via_local_agent = false;  // this process is not the agent: the host's agent is the hop
  size_t cables = 0;             // cables of the route (0 when via_local_agent: unknown here)
  uint32_t peer_addr = 0;        // connect here, at the relay port
  uint16_t port = 0;
  std::string route;  // the first hop, "198.18.20.2", for messages
  std::string path;   // "2 cables, 2 equal-cost first hops, e.g. through 198.18.20.2+..."
};

enum class HopStatus { kOk, kWait, kFail };

class Agent {
 public:
  Agent();
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  bool start(const AgentConfig& config, std::string* why);
  void stop();
  bool running() const { return thread_.joinable(); }
  bool is_agent() const { return bound_.load(); }
  uint32_t host_id() const { return self_id_; }

  // kWait: no route yet, or the agent bound its port less than kSettleMs ago (the graph may
  // still be converging: a route found then might miss an equal-cost path); kFail: the graph is
  // complete enough to say there is no path (*why names what is missing).
  // `since_ms` (monotonic): when the connect began asking; a missing route is a failure only
  // config.route_wait_ms (the connect timeout) after both it and the agent's start (a peer whose
  // agent starts late is not in the graph yet).
  HopStatus first_hop(const std::vector<Ipv4Prefix>& dest, uint16_t stream, FirstHop* out,
                      std::string* why, int64_t since_ms = 0);

  // first_hop() for a process that must know the route itself (RDMA relay opens its QPs on the
  // first cable): in a standby, the host's agent is asked over the local socket (`local`, set
  // by set_local_client), without blocking: kWait until it answered.
  HopStatus route_for_rdma(const std::vector<Ipv4Prefix>& dest, uint16_t stream, FirstHop* out,
                           std::string* why, int64_t since_ms);
  void set_local_client(Registrar* local) { local_client_ = local; }

  // Relayed pairs carried now and bytes spliced so far (tests, the log).
  size_t pairs() const { return npairs_.load(); }

 private:
  struct Target;
  struct Pending;
  struct Box;
  void loop();
  bool try_bind();
  void send_beacons(int64_t now);
  // The silent neighbours this host holds now (relay/retention.h), for LinkState::expire().
  std::set<uint32_t> held_neighbours(int64_t now);
  void read_beacons(int fd, int64_t now);
  void accept_local(int fd);
  void read_local(int fd);
  // The last hop: checks the registration, the proof and that the listener at `local` (where
  // the agent connects) is still its registrant's user's; false after answering the refusal.
  bool admit_terminal(Pending* p, uint32_t local, int64_t now);
  // A registration's port names a listener of the registering process's user (registry.h,
  // check_listener); false after one WARN (rate-limited per cause) saying why not.
  bool registration_allowed(const Registration& r, uid_t uid, pid_t pid);
  void on_down_reply(Pending* p);
  void accept_requests(int fd);
  // After accept4 failed on a listener: true to take the next connection (the error was about
  // this one), false to stop (the backlog is drained, or accepting paused).
  bool accept_failed(int err, int64_t now);
  void set_listeners_watched(bool watched);  // the relay port's listeners and the local socket
  void accepting_again();                    // an accept4 worked: logs the end of a shortage
  // An event on the upstream socket (reading the request) or the downstream one (connecting).
  void on_pending(Pending* p, bool downstream, uint32_t events, int64_t now);
  void route_request(Pending* p, int64_t now);
  void finish_pending(Pending* p, ReplyCode code, const std::string& why);
  void start_splice(Pending* p);
  // start_splice for a request with the RDMA flag: both sockets (out of the epoll set) go to
  // config_.rdma_forward, or the connector is answered "busy".
  void hand_to_rdma(Pending* p);
  void on_splice(Target* t);
  void update_splice(Target* t);
  void close_splice(Target* t);
  void expire(int64_t now);
  void warn_limited(const std::string& key, const std::string& text, int64_t now);

  AgentConfig config_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> bound_{false};
  std::atomic<size_t> npairs_{0};
  int64_t started_ms_ = 0;
  std::atomic<int64_t> bound_ms_{0};  // read by first_hop() on other threads
  uint32_t self_id_ = 0;
  UniqueFd epoll_;
  UniqueFd wake_;
  std::vector<UniqueFd> listeners_;
  std::vector<UniqueFd> udp_recv_;
  UniqueFd local_;  // the local socket's listener
  struct LocalClient {
    UniqueFd fd;
    Target* target = nullptr;
    uid_t uid = 0;  // SO_PEERCRED at accept: whose listeners it may register
    pid_t pid = 0;
  };
  std::map<int, LocalClient> local_clients_;
  Registry registry_;
  Registrar* local_client_ = nullptr;  // the plugin's registrar (route queries of a standby)
  ReplayCache replays_;
  std::vector<std::pair<UniqueFd, size_t>> udp_send_;  // socket, interface index
  std::vector<std::unique_ptr<Target>> targets_;       // listeners, udp, wake
  // Requests being read or connected onward, and relayed socket pairs, keyed by themselves and
  // never by a descriptor number: a request that ends closes its sockets at once, and a
  // connection accepted later in the same batch of events gets the same number, while the
  // batch may still hold an event whose data points at the first request. Whatever ends (dead)
  // is freed only after the batch (loop()), as are the targets of closed local clients.
  std::map<Pending*, std::unique_ptr<Pending>> pending_;
  std::map<Box*, std::unique_ptr<Box>> boxes_;
  // Entries of pending_ per upstream source address (only sources with one at least), dead
  // ones included until they are freed, as in the total cap.
  std::map<uint32_t, size_t> pending_per_source_;
  std::vector<std::unique_ptr<Target>> retired_;  // targets freed after the current batch
  std::map<std::string, int64_t> warned_;
  // Beacons accepted per source address in the current second (a flood is dropped).
  std::map<uint32_t, std::pair<int64_t, int>> beacon_rate_;
  bool warned_truncated_ = false;
  bool warned_socket_table_ = false;
  // Neighbours held past their TTL now, by id, with their addresses (logged once each).
  std::map<uint32_t, std::string> retained_;
  int64_t last_bind_try_ms_ = -1;
  AcceptPause accept_pause_;  // listeners out of the epoll set for want of a resource
  int64_t next_beacon_ms_ = 0;

  mutable std::mutex mu_;  // guards state_
  std::unique_ptr<LinkState> state_;
};

}  // namespace mesh::relay
