// SPDX-License-Identifier: Apache-2.0
// GIN put bandwidth against plain TCP, side by side in one run, two forked ranks on loopback
// (or namespace hosts with MESH_GIN_NETNS/MESH_GIN_IFNAME, like the suite): for each size,
// rank 0 streams puts of that size to rank 1 (the last one with an INC signal; a put is done
// only when tested done, at most `depth` in flight, as NCCL's proxy queue allows), rank 1 waits
// for the signal and checks the last put's bytes; then the same bytes over one plain TCP socket
// between the same two processes. Rounds alternate GIN and TCP so both see the same machine load.
//
// Usage: mesh_gin_bench [VERSION(11..15) [MiB-per-size [rounds]]]
// Prints one markdown row per size: GIN GB/s, the plugin's own net path (ncclNetPlugin_v11
// isend/irecv of the same sizes, 32 in flight, between the same processes), plain TCP GB/s, and
// the ratios (best of the rounds each).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <dlfcn.h>

#include "gin_rank.h"
#include "nccl/net.h"

using namespace gintest;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool tcp_send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
bool tcp_recv_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int version = argc > 1 ? std::atoi(argv[1]) : 13;
  const size_t total_mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 256;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const size_t sizes[] = {4096, 65536, 1 << 20, 16 << 20};
  struct Result {
    double gin = 0, net = 0, tcp = 0;
  };
  // Results travel back through the shared page's blob area.
  const std::string errors = run_ranks(2, 600, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(version, 1)) return false;
    const size_t max = sizes[3];
    std::vector<uint8_t> buf(max * 2, static_cast<uint8_t>(env.rank() + 1));
    alignas(8) static uint64_t sig = 0;
    void *mh, *sig_mh;
    if (!g.reg(buf.data(), buf.size(), &mh) || !g.reg(&sig, 8, &sig_mh)) return false;
    // Plain TCP: rank 1 listens on an ephemeral port of its first address, rank 0 connects.
    int fd = -1;
    if (env.rank() == 1) {
      const int l = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      socklen_t len = sizeof(a);
      if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(l, 1) != 0 ||
          getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        return env.fail("tcp listen");
      std::memcpy(env.shared().blob[1], &a.sin_port, sizeof(a.sin_port));
      if (!env.barrier()) return false;
      fd = accept(l, nullptr, nullptr);
      close(l);
    } else {
      if (!env.barrier()) return false;
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      std::memcpy(&a.sin_port, env.shared().blob[1], sizeof(a.sin_port));
      fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
        return env.fail("tcp connect");
    }
    if (fd < 0) return env.fail("tcp socket");
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // The plugin's own net path between the same two processes: rank 0 sends, rank 1 receives.
    void* lib = dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    auto* net =
        lib != nullptr ? static_cast<ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11")) : nullptr;
    if (net == nullptr) return env.fail("no ncclNetPlugin_v11");
    void *nctx = nullptr, *nlisten = nullptr, *ncomm = nullptr, *nmh = nullptr;
    ncclNetCommConfig_v11_t cfg{};
    cfg.trafficClass = -1;
    uint8_t nhandle[128] = {};
    if (net->init(&nctx, env.shared().comm_id + 1, &cfg, nullptr, nullptr) != ncclSuccess ||
        net->listen(nctx, 0, nhandle, &nlisten) != ncclSuccess)
      return env.fail("net init/listen");
    std::vector<void*> nhandles(2);
    if (!env.allgather_handles(nhandle, nhandles.data())) return false;
    while (ncomm == nullptr) {
      const ncclResult_t rc = env.rank() == 0 ? net->connect(nctx, 0, nhandles[1], &ncomm, nullptr)
                                              : net->accept(nlisten, &ncomm, nullptr);
      if (rc != ncclSuccess) return env.fail("net connect/accept");
    }
    if (net->regMr(ncomm, buf.data(), buf.size(), NCCL_PTR_HOST, &nmh) != ncclSuccess)
      return env.fail("net regMr");
    std::vector<Result> best(std::size(sizes));
    uint64_t expect_sig = 0;
    for (int round = 0; round < rounds; ++round) {
      for (size_t si = 0; si < std::size(sizes); ++si) {
        const size_t size = sizes[si];
        const size_t count = std::max<size_t>(1, (total_mib << 20) / size);
        // GIN
        if (!env.barrier()) return false;
        double t0 = now_s();
        if (env.rank() == 0) {
          std::vector<void*> in_flight;
          for (size_t i = 0; i < count; ++i) {
            while (in_flight.size() >= 32) {  // NCCL's default proxy queue depth
              int done = 0;
              if (!g.ok(g.api.test(g.comm, in_flight.front(), &done), "test")) return false;
              if (done)
                in_flight.erase(in_flight.begin());
              else
                std::this_thread::yield();
            }
            void* r = nullptr;
            const uint64_t off = (i % 2) * max;
            const bool last = i + 1 == count;
            const ncclResult_t rc =
                last ? g.api.iput_signal(g.target, 0, off, mh, size, off, mh, 1, 0, sig_mh, 1,
                                         NCCL_GIN_SIGNAL_OP_INC, true, &r)
                     : g.api.iput(g.target, 0, off, mh, size, off, mh, 1, &r);
            if (!g.ok(rc, "put")) return false;
            in_flight.push_back(r);
          }
          for (void* r : in_flight) {
            int done = 0;
            while (!done)
              if (!g.ok(g.api.test(g.comm, r, &done), "test")) return false;
          }
        } else {
          ++expect_sig;
          while (load_signal(&sig) < expect_sig)
            std::this_thread::yield();  // leave the CPU
                                        // to the engine
          const uint8_t* last = buf.data() + ((count - 1) % 2) * max;
          for (size_t i = 0; i < size; ++i)
            if (last[i] != 1) return env.fail("GIN bench: wrong byte");
        }
        if (!env.barrier()) return false;
        const double gin = static_cast<double>(size * count) / (now_s() - t0) / 1e9;
        // The plugin's net path: isend/irecv, at most 32 in flight, oldest tested first.
        if (!env.barrier()) return false;
        t0 = now_s();
        {
          std::vector<void*> in_flight;
          size_t posted = 0;
          while (posted < count || !in_flight.empty()) {
            if (posted < count && in_flight.size() < 32) {
              void* r = nullptr;
              void* data = buf.data() + max;
              size_t sz = size;
              int tag = 0;
              const ncclResult_t rc =
                  env.rank() == 0 ? net->isend(ncomm, buf.data(), size, 0, nmh, nullptr, &r)
                                  : net->irecv(ncomm, 1, &data, &sz, &tag, &nmh, nullptr, &r);
              if (rc != ncclSuccess) return env.fail("net isend/irecv");
              if (r != nullptr) {
                in_flight.push_back(r);
                ++posted;
              }
            }
            if (!in_flight.empty()) {
              int done = 0;
              if (net->test(in_flight.front(), &done, nullptr) != ncclSuccess)
                return env.fail("net test");
              if (done) in_flight.erase(in_flight.begin());
            }
          }
        }
        if (!env.barrier()) return false;
        const double netbw = static_cast<double>(size * count) / (now_s() - t0) / 1e9;
        // TCP
        if (!env.barrier()) return false;
        t0 = now_s();
        for (size_t i = 0; i < count; ++i) {
          const bool ok = env.rank() == 0 ? tcp_send_all(fd, buf.data(), size)
                                          : tcp_recv_all(fd, buf.data() + max, size);
          if (!ok) return env.fail("tcp transfer");
        }
        uint8_t ack = 0;  // the receiver has everything: the same end point as the signal
        if (env.rank() == 1 ? send(fd, &ack, 1, 0) != 1 : recv(fd, &ack, 1, MSG_WAITALL) != 1)
          return env.fail("tcp ack");
        if (!env.barrier()) return false;
        const double tcp = static_cast<double>(size * count) / (now_s() - t0) / 1e9;
        best[si].gin = std::max(best[si].gin, gin);
        best[si].net = std::max(best[si].net, netbw);
        best[si].tcp = std::max(best[si].tcp, tcp);
      }
    }
    close(fd);
    net->deregMr(ncomm, nmh);
    if (env.rank() == 0)
      net->closeSend(ncomm);
    else
      net->closeRecv(ncomm);
    net->closeListen(nlisten);
    net->finalize(nctx);
    if (env.rank() == 0) {
      std::printf(
          "| size | GIN put GB/s (%s) | plugin net isend GB/s | plain TCP GB/s | GIN / "
          "net | GIN / TCP |\n|---|---|---|---|---|---|\n",
          g.api.symbol());
      for (size_t si = 0; si < std::size(sizes); ++si)
        std::printf("| %zu KiB | %.3f | %.3f | %.3f | %.2f | %.2f |\n", sizes[si] / 1024,
                    best[si].gin, best[si].net, best[si].tcp, best[si].gin / best[si].net,
                    best[si].gin / best[si].tcp);
      std::fflush(stdout);
    }
    if (!env.barrier()) return false;
    return g.dereg(mh) && g.dereg(sig_mh) && g.teardown();
  });
  if (!errors.empty()) {
    std::fprintf(stderr, "%s", errors.c_str());
    return 1;
  }
  return 0;
}
