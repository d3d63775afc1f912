// SPDX-License-Identifier: Apache-2.0
// The engine's half of the one-sided path (one_sided.h): NCCL's queued puts and gets for a
// one-sided peer become work requests on its QP, in queue order; completions complete them in
// the same order. Engine thread only.
#include <algorithm>

#include "gin/comm.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

namespace mesh::gin {

int Comm::post_one_sided(uint32_t rank, Peer& p, Op& op) {
  OneSided& q = *p.rdma;
  // The target's registrations: known once its kRegKey arrived (it registers collectively, but
  // maybe later than this rank); waiting is bounded like the two-sided stream's stall.
  auto key = [&](uint32_t id) -> const RegKey* {
    auto it = q.keys.find(id);
    return it == q.keys.end() ? nullptr : &it->second;
  };
  const bool put = op.kind == Kind::kPut;
  const bool data = op.size > 0;
  const bool add = put && op.signal_op != 0;
  const RegKey* dst = data ? key(op.dst_reg) : nullptr;
  const RegKey* sig = add ? key(op.signal_reg) : nullptr;
  if ((data && dst == nullptr) || (add && sig == nullptr)) {
    const int64_t now = monotonic_ms();
    if (p.key_wait_since_ms < 0) p.key_wait_since_ms = now;
    if (now - p.key_wait_since_ms > settings().connect_timeout_ms) {
      fail_peer(rank, "registration " +
                          std::to_string(dst == nullptr && data ? op.dst_reg : op.signal_reg) +
                          " of that rank has no RDMA key after NCCL_MESH_CONNECT_TIMEOUT_MS "
                          "(regMrSym not called collectively in the same order on every rank?)");
      return -1;
    }
    return 0;
  }
  p.key_wait_since_ms = -1;
  const int wrs = (data ? 1 : 0) + (add ? 1 : 0);
  if (!q.room(wrs)) return 0;
  // The target said how large its registrations are: never post outside them (its NIC would
  // refuse, and the QP would then be lost for every later op).
  if ((data && !range_fits(op.dst_off, op.size, dst->size)) ||
      (add && (!range_fits(op.signal_off, 8, sig->size) || (sig->addr + op.signal_off) % 8 != 0))) {
    fail_peer(rank, std::string(put ? "a put" : "a get") + " of " + std::to_string(op.size) +
                        " bytes at offset " + std::to_string(op.dst_off) +
                        " (or its signal) lies outside registration " + std::to_string(op.dst_reg) +
                        " of that rank as it announced it");
    return -1;
  }
  Posted o;
  o.number = p.next_posted++;
  o.wrs = wrs;
  std::string why;
  if (put) {
    const ibv_mr* mr = data && op.src->rdma ? op.src->rdma->on(q.device()) : nullptr;
    if (data && mr == nullptr) {
      fail_peer(rank, "the source registration is not registered on " + q.describe());
      return -1;
    }
    o.request = op.request;
    o.hold = op.src;
    if (wrs > 0 &&
        !q.write_and_add(mr, data ? reinterpret_cast<uintptr_t>(op.src->base) + op.src_off : 0,
                         static_cast<uint32_t>(op.size), data ? dst->addr + op.dst_off : 0,
                         data ? dst->rkey : 0, add, add ? sig->addr + op.signal_off : 0,
                         add ? sig->rkey : 0, op.signal_value, o.number, &why)) {
      fail_peer(rank, why);
      return -1;
    }
  } else {  // a get: RDMA READ into the local registration
    std::shared_ptr<Region> local;
    uint64_t local_off = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = p.gets.find(op.get_id);
      if (it != p.gets.end()) local = it->second.local, local_off = it->second.local_off;
    }
    const ibv_mr* mr = local && local->rdma ? local->rdma->on(q.device()) : nullptr;
    if (mr == nullptr) {
      fail_peer(rank, "the get's local registration is not registered on " + q.describe());
      return -1;
    }
    o.get_id = op.get_id;
    o.hold = local;
    o.wrs = 1;
    if (!q.read(mr, reinterpret_cast<uintptr_t>(local->base) + local_off,
                static_cast<uint32_t>(op.size), dst->addr + op.dst_off, dst->rkey, o.number,
                &why)) {
      fail_peer(rank, why);
      return -1;
    }
  }
  p.posted.push_back(std::move(o));
  // A size-0 put without a signal posts nothing: it completes once everything before it has.
  poll_one_sided(rank, p);
  return 1;
}

bool Comm::poll_one_sided(uint32_t rank, Peer& p) {
  uint64_t completed = 0;
  std::string why;
  if (!p.rdma->poll(&why, [&](uint64_t number) { completed = std::max(completed, number); })) {
    fail_peer(rank, why);
    return true;
  }
  p.completed_posted = std::max(p.completed_posted, completed);
  bool moved = false;
  while (!p.posted.empty() &&
         (p.posted.front().number <= p.completed_posted || p.posted.front().wrs == 0)) {
    Posted& o = p.posted.front();
    p.rdma->release(o.wrs);
    if (o.get_id != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = p.gets.find(o.get_id);
      if (it != p.gets.end()) {
        // The request before the count a flush reads: a done flush implies its ops are done.
        it->second.request->state.store(1, std::memory_order_release);
        p.gets_done.fetch_add(1, std::memory_order_acq_rel);
        p.gets.erase(it);
      }
    } else if (o.request != nullptr) {
      o.request->state.store(1, std::memory_order_release);
      p.puts_done.fetch_add(1, std::memory_order_acq_rel);
    }
    p.posted.pop_front();
    moved = true;
  }
  return moved;
}

}  // namespace mesh::gin
