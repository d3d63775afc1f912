// SPDX-License-Identifier: Apache-2.0
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
#include <utility>
#include <vector>

#include "relay/registry.h"
#include "util/socket_util.h"

namespace mesh::relay {

inline constexpr int64_t kRegistrarRetryMs = 500;
inline constexpr int64_t kRouteAnswerTtlMs = 1000;

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
  // A route query to the host's agent (registry.h) without blocking: true with *out once the
  // agent answered (an answer is reused for kRouteAnswerTtlMs), false while the question is on
  // its way (it is sent on the first call; tick() collects the answer) or no agent is there.
  bool query(const std::vector<Ipv4Prefix>& dest, uint16_t stream, int64_t age_ms,
             RouteAnswer* out);

 private:
  bool connect_locked();
  void flush_locked();
  void drop_locked(const char* why);
  void read_answers_locked(int64_t now_ms);

  mutable std::mutex mu_;
  std::string name_;
  UniqueFd fd_;
  int64_t next_try_ms_ = 0;
  bool warned_foreign_ = false;
  bool said_missing_ = false;
  int64_t connected_ms_ = 0;  // when fd_ connected
  int quick_drops_ = 0;       // the agent closed us within a second of connecting, in a row
  bool warned_refused_ = false;
  std::map<ListenerTag, Registration> live_;
  std::deque<Registration> queue_;
  struct Asked {
    uint32_t id = 0;
    int64_t sent_ms = -1;      // -1: never sent
    int64_t answered_ms = -1;  // -1: no answer yet
    RouteAnswer answer;
  };
  std::map<std::pair<std::vector<uint32_t>, uint16_t>, Asked> asked_;
  uint32_t next_id_ = 1;
};

}  // namespace mesh::relay
