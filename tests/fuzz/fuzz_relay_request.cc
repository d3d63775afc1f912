// SPDX-License-Identifier: Apache-2.0
// The relay request is the first thing any host can send to a relay agent's TCP port, and the
// relay reply the first thing a relay sends back.
#include <cstring>

#include "relay/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::relay;
  ReplyCode code;
  if (size >= kRelayReplySize && decode_relay_reply(data, &code)) (void)relay_reply_text(code);
  if (size < kRequestSize) return 0;
  RelayRequest r;
  std::string why;
  if (decode_request(data, &r, &why)) {
    uint8_t again[kRequestSize];
    encode_request(r, again);
    if (std::memcmp(again, data, kRequestSize) != 0) __builtin_trap();
    if (r.port == 0 || r.dest.empty() || r.dest.size() > kMaxRequestAddrs) __builtin_trap();
  }
  return 0;
}
