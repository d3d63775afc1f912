// SPDX-License-Identifier: Apache-2.0
// The hello is the first thing any host on the network can send to the handshake port.
#include <cstring>

#include "handshake/hello.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::handshake;
  if (size < kHelloSize) return 0;
  Hello h;
  std::string why;
  if (decode_hello(data, &h, &why)) {
    uint8_t again[kHelloSize];
    encode_hello(h, again);
    if (std::memcmp(again, data, kHelloSize) != 0) __builtin_trap();
    if ((h.ndata == 0 && h.ext_len == 0) || h.ndata > kMaxDataStreams) __builtin_trap();
    if (h.ext_len > kMaxExtension || (h.ext_len != 0 && h.role != Role::kControl)) __builtin_trap();
  }
  HelloReply r;
  (void)decode_reply(data, &r);
  return 0;
}
