// SPDX-License-Identifier: Apache-2.0
// One GIN/RMA collective comm (connect()'s collComm): a net send comm and a net receive comm to
// every other rank, and the engine thread that turns NCCL's one-sided operations into ordered
// messages (wire.h) on them and applies the messages that arrive.
//
// Semantics (proxy mode, shared/reference/gin-rma.md 1.4, docs/gin.md):
//  - Each direction of each rank pair is one ordered message stream carrying every context, and
//    the receiver applies messages strictly in stream order, data before the signal of the same
//    put. So a signal visible at the target implies its put and every earlier put from this rank
//    (any context) is visible: every signal is strong.
//  - Registrations are symmetric by call order: regMrSym is collective, so the n-th call on every
//    rank gets id n; a put names the target's registration by id and an offset in it. A message
//    for an id the target has not registered yet waits (the stream stalls) for at most
//    NCCL_MESH_CONNECT_TIMEOUT_MS.
//  - test() done: a put's source was copied out and its last message handed to the transport
//    (source reusable, NCCL's counters); a get's bytes are in the local buffer; a flush: every
//    put and get issued to that rank before it is done.
//
// Threads: NCCL's threads (GIN progress, host RMA proxy, the proxy service for registration)
// call the public functions; they take `mu_` briefly to queue an op, register or find a request
// and never touch a net comm after connect(). The engine thread alone drives the net comms
// (isend/irecv/test), copies payloads and applies signals; it takes `mu_` only to pop queued ops
// and look up registrations and gets. Request completion is an atomic store the caller's test()
// reads. Each copy into or out of a registration (and each signal) holds that Region's copy_mu,
// which deregMrSym (NCCL's thread) also takes to mark it dead; lock order mu_ -> copy_mu (a get
// reply is copied under mu_), and deregister takes them one after the other, never nested.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gin/objects.h"
#include "gin/one_sided.h"
#include "gin/wire.h"
#include "nccl/gin_common.h"

namespace mesh::gin {

// [off, off + n) lies within [0, size), without overflow: every put, get and signal is checked
// with it before its bytes are touched or posted.
inline bool range_fits(uint64_t off, uint64_t n, uint64_t size) {
  return n <= size && off <= size - n;
}

struct Region {
  GinTag tag = GinTag::kRegion;
  Comm* comm = nullptr;
  uint32_t id = 0;
  uint8_t* base = nullptr;
  size_t size = 0;
  int type = NCCL_PTR_HOST;
  uint64_t flags = 0;
  void* cuda_context = nullptr;  // NCCL_PTR_CUDA: the device's primary context (retained)
  int cuda_device = -1;
  // Registered on every verbs device of the comm's one-sided peers (null when there are none).
  std::unique_ptr<RdmaRegistration> rdma;
  // The engine copies into and out of `base` only while holding copy_mu and seeing !dead;
  // deregister() sets dead under it, so once deregMrSym returns no copy is in flight (it waits
  // for at most one chunk) and none starts (queued get replies and puts naming it still hold the
  // Region, not the memory). Innermost lock: nothing takes mu_ or req_mu_ while holding it.
  mutable std::mutex copy_mu;
  bool dead = false;  // copy_mu
};

struct Request {
  GinTag tag = GinTag::kRequest;
  enum class Kind : uint8_t { kPut, kGet, kFlush } kind = Kind::kPut;
  uint32_t peer = 0;
  // 0 pending, 1 done, 2 failed (the peer's stream broke).
  std::atomic<int> state{0};
  uint64_t wait_puts = 0;  // kFlush: done when the peer's completed puts/gets reach these
  uint64_t wait_gets = 0;
};

struct Signal {
  const Region* region = nullptr;
  uint64_t offset = 0;
  uint64_t value = 0;
  uint32_t op = 0;  // kSignalInc or kSignalAdd
};

class Comm {
 public:
  Comm(Plugin& plugin, Instance* instance, int dev, int nranks, int rank);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  GinTag tag = GinTag::kComm;  // first data member: the entry points check it

  // Collective: connects to every other rank (handles[] from each rank's listen), identifies
  // every accepted connection by its greeting, and starts the engine. Bounded by
  // NCCL_MESH_CONNECT_TIMEOUT_MS; on failure one WARN names the ranks missing.
  ncclResult_t connect(void* const* handles, Listen* listen);

  ncclResult_t register_region(void* data, size_t size, int type, uint64_t flags, Region** out);
  ncclResult_t deregister(void* mhandle);
  // size 0 puts carry only the signal; `dst` may then be null (VA signals).
  ncclResult_t put(int context, void* src, uint64_t src_off, size_t size, void* dst,
                   uint64_t dst_off, uint32_t rank, const Signal* signal, void** request);
  ncclResult_t get(int context, void* remote, uint64_t remote_off, size_t size, void* local,
                   uint64_t local_off, uint32_t rank, void** request);
  ncclResult_t flush(int context, uint32_t rank, void** request);
  ncclResult_t test(void* request, int* done);
  // A region of this comm, or null (one WARN naming `what`) for anything else.
  Region* region(void* mhandle, const char* what);
  bool has_error() const { return error_.load(std::memory_order_acquire); }
  int nranks() const { return nranks_; }
  Instance* instance() const { return instance_; }
  int rank() const { return rank_; }
  // Sends kBye after everything queued, waits a bounded time for every peer's kBye (NCCL closes
  // collectively), then stops the engine and closes every net comm.
  void close();

 private:
  static constexpr size_t kSlots = 8;  // messages in flight per direction per peer
  static constexpr size_t kMaxRequests = 1 << 16;
  static constexpr size_t kMaxReplies = 4096;  // get replies queued for one peer

  struct Op {
    Kind kind = Kind::kPut;
    uint16_t context = 0;
    std::shared_ptr<Region> src;  // put, get reply: the local source
    uint64_t src_off = 0;
    uint64_t size = 0;
    uint64_t sent = 0;  // bytes already in messages
    uint32_t dst_reg = 0;
    uint64_t dst_off = 0;
    uint32_t signal_reg = 0;
    uint64_t signal_off = 0;
    uint64_t signal_value = 0;
    uint32_t signal_op = 0;
    uint32_t get_id = 0;
    Request* request = nullptr;  // completed when the op's last message is sent (puts)
    bool started = false;
    RegKey key;  // kRegKey: registration dst_reg's RDMA address for the peer's device
  };
  // A one-sided op posted on the peer's QP, until its signalled work request completes.
  struct Posted {
    uint64_t number = 0;  // wr_id of its signalled work request
    int wrs = 0;          // 0: nothing posted (a size-0 put without signal)
    Request* request = nullptr;
    uint32_t get_id = 0;           // a get: its GetState (the request is there)
    std::shared_ptr<Region> hold;  // the local memory its work requests name
  };
  struct GetState {
    Request* request = nullptr;
    std::shared_ptr<Region> local;
    uint64_t local_off = 0;
    uint64_t size = 0;
    uint64_t received = 0;
  };
  struct SendSlot {
    void* net_request = nullptr;
    size_t bytes = 0;     // message size; 0 = slot free
    bool posted = false;  // false: built, isend to retry
    Request* completes = nullptr;
    bool bye = false;
  };
  struct Peer {
    void* send_comm = nullptr;
    void* recv_comm = nullptr;
    void* send_mr = nullptr;
    void* recv_mr = nullptr;
    std::vector<uint8_t> send_staging;  // kSlots x kSlotSize
    std::vector<uint8_t> recv_staging;
    bool greeted = false;  // connect: our greeting went out
    void* greet_request = nullptr;
    // mu_: queued by NCCL's threads.
    std::deque<Op> queue;
    std::deque<Op> keys_out;  // kRegKey messages (one-sided peers): sent before the queue
    // Registrations deregistered here: the engine erases the peer's keys for them (rdma->keys
    // is engine-thread only), so stored keys stay bounded by the live registrations.
    std::vector<uint32_t> keys_forget;
    std::atomic<bool> keys_forget_pending{false};
    std::unordered_map<uint32_t, GetState> gets;
    uint32_t next_get_id = 1;
    uint64_t puts_issued = 0;
    uint64_t gets_issued = 0;
    bool warned_unusable = false;
    // Engine thread only.
    std::array<SendSlot, kSlots> send{};
    size_t send_head = 0;  // oldest in flight
    size_t send_count = 0;
    std::array<void*, kSlots> recv{};  // posted irecvs, ring (null: completed, not applied)
    std::array<size_t, kSlots> recv_size{};
    size_t recv_head = 0;
    size_t recv_posted = 0;
    int64_t stalled_since_ms = -1;  // the oldest received message waits for a registration
    uint64_t send_seq = 0;
    uint64_t recv_seq = 0;
    Op current;
    bool has_current = false;
    std::deque<Op> replies;
    // One-sided path (set in connect, null for a two-sided peer); the rest engine thread only.
    std::unique_ptr<OneSided> rdma;
    std::deque<Posted> posted;
    uint64_t next_posted = 1;
    uint64_t completed_posted = 0;   // the highest op number a completion reported
    int64_t key_wait_since_ms = -1;  // the current op waits for the peer's registration key
    uint64_t stream_ops = 0;         // puts and gets that went as messages on the stream
    // Read by test() on NCCL's threads.
    std::atomic<uint64_t> puts_done{0};
    std::atomic<uint64_t> gets_done{0};
    std::atomic<bool> failed{false};
    // Closing (kBye): ours is in flight / sent; the peer's arrived (its stream has ended: no
    // receive is posted or tested on it again, so its close is not an error).
    bool bye_queued = false;
    std::atomic<bool> bye_sent{false};
    std::atomic<bool> bye_received{false};
  };

  Peer* peer_for(uint32_t rank, const char* what);
  Request* new_request(Request::Kind kind, uint32_t peer);  // takes req_mu_
  // False (one WARN per peer) once the peer's stream failed or it closed; caller holds mu_.
  bool peer_usable(Peer& p, uint32_t rank, const char* what);
  std::shared_ptr<Region> find_region(const void* mhandle);  // caller holds mu_
  // Engine thread only: one WARN (none with warn=false: the caller logged it), every pending
  // operation with that rank fails. Takes mu_: never call it holding a Region's copy_mu.
  void fail_peer(uint32_t rank, const std::string& why, bool warn = true);

  // one_sided_connect.cc: after the greetings, offer every peer a QP on the cable of our
  // connection to it; pairs where both offered and connected go one-sided.
  bool setup_one_sided(int64_t deadline, std::string* failure);
  bool exchange(const std::vector<std::vector<uint8_t>>& out, std::vector<std::vector<uint8_t>>* in,
                int64_t deadline, std::string* failure);
  // one_sided_ops.cc (engine thread): 1 posted, 0 waits (a key, room on the QP), -1 the peer
  // failed (fail_peer called).
  int post_one_sided(uint32_t rank, Peer& p, Op& op);
  bool poll_one_sided(uint32_t rank, Peer& p);

  // engine.cc
  void engine();
  // The engine caught an exception: one WARN, every peer fails (never std::terminate).
  void fail_all(const char* what) noexcept;
  bool progress_peer(uint32_t rank);
  bool progress_receives(uint32_t rank, Peer& p);
  bool progress_sends(uint32_t rank, Peer& p);
  bool build_message(uint32_t rank, Peer& p, Op& op, uint8_t* slot, size_t* bytes, bool* last);
  // 1: applied; 0: waits for a registration; -1: the peer broke the protocol (*why).
  int apply_message(uint32_t rank, Peer& p, const uint8_t* msg, size_t size, std::string* why);
  bool copy_in(const Region& r, uint64_t off, const uint8_t* from, size_t n, std::string* why);
  bool copy_out(const Region& r, uint64_t off, uint8_t* to, size_t n, std::string* why);
  bool apply_signal(const Region& r, uint64_t off, uint64_t value, std::string* why);
  bool self_deliver(uint32_t rank, Peer& p, const uint8_t* msg, size_t size);

  Plugin& plugin_;
  Instance* instance_;
  const int dev_;
  const int nranks_;
  const int rank_;
  std::vector<std::unique_ptr<Peer>> peers_;
  // The verbs devices of the one-sided peers (fixed in connect): regMrSym registers on each.
  std::vector<rdma::VerbsDevice*> rdma_devices_;

  mutable std::mutex mu_;
  uint32_t next_region_id_ = 1;
  std::map<uint32_t, std::shared_ptr<Region>> regions_;  // live, by id
  std::unordered_map<const void*, std::shared_ptr<Region>> by_handle_;
  std::mutex req_mu_;  // requests_ only; taken after mu_ where both are held
  std::unordered_set<Request*> requests_;

  // Engine thread only: the totals of never-reset GPU signals, by (registration, offset).
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> signal_shadow_;
  std::atomic<bool> error_{false};
  std::atomic<bool> closing_{false};  // close(): say kBye on every stream after the queue
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool closed_ = false;
};

}  // namespace mesh::gin
