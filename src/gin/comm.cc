// SPDX-License-Identifier: Apache-2.0
// Comm: connect, registration and the calls NCCL's threads make (engine.cc runs the streams).
#include "gin/comm.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "gin/cuda_driver.h"
#include "plugin/plugin.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

namespace mesh::gin {

Comm::Comm(Plugin& plugin, Instance* instance, int dev, int nranks, int rank)
    : plugin_(plugin), instance_(instance), dev_(dev), nranks_(nranks), rank_(rank) {
  for (int i = 0; i < nranks; ++i) peers_.push_back(std::make_unique<Peer>());
}

Comm::~Comm() {
  close();
}

namespace {
std::string list_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
    if (i > 0) s += ',';
    s += std::to_string(ranks[i]);
  }
  if (ranks.size() > 16) s += ",...";
  return s;
}
}  // namespace

ncclResult_t Comm::connect(void* const* handles, Listen* listen) {
  // Every rank runs this at the same time (NCCL calls connect collectively): connects go out
  // to every peer while accepts come in, all non-blocking, so no order between ranks is needed.
  const int64_t deadline = monotonic_ms() + settings().connect_timeout_ms;
  struct Accepted {
    void* comm = nullptr;
    void* mr = nullptr;
    std::vector<uint8_t> buf;
    void* request = nullptr;
  };
  std::vector<Accepted> accepted;
  int identified = 0;
  const size_t max_accepted = 4 * static_cast<size_t>(nranks_) + 16;  // bounds stray connections
  std::string failure;
  // This rank's own memory is a target too (messages built and applied in place, engine.cc).
  peers_[static_cast<size_t>(rank_)]->send_staging.assign(kSlots * kSlotSize, 0);
  auto release_accepted = [&](Accepted& a) {
    if (a.mr != nullptr) plugin_.dereg_mr(a.comm, a.mr);
    if (a.comm != nullptr) plugin_.close_connection(a.comm, ObjectTag::kRecv);
    a = Accepted{};
  };
  while (failure.empty()) {
    bool moved = false;
    int greeted = 0;
    for (int j = 0; j < nranks_ && failure.empty(); ++j) {
      if (j == rank_) continue;
      Peer& p = *peers_[static_cast<size_t>(j)];
      if (p.send_comm == nullptr) {
        const ncclResult_t rc =
            plugin_.connect(instance_->net, listen->dev, handles[j], &p.send_comm);
        if (rc != ncclSuccess) {
          failure = "connecting to rank " + std::to_string(j) + " failed (see the WARN above)";
          break;
        }
        if (p.send_comm == nullptr) continue;
        moved = true;
        p.send_staging.assign(kSlots * kSlotSize, 0);
        if (plugin_.reg_mr(p.send_comm, p.send_staging.data(), p.send_staging.size(), NCCL_PTR_HOST,
                           &p.send_mr) != ncclSuccess) {
          failure = "registering the staging buffer for rank " + std::to_string(j) + " failed";
          break;
        }
      }
      if (!p.greeted && p.greet_request == nullptr) {
        encode_greeting(
            {static_cast<uint32_t>(rank_), static_cast<uint32_t>(nranks_), instance_->comm_id},
            p.send_staging.data());
        if (plugin_.isend(p.send_comm, p.send_staging.data(), kGreetingSize, 0, p.send_mr,
                          &p.greet_request) != ncclSuccess) {
          failure = "greeting rank " + std::to_string(j) + " failed";
          break;
        }
      }
      if (p.greet_request != nullptr) {
        int done = 0;
        int sent = 0;
        if (plugin_.test(p.greet_request, &done, &sent) != ncclSuccess) {
          failure = "greeting rank " + std::to_string(j) + " failed";
          break;
        }
        if (done) {
          p.greet_request = nullptr;
          p.greeted = true;
          moved = true;
        }
      }
      if (p.greeted) ++greeted;
    }
    if (!failure.empty()) break;
    void* recv = nullptr;
    if (identified + static_cast<int>(accepted.size()) < nranks_ - 1 ||
        accepted.size() < max_accepted) {
      if (plugin_.accept(listen->net_listen, &recv) != ncclSuccess) {
        failure = "accepting a connection failed (see the WARN above)";
        break;
      }
    }
    if (recv != nullptr) {
      moved = true;
      Accepted a;
      a.comm = recv;
      a.buf.assign(kSlots * kSlotSize, 0);
      if (plugin_.reg_mr(recv, a.buf.data(), a.buf.size(), NCCL_PTR_HOST, &a.mr) != ncclSuccess) {
        release_accepted(a);
        failure = "registering a receive staging buffer failed";
        break;
      }
      accepted.push_back(std::move(a));
    }
    for (auto it = accepted.begin(); it != accepted.end();) {
      Accepted& a = *it;
      if (a.request == nullptr) {
        void* data = a.buf.data();
        size_t size = kSlotSize;
        int msg_tag = 0;
        if (plugin_.irecv(a.comm, 1, &data, &size, &msg_tag, &a.mr, &a.request) != ncclSuccess) {
          release_accepted(a);
          it = accepted.erase(it);
          continue;
        }
        if (a.request == nullptr) {
          ++it;
          continue;
        }
      }
      int done = 0;
      int size = 0;
      if (plugin_.test(a.request, &done, &size) != ncclSuccess) {
        release_accepted(a);  // a stray connection that broke: not a rank of ours
        it = accepted.erase(it);
        continue;
      }
      if (!done) {
        ++it;
        continue;
      }
      moved = true;
      a.request = nullptr;
      Greeting g;
      std::string why;
      bool ok = decode_greeting(a.buf.data(), static_cast<size_t>(size), &g, &why);
      if (ok && (g.nranks != static_cast<uint32_t>(nranks_) || g.comm_id != instance_->comm_id))
        ok = false,
        why = "greeting from another communicator (" + std::to_string(g.nranks) + " ranks)";
      if (ok && (g.rank >= static_cast<uint32_t>(nranks_) ||
                 g.rank == static_cast<uint32_t>(rank_) || peers_[g.rank]->recv_comm != nullptr))
        ok = false,
        why = "greeting names rank " + std::to_string(g.rank) +
              (g.rank < static_cast<uint32_t>(nranks_) ? " twice or ourselves" : ", out of range");
      if (!ok) {
        MESH_WARN("GIN connect (rank %d of %d): refused a connection: %s", rank_, nranks_,
                  why.c_str());
        release_accepted(a);
        it = accepted.erase(it);
        continue;
      }
      Peer& p = *peers_[g.rank];
      p.recv_comm = a.comm;
      p.recv_mr = a.mr;
      p.recv_staging = std::move(a.buf);
      ++identified;
      it = accepted.erase(it);
    }
    if (greeted == nranks_ - 1 && identified == nranks_ - 1) break;
    if (monotonic_ms() > deadline) {
      std::vector<int> no_send, no_recv;
      for (int j = 0; j < nranks_; ++j) {
        if (j == rank_) continue;
        if (!peers_[static_cast<size_t>(j)]->greeted) no_send.push_back(j);
        if (peers_[static_cast<size_t>(j)]->recv_comm == nullptr) no_recv.push_back(j);
      }
      failure = "timed out after NCCL_MESH_CONNECT_TIMEOUT_MS=" +
                std::to_string(settings().connect_timeout_ms) + " ms; not connected to ranks [" +
                list_ranks(no_send) + "], no connection from ranks [" + list_ranks(no_recv) +
                "] (are all ranks calling connect, and can every pair reach each other? run "
                "nccl-mesh-doctor)";
      break;
    }
    if (!moved) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (Accepted& a : accepted) release_accepted(a);
  if (failure.empty()) setup_one_sided(deadline, &failure);
  if (!failure.empty()) {
    MESH_WARN("GIN connect (rank %d of %d, device %d): %s", rank_, nranks_, listen->dev,
              failure.c_str());
    close();
    return ncclRemoteError;
  }
  MESH_INFO(NCCL_INIT | NCCL_NET, "GIN: rank %d connected to %d ranks (device %d)", rank_,
            nranks_ - 1, listen->dev);
  thread_ = std::thread([this] { engine(); });
  return ncclSuccess;
}

ncclResult_t Comm::register_region(void* data, size_t size, int type, uint64_t flags,
                                   Region** out) {
  *out = nullptr;
  if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
    MESH_WARN("GIN regMrSym: memory type %d is not supported (host or CUDA memory only)", type);
    return ncclInvalidArgument;
  }
  if ((data == nullptr && size > 0) || size > (1ULL << 48)) {
    MESH_WARN("GIN regMrSym: invalid buffer %p of %zu bytes", data, size);
    return ncclInvalidArgument;
  }
  auto r = std::make_shared<Region>();
  r->comm = this;
  r->base = static_cast<uint8_t*>(data);
  r->size = size;
  r->type = type;
  r->flags = flags;
  if (type == NCCL_PTR_CUDA) {
    std::string why;
    if (!CudaDriver::instance().context_of(data, &r->cuda_context, &r->cuda_device, &why)) {
      MESH_WARN("GIN regMrSym: CUDA buffer %p of %zu bytes cannot be used: %s", data, size,
                why.c_str());
      return ncclInvalidArgument;
    }
  }
  // One-sided peers reach it by RDMA: registered on each of their devices, and its address
  // and key go to each of them (kRegKey, before any op this rank queues after this call).
  if (!rdma_devices_.empty()) {
    r->rdma = std::make_unique<RdmaRegistration>();
    std::string why;
    for (rdma::VerbsDevice* dev : rdma_devices_) {
      if (size > 0 && !r->rdma->add(dev, data, size, &why)) {
        MESH_WARN("GIN regMrSym: %s buffer %p of %zu bytes: %s",
                  type == NCCL_PTR_CUDA ? "CUDA" : "host", data, size, why.c_str());
        if (r->cuda_context != nullptr)
          CudaDriver::instance().release_context(r->cuda_context, r->cuda_device);
        return ncclSystemError;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  size_t duplicates = 0;
  for (const auto& [id, other] : regions_)
    if (other->base == r->base && other->size == r->size && other->type == r->type) ++duplicates;
  r->id = next_region_id_++;
  if (duplicates > 0) {
    MESH_INFO(NCCL_NET, "GIN regMrSym: %p (%zu bytes) registered %zu times now (id %u)", data, size,
              duplicates + 1, r->id);
  }
  regions_[r->id] = r;
  by_handle_[r.get()] = r;
  for (auto& peer : peers_) {
    if (!peer->rdma) continue;
    Op key;
    key.kind = Kind::kRegKey;
    key.dst_reg = r->id;
    key.key.addr = reinterpret_cast<uintptr_t>(data);
    key.key.size = size;
    const ibv_mr* mr = size > 0 ? r->rdma->on(peer->rdma->device()) : nullptr;
    key.key.rkey = mr != nullptr ? mr->rkey : 0;
    peer->keys_out.push_back(std::move(key));
  }
  *out = r.get();
  return ncclSuccess;
}

ncclResult_t Comm::deregister(void* mhandle) {
  std::shared_ptr<Region> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_handle_.find(mhandle);
    if (it == by_handle_.end()) {
      MESH_WARN("GIN deregMrSym: %p is not a registration of this comm (deregistered twice?)",
                mhandle);
      return ncclInvalidArgument;
    }
    r = it->second;
    by_handle_.erase(it);
    regions_.erase(r->id);
    for (auto& peer : peers_) {
      if (!peer->rdma) continue;
      peer->keys_forget.push_back(r->id);
      peer->keys_forget_pending.store(true, std::memory_order_release);
    }
  }
  {
    // Not under mu_ (the engine copies a get reply holding mu_ then copy_mu): waits for a copy
    // in flight (one chunk at most); every later copy sees `dead` and fails that peer's stream.
    // Queued get replies and ops keep the Region object alive, never its memory.
    std::lock_guard<std::mutex> lock(r->copy_mu);
    r->dead = true;
    r->tag = GinTag::kDead;
  }
  // After `dead`: a CUDA copy in flight used this context until the lock was free.
  if (r->cuda_context != nullptr)
    CudaDriver::instance().release_context(r->cuda_context, r->cuda_device);
  return ncclSuccess;
}

std::shared_ptr<Region> Comm::find_region(const void* mhandle) {
  auto it = by_handle_.find(mhandle);
  return it == by_handle_.end() ? nullptr : it->second;
}

Comm::Peer* Comm::peer_for(uint32_t rank, const char* what) {
  if (rank >= static_cast<uint32_t>(nranks_)) {
    MESH_WARN("GIN %s: rank %u out of range (%d ranks)", what, rank, nranks_);
    return nullptr;
  }
  return peers_[rank].get();
}

bool Comm::peer_usable(Peer& p, uint32_t rank, const char* what) {
  // NCCL 2.28's proxy learns of an error only from the call that issues an op (it ignores
  // test()'s result), so a broken or closed stream fails every later call; one WARN per peer.
  const bool failed = p.failed.load(std::memory_order_acquire);
  if (!failed && !p.bye_received.load(std::memory_order_acquire)) return true;
  if (!p.warned_unusable) {
    p.warned_unusable = true;
    MESH_WARN("GIN %s with rank %u: %s; this and every later operation with it fails", what, rank,
              failed ? "the stream with that rank failed earlier (see the WARN above)"
                     : "that rank has closed its GIN comm");
  }
  return false;
}

Request* Comm::new_request(Request::Kind kind, uint32_t peer) {
  std::lock_guard<std::mutex> lock(req_mu_);
  if (requests_.size() >= kMaxRequests) {
    MESH_WARN("GIN: %zu requests in flight on one comm (test() them before issuing more)",
              requests_.size());
    return nullptr;
  }
  auto* r = new Request;
  r->kind = kind;
  r->peer = peer;
  requests_.insert(r);
  return r;
}

ncclResult_t Comm::put(int context, void* src, uint64_t src_off, size_t size, void* dst,
                       uint64_t dst_off, uint32_t rank, const Signal* signal, void** request) {
  *request = nullptr;
  const char* what = signal != nullptr ? "iputSignal" : "iput";
  if (context < 0 || static_cast<uint32_t>(context) >= kMaxContexts) {
    MESH_WARN("GIN %s: context %d out of range", what, context);
    return ncclInvalidArgument;
  }
  Peer* p = peer_for(rank, what);
  if (p == nullptr) return ncclInvalidArgument;
  if (size > kMaxOpBytes) {
    MESH_WARN("GIN %s to rank %u: %zu bytes exceed the 1 GiB limit of one operation", what, rank,
              size);
    return ncclInvalidArgument;
  }
  if (signal != nullptr && signal->op != kSignalInc && signal->op != kSignalAdd) {
    MESH_WARN("GIN iputSignal to rank %u: unknown signal op %u", rank, signal->op);
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Op op;
  op.kind = Kind::kPut;
  op.context = static_cast<uint16_t>(context);
  op.size = size;
  if (size > 0) {
    op.src = find_region(src);
    std::shared_ptr<Region> d = find_region(dst);
    if (!op.src || !d) {
      MESH_WARN("GIN %s to rank %u: %s handle %p is not a registration of this comm", what, rank,
                !op.src ? "source" : "destination", !op.src ? src : dst);
      return ncclInvalidArgument;
    }
    if (!range_fits(src_off, size, op.src->size) || !range_fits(dst_off, size, d->size)) {
      MESH_WARN(
          "GIN %s to rank %u: %zu bytes at source offset %lu / destination offset %lu "
          "overrun the registrations (%zu / %zu bytes)",
          what, rank, size, static_cast<unsigned long>(src_off),
          static_cast<unsigned long>(dst_off), op.src->size, d->size);
      return ncclInvalidArgument;
    }
    op.src_off = src_off;
    op.dst_reg = d->id;
    op.dst_off = dst_off;
  }
  if (signal != nullptr) {
    std::shared_ptr<Region> s = find_region(signal->region);
    if (!s || signal->offset % 8 != 0 || !range_fits(signal->offset, 8, s->size)) {
      MESH_WARN(
          "GIN iputSignal to rank %u: signal %p + %lu is not an aligned 8-byte word of a "
          "registration of this comm",
          rank, static_cast<const void*>(signal->region),
          static_cast<unsigned long>(signal->offset));
      return ncclInvalidArgument;
    }
    op.signal_reg = s->id;
    op.signal_off = signal->offset;
    op.signal_op = signal->op;
    op.signal_value = signal->op == kSignalInc ? 1 : signal->value;
  }
  if (!peer_usable(*p, rank, what)) return ncclRemoteError;
  Request* r = new_request(Request::Kind::kPut, rank);
  if (r == nullptr) return ncclInternalError;
  op.request = r;
  ++p->puts_issued;
  p->queue.push_back(std::move(op));
  *request = r;
  return ncclSuccess;
}

ncclResult_t Comm::get(int context, void* remote, uint64_t remote_off, size_t size, void* local,
                       uint64_t local_off, uint32_t rank, void** request) {
  *request = nullptr;
  if (context < 0 || static_cast<uint32_t>(context) >= kMaxContexts) {
    MESH_WARN("GIN iget: context %d out of range", context);
    return ncclInvalidArgument;
  }
  Peer* p = peer_for(rank, "iget");
  if (p == nullptr) return ncclInvalidArgument;
  if (size == 0 || size > kMaxOpBytes) {
    MESH_WARN("GIN iget from rank %u: size %zu not in 1 byte .. 1 GiB", rank, size);
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Region> rem = find_region(remote);
  std::shared_ptr<Region> loc = find_region(local);
  if (!rem || !loc || !range_fits(remote_off, size, rem->size) ||
      !range_fits(local_off, size, loc->size)) {
    MESH_WARN(
        "GIN iget from rank %u: %zu bytes at remote offset %lu into local offset %lu: a "
        "handle is not a registration of this comm or the range overruns it",
        rank, size, static_cast<unsigned long>(remote_off), static_cast<unsigned long>(local_off));
    return ncclInvalidArgument;
  }
  if (!peer_usable(*p, rank, "iget")) return ncclRemoteError;
  Request* r = new_request(Request::Kind::kGet, rank);
  if (r == nullptr) return ncclInternalError;
  ++p->gets_issued;
  *request = r;
  uint32_t id = p->next_get_id++;
  if (id == 0) id = p->next_get_id++;  // 0 is "no get" on the wire
  GetState g;
  g.request = r;
  g.local = loc;
  g.local_off = local_off;
  g.size = size;
  p->gets[id] = std::move(g);
  Op op;
  op.kind = Kind::kGetRequest;
  op.context = static_cast<uint16_t>(context);
  op.dst_reg = rem->id;
  op.dst_off = remote_off;
  op.size = size;
  op.get_id = id;
  p->queue.push_back(std::move(op));
  return ncclSuccess;
}

ncclResult_t Comm::flush(int context, uint32_t rank, void** request) {
  *request = nullptr;
  if (context < 0 || static_cast<uint32_t>(context) >= kMaxContexts) {
    MESH_WARN("GIN iflush: context %d out of range", context);
    return ncclInvalidArgument;
  }
  Peer* p = peer_for(rank, "iflush");
  if (p == nullptr) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(mu_);
  Request* r = new_request(Request::Kind::kFlush, rank);
  if (r == nullptr) return ncclInternalError;
  r->wait_puts = p->puts_issued;
  r->wait_gets = p->gets_issued;
  *request = r;
  return ncclSuccess;
}

ncclResult_t Comm::test(void* request, int* done) {
  *done = 0;
  auto* r = static_cast<Request*>(request);
  std::lock_guard<std::mutex> lock(
      req_mu_);  // never mu_: a spinning test() must not hold up the engine
  if (requests_.count(r) == 0) {
    MESH_WARN("GIN test: %p is not a request in flight on this comm (tested after done?)", request);
    return ncclInvalidArgument;
  }
  Peer& p = *peers_[r->peer];
  int state = r->state.load(std::memory_order_acquire);
  if (r->kind == Request::Kind::kFlush && state == 0) {
    if (p.failed.load(std::memory_order_acquire))
      state = 2;
    else if (p.puts_done.load(std::memory_order_acquire) >= r->wait_puts &&
             p.gets_done.load(std::memory_order_acquire) >= r->wait_gets)
      state = 1;
  }
  if (state == 0) return ncclSuccess;
  requests_.erase(r);
  r->tag = GinTag::kDead;
  delete r;
  *done = 1;
  return state == 1 ? ncclSuccess : ncclRemoteError;
}

Region* Comm::region(void* mhandle, const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = find_region(mhandle);
  if (!r) MESH_WARN("GIN %s: %p is not a registration of this comm", what, mhandle);
  return r.get();
}

void Comm::fail_peer(uint32_t rank, const std::string& why, bool warn) {
  Peer& p = *peers_[rank];
  if (p.failed.exchange(true, std::memory_order_acq_rel)) return;
  error_.store(true, std::memory_order_release);
  if (warn)
    MESH_WARN(
        "GIN (rank %d): the stream with rank %u failed: %s; every operation with that rank "
        "now fails (queryLastError reports it)",
        rank_, rank, why.c_str());
  // A one-sided peer's QP goes to the error state: the peer (alive, perhaps misbehaving) can
  // no longer write into or read this rank's registrations through it, and our work requests
  // on it stop (their flushed completions are not reported again: the peer is failed).
  if (p.rdma) {
    std::string qp_why;
    if (!p.rdma->shut(&qp_why))
      MESH_WARN(
          "GIN (rank %d): %s; rank %u may still reach this rank's registrations until "
          "the comm closes",
          rank_, qp_why.c_str(), rank);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (Op& op : p.queue)
    if (op.request != nullptr) op.request->state.store(2, std::memory_order_release);
  p.queue.clear();
  if (p.has_current && p.current.request != nullptr)
    p.current.request->state.store(2, std::memory_order_release);
  // Drop every Region reference the engine held for this peer: the current op, queued get
  // replies (their source may be deregistered; its ibv_mr goes with the last reference).
  p.has_current = false;
  p.current = Op{};
  p.replies.clear();
  for (auto& [id, g] : p.gets) g.request->state.store(2, std::memory_order_release);
  p.gets.clear();
  for (SendSlot& s : p.send)
    if (s.completes != nullptr) s.completes->state.store(2, std::memory_order_release);
  for (Posted& o : p.posted)
    if (o.request != nullptr) o.request->state.store(2, std::memory_order_release);
  p.posted.clear();
  p.keys_out.clear();
}

void Comm::close() {
  if (closed_) return;
  closed_ = true;
  if (thread_.joinable()) {
    closing_.store(true, std::memory_order_release);
    const int64_t deadline =
        monotonic_ms() + std::min<int64_t>(settings().connect_timeout_ms, 10000);
    for (;;) {
      bool all = true;
      for (int j = 0; j < nranks_; ++j) {
        const Peer& p = *peers_[static_cast<size_t>(j)];
        if (j == rank_ || p.failed.load(std::memory_order_acquire)) continue;
        all &= p.bye_sent.load(std::memory_order_acquire) &&
               p.bye_received.load(std::memory_order_acquire);
      }
      if (all) break;
      if (monotonic_ms() > deadline) {
        MESH_INFO(NCCL_NET, "GIN closeColl (rank %d): not every rank closed within %ld ms", rank_,
                  static_cast<long>(std::min<int64_t>(settings().connect_timeout_ms, 10000)));
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.rdma) {
      MESH_INFO(
          NCCL_NET,
          "GIN (rank %d): to rank %u one-sided over %s: %lu RDMA WRITEs, %lu atomics, %lu "
          "READs; %lu puts/gets as stream messages",
          rank_, static_cast<unsigned>(&pp - peers_.data()), p.rdma->describe().c_str(),
          static_cast<unsigned long>(p.rdma->writes), static_cast<unsigned long>(p.rdma->atomics),
          static_cast<unsigned long>(p.rdma->reads), static_cast<unsigned long>(p.stream_ops));
    }
    p.posted.clear();
    p.rdma.reset();  // its QP, before the registrations its work requests named
    if (p.send_mr != nullptr) plugin_.dereg_mr(p.send_comm, p.send_mr);
    if (p.send_comm != nullptr) plugin_.close_connection(p.send_comm, ObjectTag::kSend);
    if (p.recv_mr != nullptr) plugin_.dereg_mr(p.recv_comm, p.recv_mr);
    if (p.recv_comm != nullptr) plugin_.close_connection(p.recv_comm, ObjectTag::kRecv);
    p.send_mr = p.send_comm = p.recv_mr = p.recv_comm = nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  {
    std::lock_guard<std::mutex> rlock(req_mu_);
    for (Request* r : requests_) {
      r->tag = GinTag::kDead;
      delete r;
    }
    requests_.clear();
  }
  for (auto& [h, r] : by_handle_)
    if (r->cuda_context != nullptr)
      CudaDriver::instance().release_context(r->cuda_context, r->cuda_device);
  by_handle_.clear();
  regions_.clear();
}

}  // namespace mesh::gin
