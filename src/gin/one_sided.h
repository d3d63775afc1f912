// SPDX-License-Identifier: Apache-2.0
// GIN's one-sided RDMA path for one peer (docs/gin.md "The one-sided RDMA path"), as NCCL's own
// IB GIN does it: one RC QP per rank pair on the port of the cable the plugin's connection to
// that peer chose; a put is an RDMA WRITE from the local registration straight into the
// target's, its signal an 8-byte ATOMIC FETCH_AND_ADD posted right after it on the same QP; a
// get is an RDMA READ. The target's CPU does nothing; no CPU ever reads or writes the data.
//
// Ordering: an RC QP executes the requests it receives in the order they were posted, and a
// responder starts an atomic only after the WRITEs before it on that QP were placed (NCCL's IB
// GIN relies on the same: WRITE then FETCH_AND_ADD, no fence; signal memory registered without
// relaxed ordering). Every op to a peer (any context) goes through its one QP, so a visible
// signal implies its put and every earlier put to that peer are visible (strong).
//
// Completion: each op's last work request is signalled, with the op's number as wr_id; RC
// completes a QP's work requests in order, so a completion completes every op up to its number.
//
// Threads: created and connected on NCCL's thread in connect(); afterwards only the GIN engine
// thread posts, polls and reads the remote keys; the device's async-event thread only fails
// `async_`. Registrations (RdmaRegistration) are made on
// NCCL's thread in regMrSym and may be released by the engine (the last op holding them).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gin/wire.h"
#include "transport/failure_latch.h"
#include "transport/rdma/completions.h"
#include "transport/rdma/devices.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/queue_pair.h"

namespace mesh::gin {

// One registration on each verbs device of the comm's one-sided peers: local access for the
// data it sends and receives, remote write, read and 8-byte atomics for its peers. Exactly the
// registration's bytes (no rounding to pages): the NIC refuses any access outside them.
class RdmaRegistration {
 public:
  RdmaRegistration() = default;
  ~RdmaRegistration();
  RdmaRegistration(const RdmaRegistration&) = delete;
  RdmaRegistration& operator=(const RdmaRegistration&) = delete;

  bool add(rdma::VerbsDevice* dev, void* data, size_t size, std::string* why);
  const ibv_mr* on(const rdma::VerbsDevice* dev) const;

 private:
  std::vector<std::pair<rdma::VerbsDevice*, ibv_mr*>> mrs_;
};

class OneSided {
 public:
  // Work requests in flight on the QP (an op posts one or two), below QueuePair::kSendDepth.
  static constexpr int kMaxWrs = 96;

  // A QP (in INIT) on `rail`'s port of `dev`, with remote atomics. Null with *why when the
  // device has no atomics or the QP cannot be made (the pair then stays two-sided).
  static std::unique_ptr<OneSided> create(rdma::VerbsDevice* dev, const rdma::RailBinding& rail,
                                          std::string* why);
  ~OneSided();
  OneSided(const OneSided&) = delete;
  OneSided& operator=(const OneSided&) = delete;

  std::vector<uint8_t> setup() const;  // the RDMA setup message for the hello
  bool connect(const std::vector<uint8_t>& peer_setup, std::string* why);

  rdma::VerbsDevice* device() const { return qp_->device(); }
  std::string describe() const { return qp_->describe(); }
  bool room(int wrs) const { return in_flight_ + wrs <= kMaxWrs; }
  // One op's work requests, the last one signalled with wr_id = `op`: an RDMA WRITE of `size`
  // bytes (none when 0) followed, with `add`, by FETCH_AND_ADD(add_value) on the 8-byte word at
  // add_raddr (the caller posts nothing for an op with neither).
  // room(wrs) first; release(wrs) when the op completed.
  bool write_and_add(const ibv_mr* local, uint64_t laddr, uint32_t size, uint64_t raddr,
                     uint32_t rkey, bool add, uint64_t add_raddr, uint32_t add_rkey,
                     uint64_t add_value, uint64_t op, std::string* why);
  bool read(const ibv_mr* local, uint64_t laddr, uint32_t size, uint64_t raddr, uint32_t rkey,
            uint64_t op, std::string* why);
  // Every completion: on_done(op number of a signalled request). False with *why on a failed
  // completion or poll (the peer's QP is then unusable).
  template <typename OnDone>
  bool poll(std::string* why, OnDone&& on_done);
  void release(int wrs) { in_flight_ -= wrs; }
  // The peer failed: the QP to the error state (QueuePair::to_error).
  bool shut(std::string* why) { return qp_->to_error(why); }

  // The peer's registrations, by id (kRegKey messages on the stream).
  std::map<uint32_t, RegKey> keys;
  // Counters for the close INFO (and the Soft-RoCE lane's proof that this path ran).
  uint64_t writes = 0, atomics = 0, reads = 0;

 private:
  OneSided() = default;
  bool post(ibv_send_wr* first, std::string* why);

  rdma::VerbsDevice* dev_ = nullptr;
  std::unique_ptr<rdma::QueuePair> qp_;
  // Failed by the device's async-event thread on a QP or CQ error (QueuePair::watch).
  std::shared_ptr<FailureLatch> async_ = std::make_shared<FailureLatch>();
  int rd_atomic_ = 1;
  uint64_t* fetch_ = nullptr;  // where the atomics' old values land (never read)
  ibv_mr* fetch_mr_ = nullptr;
  int in_flight_ = 0;
};

template <typename OnDone>
bool OneSided::poll(std::string* why, OnDone&& on_done) {
  if (async_->failed()) {
    // An asynchronous QP/CQ event (the device's event thread): its WARN names the event.
    async_->report("GIN one-sided " + qp_->describe());
    *why = "asynchronous error on " + qp_->describe() + " (see the WARN above)";
    return false;
  }
  ibv_wc wc[16];
  for (;;) {
    const int n = ibv_poll_cq(qp_->cq(), 16, wc);
    if (n < 0) {
      *why = "ibv_poll_cq on " + qp_->describe() + " failed";
      return false;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        *why = rdma::completion_error(*qp_, wc[i]);
        return false;
      }
      if (wc[i].opcode == IBV_WC_RECV || wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) continue;
      on_done(wc[i].wr_id);
    }
    if (n < 16) return true;
  }
}

}  // namespace mesh::gin
