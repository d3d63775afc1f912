// SPDX-License-Identifier: Apache-2.0
#include "loader/version_checks.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <thread>

#include "harness/table_of.h"
#include "nccl/net.h"

namespace loader {
namespace {

void quiet_logger(ncclDebugLogLevel level, unsigned long /*flags*/, const char* file, int line,
                  const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;  // WARNs are worth seeing in a failing test's output
  std::fprintf(stderr, "[plugin WARN %s:%d] ", file, line);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

using mesh_test::TableOf;

// A device-handle slot as NCCL/RCCL pass it to connect/accept (`&slot`), with guard words around
// it, and the object it may point at, filled with a pattern.
struct DevHandleProbe {
  uint64_t guard_before = 0x5E57A1E15E57A1E1ull;
  ncclNetDeviceHandle_v7_t* slot = nullptr;
  uint64_t guard_after = 0x5E57A1E15E57A1E1ull;
  ncclNetDeviceHandle_v7_t object;

  explicit DevHandleProbe(bool live) {
    std::memset(&object, 0xA5, sizeof(object));
    slot = live ? &object : nullptr;
  }
  // Empty when nothing was written.
  std::string damage(bool live) const {
    unsigned char pattern[sizeof(object)];
    std::memset(pattern, 0xA5, sizeof(pattern));
    if (guard_before != 0x5E57A1E15E57A1E1ull || guard_after != 0x5E57A1E15E57A1E1ull) {
      return "the words around the handle pointer were overwritten";
    }
    if (slot != (live ? &object : nullptr)) return "the handle pointer was overwritten";
    if (std::memcmp(&object, pattern, sizeof(object)) != 0) return "the handle object was written";
    return "";
  }
};

template <int V>
class Checker {
 public:
  using Table = typename TableOf<V>::Table;
  using Props = typename TableOf<V>::Props;

  Checker(const Table* t, std::vector<std::string>* problems) : t_(t), problems_(problems) {}

  void run() {
    if (t_->name == nullptr || std::strcmp(t_->name, "Mesh") != 0) {
      fail(std::string("name is ") + (t_->name != nullptr ? t_->name : "NULL") + ", not Mesh");
    }
    if (!init()) return;
    int ndev = 0;
    if (t_->devices(&ndev) != ncclSuccess || ndev < 1) {
      fail("devices() failed or returned " + std::to_string(ndev));
    } else {
      for (int dev = 0; dev < ndev; ++dev) properties(dev);
      // NCCL's case (the slot holds NULL), then RCCL's AINIC case (a live handle).
      connection(false);
      connection(true);
    }
    if constexpr (V >= 11) {
      if (t_->finalize(ctx_) != ncclSuccess) fail("finalize failed");
    }
  }

 private:
  void fail(const std::string& what) {
    problems_->push_back("v" + std::to_string(V) + ": " + what);
  }

  bool init() {
    ncclResult_t rc;
    if constexpr (V >= 11) {
      typename TableOf<V>::Config config{-1};
      rc = t_->init(&ctx_, 0x10ADE5, &config, quiet_logger, nullptr);
    } else if constexpr (V == 10) {
      rc = t_->init(quiet_logger, nullptr);
    } else {
      rc = t_->init(quiet_logger);
    }
    if (rc != ncclSuccess) fail("init returned " + std::to_string(rc));
    return rc == ncclSuccess;
  }

  void properties(int dev) {
    Props p;
    std::memset(&p, 0x5A, sizeof(p));  // the plugin must set every field NCCL reads
    if (t_->getProperties(dev, &p) != ncclSuccess) {
      fail("getProperties(" + std::to_string(dev) + ") failed");
      return;
    }
    if (p.name == nullptr) fail("device " + std::to_string(dev) + " has no name");
    if (p.speed <= 0 || p.maxRecvs < 1 || (p.ptrSupport & NCCL_PTR_HOST) == 0) {
      fail("device " + std::to_string(dev) + ": speed, maxRecvs or ptrSupport out of range");
    }
    if constexpr (V >= 7) {
      if (p.netDeviceType != NCCL_NET_DEVICE_HOST || p.netDeviceVersion != 0) {
        fail("device " + std::to_string(dev) + " claims device offload");
      }
    }
    if constexpr (V >= 9) {
      if (p.maxP2pBytes == 0 || p.maxP2pBytes > NCCL_MAX_NET_SIZE_BYTES || p.vProps.ndevs != 1 ||
          p.vProps.devs[0] != dev) {
        fail("device " + std::to_string(dev) + ": maxP2pBytes or vProps out of range");
      }
    }
    if constexpr (V >= 12) {
      if (p.railId != NCCL_NET_ID_UNDEF || p.planeId != NCCL_NET_ID_UNDEF) {
        fail("device " + std::to_string(dev) + ": railId " + std::to_string(p.railId) +
             ", planeId " + std::to_string(p.planeId) + " (a switchless mesh has neither)");
      }
    }
  }

  ncclResult_t listen(void* handle, void** lcomm) {
    if constexpr (V >= 11) {
      return t_->listen(ctx_, 0, handle, lcomm);
    } else {
      return t_->listen(0, handle, lcomm);
    }
  }

  ncclResult_t connect(void* handle, void** scomm, ncclNetDeviceHandle_v7_t** dev) {
    if constexpr (V >= 11) {
      return t_->connect(ctx_, 0, handle, scomm, dev);
    } else if constexpr (V == 10) {
      ncclNetCommConfig_v10_t config{-1};
      return t_->connect(0, &config, handle, scomm, dev);
    } else if constexpr (V >= 7) {
      return t_->connect(0, handle, scomm, dev);
    } else {
      return t_->connect(0, handle, scomm);
    }
  }

  ncclResult_t accept(void* lcomm, void** rcomm, ncclNetDeviceHandle_v7_t** dev) {
    if constexpr (V >= 7) {
      return t_->accept(lcomm, rcomm, dev);
    } else {
      return t_->accept(lcomm, rcomm);
    }
  }

  // One loopback connection, connect and accept retried as NCCL's proxy thread does, with the
  // device-handle probes in place; then a 4-byte message through it.
  void connection(bool live) {
    const std::string which = live ? " (live device handle)" : " (NULL device handle)";
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* lcomm = nullptr;
    if (listen(handle, &lcomm) != ncclSuccess || lcomm == nullptr) {
      fail("listen failed" + which);
      return;
    }
    DevHandleProbe send_dev(live), recv_dev(live);
    void* scomm = nullptr;
    void* rcomm = nullptr;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool ok = true;
    while ((scomm == nullptr || rcomm == nullptr) && ok) {
      if (scomm == nullptr && connect(handle, &scomm, &send_dev.slot) != ncclSuccess) {
        fail("connect failed" + which);
        ok = false;
      }
      if (ok && rcomm == nullptr && accept(lcomm, &rcomm, &recv_dev.slot) != ncclSuccess) {
        fail("accept failed" + which);
        ok = false;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        fail("no connection within 20 s" + which);
        ok = false;
      }
      if (ok) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (V >= 7) {
      const std::string s = send_dev.damage(live), r = recv_dev.damage(live);
      if (!s.empty()) fail("connect: " + s + which);
      if (!r.empty()) fail("accept: " + r + which);
    }
    if (ok) message(scomm, rcomm, which);
    if (scomm != nullptr) t_->closeSend(scomm);
    if (rcomm != nullptr) t_->closeRecv(rcomm);
    t_->closeListen(lcomm);
  }

  ncclResult_t isend(void* scomm, void* data, int size, void* mh, void** req) {
    if constexpr (V <= 8) {
      return t_->isend(scomm, data, size, 0, mh, req);
    } else if constexpr (V == 9) {
      return t_->isend(scomm, data, static_cast<size_t>(size), 0, mh, req);
    } else {
      return t_->isend(scomm, data, static_cast<size_t>(size), 0, mh, nullptr, req);
    }
  }

  ncclResult_t irecv(void* rcomm, void* data, int size, void* mh, void** req) {
    void* datas[1] = {data};
    int tags[1] = {0};
    void* mhs[1] = {mh};
    if constexpr (V <= 8) {
      int sizes[1] = {size};
      return t_->irecv(rcomm, 1, datas, sizes, tags, mhs, req);
    } else {
      size_t sizes[1] = {static_cast<size_t>(size)};
      if constexpr (V == 9) {
        return t_->irecv(rcomm, 1, datas, sizes, tags, mhs, req);
      } else {
        void* phandles[1] = {nullptr};
        return t_->irecv(rcomm, 1, datas, sizes, tags, mhs, phandles, req);
      }
    }
  }

  void message(void* scomm, void* rcomm, const std::string& which) {
    char out[4] = {'m', 'e', 's', 'h'}, in[4] = {};
    void *smh = nullptr, *rmh = nullptr;
    if (t_->regMr(scomm, out, sizeof(out), NCCL_PTR_HOST, &smh) != ncclSuccess ||
        t_->regMr(rcomm, in, sizeof(in), NCCL_PTR_HOST, &rmh) != ncclSuccess) {
      fail("regMr failed" + which);
      return;
    }
    void *sreq = nullptr, *rreq = nullptr;
    int sdone = 0, rdone = 0, ssize = 0, rsizes[NCCL_PROXY_MAX_SUBS] = {};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((sdone == 0 || rdone == 0) && std::chrono::steady_clock::now() < deadline) {
      if (rreq == nullptr && irecv(rcomm, in, sizeof(in), rmh, &rreq) != ncclSuccess) break;
      if (sreq == nullptr && isend(scomm, out, sizeof(out), smh, &sreq) != ncclSuccess) break;
      if (sreq != nullptr && sdone == 0 && t_->test(sreq, &sdone, &ssize) != ncclSuccess) break;
      if (rreq != nullptr && rdone == 0 && t_->test(rreq, &rdone, rsizes) != ncclSuccess) break;
    }
    if (sdone == 0 || rdone == 0 || rsizes[0] != 4 || std::memcmp(in, out, sizeof(in)) != 0) {
      fail("a 4-byte message did not arrive intact" + which);
    }
    t_->deregMr(scomm, smh);
    t_->deregMr(rcomm, rmh);
  }

  const Table* t_;
  std::vector<std::string>* problems_;
  void* ctx_ = nullptr;
};

template <int V>
bool run_checks(void* lib, std::vector<std::string>* problems) {
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(V);
  const auto* table = static_cast<const typename TableOf<V>::Table*>(dlsym(lib, symbol.c_str()));
  if (table == nullptr) {
    problems->push_back(symbol + " is not exported");
    return false;
  }
  const size_t before = problems->size();
  Checker<V>(table, problems).run();
  return problems->size() == before;
}

}  // namespace

bool check_version(void* lib, int version, std::vector<std::string>* problems) {
  switch (version) {
    case 6:
      return run_checks<6>(lib, problems);
    case 7:
      return run_checks<7>(lib, problems);
    case 8:
      return run_checks<8>(lib, problems);
    case 9:
      return run_checks<9>(lib, problems);
    case 10:
      return run_checks<10>(lib, problems);
    case 11:
      return run_checks<11>(lib, problems);
    case 12:
      return run_checks<12>(lib, problems);
    default:
      problems->push_back("no checks for v" + std::to_string(version));
      return false;
  }
}

}  // namespace loader
