// SPDX-License-Identifier: Apache-2.0
// relay/connect_plan.h: which relay a peer without a common subnet gets (RDMA through the
// route's relay hosts, TCP through the agents, wait, or a WARN), from the connection's needs and a
// faked route.
#include "relay/connect_plan.h"

#include <gtest/gtest.h>

#include "warn_capture.h"

namespace mesh::relay {
namespace {

class RelayConnectPlan : public ::testing::Test {
 protected:
  test::WarnCapture warns_;
};

std::vector<std::string> take_warns() {
  return test::WarnCapture::take();
}

// The one WARN a failed plan logged.
std::string the_warn() {
  const std::vector<std::string> w = take_warns();
  EXPECT_EQ(w.size(), 1u);
  return w.empty() ? std::string() : w[0];
}

const std::vector<Ipv4Prefix> kDest = {{0xC6120506u, 30}};  // 198.18.5.6/30

FirstHop two_cables() {
  FirstHop f;
  f.local = {0xC6120501u, 30};  // 198.18.5.1
  f.peer_addr = 0xC6120502u;
  f.port = 7000;
  f.cables = 2;
  f.route = "198.18.5.2";
  f.path = "2 cables, through 198.18.5.2";
  return f;
}

struct Fake {
  HopStatus status = HopStatus::kOk;
  FirstHop first = two_cables();
  bool rdma_port = true;
  int queries = 0;
  ConnectPlan plan(const RelayNeeds& n) {
    return plan_relayed_connect(
        n, kDest,
        [this](FirstHop* out, std::string* why) {
          ++queries;
          *out = first;
          if (status == HopStatus::kFail) *why = "no host announces 198.18.5.6";
          return status;
        },
        [this](uint32_t) { return rdma_port; });
  }
};

RelayNeeds gpu() {
  RelayNeeds n;
  n.gpu = true;
  return n;
}

RelayNeeds auto_rdma() {
  RelayNeeds n;
  n.rdma_worth_trying = true;
  return n;
}

TEST_F(RelayConnectPlan, RelayingOffFailsWithTheSettingAndBothSidesSubnets) {
  RelayNeeds n;
  n.relay_on = false;
  n.relay_off = "off (NCCL_MESH_RELAY=0)";
  n.local_subnets = "mesh0 198.18.1.1/30";
  Fake f;
  const ConnectPlan p = f.plan(n);
  EXPECT_EQ(p.kind, PlanKind::kFail);
  const std::string w = the_warn();
  EXPECT_NE(w.find("it advertises 198.18.5.6/30"), std::string::npos) << w;
  EXPECT_NE(w.find("local subnets: mesh0 198.18.1.1/30"), std::string::npos) << w;
  EXPECT_NE(w.find("relaying is off (NCCL_MESH_RELAY=0)"), std::string::npos) << w;
  EXPECT_EQ(f.queries, 0);
}

TEST_F(RelayConnectPlan, TcpOnlyPeersGoOverTcpWithoutAskingForTheRoute) {
  Fake f;
  const ConnectPlan p = f.plan(RelayNeeds{});
  EXPECT_EQ(p.kind, PlanKind::kTcp);
  EXPECT_EQ(f.queries, 0) << "TCP resolves its hop per stream in the handshake";
  EXPECT_TRUE(take_warns().empty());
}

TEST_F(RelayConnectPlan, RdmaThroughOneRelayHostWhenRouteAndCableAllow) {
  for (const RelayNeeds& n : {gpu(), auto_rdma()}) {
    Fake f;
    const ConnectPlan p = f.plan(n);
    EXPECT_EQ(p.kind, PlanKind::kRdma);
    EXPECT_EQ(p.first.peer_addr, 0xC6120502u);
    EXPECT_EQ(p.first.local.addr, 0xC6120501u);
    EXPECT_NE(p.message.find("relaying over RDMA through 198.18.5.2"), std::string::npos)
        << p.message;
  }
  EXPECT_TRUE(take_warns().empty());
}

TEST_F(RelayConnectPlan, NoRouteYetWaitsAndNoRouteFailsWithTheReason) {
  Fake f;
  f.status = HopStatus::kWait;
  EXPECT_EQ(f.plan(gpu()).kind, PlanKind::kWait);
  EXPECT_TRUE(take_warns().empty()) << "waiting for a route is no failure";
  f.status = HopStatus::kFail;
  const ConnectPlan p = f.plan(auto_rdma());
  EXPECT_EQ(p.kind, PlanKind::kFail);
  const std::string w = the_warn();
  EXPECT_NE(w.find("connect: no route to the peer (198.18.5.6/30) through neighbours: no host "
                   "announces 198.18.5.6"),
            std::string::npos)
      << w;
}

// Each reason RDMA relay cannot be used: GPU memory fails (TCP cannot carry it), auto falls
// back to TCP and says why.
TEST_F(RelayConnectPlan, WhenRdmaRelayIsImpossibleGpuFailsAndAutoFallsBackToTcp) {
  struct Case {
    const char* reason;
    void (*apply)(Fake*);
  };
  const Case cases[] = {
      {"not its host's relay agent",
       [](Fake* f) {
         f->first.via_local_agent = true;
         f->first.cables = 0;
       }},
      {"has no usable RDMA port", [](Fake* f) { f->rdma_port = false; }},
  };
  for (const Case& c : cases) {
    Fake g;
    c.apply(&g);
    const ConnectPlan pg = g.plan(gpu());
    EXPECT_EQ(pg.kind, PlanKind::kFail) << c.reason;
    const std::string w = the_warn();
    EXPECT_NE(w.find(c.reason), std::string::npos) << w;
    EXPECT_NE(w.find("TCP relay cannot carry GPU buffers"), std::string::npos) << w;
    Fake a;
    c.apply(&a);
    const ConnectPlan pa = a.plan(auto_rdma());
    EXPECT_EQ(pa.kind, PlanKind::kTcp) << c.reason;
    EXPECT_NE(pa.message.find(c.reason), std::string::npos) << pa.message;
    EXPECT_TRUE(take_warns().empty()) << "auto falls back to TCP without a WARN";
  }
}

TEST_F(RelayConnectPlan, RdmaOnlyTransportNeverFallsBackToTcp) {
  RelayNeeds n;
  n.rdma_only = true;
  Fake f;
  f.rdma_port = false;
  const ConnectPlan p = f.plan(n);
  EXPECT_EQ(p.kind, PlanKind::kFail);
  const std::string w = the_warn();
  EXPECT_NE(w.find("has no usable RDMA port"), std::string::npos) << w;
  EXPECT_NE(w.find("NCCL_MESH_TRANSPORT=rdma forbids TCP relay"), std::string::npos) << w;
}

// Issue 26 item 2: routes longer than two cables chain relay hosts over RDMA (the old code
// refused them: "RDMA relay crosses one relay host", a WARN for GPU memory, TCP under auto).
TEST_F(RelayConnectPlan, RoutesOfThreeCablesAndMoreAreRelayedOverRdma) {
  for (size_t cables : {3u, 4u, 9u}) {
    Fake g;
    g.first.cables = cables;
    const ConnectPlan p = g.plan(gpu());
    EXPECT_EQ(p.kind, PlanKind::kRdma) << cables << " cables";
    EXPECT_NE(p.message.find("relaying over RDMA through 198.18.5.2"), std::string::npos)
        << p.message;
    Fake a;
    a.first.cables = cables;
    EXPECT_EQ(a.plan(auto_rdma()).kind, PlanKind::kRdma) << cables << " cables";
    EXPECT_TRUE(take_warns().empty());
  }
}

TEST_F(RelayConnectPlan, AFailedRdmaSetupFallsBackOnlyWhereTcpMayCarryTheConnection) {
  const ConnectPlan a = after_rdma_setup_failed(auto_rdma(), kDest, "ibv_create_qp: ENOMEM");
  EXPECT_EQ(a.kind, PlanKind::kTcp);
  EXPECT_NE(a.message.find("ibv_create_qp: ENOMEM"), std::string::npos) << a.message;
  EXPECT_TRUE(take_warns().empty());
  const ConnectPlan g = after_rdma_setup_failed(gpu(), kDest, "ibv_create_qp: ENOMEM");
  EXPECT_EQ(g.kind, PlanKind::kFail);
  const std::string w = the_warn();
  EXPECT_NE(w.find("connect: the peer (198.18.5.6/30) shares no subnet with this host and RDMA "
                   "relay is impossible: RDMA setup towards the relay host failed: "
                   "ibv_create_qp: ENOMEM"),
            std::string::npos)
      << w;
}

}  // namespace
}  // namespace mesh::relay
