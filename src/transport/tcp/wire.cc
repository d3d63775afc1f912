// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/wire.h"

#include <algorithm>
#include <cstring>

#include "util/byte_order.h"

namespace mesh::tcp {

void encode_ask(const MessageHeader& h, uint8_t* out) {
  put_u32(out, h.seq);
  put_u16(out + 4, h.flags);
  put_u16(out + 6, h.nparts);
  put_u64(out + 8, h.size);
}

void encode_header(const MessageHeader& h, uint8_t* out) {
  encode_ask(h, out);
  std::memset(out + kHeaderFieldsSize, 0, kHeaderSize - kHeaderFieldsSize);
}

bool header_padding_is_zero(const uint8_t* in) {
  return std::all_of(in + kHeaderFieldsSize, in + kHeaderSize, [](uint8_t b) { return b == 0; });
}

MessageHeader decode_header(const uint8_t* in) {
  return {get_u32(in), get_u16(in + 4), get_u16(in + 6), get_u64(in + 8)};
}

void encode_cts(const ClearToSend& c, uint8_t* out) {
  put_u32(out, c.seq);
  put_u32(out + 4, c.reserved);
  put_u64(out + 8, c.capacity);
}

ClearToSend decode_cts(const uint8_t* in) {
  return {get_u32(in), get_u32(in + 4), get_u64(in + 8)};
}

}  // namespace mesh::tcp
