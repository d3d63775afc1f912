// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/relay_chunk_writer.h"

#include <arpa/inet.h>
#include <endian.h>

#include <algorithm>

#include "transport/rdma/queue_pair.h"
#include "util/socket_util.h"

namespace mesh::rdma {

RelayChunkWriter::RelayChunkWriter(const SetupMessage& relay)
    : staging_addr_(relay.ring_addr),
      slots_(relay.relay_slots),
      slot_bytes_(relay.relay_slot_bytes) {
  for (size_t q = 0; q < relay.qps.size() && q < kMaxQps; ++q) rkey_[q] = relay.qps[q].ring_rkey;
}

RelayChunkWriter::Write RelayChunkWriter::next(size_t nqps, uint32_t length, bool last) const {
  Write w;
  w.chunk = posted_;
  w.qp = nqps == 0 ? 0 : static_cast<size_t>(posted_ % nqps);
  w.remote_addr = staging_addr_ + (slots_ == 0 ? 0 : posted_ % slots_) * slot_bytes_;
  w.rkey = rkey_[std::min(w.qp, kMaxQps - 1)];
  w.imm = chunk_imm(length, last, posted_);
  return w;
}

uint64_t read_credit_word(const uint8_t* word) {
  return le64toh(__atomic_load_n(reinterpret_cast<const uint64_t*>(word), __ATOMIC_ACQUIRE));
}

bool post_chunk_write(QueuePair& qp, const RelayChunkWriter::Write& w, uint64_t addr,
                      uint32_t length, uint32_t lkey, uint64_t wr_id, bool inline_ok,
                      std::string* why) {
  ibv_sge sge{};
  sge.addr = addr;
  sge.length = length;
  sge.lkey = lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(w.imm);
  wr.send_flags = IBV_SEND_SIGNALED;
  if (inline_ok && length > 0 && length <= qp.max_inline()) wr.send_flags |= IBV_SEND_INLINE;
  wr.sg_list = &sge;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.wr.rdma.remote_addr = w.remote_addr;
  wr.wr.rdma.rkey = w.rkey;
  const int rc = ibv_post_send(qp.qp(), &wr, &bad);
  if (rc != 0) {
    *why = "ibv_post_send on " + qp.describe() + " failed: " + errno_text(rc);
    return false;
  }
  return true;
}

}  // namespace mesh::rdma
