// SPDX-License-Identifier: Apache-2.0
// `nccl-mesh-doctor --serve`: answers the probes of other hosts' doctors. It listens only on the
// addresses the plugin would use (the cables), answers INFO with this host's interface list,
// echoes pings, and sinks or sources data for a bounded time. No state outlives a connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "tools/doctor/peers.h"
#include "topology/interface.h"
#include "util/socket_util.h"

namespace mesh::doctor::probe {

class ProbeServer {
 public:
  ProbeServer() = default;
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;
  ~ProbeServer();

  // What INFO reports, asked for on every INFO request (from the session's thread): a server
  // that runs for days must report an MTU or link state changed after it started (issue 29).
  using SelfInfo = std::function<PeerInfo()>;

  // Listens on `port` of every address in `bind` (port 0: the first listener picks a free port
  // and the others use the same). `self` is what INFO reports. `log` (may be null) gets one line
  // per connection. False with *error when an address cannot be bound. The listeners stay on
  // the addresses `bind` had at start: an address added later needs a restart.
  bool start(const std::vector<topology::Interface>& bind, uint16_t port, SelfInfo self,
             std::ostream* log, std::string* error);
  bool start(const std::vector<topology::Interface>& bind, uint16_t port, PeerInfo self,
             std::ostream* log, std::string* error) {
    return start(bind, port, SelfInfo([self] { return self; }), log, error);
  }

  uint16_t port() const { return port_; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }

  // Serves until `stop` becomes true or `seconds` (> 0) have passed, then waits for the
  // connections in progress (each is bounded by the protocol's limits and I/O timeouts).
  // Returns the number of connections served.
  size_t run(double seconds, const std::atomic<bool>& stop);

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void session(UniqueFd fd, std::string peer);
  void log_line(const std::string& line);
  void reap(bool all);

  std::vector<UniqueFd> listeners_;
  std::vector<std::string> endpoints_;
  uint16_t port_ = 0;
  SelfInfo self_;
  std::ostream* log_ = nullptr;
  std::mutex log_mutex_;
  std::atomic<bool> stopping_{false};
  bool accept_warned_ = false;  // run(): a shortage of descriptors was logged
  std::vector<Worker> workers_;
};

}  // namespace mesh::doctor::probe
