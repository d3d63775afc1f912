// SPDX-License-Identifier: Apache-2.0
// The GPU paths of the RDMA transport, driven with the GPU-memory stand-in (StreamSpec::
// gpu_standin: host pages registered as NCCL_PTR_CUDA, then PROT_NONE for the CPU). A plugin
// that reads or writes such memory with the CPU (an inline send, a memcpy) dies with SIGSEGV
// here, as it would on a real GPU address. RDMA only (the Soft-RoCE lane): TCP comms refuse
// NCCL_PTR_CUDA registrations.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "harness/env.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

bool rdma_lane() {
  return expected_transport() == "rdma";
}

class GpuMemoryTest : public VersionedTest {
 protected:
  void SetUp() override {
    if (!rdma_lane()) {
      GTEST_SKIP() << "needs the RDMA transport (MESH_CONFORMANCE_EXPECT_TRANSPORT=rdma, the "
                      "Soft-RoCE lane): TCP comms take host memory only";
    }
    VersionedTest::SetUp();
  }
};

// 0 and 1 B, every size around the inline limit (64 B per QP slice; 128-byte slices over 2+
// QPs), then up to 64 MiB.
std::vector<uint64_t> standin_sizes() {
  return {0,   1,   2,   7,   63,   64,   65,   100,  127,      128,   129,     191,     200,
          255, 256, 257, 511, 1000, 4095, 4096, 4097, 64 * KiB, 65537, MiB + 3, 8 * MiB, 64 * MiB};
}

TEST_P(GpuMemoryTest, StandInMemoryCarriesEverySizeBothWaysWithoutCpuAccess) {
  if (const char* v = std::getenv("NCCL_MESH_TEST_HOST_AS_GPU"); v != nullptr && v[0] == '1') {
    DeviceProps p;
    ASSERT_EQ(net().get_properties(0, &p), ncclSuccess);
    EXPECT_NE(p.ptr_support & NCCL_PTR_CUDA, 0)
        << "NCCL_MESH_TEST_HOST_AS_GPU=1 on an RDMA device must advertise NCCL_PTR_CUDA";
  }
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out, &in));
  Flow flow;
  flow.messages = exact(standin_sizes());
  flow.window = 4;
  flow.local_gpu_standin = true;  // our sends come from it, our receives land in it (+ iflush)
  Exchange ex;
  ex.outbound(out[0], flow);
  ex.inbound(in[0], flow);
  const ExchangeResult r = run(ex, scaled(180000));
  ASSERT_TRUE(r.all_ok()) << r.report();
  ASSERT_EQ(r.local.size(), 2u);
  const uint32_t nonempty = static_cast<uint32_t>(standin_sizes().size() - 1);
  EXPECT_EQ(r.local[1].flushes, nonempty);
  EXPECT_EQ(r.local[1].flush_requests, nonempty) << "every GPU receive needs a real flush";
}

// rxe's per-port packet counters of an RDMA device.
uint64_t read_counter(const std::string& dev, const char* name) {
  std::ifstream f("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name);
  uint64_t v = 0;
  f >> v;
  return v;
}

// The RDMA devices behind rank 0's interfaces (MESH_CONFORMANCE_IFNAME), from the GID tables.
std::set<std::string> rank0_rdma_devices() {
  std::set<std::string> netdevs, out;
  std::stringstream ss(rank_ifname(Rank::kTest));
  for (std::string n; std::getline(ss, n, ',');) netdevs.insert(n);
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    const auto ndevs = d.path() / "ports/1/gid_attrs/ndevs";
    for (const auto& g : std::filesystem::directory_iterator(ndevs, ec)) {
      std::ifstream f(g.path());
      std::string name;
      if (f >> name && netdevs.count(name) != 0) out.insert(d.path().filename().string());
    }
  }
  return out;
}

// Packets a device sent and received (a loopback flush READ is a request and a response, both
// sent and received by the device it went through).
std::map<std::string, uint64_t> packets(const std::set<std::string>& devs) {
  std::map<std::string, uint64_t> m;
  for (const auto& d : devs) m[d] = read_counter(d, "sent_pkts") + read_counter(d, "rcvd_pkts");
  return m;
}

TEST_P(GpuMemoryTest, FlushReadsThroughEveryDeviceThatWrote) {
  // A receive striped over several RDMA devices (the dual VM: two cables, one QP each) must be
  // flushed through every one of them: each device's writes are ordered only before its own
  // READ. The flushes run alone, so the devices' packet counters show which devices read.
  const auto devs = rank0_rdma_devices();
  if (devs.empty() || !std::filesystem::exists("/sys/class/infiniband/" + *devs.begin() +
                                               "/ports/1/hw_counters/sent_pkts")) {
    GTEST_SKIP() << "no readable rxe hw_counters for rank 0's interfaces ("
                 << rank_ifname(Rank::kTest) << ")";
  }
  std::vector<Link> in;
  ASSERT_NO_FATAL_FAILURE(open_inbound(1, &in));
  const auto before_data = packets(devs);
  Flow flow;
  flow.messages = exact({MiB, 4 * MiB});
  flow.local_gpu_standin = true;
  Exchange ex;
  ex.inbound(in[0], flow);
  const ExchangeResult r = run(ex);
  ASSERT_TRUE(r.all_ok()) << r.report();
  const auto after_data = packets(devs);
  std::set<std::string> wrote;  // devices that carried the receive
  for (const auto& d : devs) {
    if (after_data.at(d) > before_data.at(d)) wrote.insert(d);
  }
  ASSERT_FALSE(wrote.empty()) << "no RDMA device of rank 0 carried the receive";

  // Flush a registered stand-in page kFlushes times with nothing else on the wire.
  constexpr int kFlushes = 16;
  alignas(4096) static uint8_t page[4096];
  void* mh = nullptr;
  ASSERT_EQ(net().reg_mr(in[0].local, page, sizeof(page), NCCL_PTR_CUDA, &mh), ncclSuccess);
  // Late ACKs of the data settle (and the counters' cache lifespan passes).
  std::this_thread::sleep_for(std::max<Millis>(scaled(100), Millis(200)));
  const auto before = packets(devs);
  for (int i = 0; i < kFlushes; ++i) {
    void* req = nullptr;
    ASSERT_EQ(net().iflush(in[0].local, page, 1, mh, &req), ncclSuccess);
    ASSERT_NE(req, nullptr) << "a GPU receive over RDMA needs a real flush";
    const auto limit = Clock::now() + kDataCallLimit;
    for (int done = 0; !done;) {
      ASSERT_EQ(net().test(req, &done, nullptr), ncclSuccess);
      ASSERT_LT(Clock::now(), limit) << "flush " << i << " did not complete";
    }
  }
  // The kernel caches hw_counters for a lifespan (10 ms by default): 16 loopback READs can be
  // quicker than that, and a read right after them would show the cached values.
  std::this_thread::sleep_for(Millis(200));
  const auto after = packets(devs);
  EXPECT_EQ(net().dereg_mr(in[0].local, mh), ncclSuccess);
  std::string seen;
  for (const auto& d : devs) {
    seen += " " + d + (wrote.count(d) ? "(carried data)" : "") + ": " +
            std::to_string(after.at(d) - before.at(d)) + " packets (" +
            std::to_string(before.at(d)) + " -> " + std::to_string(after.at(d)) + ")";
  }
  std::printf("[flush] %d flushes;%s\n", kFlushes, seen.c_str());
  for (const auto& d : wrote) {
    EXPECT_GE(after.at(d) - before.at(d), static_cast<uint64_t>(kFlushes))
        << d << " carried the receive but the flushes did not read through it;" << seen;
  }
}

MESH_INSTANTIATE_VERSIONS(GpuMemoryTest, 11);

}  // namespace
}  // namespace conformance
