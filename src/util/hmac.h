// SPDX-License-Identifier: Apache-2.0
// HMAC-SHA256 (OpenSSL's libcrypto, Debian libssl-dev): the relay request's proof of a handle
// (relay/request.h) and the beacons' cluster-key authentication (relay/beacon.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace mesh {

using Sha256 = std::array<uint8_t, 32>;

Sha256 hmac_sha256(const uint8_t* key, size_t key_len, const uint8_t* data, size_t len);

// Compares in time independent of where the bytes differ (MACs from the network).
bool equal_constant_time(const uint8_t* a, const uint8_t* b, size_t len);

}  // namespace mesh
