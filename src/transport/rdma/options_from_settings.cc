// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/options_from_settings.h"

namespace mesh::rdma {

RdmaOptions rdma_options(const Settings& s) {
  RdmaOptions opt;
  opt.mode = s.transport;
  opt.gid_index = static_cast<int>(s.gid_index);
  opt.qps_per_conn = static_cast<size_t>(s.qps_per_conn);
  opt.qp.timeout = static_cast<int>(s.ib_timeout);
  opt.qp.retry_cnt = static_cast<int>(s.ib_retry_cnt);
  opt.host_as_gpu = s.test_host_as_gpu != 0;
  return opt;
}

ForwarderOptions forwarder_options(const Settings& s) {
  ForwarderOptions fo;
  fo.slots = static_cast<uint32_t>(s.relay_rdma_slots);
  fo.slot_bytes = static_cast<uint32_t>(s.relay_rdma_slot_bytes / 4096 * 4096);
  fo.drain_timeout_ms = s.relay_rdma_drain_ms;
  return fo;
}

}  // namespace mesh::rdma
