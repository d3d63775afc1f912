// SPDX-License-Identifier: Apache-2.0
// Comm's engine thread: keeps kSlots receives posted on every peer's receive comm and applies
// what arrives in order; turns queued ops into messages on every peer's send comm.
#include <chrono>
#include <cstring>

#include "gin/comm.h"
#include "gin/cuda_driver.h"
#include "plugin/plugin.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

namespace mesh::gin {

void Comm::engine() {
  // A comm that moved anything in the last 20 ms stays hot (yield only): a sleeping engine wakes
  // late on a loaded host, and a stream whose messages then arrive slower than the hot window
  // would never get hot again. After that it backs off to 50 us sleeps, and after a second of
  // nothing to 200 us, so an idle comm does not burn a core (hosts run 8 ranks).
  int64_t last_move = monotonic_ns();
  while (!stop_.load(std::memory_order_acquire)) {
    bool moved = false;
    // Nothing may escape this thread (std::terminate would kill NCCL's process): an exception
    // (bad_alloc, say) fails every stream with one WARN; NCCL sees the errors and aborts cleanly.
    try {
      for (uint32_t j = 0; j < static_cast<uint32_t>(nranks_); ++j) moved |= progress_peer(j);
    } catch (const std::exception& e) {
      fail_all(e.what());
    } catch (...) {
      fail_all("unknown exception");
    }
    const int64_t now = monotonic_ns();
    if (moved) {
      last_move = now;
    } else if (now - last_move < 20000000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(
          std::chrono::microseconds(now - last_move < 1000000000 ? 50 : 200));
    }
  }
}

void Comm::fail_all(const char* what) noexcept {
  MESH_WARN(
      "GIN engine (rank %d): internal error: %s; every stream of this comm fails (out of memory? "
      "check the process's memory use and limits)",
      rank_, what);
  for (uint32_t j = 0; j < static_cast<uint32_t>(nranks_); ++j) {
    try {
      fail_peer(j, what, false);
    } catch (...) {  // the failed flag is set first: the peer is failed even so
    }
  }
}

bool Comm::progress_peer(uint32_t rank) {
  Peer& p = *peers_[rank];
  if (p.failed.load(std::memory_order_acquire)) return false;
  bool moved = false;
  if (p.rdma && p.keys_forget_pending.exchange(false, std::memory_order_acq_rel)) {
    std::vector<uint32_t> ids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ids.swap(p.keys_forget);
    }
    for (uint32_t id : ids) p.rdma->keys.erase(id);
  }
  if (rank != static_cast<uint32_t>(rank_)) moved |= progress_receives(rank, p);
  if (p.failed.load(std::memory_order_acquire)) return moved;
  if (p.rdma) moved |= poll_one_sided(rank, p);
  if (p.failed.load(std::memory_order_acquire)) return moved;
  moved |= progress_sends(rank, p);
  return moved;
}

bool Comm::progress_receives(uint32_t rank, Peer& p) {
  bool moved = false;
  if (p.bye_received.load(std::memory_order_acquire)) return false;
  // Post receives into every free slot, in ring order, so completions come back in stream order.
  while (p.recv_posted < kSlots) {
    const size_t slot = (p.recv_head + p.recv_posted) % kSlots;
    void* data = p.recv_staging.data() + slot * kSlotSize;
    size_t size = kSlotSize;
    int msg_tag = 0;
    void* req = nullptr;
    if (plugin_.irecv(p.recv_comm, 1, &data, &size, &msg_tag, &p.recv_mr, &req) != ncclSuccess) {
      fail_peer(rank, "posting a receive failed (see the WARN above)");
      return true;
    }
    if (req == nullptr) break;
    p.recv[slot] = req;
    ++p.recv_posted;
    moved = true;
  }
  // Complete the oldest first: messages are applied strictly in order.
  while (p.recv_posted > 0) {
    const size_t slot = p.recv_head;
    if (p.recv[slot] != nullptr) {
      int done = 0;
      int size = 0;
      if (plugin_.test(p.recv[slot], &done, &size) != ncclSuccess) {
        fail_peer(rank, "receiving failed (see the WARN above; did rank " + std::to_string(rank) +
                            " exit or close its comm?)");
        return true;
      }
      if (!done) break;
      p.recv[slot] = nullptr;
      p.recv_size[slot] = static_cast<size_t>(size);
    }
    std::string why;
    const int rc =
        apply_message(rank, p, p.recv_staging.data() + slot * kSlotSize, p.recv_size[slot], &why);
    if (rc < 0) {
      fail_peer(rank, why);
      return true;
    }
    if (rc == 0) {  // waits for a registration this rank has not made yet
      const int64_t now = monotonic_ms();
      if (p.stalled_since_ms < 0) p.stalled_since_ms = now;
      if (now - p.stalled_since_ms > settings().connect_timeout_ms) {
        fail_peer(rank, why +
                            " for NCCL_MESH_CONNECT_TIMEOUT_MS (regMrSym not called "
                            "collectively in the same order on every rank?)");
        return true;
      }
      break;
    }
    p.stalled_since_ms = -1;
    p.recv_head = (p.recv_head + 1) % kSlots;
    --p.recv_posted;
    moved = true;
    if (p.bye_received.load(std::memory_order_acquire)) break;  // the other slots stay posted
  }
  return moved;
}

bool Comm::progress_sends(uint32_t rank, Peer& p) {
  const bool self = rank == static_cast<uint32_t>(rank_);
  bool moved = false;
  // Completions, oldest first (the transport completes a comm's sends in order).
  while (p.send_count > 0) {
    SendSlot& s = p.send[p.send_head];
    if (!s.posted) break;
    if (s.net_request != nullptr) {
      int done = 0;
      int size = 0;
      if (plugin_.test(s.net_request, &done, &size) != ncclSuccess) {
        fail_peer(rank, "sending failed (see the WARN above; did rank " + std::to_string(rank) +
                            " exit or close its comm?)");
        return true;
      }
      if (!done) break;
    }
    if (s.completes != nullptr) {
      // The request first, then the count a flush reads (release): a flush seen done implies
      // every request it covers is seen done (OpsTest.GetAndFlush under TSan caught the other
      // order: the flush done, the put it covered still pending).
      s.completes->state.store(1, std::memory_order_release);
      p.puts_done.fetch_add(1, std::memory_order_acq_rel);
    }
    if (s.bye) p.bye_sent.store(true, std::memory_order_release);
    s = SendSlot{};
    p.send_head = (p.send_head + 1) % kSlots;
    --p.send_count;
    moved = true;
  }
  // A built message the transport could not take yet (no clear-to-send): retry it first.
  for (size_t i = 0; i < p.send_count; ++i) {
    SendSlot& s = p.send[(p.send_head + i) % kSlots];
    if (s.posted) continue;
    const size_t slot = (p.send_head + i) % kSlots;
    if (plugin_.isend(p.send_comm, p.send_staging.data() + slot * kSlotSize, s.bytes, 0, p.send_mr,
                      &s.net_request) != ncclSuccess) {
      fail_peer(rank, "sending failed (see the WARN above)");
      return true;
    }
    if (s.net_request == nullptr) return moved;
    s.posted = true;
    moved = true;
  }
  // New messages: get replies first (they unblock the peer), then NCCL's queue in order.
  while (p.send_count < kSlots) {
    Op* op = nullptr;
    if (p.has_current) {
      op = &p.current;
    } else if (!p.replies.empty()) {
      p.current = std::move(p.replies.front());
      p.replies.pop_front();
      p.has_current = true;
      op = &p.current;
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      if (!p.keys_out.empty()) {
        p.current = std::move(p.keys_out.front());
        p.keys_out.pop_front();
        p.has_current = true;
      } else if (p.queue.empty()) {
        // Closing and nothing left to send: the stream's last message (after the last
        // one-sided op completed: the peer tears its QP down once it has our kBye).
        if (!closing_.load(std::memory_order_acquire) || p.bye_queued || !p.posted.empty()) break;
        p.bye_queued = true;
        p.current = Op{};
        p.current.kind = Kind::kBye;
        p.has_current = true;
      } else {
        p.current = std::move(p.queue.front());
        p.queue.pop_front();
        p.has_current = true;
      }
      op = &p.current;
    }
    if (p.rdma && (op->kind == Kind::kPut || op->kind == Kind::kGetRequest)) {
      const int rc = post_one_sided(rank, p, *op);
      if (rc < 0) return true;
      if (rc == 0) break;  // waits for a key or room on the QP: stays current
      // The posted op holds its own Region reference until it completes; the current one must
      // not keep the registration (and its ibv_mr, remote access rights) alive after that.
      p.has_current = false;
      p.current = Op{};
      moved = true;
      continue;
    }
    if (op->kind == Kind::kGetRequest && p.bye_received.load(std::memory_order_acquire)) {
      // Its stream has ended: no reply could ever come, and a flush would wait on it forever.
      fail_peer(rank, "a get to rank " + std::to_string(rank) +
                          " after it closed its GIN comm (its goodbye arrived first; are all ranks "
                          "done with their gets before closing?)");
      return true;
    }
    if (op->kind == Kind::kPut || op->kind == Kind::kGetRequest) ++p.stream_ops;
    const size_t slot = (p.send_head + p.send_count) % kSlots;
    uint8_t* buf = p.send_staging.data() + slot * kSlotSize;
    size_t bytes = 0;
    bool last = false;
    if (!build_message(rank, p, *op, buf, &bytes, &last)) return true;  // peer failed
    SendSlot& s = p.send[slot];
    s.bytes = bytes;
    s.completes = last && op->kind == Kind::kPut ? op->request : nullptr;
    s.bye = op->kind == Kind::kBye;
    ++p.send_count;
    if (last) {
      p.has_current = false;
      p.current = Op{};  // its Region reference goes (a deregistered source is not kept)
    }
    moved = true;
    if (self) {
      // This rank's own memory: applied at once, in the same order as any peer's stream.
      if (!self_deliver(rank, p, buf, bytes)) return true;
      s.posted = true;
      continue;
    }
    if (plugin_.isend(p.send_comm, buf, bytes, 0, p.send_mr, &s.net_request) != ncclSuccess) {
      fail_peer(rank, "sending failed (see the WARN above)");
      return true;
    }
    if (s.net_request == nullptr) break;  // retried next pass
    s.posted = true;
  }
  return moved;
}

bool Comm::build_message(uint32_t rank, Peer& p, Op& op, uint8_t* slot, size_t* bytes, bool* last) {
  Header h;
  h.kind = op.kind;
  h.context = op.kind == Kind::kGetReply ? 0 : op.context;
  h.seq = p.send_seq++;
  uint64_t chunk = 0;
  if (op.kind == Kind::kBye) {
    h.flags = kFlagLast;
    *last = true;
  } else if (op.kind == Kind::kRegKey) {
    h.flags = kFlagLast;
    h.reg = op.dst_reg;
    h.length = kRegKeySize;
    encode_reg_key(op.key, slot + kHeaderSize);
    chunk = kRegKeySize;
    *last = true;
  } else if (op.kind == Kind::kGetRequest) {
    h.reg = op.dst_reg;
    h.offset = op.dst_off;
    h.length = op.size;
    h.get_id = op.get_id;
    h.flags = kFlagLast;
    *last = true;
  } else {
    chunk = std::min<uint64_t>(kMaxChunk, op.size - op.sent);
    *last = op.sent + chunk == op.size;
    h.flags = *last ? kFlagLast : 0;
    h.length = chunk;
    if (op.kind == Kind::kPut) {
      h.reg = op.dst_reg;
      h.offset = op.dst_off + op.sent;
      if (*last && op.signal_op != 0) {
        h.flags |= kFlagSignal;
        h.signal_reg = op.signal_reg;
        h.signal_offset = op.signal_off;
        h.signal_value = op.signal_value;
        h.signal_op = op.signal_op;
      }
    } else {  // get reply
      h.offset = op.sent;
      h.get_id = op.get_id;
    }
    std::string why;
    if (chunk > 0 && !copy_out(*op.src, op.src_off + op.sent, slot + kHeaderSize, chunk, &why)) {
      // The protocol has no error reply: failing the stream is how the peer learns of it.
      fail_peer(rank, std::string(op.kind == Kind::kGetReply ? "get reply" : "put") +
                          " from registration " + std::to_string(op.src->id) + ": " + why);
      return false;
    }
    op.sent += chunk;
  }
  encode_header(h, slot);
  *bytes = kHeaderSize + chunk;
  return true;
}

bool Comm::self_deliver(uint32_t rank, Peer& p, const uint8_t* msg, size_t size) {
  std::string why;
  p.recv_seq = p.send_seq - 1;
  const int rc = apply_message(rank, p, msg, size, &why);
  if (rc == 1) return true;
  // Our own registrations are all known: waiting would be a bug, not a race.
  fail_peer(rank, rc == 0 ? why : "applying a message to this rank's own memory: " + why);
  return false;
}

int Comm::apply_message(uint32_t /*rank*/, Peer& p, const uint8_t* msg, size_t size,
                        std::string* why) {
  Header h;
  if (!decode_header(msg, size, &h, why)) {
    *why = "malformed message: " + *why;
    return -1;
  }
  if (h.seq != p.recv_seq) {
    *why = "message " + std::to_string(h.seq) + " out of sequence (expected " +
           std::to_string(p.recv_seq) + ")";
    return -1;
  }
  // Registrations named by id; an id above the last one registered here waits (collective
  // registration not yet made on this rank), a lower one that is gone is an error.
  auto lookup = [&](uint32_t id, std::shared_ptr<Region>* out) -> int {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(id);
    if (it != regions_.end()) {
      *out = it->second;
      return 1;
    }
    *why = id == 0
               ? std::string("a message names no registration (id 0)")
               : "registration " + std::to_string(id) +
                     (id >= next_region_id_ ? " not registered on this rank yet"
                                            : " no longer registered on this rank (deregistered?)");
    return id >= next_region_id_ && id != 0 ? 0 : -1;
  };
  if (h.kind == Kind::kPut) {
    std::shared_ptr<Region> dst, sig;
    if (h.length > 0 || h.reg != 0) {
      const int rc = lookup(h.reg, &dst);
      if (rc <= 0) return rc;
      if (h.length > dst->size || h.offset > dst->size - h.length) {
        *why = "put of " + std::to_string(h.length) + " bytes at offset " +
               std::to_string(h.offset) + " overruns registration " + std::to_string(h.reg) + " (" +
               std::to_string(dst->size) + " bytes)";
        return -1;
      }
    }
    if (h.flags & kFlagSignal) {
      const int rc = lookup(h.signal_reg, &sig);
      if (rc <= 0) return rc;
      if (sig->size < 8 || h.signal_offset > sig->size - 8) {
        *why = "signal at offset " + std::to_string(h.signal_offset) + " outside registration " +
               std::to_string(h.signal_reg);
        return -1;
      }
    }
    if (h.length > 0 && !copy_in(*dst, h.offset, msg + kHeaderSize, h.length, why)) {
      *why = "put into registration " + std::to_string(h.reg) + ": " + *why;
      return -1;
    }
    if (sig && !apply_signal(*sig, h.signal_offset, h.signal_value, why)) {
      *why = "signal in registration " + std::to_string(h.signal_reg) + ": " + *why;
      return -1;
    }
  } else if (h.kind == Kind::kGetRequest) {
    std::shared_ptr<Region> src;
    const int rc = lookup(h.reg, &src);
    if (rc <= 0) return rc;
    if (h.length > src->size || h.offset > src->size - h.length) {
      *why = "get of " + std::to_string(h.length) + " bytes at offset " + std::to_string(h.offset) +
             " overruns registration " + std::to_string(h.reg);
      return -1;
    }
    if (p.replies.size() >= kMaxReplies) {
      *why = "more than " + std::to_string(kMaxReplies) + " gets waiting for their replies";
      return -1;
    }
    Op reply;
    reply.kind = Kind::kGetReply;
    reply.src = src;
    reply.src_off = h.offset;
    reply.size = h.length;
    reply.get_id = h.get_id;
    p.replies.push_back(std::move(reply));
  } else if (h.kind == Kind::kBye) {
    // On a two-sided stream our gets are answered by messages after which its kBye would come:
    // a kBye with gets outstanding leaves them (and flushes waiting on them) unanswered forever.
    // One-sided gets are RDMA READs its QP answers until our own kBye, so they may be pending.
    if (!p.rdma) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!p.gets.empty()) {
        *why = "that rank closed its GIN comm with " + std::to_string(p.gets.size()) +
               " gets from this rank unanswered (protocol violation; did every rank finish "
               "its gets before closing?)";
        return -1;
      }
    }
    p.bye_received.store(true, std::memory_order_release);
  } else if (h.kind == Kind::kRegKey) {
    RegKey k;
    if (!p.rdma) {
      *why = "a registration key from a rank that is not one-sided";
      return -1;
    }
    if (!decode_reg_key(msg + kHeaderSize, h.length, &k, why)) return -1;
    int verdict = 0;
    uint32_t next_id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      next_id = next_region_id_;
      verdict = reg_key_verdict(h.reg, next_id, regions_.count(h.reg) != 0);
    }
    if (verdict < 0) {
      *why = "a key for registration " + std::to_string(h.reg) + " (this rank's next is " +
             std::to_string(next_id) + "; more than " + std::to_string(kRegKeyLookahead) +
             " ahead, or 0)";
      return -1;
    }
    // Already deregistered here (its key was still on the way): never used, not kept.
    if (verdict == 0) {
      ++p.recv_seq;
      return 1;
    }
    if (!p.rdma->keys.emplace(h.reg, k).second) {
      *why = "registration " + std::to_string(h.reg) + "'s key announced twice";
      return -1;
    }
  } else {  // get reply
    std::lock_guard<std::mutex> lock(mu_);
    auto it = p.gets.find(h.get_id);
    if (it == p.gets.end()) {
      *why = "reply to get " + std::to_string(h.get_id) + " that this rank did not ask for";
      return -1;
    }
    GetState& g = it->second;
    const bool last = (h.flags & kFlagLast) != 0;
    if (h.offset != g.received || h.length > g.size - g.received ||
        last != (g.received + h.length == g.size)) {
      *why = "reply to get " + std::to_string(h.get_id) + " with bytes " +
             std::to_string(h.offset) + "+" + std::to_string(h.length) + " of " +
             std::to_string(g.size);
      return -1;
    }
    if (h.length > 0 &&
        !copy_in(*g.local, g.local_off + h.offset, msg + kHeaderSize, h.length, why)) {
      *why = "reply to get " + std::to_string(h.get_id) + " into registration " +
             std::to_string(g.local->id) + ": " + *why;
      return -1;
    }
    g.received += h.length;
    if (last) {
      g.request->state.store(1, std::memory_order_release);  // before the flush's count
      p.gets_done.fetch_add(1, std::memory_order_acq_rel);
      p.gets.erase(it);
    }
  }
  ++p.recv_seq;
  return 1;
}

namespace {
// Caller holds r.copy_mu.
bool region_alive(const Region& r, std::string* why) {
  if (!r.dead) return true;
  *why =
      "deregistered on this rank while the engine still had bytes of it to move (deregMrSym "
      "called before every get, put and signal naming it completed on every rank?)";
  return false;
}
}  // namespace

bool Comm::copy_in(const Region& r, uint64_t off, const uint8_t* from, size_t n, std::string* why) {
  std::lock_guard<std::mutex> lock(r.copy_mu);
  if (!region_alive(r, why)) return false;
  if (r.type == NCCL_PTR_CUDA)
    return CudaDriver::instance().to_device(r.cuda_context, r.base + off, from, n, why);
  std::memcpy(r.base + off, from, n);
  return true;
}

bool Comm::copy_out(const Region& r, uint64_t off, uint8_t* to, size_t n, std::string* why) {
  std::lock_guard<std::mutex> lock(r.copy_mu);
  if (!region_alive(r, why)) return false;
  if (r.type == NCCL_PTR_CUDA)
    return CudaDriver::instance().to_host(r.cuda_context, to, r.base + off, n, why);
  std::memcpy(to, r.base + off, n);
  return true;
}

bool Comm::apply_signal(const Region& r, uint64_t off, uint64_t value, std::string* why) {
  std::lock_guard<std::mutex> lock(r.copy_mu);
  if (!region_alive(r, why)) return false;
  uint8_t* word = r.base + off;
  if (r.type != NCCL_PTR_CUDA) {
    if (reinterpret_cast<uintptr_t>(word) % 8 != 0) {
      *why = "signal word not 8-byte aligned in memory";
      return false;
    }
    // Release: every byte copied before (this put and all earlier ones from this rank) is
    // visible to whoever reads the new value with acquire.
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(word), value, __ATOMIC_RELEASE);
    return true;
  }
  // GPU memory from the CPU: no atomic add exists, so read-add-write through the driver. A
  // never-reset signal (NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET) keeps a host shadow of the total
  // and only writes, so it never races with the GPU reading; a resettable one is read first.
  uint64_t current = 0;
  CudaDriver& cuda = CudaDriver::instance();
  if (r.flags & NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET) {
    current = signal_shadow_[{r.id, off}];
  } else if (!cuda.to_host(r.cuda_context, &current, word, 8, why)) {
    return false;
  }
  current += value;
  if (r.flags & NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET) signal_shadow_[{r.id, off}] = current;
  return cuda.to_device(r.cuda_context, word, &current, 8, why);
}

}  // namespace mesh::gin
