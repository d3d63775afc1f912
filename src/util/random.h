// SPDX-License-Identifier: Apache-2.0
// Cryptographically random bytes (getrandom): nonces and connection ids must not be guessable
// by other processes on the network.
#pragma once

#include <cstddef>

namespace mesh {

void fill_random(void* buf, size_t len);

}  // namespace mesh
