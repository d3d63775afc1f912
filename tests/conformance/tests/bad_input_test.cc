// SPDX-License-Identifier: Apache-2.0
// Hostile or broken input from the network side: handles that are corrupt or forged, and raw TCP
// garbage aimed at a listener's handshake port. Each must end in an error (or be dropped by the
// listener), and must leave the process and its good connections working.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "handshake/handle.h"
#include "harness/call_timer.h"
#include "harness/log_capture.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

const Millis kRemoteWait = scaled(20000);

// Both suites below: the peer listens, this process connects with hostile or good handles.
class BadInputFixture : public PeerFixture {
 protected:
  void start_with_good_connections(int version) {
    ASSERT_NO_FATAL_FAILURE(start(version));
    // The good connections every test checks again after the abuse.
    ASSERT_NO_FATAL_FAILURE(open_both(1, &good_out_, &good_in_));
  }

  // A fresh listener in the peer; returns its handle and id.
  void peer_listen(HandleBytes* handle, uint32_t* id) {
    ListenReply rep;
    ASSERT_TRUE(peer().call(Op::kListen, ListenRequest{0, 0, 1}, &rep, scaled(10000)))
        << peer().error();
    ASSERT_EQ(rep.error, "");
    *handle = rep.handles[0];
    *id = rep.listen_ids[0];
  }

  // The peer accepts on `id` in the background (its reply arrives when it has a comm).
  void peer_start_accept(uint32_t id) {
    EstablishRequest req;
    req.timeout_ms = static_cast<uint32_t>(kRemoteWait.count());
    req.accepts = {id};
    ASSERT_TRUE(peer().start(Op::kEstablish, req)) << peer().error();
  }

  // Connects to `handle` as NCCL would (retrying until a comm or an error) and expects an error
  // within `limit`.
  void expect_connect_error(const HandleBytes& handle, Millis limit, const char* what) {
    const size_t warns_before = warn_count();
    std::vector<ConnectItem> items = {{ctx(), 0, handle, true}};
    const auto start_time = Clock::now();
    const EstablishOutcome o = establish(net(), items, {}, deadline_after(limit));
    EXPECT_TRUE(o.ok) << what << ": " << o.error;
    EXPECT_TRUE(o.connects[0].done)
        << what << ": no error after " << elapsed_us(start_time) / 1000 << " ms";
    EXPECT_NE(o.connects[0].rc, ncclSuccess) << what;
    EXPECT_GT(warn_count(), warns_before) << what << ": connect failed without a WARN";
  }

  // Connects to `handle` (a live peer listener accepting in the background) and returns the link.
  void connect_good(const HandleBytes& handle, std::vector<Link>* links) {
    std::vector<ConnectItem> items = {{ctx(), 0, handle, false}};
    const EstablishOutcome o = establish(net(), items, {}, deadline_after(scaled(10000)));
    if (o.connects[0].comm != nullptr) track_send(o.connects[0].comm);
    EstablishReply rep;
    ASSERT_TRUE(peer().finish(&rep, kRemoteWait + scaled(5000))) << peer().error();
    ASSERT_TRUE(o.ok) << "good connect after the abuse: " << o.error;
    ASSERT_TRUE(rep.outcome.ok) << "peer accept after the abuse: " << rep.outcome.error;
    links->push_back({o.connects[0].comm, rep.recv_ids[0]});
  }

  void expect_good_connections_work() {
    expect_traffic(good_out_, good_in_, "on the connections established before the abuse");
  }

  std::vector<Link> good_out_, good_in_;
};

// Hostile handles reach the plugin through each version's connect(): every version.
class BadHandleTest : public BadInputFixture, public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start_with_good_connections(GetParam())); }
};

// Raw sockets on the handshake port never reach an ABI table: one version is enough.
class BadInputTest : public BadInputFixture {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start_with_good_connections(12)); }
};

mesh::handshake::Handle decode_or_die(const HandleBytes& h) {
  mesh::handshake::Handle out;
  std::string why;
  EXPECT_TRUE(mesh::handshake::decode_handle(h.data(), h.size(), &out, &why)) << why;
  return out;
}

TEST_P(BadHandleTest, MalformedHandlesAreRejectedOnTheFirstCall) {
  HandleBytes valid{};
  uint32_t lid = 0;
  ASSERT_NO_FATAL_FAILURE(peer_listen(&valid, &lid));

  struct Case {
    std::string name;
    HandleBytes bytes;
  };
  std::vector<Case> cases;
  std::mt19937_64 rng(0xBADC0DE);
  for (int i = 0; i < 64; ++i) {
    HandleBytes h;
    for (uint8_t& b : h) b = static_cast<uint8_t>(rng());
    cases.push_back({"random #" + std::to_string(i), h});
  }
  for (size_t keep = 0; keep < kHandleBytes; ++keep) {  // truncated: tail zeroed from `keep`
    HandleBytes h = valid;
    std::fill(h.begin() + static_cast<std::ptrdiff_t>(keep), h.end(), 0);
    if (h != valid) cases.push_back({"truncated to " + std::to_string(keep) + " bytes", h});
  }
  for (size_t bit = 0; bit < kHandleBytes * 8; ++bit) {
    HandleBytes h = valid;
    h[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    cases.push_back({"bit " + std::to_string(bit) + " flipped", h});
  }
  for (size_t i = 0; i < kHandleBytes; ++i) {
    HandleBytes h = valid;
    h[i] = static_cast<uint8_t>(h[i] + 1 + rng() % 255);
    cases.push_back({"byte " + std::to_string(i) + " replaced", h});
  }

  size_t failures = 0;
  std::string details;
  const uint64_t limit_us = static_cast<uint64_t>(kSetupCallLimit.count()) * 1000;
  {
    QuietWarnings quiet;  // ~1300 expected WARNs
    for (Case& c : cases) {
      const size_t warns_before = warn_count();
      void* comm = nullptr;
      ncclNetDeviceHandle_v11_t* dev = nullptr;
      CallTimer timer;
      const ncclResult_t rc = net().connect(ctx(), 0, c.bytes.data(), &comm, &dev);
      timer.stop();
      const uint64_t us = timer.charged_us();
      std::string problem;
      if (rc == ncclSuccess) {
        problem = comm != nullptr ? "connect succeeded" : "not rejected on the first call";
      } else if (comm != nullptr) {
        problem = "error but *sendComm set";
      } else if (us > limit_us) {
        problem = "took " + std::to_string(us / 1000) + " ms";
      } else if (warn_count() == warns_before) {
        problem = "rejected without a WARN";
      }
      if (comm != nullptr) net().close_send(comm);
      if (!problem.empty()) {
        if (++failures <= 10) details += "\n  " + c.name + ": " + problem;
      }
    }
  }
  EXPECT_EQ(failures, 0u) << failures << " of " << cases.size() << " bad handles mishandled"
                          << details;

  // The listener whose handle was mangled still accepts the real one.
  ASSERT_NO_FATAL_FAILURE(peer_start_accept(lid));
  std::vector<Link> fresh;
  ASSERT_NO_FATAL_FAILURE(connect_good(valid, &fresh));
  expect_traffic(fresh, {}, "on the listener whose handle was mangled");
  expect_good_connections_work();
}

TEST_P(BadHandleTest, WrongNonceIsRefusedWithinTheConnectTimeout) {
  HandleBytes valid{};
  uint32_t lid = 0;
  ASSERT_NO_FATAL_FAILURE(peer_listen(&valid, &lid));
  // A handle that passes every local check (checksum included) but carries another nonce: what a
  // stale handle or an impostor presents. Only the listener can tell.
  mesh::handshake::Handle forged = decode_or_die(valid);
  for (uint8_t& b : forged.nonce) b = static_cast<uint8_t>(~b);
  HandleBytes bad{};
  std::string why;
  ASSERT_TRUE(mesh::handshake::encode_handle(forged, bad.data(), &why)) << why;
  mesh::handshake::Handle check;
  ASSERT_TRUE(mesh::handshake::decode_handle(bad.data(), bad.size(), &check, &why)) << why;

  ASSERT_NO_FATAL_FAILURE(peer_start_accept(lid));
  expect_connect_error(bad, connect_timeout() + scaled(3000), "wrong nonce");
  // The impostor must not have produced a recv comm (or an error) at the listener.
  EXPECT_FALSE(peer().reply_pending()) << "the peer's accept returned for a wrong-nonce connect";

  std::vector<Link> fresh;
  ASSERT_NO_FATAL_FAILURE(connect_good(valid, &fresh));
  expect_traffic(fresh, {}, "on the connection made after the impostor");
  expect_good_connections_work();
}

TEST_P(BadHandleTest, ConnectToAClosedListenerFails) {
  HandleBytes valid{};
  uint32_t lid = 0;
  ASSERT_NO_FATAL_FAILURE(peer_listen(&valid, &lid));
  EXPECT_EQ(remote_close(CommKind::kListen, lid).rc, ncclSuccess);
  expect_connect_error(valid, connect_timeout() + scaled(3000), "closed listener");
  expect_good_connections_work();
}

MESH_INSTANTIATE_ALL_VERSIONS(BadHandleTest);

// Raw TCP clients aimed at the handshake port of a handle.
class RawClient {
 public:
  // `source` (host order, 0: the kernel's choice) is the local address to connect from.
  RawClient(uint32_t addr, uint16_t port, uint32_t source = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (source != 0) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      local.sin_addr.s_addr = htonl(source);
      if (bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) return;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void send_bytes(const std::vector<uint8_t>& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the listener may hang up on garbage: that is fine
      off += static_cast<size_t>(n);
    }
  }
  // Close with an RST instead of a FIN.
  void reset() {
    linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd_);
    fd_ = -1;
  }
  void hang_up() {
    close(fd_);
    fd_ = -1;
  }
  // True once the other side has closed the connection (EOF or reset), waiting up to `limit`.
  bool closed_by_peer(Millis limit) {
    const auto deadline = Clock::now() + limit;
    uint8_t buf[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

TEST_F(BadInputTest, GarbageAndHalfOpenConnectionsDoNotDisturbTheListener) {
  HandleBytes valid{};
  uint32_t lid = 0;
  ASSERT_NO_FATAL_FAILURE(peer_listen(&valid, &lid));
  const mesh::handshake::Handle h = decode_or_die(valid);
  ASSERT_FALSE(h.addrs.empty());
  ASSERT_TRUE(rank_may_advertise(Rank::kPeer, h.addrs[0].addr))
      << "handshake port must be on the peer's interfaces (" << rank_ifname(Rank::kPeer)
      << "), not " << mesh::format_prefix(h.addrs[0]);
  ASSERT_NO_FATAL_FAILURE(peer_start_accept(lid));

  std::mt19937_64 rng(0x6A5BA6E);
  std::vector<std::unique_ptr<RawClient>> open_clients;
  const auto client = [&] {
    auto c = std::make_unique<RawClient>(h.addrs[0].addr, h.port);
    EXPECT_TRUE(c->connected()) << "cannot reach the handshake port " << h.port;
    return c;
  };
  {
    auto c = client();  // garbage, then a clean hang-up
    c->send_bytes(random_bytes(rng, 1024));
    c->hang_up();
  }
  {
    auto c = client();  // connect, then reset
    c->reset();
  }
  {
    auto c = client();  // garbage and stays open
    c->send_bytes(random_bytes(rng, 1024));
    open_clients.push_back(std::move(c));
  }
  open_clients.push_back(client());  // half open: connects and says nothing
  {
    auto c =
        client();  // the start of a plausible handshake (the handle's first bytes), then silence
    c->send_bytes(std::vector<uint8_t>(valid.begin(), valid.begin() + 16));
    open_clients.push_back(std::move(c));
  }
  {
    auto c = client();  // a lot of garbage
    c->send_bytes(random_bytes(rng, 64 * 1024));
    open_clients.push_back(std::move(c));
  }

  // Give the listener time to look at all of it: none may turn into a recv comm or an error.
  std::this_thread::sleep_for(scaled(300));
  EXPECT_FALSE(peer().reply_pending()) << "the peer's accept returned for a garbage connection";

  // The real connect succeeds while the half-open ones are still open.
  std::vector<Link> fresh;
  ASSERT_NO_FATAL_FAILURE(connect_good(valid, &fresh));
  expect_traffic(fresh, {}, "on the connection made next to the garbage");
  expect_good_connections_work();

  // After closeListen (done right after the accept) no garbage connection may stay open: each
  // would pin a socket in the peer forever.
  for (size_t i = 0; i < open_clients.size(); ++i) {
    EXPECT_TRUE(open_clients[i]->closed_by_peer(connect_timeout() + scaled(3000)))
        << "raw connection #" << i << " still open in the peer after closeListen";
  }
}

// Lines of `lines` that contain `needle`.
size_t count_containing(const std::vector<std::string>& lines, const std::string& needle) {
  return static_cast<size_t>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(needle) != std::string::npos;
  }));
}

// The first bytes of a hello ("MSHH", version 2), as a connector that stalls would leave them.
const std::vector<uint8_t> kPartialHello = {'M', 'S', 'H', 'H', 2, 0, 0};

// A handshake-port flood like tests/netns/flood.py: keeps `per_source` half-open connections
// (the start of a hello, then silence) from each of `sources`, and opens a new one whenever the
// listener closes one, at most one every 2 ms. Counts the "busy" replies the listener sends to
// the sockets it closes to make room.
class HalfOpenFlood {
 public:
  HalfOpenFlood(uint32_t target, uint16_t port, const std::vector<uint32_t>& sources,
                size_t per_source)
      : target_(target), port_(port) {
    for (uint32_t source : sources) {
      for (size_t i = 0; i < per_source; ++i) slots_.push_back({source, nullptr});
    }
    thread_ = std::thread([this] { run(); });
  }
  ~HalfOpenFlood() { stop(); }
  HalfOpenFlood(const HalfOpenFlood&) = delete;
  HalfOpenFlood& operator=(const HalfOpenFlood&) = delete;

  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  uint64_t opened() const { return opened_.load(); }
  uint64_t busy_replies() const { return busy_.load(); }
  uint64_t connect_failures() const { return connect_failures_.load(); }

 private:
  struct Slot {
    uint32_t source;
    std::unique_ptr<RawClient> client;
  };

  void run() {
    auto next_open = Clock::now();
    while (!stop_.load()) {
      for (Slot& s : slots_) {
        if (s.client || Clock::now() < next_open) continue;
        next_open = Clock::now() + Millis(2);
        auto c = std::make_unique<RawClient>(target_, port_, s.source);
        if (!c->connected()) {
          connect_failures_.fetch_add(1);
          continue;
        }
        c->send_bytes(kPartialHello);
        opened_.fetch_add(1);
        s.client = std::move(c);
      }
      std::vector<pollfd> fds;
      std::vector<Slot*> owners;
      for (Slot& s : slots_) {
        if (!s.client) continue;
        fds.push_back({s.client->fd(), POLLIN, 0});
        owners.push_back(&s);
      }
      if (poll(fds.data(), fds.size(), 2) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        for (;;) {  // the reply, if any, then EOF
          uint8_t buf[64];
          const ssize_t n = recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
          if (n >= 4 && buf[0] == 'M' && buf[1] == 'S' && buf[2] == 'R' && buf[3] == 4) {
            busy_.fetch_add(1);
          }
          if (n > 0) continue;
          if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
          owners[i]->client.reset();  // closed by the listener: open another one
          break;
        }
      }
    }
  }

  uint32_t target_;
  uint16_t port_;
  std::vector<Slot> slots_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> opened_{0}, busy_{0}, connect_failures_{0};
  std::thread thread_;
};

// The peer runs with a small NCCL_MESH_MAX_PENDING_HANDSHAKES so that a flood above it is cheap.
class HandshakeFloodTest : public BadInputTest {
 protected:
  static constexpr size_t kCap = 16;
  void SetUp() override {
    set_peer_env({"NCCL_MESH_MAX_PENDING_HANDSHAKES=" + std::to_string(kCap)});
    BadInputTest::SetUp();
  }
};

// Twice as many half-open sockets as the pending cap, re-opened as soon as the listener closes
// one, from 8 source addresses including the connector's own. A listener that answered every
// newcomer "busy" at the cap, and a connector that gave up on "busy", let this keep every real
// connect out. Now the listener closes the oldest silent socket to admit a newcomer and the
// connector retries "busy": the real connection is made within the connect timeout, carries
// data, and the evictions cost one WARN, not one per socket.
TEST_F(HandshakeFloodTest, HalfOpenSocketsAboveTheCapDoNotKeepARealConnectOut) {
  HandleBytes valid{};
  uint32_t lid = 0;
  ASSERT_NO_FATAL_FAILURE(peer_listen(&valid, &lid));
  const mesh::handshake::Handle h = decode_or_die(valid);
  ASSERT_FALSE(h.addrs.empty());
  // On loopback any 127/8 address is local: sources 127.0.0.1 (the connector's) .. 127.0.0.8,
  // each filling its per-source share (a quarter of the cap). Elsewhere one source holds all.
  std::vector<uint32_t> sources = {0};
  size_t per_source = 2 * kCap;
  if (on_loopback(Rank::kTest) && on_loopback(Rank::kPeer)) {
    sources.clear();
    for (uint32_t i = 1; i <= 8; ++i) sources.push_back(0x7F000000u + i);
    per_source = kCap / 4;
  }
  HalfOpenFlood flood(h.addrs[0].addr, h.port, sources, per_source);
  // The listener holds at most kCap of them: wait until it has had to make room many times.
  const auto flood_deadline = Clock::now() + scaled(10000);
  while (flood.busy_replies() < 4 * kCap && Clock::now() < flood_deadline) {
    std::this_thread::sleep_for(Millis(10));
  }
  ASSERT_GE(flood.busy_replies(), 4 * kCap)
      << "the flood did not saturate the listener (" << flood.opened() << " opened, "
      << flood.connect_failures() << " connects failed)";

  ASSERT_NO_FATAL_FAILURE(peer_start_accept(lid));
  const auto t0 = Clock::now();
  std::vector<Link> fresh;
  // The plugin fails a connect after NCCL_MESH_CONNECT_TIMEOUT_MS (2 s): success is in time.
  ASSERT_NO_FATAL_FAILURE(connect_good(valid, &fresh));
  const uint64_t connect_ms = elapsed_us(t0) / 1000;
  expect_traffic(fresh, {}, "on the connection made through the flood");
  expect_good_connections_work();
  const uint64_t busy_during = flood.busy_replies();
  flood.stop();
  EXPECT_GT(busy_during, 4 * kCap) << "the flood went on while the connection was made";

  const std::vector<std::string> warns = remote_warnings();
  EXPECT_EQ(count_containing(warns, "handshake port saturated"), 1u)
      << busy_during << " sockets closed to make room; connected in " << connect_ms
      << " ms; the peer logged:\n"
      << join_lines(warns);
  EXPECT_LE(warns.size(), 6u) << "the peer logged:\n" << join_lines(warns);
}

// 200 garbage connections and 20 that go silent after the start of a hello: one full WARN per
// cause (the peer and what to check), the rest counted into one summary per cause when its 10 s
// window closes. Before, each connection logged its own WARN.
TEST_F(BadInputTest, GarbageFloodLogsOneWarningPerCauseAndASummary) {
  HandleBytes valid{};
  uint32_t lid = 0;
  ASSERT_NO_FATAL_FAILURE(peer_listen(&valid, &lid));
  const mesh::handshake::Handle h = decode_or_die(valid);
  ASSERT_FALSE(h.addrs.empty());
  const size_t before = remote_warnings().size();
  constexpr size_t kGarbage = 200, kSilent = 20;

  const auto t0 = Clock::now();
  std::vector<std::unique_ptr<RawClient>> silent;
  for (size_t i = 0; i < kSilent; ++i) {
    silent.push_back(std::make_unique<RawClient>(h.addrs[0].addr, h.port));
    ASSERT_TRUE(silent.back()->connected());
    silent.back()->send_bytes(kPartialHello);
  }
  std::mt19937_64 rng(0xF100D);
  for (size_t i = 0; i < kGarbage; ++i) {  // one at a time: each refused before the next
    RawClient c(h.addrs[0].addr, h.port);
    ASSERT_TRUE(c.connected());
    c.send_bytes(random_bytes(rng, 64));
    ASSERT_TRUE(c.closed_by_peer(scaled(5000))) << "garbage connection #" << i << " not refused";
  }
  for (size_t i = 0; i < kSilent; ++i) {
    EXPECT_TRUE(silent[i]->closed_by_peer(connect_timeout() + scaled(3000)))
        << "silent connection #" << i << " not closed after the connect timeout";
  }

  // Both windows (10 s, opened by the first refusal and the first expiry) close and summarise.
  const std::string refused_summary = "refused " + std::to_string(kGarbage - 1) +
                                      " more malformed handshakes from 1 source in the last";
  const std::string silent_summary = "closed " + std::to_string(kSilent - 1) +
                                     " more handshake sockets that sent no complete hello in "
                                     "time from 1 source in the last";
  std::vector<std::string> lines;
  const auto deadline = t0 + Millis(10000) + connect_timeout() + scaled(5000);
  do {
    std::this_thread::sleep_for(Millis(200));
    const std::vector<std::string> all = remote_warnings();
    lines.assign(all.begin() + static_cast<std::ptrdiff_t>(std::min(before, all.size())),
                 all.end());
  } while ((count_containing(lines, refused_summary) == 0 ||
            count_containing(lines, silent_summary) == 0) &&
           Clock::now() < deadline);
  EXPECT_EQ(count_containing(lines, "refused handshake from "), 1u) << join_lines(lines);
  EXPECT_EQ(count_containing(lines, "closing handshake socket from "), 1u) << join_lines(lines);
  EXPECT_EQ(count_containing(lines, refused_summary), 1u) << join_lines(lines);
  EXPECT_EQ(count_containing(lines, silent_summary), 1u) << join_lines(lines);
  EXPECT_EQ(lines.size(), 4u) << kGarbage + kSilent << " bad connections; the peer logged:\n"
                              << join_lines(lines);
  expect_good_connections_work();
}

// A listener that answers every hello "busy" (a saturated handshake service) on a local port.
class BusyListener {
 public:
  explicit BusyListener(uint32_t addr) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(addr);
    socklen_t len = sizeof(sa);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd_, 64) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      return;
    }
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~BusyListener() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  BusyListener(const BusyListener&) = delete;
  BusyListener& operator=(const BusyListener&) = delete;

  uint16_t port() const { return port_; }
  uint64_t hellos() const { return hellos_.load(); }

 private:
  void run() {
    while (!stop_.load()) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      uint8_t buf[2048];
      size_t got = 0;
      while (got < 48) {  // the hello (an extension may follow; it is not read)
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 500) <= 0) break;
        const ssize_t n = recv(c, buf + got, sizeof(buf) - got, 0);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      if (got >= 48) {
        hellos_.fetch_add(1);
        const uint8_t busy[4] = {'M', 'S', 'R', 4};
        (void)!::send(c, busy, sizeof(busy), MSG_NOSIGNAL);
      }
      close(c);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> hellos_{0};
  std::thread thread_;
};

// "Busy" is not a refusal: the connector retries until its connect timeout, then fails with a
// WARN that names the saturation (not "no answer").
TEST_F(BadInputTest, BusyListenerIsRetriedUntilTheConnectTimeoutThenReported) {
  HandleBytes valid{};
  uint32_t lid = 0;
  ASSERT_NO_FATAL_FAILURE(peer_listen(&valid, &lid));
  mesh::handshake::Handle redirected = decode_or_die(valid);
  ASSERT_FALSE(redirected.addrs.empty());
  BusyListener busy(redirected.addrs[0].addr);
  ASSERT_NE(busy.port(), 0) << "cannot listen on " << mesh::format_prefix(redirected.addrs[0]);
  redirected.port = busy.port();
  HandleBytes handle{};
  std::string why;
  ASSERT_TRUE(mesh::handshake::encode_handle(redirected, handle.data(), &why)) << why;

  const size_t warns_before = warn_count();
  const auto t0 = Clock::now();
  expect_connect_error(handle, connect_timeout() + scaled(3000), "busy listener");
  const uint64_t took_ms = elapsed_us(t0) / 1000;
  EXPECT_GE(took_ms, static_cast<uint64_t>(connect_timeout_ms()) - 100)
      << "the connect gave up on \"busy\" before its connect timeout";
  EXPECT_GE(busy.hellos(), 5u) << "the connector did not retry after \"busy\"";
  const std::vector<std::string> warns = warns_since(warns_before);
  EXPECT_EQ(count_containing(warns, "handshake port was saturated by unauthenticated"), 1u)
      << join_lines(warns);
  expect_good_connections_work();
}

}  // namespace
}  // namespace conformance
