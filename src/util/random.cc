// SPDX-License-Identifier: Apache-2.0
#include "util/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <fstream>

namespace mesh {

void fill_random(void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    const ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // getrandom is missing only on very old kernels: fall back to the same pool via the file.
      std::ifstream f("/dev/urandom", std::ios::binary);
      f.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(len));
      return;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace mesh
