// SPDX-License-Identifier: Apache-2.0
// Connection setup the way NCCL's proxy service thread does it: listen never blocks; connect and
// accept are re-called (connect with the same handle buffer every time) until they hand out a
// comm; closeListen follows a successful accept at once. All pending connects and accepts of one
// call are interleaved in one thread, so a plugin that blocks, or that needs the two sides to be
// serviced in a particular order, fails here instead of deadlocking NCCL.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/plugin.h"
#include "harness/timing.h"

namespace conformance {

using HandleBytes = std::array<uint8_t, kHandleBytes>;

struct ConnectItem {
  void* ctx = nullptr;  // v11 context (ignored before v11)
  int dev = 0;
  HandleBytes handle{};       // the buffer passed to every retry; the plugin may write to it
  bool expect_error = false;  // a bad handle: connect must end in an error return
};

struct CallOutcome {
  int32_t rc = 0;               // the first non-success result, if any
  bool done = false;            // got a comm (or, for expect_error, got the error)
  void* comm = nullptr;         // local only: the send or recv comm
  uint32_t calls = 0;           // how many times connect/accept was called
  uint64_t elapsed_us = 0;      // from the first call to the last
  int32_t close_listen_rc = 0;  // accept only
};

struct EstablishOutcome {
  bool ok = true;
  std::string error;  // first problem found, empty when ok
  uint64_t max_call_us = 0;
  std::vector<CallOutcome> connects;
  std::vector<CallOutcome> accepts;
};

// Runs connect for every item and accept for every listen comm until all are done or `deadline`
// passes. Listen comms are closed after their accept succeeds. A connect expected to fail that
// succeeds instead is closed again and reported.
EstablishOutcome establish(NetApi& net, std::vector<ConnectItem>& connects,
                           const std::vector<void*>& listen_comms, Clock::time_point deadline);

// Calls listen once, checking it returns quickly, gives a non-NULL comm and writes at most
// kHandleBytes. Returns false with *error set otherwise.
bool listen_once(NetApi& net, void* ctx, int dev, HandleBytes* handle, void** listen_comm,
                 uint64_t* call_us, std::string* error);

}  // namespace conformance
