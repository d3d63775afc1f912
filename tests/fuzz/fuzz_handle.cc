// SPDX-License-Identifier: Apache-2.0
// The 128-byte handle arrives from a peer through NCCL's bootstrap: decode must reject anything
// malformed without reading out of bounds, and whatever it accepts must re-encode identically.
#include <cstring>

#include "handshake/handle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::handshake;
  Handle h;
  std::string why;
  if (!decode_handle(data, size, &h, &why)) return 0;
  uint8_t again[kHandleSize];
  if (!encode_handle(h, again, &why) || std::memcmp(again, data, kHandleSize) != 0)
    __builtin_trap();
  return 0;
}
