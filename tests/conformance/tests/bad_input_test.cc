// Hostile or broken input from the network side: handles that are corrupt or forged, and raw TCP
// garbage aimed at a listener's handshake port. Each must end in an error (or be dropped by the
// listener), and must leave the process and its good connections working.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "handshake/handle.h"
#include "harness/call_timer.h"
#include "harness/log_capture.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

const Millis kRemoteWait = scaled(20000);

class BadInputTest : public PeerFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start(11));
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

mesh::handshake::Handle decode_or_die(const HandleBytes& h) {
  mesh::handshake::Handle out;
  std::string why;
  EXPECT_TRUE(mesh::handshake::decode_handle(h.data(), h.size(), &out, &why)) << why;
  return out;
}

TEST_F(BadInputTest, MalformedHandlesAreRejectedOnTheFirstCall) {
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

TEST_F(BadInputTest, WrongNonceIsRefusedWithinTheConnectTimeout) {
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
  expect_connect_error(bad, Millis(kConnectTimeoutMs) + scaled(3000), "wrong nonce");
  // The impostor must not have produced a recv comm (or an error) at the listener.
  EXPECT_FALSE(peer().reply_pending()) << "the peer's accept returned for a wrong-nonce connect";

  std::vector<Link> fresh;
  ASSERT_NO_FATAL_FAILURE(connect_good(valid, &fresh));
  expect_traffic(fresh, {}, "on the connection made after the impostor");
  expect_good_connections_work();
}

TEST_F(BadInputTest, ConnectToAClosedListenerFails) {
  HandleBytes valid{};
  uint32_t lid = 0;
  ASSERT_NO_FATAL_FAILURE(peer_listen(&valid, &lid));
  EXPECT_EQ(remote_close(CommKind::kListen, lid).rc, ncclSuccess);
  expect_connect_error(valid, Millis(kConnectTimeoutMs) + scaled(3000), "closed listener");
  expect_good_connections_work();
}

// Raw TCP clients aimed at the handshake port of a handle.
class RawClient {
 public:
  RawClient(uint32_t addr, uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
    EXPECT_TRUE(open_clients[i]->closed_by_peer(Millis(kConnectTimeoutMs) + scaled(3000)))
        << "raw connection #" << i << " still open in the peer after closeListen";
  }
}

}  // namespace
}  // namespace conformance
