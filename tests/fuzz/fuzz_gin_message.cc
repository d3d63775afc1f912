// SPDX-License-Identifier: Apache-2.0
// A GIN message (src/gin/wire.h) is peer-supplied: decoding is total, never reads past the
// message, and a header it accepts re-encodes to the same 64 bytes (every byte is a field, so
// nothing the receiver ignored could carry meaning). The connect greeting, a registration key's
// payload and the RDMA hello (one-sided path) likewise.
#include <cstring>

#include "gin/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::gin;
  Header h;
  std::string why;
  if (decode_header(data, size, &h, &why)) {
    if (size < kHeaderSize) __builtin_trap();
    uint8_t again[kHeaderSize];
    encode_header(h, again);
    if (std::memcmp(again, data, kHeaderSize) != 0) __builtin_trap();
    if ((h.kind == Kind::kPut || h.kind == Kind::kGetReply) &&
        (h.length > kMaxChunk || h.length != size - kHeaderSize))
      __builtin_trap();
    if ((h.flags & kFlagSignal) != 0 && (h.signal_offset % 8 != 0 || h.kind != Kind::kPut))
      __builtin_trap();
  } else if (why.empty()) {
    __builtin_trap();
  }
  Greeting g;
  if (decode_greeting(data, size, &g, &why)) {
    uint8_t again[kGreetingSize];
    encode_greeting(g, again);
    if (std::memcmp(again, data, kGreetingSize) != 0) __builtin_trap();
  }
  RegKey k;
  if (decode_reg_key(data, size, &k, &why)) {
    uint8_t again[kRegKeySize];
    encode_reg_key(k, again);
    if (std::memcmp(again, data, kRegKeySize) != 0 || k.size > UINT64_MAX - k.addr)
      __builtin_trap();
  }
  RdmaHello r;
  if (decode_rdma_hello(data, size, &r, &why)) {
    const std::vector<uint8_t> again = encode_rdma_hello(r);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
    if ((r.phase == 1 && r.offer) != !r.setup.empty()) __builtin_trap();
  }
  return 0;
}
