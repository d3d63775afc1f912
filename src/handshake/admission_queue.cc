// SPDX-License-Identifier: Apache-2.0
#include "handshake/admission_queue.h"

#include <algorithm>

namespace mesh::handshake {

AdmissionQueue::AdmissionQueue(size_t max_pending)
    : max_pending_(std::max<size_t>(1, max_pending)),
      // A quarter of the slots per source address: one host flooding the port then only ever
      // evicts its own sockets, never other hosts' handshakes in progress.
      max_per_source_(std::max<size_t>(1, max_pending_ / 4)) {}

size_t AdmissionQueue::pending_from(uint32_t source) const {
  const auto it = per_source_.find(source);
  return it == per_source_.end() ? 0 : it->second;
}

std::optional<AdmissionQueue::Eviction> AdmissionQueue::make_room(uint32_t source) const {
  const size_t from_source = pending_from(source);
  const Entry* v = nullptr;
  Eviction e;
  if (from_source >= max_per_source_) {
    v = victim(&source);
    e.per_source = true;
    e.pending = from_source;
  } else if (order_.size() >= max_pending_) {
    v = victim(nullptr);
    e.pending = order_.size();
  }
  if (v == nullptr) return std::nullopt;
  e.victim = *v;
  return e;
}

bool AdmissionQueue::add(Id id, uint32_t source, int64_t since_ms) {
  if (index_.count(id) != 0) return false;
  index_[id] = order_.insert(order_.end(), Entry{id, source, since_ms, false});
  ++per_source_[source];
  return true;
}

void AdmissionQueue::hello_complete(Id id) {
  const auto it = index_.find(id);
  if (it != index_.end()) it->second->have_hello = true;
}

void AdmissionQueue::remove(Id id) {
  const auto it = index_.find(id);
  if (it == index_.end()) return;
  const auto count = per_source_.find(it->second->source);
  if (count != per_source_.end() && --count->second == 0) per_source_.erase(count);
  order_.erase(it->second);
  index_.erase(it);
}

const AdmissionQueue::Entry* AdmissionQueue::oldest() const {
  return order_.empty() ? nullptr : &order_.front();
}

const AdmissionQueue::Entry* AdmissionQueue::find(Id id) const {
  const auto it = index_.find(id);
  return it == index_.end() ? nullptr : &*it->second;
}

const AdmissionQueue::Entry* AdmissionQueue::victim(const uint32_t* source) const {
  const Entry* oldest_match = nullptr;
  for (const Entry& e : order_) {
    if (source != nullptr && e.source != *source) continue;
    if (!e.have_hello) return &e;
    if (oldest_match == nullptr) oldest_match = &e;
  }
  return oldest_match;
}

}  // namespace mesh::handshake
