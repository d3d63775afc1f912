// SPDX-License-Identifier: Apache-2.0
// NCCL's GIN proxy loop, host side (gin-rma.md 1.4): ops wait in one queue per (context, target
// rank); each pass tests every issued request (a done request bumps its counter, like NCCL's
// WithCounter), then takes at most one new op per (context, rank) and calls the plugin, then
// calls progress. `depth` bounds the requests in flight per (context, rank) like NCCL's queue.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "gin_api.h"

namespace gintest {

class Proxy {
 public:
  using Issue = std::function<ncclResult_t(void** request)>;
  Proxy(GinApi& api, void* comm, void* target, int nranks, int contexts, size_t depth)
      : api_(api),
        comm_(comm),
        target_(target),
        nranks_(nranks),
        contexts_(contexts),
        depth_(depth),
        queues_(static_cast<size_t>(nranks * contexts)) {}

  // `counter` (may be null) is incremented when the op's request tests done.
  void enqueue(int rank, int context, Issue issue, uint64_t* counter = nullptr) {
    queues_[index(rank, context)].pending.push_back({std::move(issue), counter});
  }
  // One pass; false (with why()) when the plugin returned an error.
  bool pass();
  // Passes until every queue is empty and every request done, or `timeout_ms`.
  bool drain(int timeout_ms);
  bool idle() const;
  size_t max_in_flight() const { return max_in_flight_; }
  const std::string& why() const { return why_; }

 private:
  struct Pending {
    Issue issue;
    uint64_t* counter;
  };
  struct InFlight {
    void* request;
    uint64_t* counter;
  };
  struct Queue {
    std::deque<Pending> pending;
    std::vector<InFlight> in_flight;
  };
  size_t index(int rank, int context) const {
    return static_cast<size_t>(context * nranks_ + rank);
  }

  GinApi& api_;
  void* comm_;
  void* target_;
  int nranks_;
  int contexts_;
  size_t depth_;
  std::vector<Queue> queues_;
  size_t max_in_flight_ = 0;
  std::string why_;
};

}  // namespace gintest
