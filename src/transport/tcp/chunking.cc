// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/chunking.h"

#include <algorithm>

namespace mesh::tcp {

uint32_t choose_parts(size_t size, size_t ndata, size_t min_chunk, size_t inline_bytes) {
  if (size <= inline_bytes || ndata == 0) return 0;
  const size_t by_size = min_chunk == 0 ? ndata : size / min_chunk;
  return static_cast<uint32_t>(std::clamp<size_t>(by_size, 1, ndata));
}

PartRange part_range(size_t size, uint32_t nparts, uint32_t index) {
  if (nparts <= 1) return {0, size};
  const size_t base = (size / nparts) / kPartAlign * kPartAlign;
  const size_t offset = base * index;
  const size_t length = index + 1 == nparts ? size - offset : base;
  return {offset, length};
}

}  // namespace mesh::tcp
