// SPDX-License-Identifier: Apache-2.0
#include "util/hmac.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace mesh {

Sha256 hmac_sha256(const uint8_t* key, size_t key_len, const uint8_t* data, size_t len) {
  Sha256 out{};
  unsigned int n = 0;
  // One-shot HMAC(): no context to leak; it fails only on allocation failure, and then `out`
  // stays zero, which no verifier accepts as a MAC of real data.
  HMAC(EVP_sha256(), key, static_cast<int>(key_len), data, len, out.data(), &n);
  return out;
}

bool equal_constant_time(const uint8_t* a, const uint8_t* b, size_t len) {
  uint8_t diff = 0;
  for (size_t i = 0; i < len; ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

}  // namespace mesh
