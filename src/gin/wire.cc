// SPDX-License-Identifier: Apache-2.0
#include "gin/wire.h"

#include <cstring>

#include "util/byte_order.h"

namespace mesh::gin {

void encode_header(const Header& h, uint8_t* out) {
  std::memset(out, 0, kHeaderSize);
  put_u32(out, kMagic);
  out[4] = static_cast<uint8_t>(h.kind);
  out[5] = h.flags;
  put_u16(out + 6, h.context);
  put_u32(out + 8, h.reg);
  put_u32(out + 12, h.signal_reg);
  put_u64(out + 16, h.offset);
  put_u64(out + 24, h.length);
  put_u64(out + 32, h.signal_offset);
  put_u64(out + 40, h.signal_value);
  put_u32(out + 48, h.signal_op);
  put_u32(out + 52, h.get_id);
  put_u64(out + 56, h.seq);
}

namespace {
bool fail(std::string* why, const std::string& text) {
  *why = text;
  return false;
}
}  // namespace

bool decode_header(const uint8_t* in, size_t message_size, Header* out, std::string* why) {
  if (message_size < kHeaderSize)
    return fail(why,
                "message of " + std::to_string(message_size) + " bytes, shorter than a header");
  if (get_u32(in) != kMagic) return fail(why, "bad magic");
  Header h;
  const uint8_t kind = in[4];
  if (kind < 1 || kind > 4) return fail(why, "unknown kind " + std::to_string(kind));
  h.kind = static_cast<Kind>(kind);
  h.flags = in[5];
  h.context = get_u16(in + 6);
  h.reg = get_u32(in + 8);
  h.signal_reg = get_u32(in + 12);
  h.offset = get_u64(in + 16);
  h.length = get_u64(in + 24);
  h.signal_offset = get_u64(in + 32);
  h.signal_value = get_u64(in + 40);
  h.signal_op = get_u32(in + 48);
  h.get_id = get_u32(in + 52);
  h.seq = get_u64(in + 56);
  if ((h.flags & ~(kFlagLast | kFlagSignal)) != 0) return fail(why, "unknown flags");
  if (h.context >= kMaxContexts)
    return fail(why, "context " + std::to_string(h.context) + " out of range");
  const size_t payload = message_size - kHeaderSize;
  const bool signal = (h.flags & kFlagSignal) != 0;
  if (signal) {
    if (h.kind != Kind::kPut || (h.flags & kFlagLast) == 0)
      return fail(why, "a signal on a message that is not the last of a put");
    if (h.signal_op != kSignalInc && h.signal_op != kSignalAdd)
      return fail(why, "unknown signal op " + std::to_string(h.signal_op));
    if (h.signal_op == kSignalInc && h.signal_value != 1)
      return fail(why, "an increment signal whose value is not 1");
    if (h.signal_offset % 8 != 0) return fail(why, "signal offset not 8-aligned");
  } else if (h.signal_reg != 0 || h.signal_offset != 0 || h.signal_value != 0 || h.signal_op != 0) {
    return fail(why, "signal fields set without a signal");
  }
  switch (h.kind) {
    case Kind::kPut:
      if (h.get_id != 0) return fail(why, "a put with a get id");
      if (h.length > kMaxChunk || h.length != payload)
        return fail(why, "put chunk of " + std::to_string(h.length) + " bytes with " +
                             std::to_string(payload) + " payload bytes");
      break;
    case Kind::kGetRequest:
      if (payload != 0 || (h.flags & kFlagLast) == 0)
        return fail(why, "a get request with payload or not marked last");
      if (h.length == 0 || h.length > kMaxOpBytes)
        return fail(why, "get of " + std::to_string(h.length) + " bytes");
      break;
    case Kind::kBye:
      if (payload != 0 || h.flags != kFlagLast || h.context != 0 || h.reg != 0 || h.offset != 0 ||
          h.length != 0 || h.get_id != 0)
        return fail(why, "a bye with fields set");
      break;
    case Kind::kGetReply:
      if (h.reg != 0 || h.context != 0) return fail(why, "a get reply with a registration");
      if (h.length > kMaxChunk || h.length != payload || h.offset >= kMaxOpBytes)
        return fail(why, "get reply chunk of " + std::to_string(h.length) + " bytes at " +
                             std::to_string(h.offset));
      break;
  }
  *out = h;
  return true;
}

void encode_greeting(const Greeting& g, uint8_t* out) {
  std::memset(out, 0, kGreetingSize);
  put_u32(out, kGreetingMagic);
  put_u32(out + 4, g.rank);
  put_u32(out + 8, g.nranks);
  put_u64(out + 16, g.comm_id);
}

bool decode_greeting(const uint8_t* in, size_t size, Greeting* out, std::string* why) {
  if (size != kGreetingSize) return fail(why, "greeting of " + std::to_string(size) + " bytes");
  if (get_u32(in) != kGreetingMagic || get_u32(in + 12) != 0) return fail(why, "bad greeting");
  out->rank = get_u32(in + 4);
  out->nranks = get_u32(in + 8);
  out->comm_id = get_u64(in + 16);
  return true;
}

}  // namespace mesh::gin
