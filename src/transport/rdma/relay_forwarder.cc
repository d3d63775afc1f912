// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/relay_forwarder.h"

#include <algorithm>
#include <chrono>
#include <system_error>

#include "util/clock.h"
#include "util/log.h"

namespace mesh::rdma {

bool RelayForwarder::adopt(ForwardSockets& sockets, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) {
    *why = "the plugin is shutting down";
    return false;
  }
  if (count_.load() >= options_.max_forwards) {
    *why =
        "this host already forwards " + std::to_string(options_.max_forwards) + " RDMA connections";
    return false;
  }
  const int64_t deadline = monotonic_ms() + options_.setup_timeout_ms;
  inbox_.push_back(std::make_unique<RelayForward>(transport_, std::move(sockets), options_.slots,
                                                  options_.slot_bytes, deadline,
                                                  options_.drain_timeout_ms));
  ++count_;
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { loop(); });
    } catch (const std::system_error& e) {
      inbox_.pop_back();
      --count_;
      *why = std::string("cannot start the RDMA relay thread: ") + e.what();
      return false;
    }
  }
  cv_.notify_one();
  return true;
}

void RelayForwarder::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  inbox_.clear();
  count_ = 0;
  stop_ = false;  // a later init may relay again
}

void RelayForwarder::loop() {
  std::vector<std::unique_ptr<RelayForward>> running;
  int sleep_us = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (running.empty() && inbox_.empty() && !stop_) cv_.wait_for(lock, std::chrono::seconds(1));
      if (stop_) break;
      for (auto& f : inbox_) running.push_back(std::move(f));
      inbox_.clear();
    }
    bool progress = false;
    const int64_t now = monotonic_ms();
    for (auto it = running.begin(); it != running.end();) {
      if ((*it)->step(now, &progress)) {
        ++it;
      } else {
        MESH_INFO(NCCL_NET, "relay: RDMA forward %s ended after %llu chunks", (*it)->what().c_str(),
                  static_cast<unsigned long long>((*it)->chunks()));
        it = running.erase(it);
        --count_;
      }
    }
    // Chunks moving: poll again at once. Idle: back off (1, 2, 4 ... kMaxIdleSleepUs), so an
    // idle relayed connection costs at most ~15k wake-ups a second, a busy one no sleep at all.
    if (progress) {
      sleep_us = 0;
      continue;
    }
    sleep_us = std::clamp(sleep_us * 2, 1, kMaxIdleSleepUs);
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) break;
    if (inbox_.empty()) cv_.wait_for(lock, std::chrono::microseconds(sleep_us));
  }
  running.clear();  // closes both ends of every forward
}

}  // namespace mesh::rdma
