// SPDX-License-Identifier: Apache-2.0
// Host memory copy bandwidth with T threads (each copies its own 256 MiB buffer for ~2 s).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
int main(int argc, char** argv) {
  const int t = argc > 1 ? atoi(argv[1]) : 1;
  const size_t n = 256u << 20;
  std::vector<double> bytes(t);
  std::vector<std::thread> th;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < t; ++i)
    th.emplace_back([&, i] {
      char* a = static_cast<char*>(malloc(n));
      char* b = static_cast<char*>(malloc(n));
      memset(a, 1, n);
      memset(b, 2, n);
      auto s = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - s < std::chrono::seconds(2)) {
        memcpy(b, a, n);
        asm volatile("" : : "r"(b) : "memory");
        bytes[i] += n;
      }
      free(a);
      free(b);
    });
  for (auto& x : th) x.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double tot = 0;
  for (double x : bytes) tot += x;
  printf("threads %2d: memcpy %.1f GB/s copied (%.1f GB/s of memory traffic, read+write)\n", t, tot / 1e9 / secs, 2.0 * tot / 1e9 / secs);
}
