// A plugin process's side of the relay agent's local socket (relay/registry.h): registers this
// process's handshake listeners with its host's relay agent, so that relayed connections reach
// them (and nothing else does). Keeps every live registration and sends them all again when it
// (re)connects: the agent may be another plugin process that exits, and a standby then takes
// over (docs/relay.md), or the host's nccl-mesh-relayd restarting.
//
// Threads: add/remove from NCCL's threads (listen/closeListen, via the handshake service), tick
// from the handshake service's thread; one mutex. Nothing blocks: the socket is non-blocking and
// messages that do not fit wait for the next tick.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "relay/registry.h"
#include "util/socket_util.h"

namespace mesh::relay {

inline constexpr int64_t kRegistrarRetryMs = 500;

class Registrar {
 public:
  // `name`: local_socket_name() of the host's (or this emulated host's) agent; empty: disabled.
  void configure(const std::string& name);
  void add(uint16_t port, const uint8_t* nonce, size_t len);
  void remove(uint16_t port, const uint8_t* nonce, size_t len);
  // Connects (at most every kRegistrarRetryMs) and sends what waits; notices a closed agent.
  void tick(int64_t now_ms);
  bool connected() const;
  void reset();

 private:
  bool connect_locked();
  void flush_locked();
  void drop_locked(const char* why);

  mutable std::mutex mu_;
  std::string name_;
  UniqueFd fd_;
  int64_t next_try_ms_ = 0;
  bool warned_foreign_ = false;
  bool said_missing_ = false;
  std::map<ListenerTag, Registration> live_;
  std::deque<Registration> queue_;
};

}  // namespace mesh::relay
