// SPDX-License-Identifier: Apache-2.0
#include "tests/fixture.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "harness/log_capture.h"
#include "topology/ifname_filter.h"
#include "topology/selection.h"

namespace conformance {

namespace {
// Replies to establish/transfer requests come after the peer's own deadline; this is the margin.
const Millis kReplySlack = scaled(10000);
const Millis kSetupTimeout = scaled(15000);
constexpr int32_t kLocalRank = 0;
constexpr int32_t kPeerRank = 1;

// Whether a "connected:"/"accepted:" INFO line names `transport` ("tcp", "rdma") as the
// connection's transport: the describe() text puts it first inside the parentheses, "(TCP, 4 data
// streams)" or "(RDMA, 2 QPs ...)". A relayed connection may add words after the transport
// ("(RDMA relayed through ..., ...)"), so the name must be followed by a comma, a space or the
// closing parenthesis, not necessarily by the comma alone; "(RDMAX" or "(TCPish" do not count.
bool logs_transport(const std::string& line, const std::string& transport) {
  std::string want = "(" + transport;
  for (char& c : want) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (size_t at = line.find(want); at != std::string::npos; at = line.find(want, at + 1)) {
    const size_t next = at + want.size();
    if (next < line.size() && (line[next] == ',' || line[next] == ' ' || line[next] == ')')) {
      return true;
    }
  }
  return false;
}
}  // namespace

// MESH_CONFORMANCE_PLUGIN runs the suite against another build of the plugin (an installed copy,
// a sanitizer build) without rebuilding the suite.
std::string plugin_path() {
  const char* override_path = std::getenv("MESH_CONFORMANCE_PLUGIN");
  return override_path != nullptr && override_path[0] != '\0' ? override_path : MESH_PLUGIN_PATH;
}
// MESH_CONFORMANCE_PEER: the peer binary when the suite runs away from its build tree (the
// Soft-RoCE lane copies both binaries into a VM).
std::string peer_path() {
  const char* override_path = std::getenv("MESH_CONFORMANCE_PEER");
  return override_path != nullptr && override_path[0] != '\0' ? override_path : MESH_PEER_PATH;
}

bool rank_may_advertise(Rank rank, uint32_t addr) {
  if (on_loopback(rank)) return addr >> 24 == 127u;
  const auto all = mesh::topology::discover_interfaces();
  const auto used =
      mesh::topology::select_interfaces(all, mesh::topology::IfnameFilter::parse(rank_ifname(rank)))
          .used;
  return std::any_of(used.begin(), used.end(),
                     [addr](const mesh::topology::Interface& i) { return i.addr.addr == addr; });
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

std::string version_name(const ::testing::TestParamInfo<int>& info) {
  return "v" + std::to_string(info.param);
}

std::vector<MessageSpec> exact(const std::vector<uint64_t>& sizes) {
  std::vector<MessageSpec> out;
  for (uint64_t s : sizes) out.push_back({s, s});
  return out;
}

bool connect_peer_pair(const std::vector<std::string>& sender_env,
                       const std::vector<std::string>& receiver_env, Millis wait, PeerPair* out) {
  std::string error;
  out->sender = PeerProcess::spawn(peer_path(), plugin_path(), &error, sender_env);
  EXPECT_TRUE(out->sender) << error;
  if (out->sender)
    out->receiver = PeerProcess::spawn(peer_path(), plugin_path(), &error, receiver_env);
  EXPECT_TRUE(out->receiver) << error;
  if (!out->sender || !out->receiver) return false;
  for (PeerProcess* p : {out->sender.get(), out->receiver.get()}) {
    InitReply rep;
    const bool replied = p->call(Op::kInit, InitRequest{11, 1}, &rep, wait);
    EXPECT_TRUE(replied) << p->error();
    EXPECT_EQ(rep.rc, ncclSuccess) << rep.error;
    if (!replied || rep.rc != ncclSuccess) return false;
  }
  ListenReply listened;
  EXPECT_TRUE(out->receiver->call(Op::kListen, ListenRequest{0, 0, 1}, &listened, wait))
      << out->receiver->error();
  EXPECT_EQ(listened.error, "");
  if (listened.handles.empty() || listened.listen_ids.empty()) return false;
  EstablishRequest accept;
  accept.accepts = listened.listen_ids;
  EstablishRequest connect;
  connect.connects = {RemoteConnect{0, 0, listened.handles[0], false}};
  EstablishReply connected, accepted;
  const bool started = out->receiver->start(Op::kEstablish, accept);
  EXPECT_TRUE(started);
  const bool sent = started && out->sender->call(Op::kEstablish, connect, &connected, wait);
  EXPECT_TRUE(sent) << out->sender->error();
  const bool received = started && out->receiver->finish(&accepted, wait);
  EXPECT_TRUE(received) << out->receiver->error();
  EXPECT_TRUE(connected.outcome.ok) << connected.outcome.error;
  EXPECT_TRUE(accepted.outcome.ok) << accepted.outcome.error;
  if (!sent || !received || connected.send_ids.empty() || accepted.recv_ids.empty()) return false;
  out->send_id = connected.send_ids[0];
  out->recv_id = accepted.recv_ids[0];
  return connected.outcome.ok && accepted.outcome.ok;
}

namespace {

StreamSpec make_spec(Direction dir, uint32_t comm_id, uint64_t seed, int32_t tag, const Flow& f) {
  StreamSpec s;
  s.dir = dir;
  s.comm_id = comm_id;
  s.seed = seed;
  s.tag = tag;
  s.window = f.window;
  s.post_window_first = f.post_window_first;
  s.messages = f.messages;
  if (dir == Direction::kRecv) {
    s.preset_optional_completion = f.preset_optional_completion;
    s.expect_error_at = f.recv_expect_error_at;
    s.flush_as_gpu = f.recv_flush_as_gpu;
  } else {
    s.tolerate_error_from = f.send_tolerate_error_from;
    s.tolerate_timeout = f.send_tolerate_timeout;
  }
  return s;
}

}  // namespace

void Exchange::outbound(const Link& link, const Flow& flow) {
  const uint64_t seed = next_seed_++;
  local_specs.push_back(make_spec(Direction::kSend, static_cast<uint32_t>(local_specs.size()), seed,
                                  kLocalRank, flow));
  local_specs.back().gpu_standin = flow.local_gpu_standin;
  local_specs.back().test_out_of_order = flow.local_out_of_order;
  local_comms.push_back(link.local);
  remote_specs.push_back(make_spec(Direction::kRecv, link.remote, seed, kLocalRank, flow));
}

void Exchange::inbound(const Link& link, const Flow& flow) {
  const uint64_t seed = next_seed_++;
  local_specs.push_back(make_spec(Direction::kRecv, static_cast<uint32_t>(local_specs.size()), seed,
                                  kPeerRank, flow));
  local_specs.back().gpu_standin = flow.local_gpu_standin;
  local_specs.back().test_out_of_order = flow.local_out_of_order;
  local_comms.push_back(link.local);
  remote_specs.push_back(make_spec(Direction::kSend, link.remote, seed, kPeerRank, flow));
}

bool ExchangeResult::all_ok() const {
  const auto ok = [](const StreamResult& r) { return r.ok; };
  return std::all_of(local.begin(), local.end(), ok) &&
         std::all_of(remote.begin(), remote.end(), ok) && local.size() == local_specs.size() &&
         remote.size() == remote_specs.size();
}

std::string ExchangeResult::report() const {
  std::string failed, passed;
  const auto add = [&](const char* side, const std::vector<StreamSpec>& specs,
                       const std::vector<StreamResult>& results) {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (i >= results.size()) {
        failed += std::string("  ") + side + " stream " + std::to_string(i) + ": no result\n";
        continue;
      }
      std::string line = std::string("  ") + side + " " + describe(specs[i], results[i]) + "\n";
      (results[i].ok ? passed : failed) += line;
    }
  };
  add("test", local_specs, local);
  add("peer", remote_specs, remote);
  return "\n" + failed + passed;
}

void PeerFixture::start(int version, int local_contexts, int remote_contexts) {
  version_ = version;
  remote_contexts_ = remote_contexts;
  warns_at_start_ = warn_count();
  connections_at_start_ = connection_count();
  std::string error;
  net_ = open_net(plugin_path(), version, &error);
  ASSERT_TRUE(net_) << error;
  for (int i = 0; i < local_contexts; ++i) {
    void* c = nullptr;
    const ncclResult_t rc = net_->init(0x7E57000000000000ull + static_cast<uint64_t>(i), &c);
    ASSERT_EQ(rc, ncclSuccess) << "init (v" << version << ") returned " << result_name(rc);
    ctxs_.push_back(c);
    finalized_.push_back(false);
  }
  int ndev = 0;
  ASSERT_EQ(net_->devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1) << "devices() must report at least one device on " << rank_ifname(Rank::kTest);
  ASSERT_NO_FATAL_FAILURE(respawn_peer());
}

void PeerFixture::respawn_peer() {
  std::string error;
  if (peer_ && peer_->alive() && !peer_dead_) {
    const std::string how = peer_->quit(kSetupTimeout);
    EXPECT_EQ(how, "") << "previous peer did not exit cleanly";
  }
  peer_ = PeerProcess::spawn(peer_path(), plugin_path(), &error, peer_env_);
  ASSERT_TRUE(peer_) << error;
  peer_dead_ = false;
  InitRequest req;
  req.version = static_cast<uint8_t>(version_);
  req.contexts = static_cast<uint8_t>(remote_contexts_);
  InitReply rep;
  ASSERT_TRUE(peer_->call(Op::kInit, req, &rep, kSetupTimeout)) << peer_->error();
  ASSERT_EQ(rep.rc, ncclSuccess) << "peer init: " << rep.error;
  ASSERT_GE(rep.ndev, 1) << "peer sees no device";
}

void PeerFixture::TearDown() {
  // MESH_CONFORMANCE_EXPECT_TRANSPORT: every connection this test made or accepted used it.
  const std::string transport = expected_transport();
  if (!transport.empty()) {
    for (const std::string& line : connections_since(connections_at_start_)) {
      EXPECT_TRUE(logs_transport(line, transport))
          << "MESH_CONFORMANCE_EXPECT_TRANSPORT=" << transport
          << " but the plugin logged: " << line;
    }
  }
  // Close what the test left open, as NCCL does when a communicator is destroyed. Failures here
  // are not asserted: tests that provoke errors leave comms that are not idle.
  if (net_) {
    for (void* c : sends_) net_->close_send(c);
    for (void* c : recvs_) net_->close_recv(c);
    for (void* c : listens_) net_->close_listen(c);
    for (size_t i = 0; i < ctxs_.size(); ++i) {
      if (!finalized_[i]) net_->finalize(ctxs_[i]);
    }
  }
  sends_.clear();
  recvs_.clear();
  listens_.clear();
  if (peer_ && !peer_dead_) {
    // A crash or a sanitizer report in the peer shows up here as a non-zero exit.
    EXPECT_EQ(peer_->quit(kSetupTimeout), "") << "peer process " << peer_->pid();
  }
  peer_.reset();
}

void PeerFixture::forget(std::vector<void*>& list, void* c) {
  list.erase(std::remove(list.begin(), list.end(), c), list.end());
}

ncclResult_t PeerFixture::close_send(void* comm) {
  forget(sends_, comm);
  return net_->close_send(comm);
}

ncclResult_t PeerFixture::close_recv(void* comm) {
  forget(recvs_, comm);
  return net_->close_recv(comm);
}

ncclResult_t PeerFixture::close_listen(void* comm) {
  forget(listens_, comm);
  return net_->close_listen(comm);
}

StatusReply PeerFixture::remote_close(CommKind kind, uint32_t id) {
  StatusReply rep;
  if (!peer_->call(Op::kClose, CloseRequest{kind, id}, &rep, kSetupTimeout)) {
    rep.rc = ncclSystemError;
    rep.error = peer_->error();
  }
  return rep;
}

std::vector<std::string> PeerFixture::remote_warnings() {
  WarningsReply rep;
  if (!peer_->start(Op::kWarnings) || !peer_->finish(&rep, kSetupTimeout)) {
    ADD_FAILURE() << "warnings request: " << peer_->error();
  }
  return rep.lines;
}

std::vector<std::string> PeerFixture::local_warnings() const {
  return warns_since(warns_at_start_);
}

void PeerFixture::listen_local(size_t n, std::vector<HandleBytes>* handles,
                               std::vector<void*>* lcomms, size_t local_ctx) {
  for (size_t i = 0; i < n; ++i) {
    HandleBytes h{};
    void* lcomm = nullptr;
    uint64_t us = 0;
    std::string error;
    ASSERT_TRUE(listen_once(*net_, ctx(local_ctx), 0, &h, &lcomm, &us, &error)) << error;
    listens_.push_back(lcomm);
    handles->push_back(h);
    lcomms->push_back(lcomm);
  }
}

void PeerFixture::open_outbound(size_t n, std::vector<Link>* links, size_t local_ctx,
                                uint32_t remote_ctx) {
  ListenReply listened;
  ASSERT_TRUE(peer_->call(Op::kListen, ListenRequest{remote_ctx, 0, static_cast<uint32_t>(n)},
                          &listened, kSetupTimeout))
      << peer_->error();
  ASSERT_EQ(listened.error, "") << "peer listen";
  ASSERT_EQ(listened.handles.size(), n);

  EstablishRequest req;
  req.timeout_ms = static_cast<uint32_t>(kSetupTimeout.count());
  req.accepts = listened.listen_ids;
  ASSERT_TRUE(peer_->start(Op::kEstablish, req)) << peer_->error();

  std::vector<ConnectItem> items;
  for (const HandleBytes& h : listened.handles) items.push_back({ctx(local_ctx), 0, h, false});
  const EstablishOutcome local = establish(*net_, items, {}, deadline_after(kSetupTimeout));
  for (const CallOutcome& c : local.connects) {
    if (c.comm != nullptr) sends_.push_back(c.comm);
  }
  EstablishReply remote;
  ASSERT_TRUE(peer_->finish(&remote, kSetupTimeout + kReplySlack)) << peer_->error();
  ASSERT_TRUE(local.ok) << "connect side (test process): " << local.error;
  ASSERT_TRUE(remote.outcome.ok) << "accept side (peer): " << remote.outcome.error;
  for (size_t i = 0; i < n; ++i) links->push_back({local.connects[i].comm, remote.recv_ids[i]});
}

void PeerFixture::open_inbound(size_t n, std::vector<Link>* links, size_t local_ctx,
                               uint32_t remote_ctx) {
  std::vector<HandleBytes> handles;
  std::vector<void*> lcomms;
  ASSERT_NO_FATAL_FAILURE(listen_local(n, &handles, &lcomms, local_ctx));

  EstablishRequest req;
  req.timeout_ms = static_cast<uint32_t>(kSetupTimeout.count());
  for (const HandleBytes& h : handles) req.connects.push_back({remote_ctx, 0, h, false});
  ASSERT_TRUE(peer_->start(Op::kEstablish, req)) << peer_->error();

  std::vector<ConnectItem> none;
  const EstablishOutcome local = establish(*net_, none, lcomms, deadline_after(kSetupTimeout));
  for (const CallOutcome& a : local.accepts) {
    if (a.comm != nullptr) recvs_.push_back(a.comm);
  }
  for (size_t i = 0; i < n; ++i) {
    if (local.accepts[i].comm != nullptr) forget(listens_, lcomms[i]);  // closed after accept
  }
  EstablishReply remote;
  ASSERT_TRUE(peer_->finish(&remote, kSetupTimeout + kReplySlack)) << peer_->error();
  ASSERT_TRUE(local.ok) << "accept side (test process): " << local.error;
  ASSERT_TRUE(remote.outcome.ok) << "connect side (peer): " << remote.outcome.error;
  for (size_t i = 0; i < n; ++i) links->push_back({local.accepts[i].comm, remote.send_ids[i]});
}

void PeerFixture::open_both(size_t n, std::vector<Link>* outbound, std::vector<Link>* inbound,
                            size_t local_ctx, uint32_t remote_ctx) {
  std::vector<HandleBytes> handles;
  std::vector<void*> lcomms;
  ASSERT_NO_FATAL_FAILURE(listen_local(n, &handles, &lcomms, local_ctx));
  ListenReply listened;
  ASSERT_TRUE(peer_->call(Op::kListen, ListenRequest{remote_ctx, 0, static_cast<uint32_t>(n)},
                          &listened, kSetupTimeout))
      << peer_->error();
  ASSERT_EQ(listened.error, "") << "peer listen";

  EstablishRequest req;
  req.timeout_ms = static_cast<uint32_t>(kSetupTimeout.count());
  for (const HandleBytes& h : handles) req.connects.push_back({remote_ctx, 0, h, false});
  req.accepts = listened.listen_ids;
  ASSERT_TRUE(peer_->start(Op::kEstablish, req)) << peer_->error();

  std::vector<ConnectItem> items;
  for (const HandleBytes& h : listened.handles) items.push_back({ctx(local_ctx), 0, h, false});
  const EstablishOutcome local = establish(*net_, items, lcomms, deadline_after(kSetupTimeout));
  for (const CallOutcome& c : local.connects) {
    if (c.comm != nullptr) sends_.push_back(c.comm);
  }
  for (size_t i = 0; i < n; ++i) {
    if (local.accepts[i].comm != nullptr) {
      recvs_.push_back(local.accepts[i].comm);
      forget(listens_, lcomms[i]);
    }
  }
  EstablishReply remote;
  ASSERT_TRUE(peer_->finish(&remote, kSetupTimeout + kReplySlack)) << peer_->error();
  ASSERT_TRUE(local.ok) << "test process: " << local.error;
  ASSERT_TRUE(remote.outcome.ok) << "peer: " << remote.outcome.error;
  for (size_t i = 0; i < n; ++i) {
    outbound->push_back({local.connects[i].comm, remote.recv_ids[i]});
    inbound->push_back({local.accepts[i].comm, remote.send_ids[i]});
  }
}

ExchangeResult PeerFixture::run(const Exchange& exchange, Millis timeout, const RunHooks& hooks) {
  ExchangeResult result;
  result.local_specs = exchange.local_specs;
  result.remote_specs = exchange.remote_specs;
  TransferRequest req;
  req.timeout_ms = static_cast<uint32_t>(timeout.count());
  req.streams = exchange.remote_specs;
  const bool remote_started = req.streams.empty() || peer_->start(Op::kTransfer, req);
  result.local = run_streams(*net_, exchange.local_specs, exchange.local_comms,
                             deadline_after(timeout), hooks);
  if (!req.streams.empty() && remote_started && !peer_dead_) {
    TransferReply rep;
    if (peer_->finish(&rep, timeout + kReplySlack)) {
      result.remote = std::move(rep.results);
    }
  }
  if (result.remote.size() != result.remote_specs.size()) {
    result.remote.assign(result.remote_specs.size(), StreamResult{});
    for (StreamResult& r : result.remote) {
      r.error = peer_dead_ ? "peer killed" : "no transfer reply from peer: " + peer_->error();
    }
  }
  return result;
}

void PeerFixture::expect_traffic(const std::vector<Link>& outbound,
                                 const std::vector<Link>& inbound, const char* why) {
  Exchange ex;
  Flow flow;
  flow.messages = exact({0, 1, 4096, 100000});
  for (const Link& l : outbound) ex.outbound(l, flow);
  for (const Link& l : inbound) ex.inbound(l, flow);
  const ExchangeResult r = run(ex);
  EXPECT_TRUE(r.all_ok()) << why << r.report();
}

}  // namespace conformance
