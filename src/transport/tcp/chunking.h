// SPDX-License-Identifier: Apache-2.0
// How a message is spread over a connection's data sockets. Both ends compute the split from
// the header the sender writes (size, number of parts), so no per-chunk headers are needed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mesh::tcp {

inline constexpr size_t kPartAlign = 128;

struct PartRange {
  size_t offset = 0;
  size_t length = 0;
};

// Sender's choice: 0 parts means "small" (size <= inline_bytes: one part, which the caller
// moves itself, tcp_connection.cc); otherwise one part per min_chunk bytes, at least 1 and at
// most ndata.
uint32_t choose_parts(size_t size, size_t ndata, size_t min_chunk, size_t inline_bytes);

// Part `index` of `nparts` for a message of `size` bytes: equal parts aligned to kPartAlign,
// the last one takes the remainder. Parts tile [0, size) exactly, in order.
// Why the share is rounded *down* (rdma::split rounds up): the header announces nparts parts
// and each one is a read queued on a data stream, so every announced part should carry bytes.
// Rounding down keeps parts 0..n-2 at exactly `base` bytes and puts the remainder on the last,
// never past `size`; with choose_parts' min_chunk >= 4096 no part is empty. Rounding up would
// leave trailing parts empty for some sizes. Wire contract: the receiver computes the same
// ranges from (size, nparts) to know which bytes each stream carries; keep it as it is.
PartRange part_range(size_t size, uint32_t nparts, uint32_t index);

}  // namespace mesh::tcp
