// SPDX-License-Identifier: Apache-2.0
// The RDMA setup message arrives from the peer inside the handshake (its length bounded by the
// hello): decode must reject or accept without crashing, and what it accepts must re-encode to
// the same bytes.
#include <cstring>

#include "transport/rdma/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::rdma;
  SetupMessage m;
  std::string why;
  if (decode_setup(data, size, &m, &why)) {
    if (m.qps.empty() || m.qps.size() > kMaxQps) __builtin_trap();
    const auto again = encode_setup(m);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  }
  // Peer-written clear-to-send entries are decoded from any 64 bytes.
  if (size >= kCtsEntrySize) {
    const CtsEntry e = decode_cts_entry(data);
    uint8_t again[kCtsEntrySize];
    encode_cts_entry(e, again);
    (void)again;
  }
  return 0;
}
