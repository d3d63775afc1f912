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
    // Every field but the proof round-trips; a proof made with some key verifies with it.
    const uint8_t nonce[16] = {};
    const auto key = relay_listener_key(nonce, sizeof(nonce));
    uint8_t again[kRequestSize];
    encode_request(r, key, again);
    if (r.time_ms != 0 && r.unique != 0 && std::memcmp(again, data, 80) != 0) __builtin_trap();
    if (!verify_proof(again, key)) __builtin_trap();
    if (r.port == 0 || r.dest.empty() || r.dest.size() > kMaxRequestAddrs) __builtin_trap();
  }
  return 0;
}
