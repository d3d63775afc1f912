// SPDX-License-Identifier: Apache-2.0
// The per-message header on a TCP connection is peer-supplied; decoding is total, and the split
// it leads to must always tile the message exactly for any size and part count.
#include "transport/tcp/chunking.h"
#include "transport/tcp/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::tcp;
  if (size < kHeaderFieldsSize) return 0;  // decode_header reads the fields only
  if (size >= kHeaderSize) (void)header_padding_is_zero(data);
  const MessageHeader h = decode_header(data);
  const uint32_t nparts = h.nparts == 0 ? 1 : h.nparts;
  size_t next = 0;
  for (uint32_t i = 0; i < nparts; ++i) {
    const PartRange r = part_range(h.size, nparts, i);
    if (r.offset != next || r.offset + r.length < r.offset) __builtin_trap();
    next = r.offset + r.length;
  }
  if (next != h.size) __builtin_trap();
  return 0;
}
