// SPDX-License-Identifier: Apache-2.0
#include "proxy.h"

#include <chrono>
#include <thread>

namespace gintest {

bool Proxy::pass() {
  for (Queue& q : queues_) {
    for (size_t i = 0; i < q.in_flight.size();) {
      int done = 0;
      const ncclResult_t rc = api_.test(comm_, q.in_flight[i].request, &done);
      if (rc != ncclSuccess) {
        why_ = "test returned " + std::to_string(rc);
        return false;
      }
      if (done) {
        if (q.in_flight[i].counter != nullptr) ++*q.in_flight[i].counter;
        q.in_flight.erase(q.in_flight.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }
  for (Queue& q : queues_) {
    if (q.pending.empty() || q.in_flight.size() >= depth_) continue;
    void* request = nullptr;
    const ncclResult_t rc = q.pending.front().issue(&request);
    if (rc != ncclSuccess) {
      why_ = "issuing an op returned " + std::to_string(rc);
      return false;
    }
    if (request == nullptr) {  // NCCL's rule: a NULL request is complete
      if (q.pending.front().counter != nullptr) ++*q.pending.front().counter;
    } else {
      q.in_flight.push_back({request, q.pending.front().counter});
      if (q.in_flight.size() > max_in_flight_) max_in_flight_ = q.in_flight.size();
    }
    q.pending.pop_front();
  }
  const ncclResult_t rc = api_.progress(target_);
  if (rc != ncclSuccess) {
    why_ = "progress returned " + std::to_string(rc);
    return false;
  }
  return true;
}

bool Proxy::idle() const {
  for (const Queue& q : queues_)
    if (!q.pending.empty() || !q.in_flight.empty()) return false;
  return true;
}

bool Proxy::drain(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!idle()) {
    if (!pass()) return false;
    if (std::chrono::steady_clock::now() > deadline) {
      why_ = "requests not done after " + std::to_string(timeout_ms) + " ms";
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

}  // namespace gintest
