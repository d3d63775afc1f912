// SPDX-License-Identifier: Apache-2.0
#include "gin/wire.h"

#include <cstring>

#include "transport/rdma/wire.h"
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
  if (kind < 1 || kind > 5) return fail(why, "unknown kind " + std::to_string(kind));
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
    case Kind::kRegKey:
      if (payload != kRegKeySize || h.length != kRegKeySize || h.flags != kFlagLast ||
          h.context != 0 || h.reg == 0 || h.offset != 0 || h.get_id != 0)
        return fail(why, "a registration key with bad fields");
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

void encode_reg_key(const RegKey& k, uint8_t* out) {
  std::memset(out, 0, kRegKeySize);
  put_u64(out, k.addr);
  put_u64(out + 8, k.size);
  put_u32(out + 16, k.rkey);
}

bool decode_reg_key(const uint8_t* in, size_t size, RegKey* out, std::string* why) {
  if (size != kRegKeySize)
    return fail(why, "registration key of " + std::to_string(size) + " bytes");
  RegKey k;
  k.addr = get_u64(in);
  k.size = get_u64(in + 8);
  k.rkey = get_u32(in + 16);
  if (get_u32(in + 20) != 0) return fail(why, "registration key with a reserved word set");
  if (k.size > UINT64_MAX - k.addr) return fail(why, "registration key wraps the address space");
  *out = k;
  return true;
}

std::vector<uint8_t> encode_rdma_hello(const RdmaHello& h) {
  std::vector<uint8_t> out(kRdmaHelloHeader + h.setup.size(), 0);
  uint8_t* o = out.data();
  if (o == nullptr) return out;  // never: the header is not empty
  put_u32(o, kRdmaHelloMagic);
  o[4] = h.phase;
  o[5] = h.offer ? 1 : 0;
  put_u32(o + 8, static_cast<uint32_t>(h.setup.size()));
  for (size_t i = 0; i < h.setup.size(); ++i) o[kRdmaHelloHeader + i] = h.setup[i];
  return out;
}

bool decode_rdma_hello(const uint8_t* in, size_t size, RdmaHello* out, std::string* why) {
  if (size < kRdmaHelloHeader) return fail(why, "RDMA hello of " + std::to_string(size) + " bytes");
  if (get_u32(in) != kRdmaHelloMagic || get_u16(in + 6) != 0 || get_u32(in + 12) != 0)
    return fail(why, "bad RDMA hello");
  RdmaHello h;
  h.phase = in[4];
  if (h.phase != 1 && h.phase != 2)
    return fail(why, "RDMA hello of phase " + std::to_string(h.phase));
  if (in[5] > 1) return fail(why, "RDMA hello with offer " + std::to_string(in[5]));
  h.offer = in[5] == 1;
  const uint32_t len = get_u32(in + 8);
  if (len != size - kRdmaHelloHeader) return fail(why, "RDMA hello length does not match");
  if ((h.phase == 1 && h.offer) != (len > 0))
    return fail(why, "RDMA hello with a setup message where none belongs, or none where one does");
  if (len > 0) {
    rdma::SetupMessage m;
    if (!rdma::decode_setup(in + kRdmaHelloHeader, len, &m, why)) return false;
    if (m.qps.size() != 1 || m.relay)
      return fail(why, "RDMA hello's setup message must name one QP and no relay");
    h.setup.assign(in + kRdmaHelloHeader, in + size);
  }
  *out = std::move(h);
  return true;
}

}  // namespace mesh::gin
