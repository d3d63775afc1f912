// SPDX-License-Identifier: Apache-2.0
// Connection setup, in the order NCCL does it: listen on every peer's behalf, ship the handles
// out of band (our rendezvous = NCCL's bootstrap), then drive every connect() and accept() in one
// non-blocking loop - a blocking or ordered setup would deadlock the ranks against each other.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "context.h"
#include "handshake/handle.h"
#include "launch_env.h"
#include "proc_usage.h"
#include "wait.h"

// LeakSanitizer's on-demand check, present only in sanitizer builds (weak: NULL otherwise).
extern "C" int __lsan_do_recoverable_leak_check() __attribute__((weak));

namespace mesh::bench {
namespace {

using json = nlohmann::json;

constexpr uint32_t kTcpHello = 0x4D42544Eu;  // "MBTN"

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* const kDigits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

void from_hex(const std::string& s, uint8_t* out, size_t n) {
  if (s.size() != 2 * n) throw setup_error("rendezvous: malformed plugin handle");
  auto nib = [](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    throw setup_error("rendezvous: malformed plugin handle");
  };
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<uint8_t>(nib(s[2 * i]) << 4 | nib(s[2 * i + 1]));
  }
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

void load_plugin(Context& ctx) {
  ctx.net = std::make_unique<Plugin>(ctx.opt.plugin);
  ctx.net->init();
  ctx.ndev = ctx.net->devices();
  if (ctx.ndev <= 0) {
    throw setup_error(fmt::format("plugin {} reports {} devices (NCCL_MESH_IFNAME='{}')",
                                  ctx.net->path(), ctx.ndev, ctx.local_net.filter_spec));
  }
  if (ctx.opt.dev >= ctx.ndev) {
    throw setup_error(fmt::format("--dev {}: the plugin has {} device(s)", ctx.opt.dev, ctx.ndev));
  }
  ctx.props = ctx.net->properties(ctx.opt.dev);
  ctx.dev_name = ctx.props.name != nullptr ? ctx.props.name : "(null)";
  if ((ctx.props.ptrSupport & NCCL_PTR_HOST) == 0) {
    throw setup_error(
        fmt::format("device {} does not support NCCL_PTR_HOST; the bench moves host "
                    "memory",
                    ctx.dev_name));
  }
}

void connect_plugin(Context& ctx) {
  // Fault-injection mode: a peer that died during setup must surface as the plugin's connect
  // error (bounded by NCCL_MESH_CONNECT_TIMEOUT_MS), not be pre-empted by the rendezvous.
  std::optional<PeerWatchPause> pause;
  if (ctx.opt.duration > 0) pause.emplace();
  Waiter w(ctx.opt.timeout, -1, [&ctx] {
    std::string s;
    for (const PeerLink* lp : ctx.all_links()) {
      const PeerLink& l = *lp;
      if (l.send_comm == nullptr) s += fmt::format(" connect(to {})", l.peer);
      if (l.recv_comm == nullptr) s += fmt::format(" accept(from {})", l.peer);
    }
    return "plugin connections:" + s;
  });
  for (;;) {
    bool pending = false;
    bool moved = false;
    for (PeerLink* lp : ctx.all_links()) {
      PeerLink& l = *lp;
      // Each call's lines replace the last call's: the call that returns the comm logs its route.
      if (l.send_comm == nullptr) {
        l.send_log.clear();
        l.send_comm = ctx.net->connect(ctx.opt.dev, l.connect_handle.data(), l.peer, &l.send_log);
        moved |= l.send_comm != nullptr;
      }
      if (l.recv_comm == nullptr) {
        l.recv_log.clear();
        l.recv_comm = ctx.net->accept(l.listen_comm, l.peer, &l.recv_log);
        if (l.recv_comm != nullptr) {
          // One listenComm serves one connection: NCCL closes it right after accept.
          ctx.net->close_listen(l.listen_comm, l.peer);
          l.listen_comm = nullptr;
          moved = true;
        }
      }
      pending |= l.send_comm == nullptr || l.recv_comm == nullptr;
    }
    if (!pending) return;
    if (moved) {
      w.progressed();
    } else {
      w.idle();
    }
  }
}

// Lower rank connects to higher rank, from the local address the topology code picks.
void connect_tcp(Context& ctx, Fd& listener, const std::vector<json>& blobs) {
  json connected = json::array();
  for (int p = ctx.rank + 1; p < ctx.nranks; ++p) {
    auto& l = ctx.link(p);
    // The peer's addresses exactly as the plugin's connect() sees them: decoded from the handle
    // the peer's listen() wrote for us (device members first). Another plugin (--plugin) has
    // another handle format: then the peer's interface list from the rendezvous stands in.
    std::vector<Ipv4Prefix> peer_addrs;
    handshake::Handle handle;
    std::string why;
    if (handshake::decode_handle(l.connect_handle.data(), l.connect_handle.size(), &handle, &why)) {
      peer_addrs = handle.addrs;
    } else {
      for (const auto& i : blobs[static_cast<size_t>(p)].at("ifaces")) {
        peer_addrs.push_back(
            Ipv4Prefix{i.at("addr").get<uint32_t>(), i.at("prefix").get<uint8_t>()});
      }
    }
    l.path = choose_baseline_path(ctx.local_net, peer_addrs, ctx.opt.dev);
    if (!l.path.ok) {
      ctx.path_lines.push_back(
          fmt::format("rank {} peer {}: no TCP baseline: {}", ctx.rank, p, l.path.why));
      continue;
    }
    if (ctx.local_mode && ((l.path.peer_addr >> 24) != 127 || (l.path.local.addr >> 24) != 127)) {
      throw setup_error(
          fmt::format("local mode must stay in 127.0.0.0/8, but the TCP baseline to "
                      "rank {} would use {}",
                      p, l.path.describe()));
    }
    const auto port = blobs[static_cast<size_t>(p)].at("tcp_port").get<uint16_t>();
    Waiter w(ctx.opt.timeout, p, [p] { return fmt::format("TCP baseline connect to rank {}", p); });
    l.tcp = tcp_connect(l.path.local.addr, l.path.peer_addr, port, false, w);
    const uint32_t hello[2] = {htonl(kTcpHello), htonl(static_cast<uint32_t>(ctx.rank))};
    send_all(l.tcp.get(), hello, sizeof hello, w);
    connected.push_back(p);
  }
  // Tell everybody whom we connected to, so each rank knows how many connections to accept.
  const auto all = ctx.rdv->allgather(connected.dump(), ctx.opt.timeout);
  int expected = 0;
  for (int q = 0; q < ctx.rank; ++q) {
    for (const auto& v : json::parse(all[static_cast<size_t>(q)])) {
      if (v.get<int>() == ctx.rank) ++expected;
    }
  }
  for (int i = 0; i < expected; ++i) {
    Waiter w(ctx.opt.timeout, -1,
             [] { return std::string("TCP baseline connections from lower ranks"); });
    Fd fd = tcp_accept(listener.get(), w);
    uint32_t hello[2] = {};
    recv_all(fd.get(), hello, sizeof hello, w);
    const int q = static_cast<int>(ntohl(hello[1]));
    if (ntohl(hello[0]) != kTcpHello || q < 0 || q >= ctx.rank || ctx.has_tcp(q)) {
      throw setup_error("TCP baseline: unexpected connection on the baseline port");
    }
    ctx.link(q).tcp = std::move(fd);
  }
  for (auto& l : ctx.links) {
    if (l.peer < 0 || !l.tcp) continue;
    l.tcp_local = local_endpoint(l.tcp.get());
    l.tcp_remote = remote_endpoint(l.tcp.get());
    const std::string itf = interface_of(ctx.local_net, local_addr(l.tcp.get()));
    l.tcp_ifname = itf.empty() ? std::string("?") : itf;
    ctx.path_lines.push_back(
        fmt::format("rank {} peer {}: tcp baseline via {} {} -> {}{}", ctx.rank, l.peer,
                    l.tcp_ifname, l.tcp_local, l.tcp_remote,
                    l.peer > ctx.rank ? fmt::format(" (chosen here: {}, {} rail(s) to that peer)",
                                                    l.path.describe(), l.path.rails)
                                      : std::string(" (opened by the peer)")));
  }
}

}  // namespace

void setup(Context& ctx) {
  const auto& opt = ctx.opt;
  ctx.fds_at_start = count_open_fds();
  ctx.threads_at_start = count_threads();
  ctx.links.clear();
  ctx.links.resize(static_cast<size_t>(ctx.nranks));
  for (int p = 0; p < ctx.nranks; ++p) {
    if (p != ctx.rank) ctx.link(p).peer = p;
  }
  // --channels: more connections to every peer, as NCCL opens one per channel.
  ctx.channel_links.clear();
  ctx.channel_links.resize(static_cast<size_t>((opt.channels - 1) * ctx.nranks));
  for (int ch = 1; ch < opt.channels; ++ch) {
    for (int p = 0; p < ctx.nranks; ++p) {
      if (p != ctx.rank) ctx.link(p, ch).peer = p;
    }
  }
  ctx.local_net = discover_local_net();
  load_plugin(ctx);

  // Rendezvous endpoint: local mode always uses the launcher's loopback port.
  HostPort where{};
  if (ctx.local_mode) {
    where = HostPort{0x7f000001u, static_cast<uint16_t>(opt.local_port)};
  } else {
    std::string why;
    const auto hp = parse_host_port(opt.rendezvous, &why);
    if (!hp) throw setup_error("--rendezvous: " + why);
    where = *hp;
  }
  ctx.rdv =
      std::make_unique<Rendezvous>(ctx.rank, ctx.nranks, where, opt.local_listen_fd, opt.timeout);
  Rendezvous* rdv = ctx.rdv.get();
  set_peer_watch([rdv] { rdv->check_peers(); });

  // One listenComm per peer and channel; its handle travels through the rendezvous, named
  // "PEER" (channel 0) or "PEER/CHANNEL".
  auto handle_key = [](int peer, int ch) {
    return ch == 0 ? std::to_string(peer) : fmt::format("{}/{}", peer, ch);
  };
  json handles = json::object();
  for (int ch = 0; ch < opt.channels; ++ch) {
    for (int p = 0; p < ctx.nranks; ++p) {
      if (p == ctx.rank) continue;
      PeerLink& l = ctx.link(p, ch);
      l.listen_comm = ctx.net->listen(opt.dev, l.listen_handle.data(), p);
      handles[handle_key(p, ch)] = to_hex(l.listen_handle.data(), l.listen_handle.size());
    }
  }
  Fd tcp_listener;
  uint16_t tcp_port = 0;
  if (opt.tcp_baseline) {
    tcp_listener = tcp_listen(ctx.local_mode ? 0x7f000001u : 0, 0, ctx.nranks + 8, &tcp_port);
  }
  json ifaces = json::array();
  for (const auto& i : ctx.local_net.used) {
    ifaces.push_back({{"name", i.name}, {"addr", i.addr.addr}, {"prefix", i.addr.prefix}});
  }
  const json mine = {
      {"rank", ctx.rank},          {"host", hostname()},   {"pid", getpid()},
      {"plugin", ctx.net->name()}, {"ndev", ctx.ndev},     {"dev_name", ctx.dev_name},
      {"ifaces", ifaces},          {"tcp_port", tcp_port}, {"handles", handles}};
  const auto all = ctx.rdv->allgather(mine.dump(), opt.timeout);
  std::vector<json> blobs;
  for (const auto& s : all) blobs.push_back(json::parse(s));
  ctx.hosts.clear();
  ctx.rank_addrs.clear();
  for (int p = 0; p < ctx.nranks; ++p) {
    const auto& b = blobs[static_cast<size_t>(p)];
    ctx.hosts.push_back(b.at("host").get<std::string>());
    auto& addrs = ctx.rank_addrs.emplace_back();
    for (const auto& i : b.at("ifaces")) addrs.push_back(format_ipv4(i.at("addr").get<uint32_t>()));
    if (p == ctx.rank) continue;
    for (int ch = 0; ch < opt.channels; ++ch) {
      from_hex(b.at("handles").at(handle_key(ctx.rank, ch)).get<std::string>(),
               ctx.link(p, ch).connect_handle.data(), NCCL_NET_HANDLE_MAXSIZE);
    }
  }

  if (opt.connect_delay > 0) {
    fmt::print(stderr, "PHASE rank {}: handles exchanged; connect()/accept() in {:g} s\n", ctx.rank,
               opt.connect_delay);
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::duration<double>(opt.connect_delay));
    fmt::print(stderr, "PHASE rank {}: connecting\n", ctx.rank);
    std::fflush(stderr);
  }
  connect_plugin(ctx);
  if (opt.tcp_baseline) connect_tcp(ctx, tcp_listener, blobs);
  if (!ctx.local_mode) {
    // Multi-host: every rank says which cable its baseline uses, so a namespace test can
    // check which link carried what.
    for (const auto& line : ctx.path_lines) fmt::print("{}\n", line);
    std::fflush(stdout);
  }
}

void teardown(Context& ctx) {
  if (ctx.opt.duration > 0) {
    close_and_report(ctx, false);
    return;
  }
  for (PeerLink* lp : ctx.all_links()) {
    PeerLink& l = *lp;
    if (l.send_comm != nullptr) ctx.net->close_send(l.send_comm, l.peer);
    if (l.recv_comm != nullptr) ctx.net->close_recv(l.recv_comm, l.peer);
    if (l.listen_comm != nullptr) ctx.net->close_listen(l.listen_comm, l.peer);
    l.send_comm = l.recv_comm = l.listen_comm = nullptr;
    l.tcp = Fd();
  }
  ctx.net->finalize();
}

void close_and_report(Context& ctx, bool after_failure) {
  if (ctx.closed || !ctx.net) return;
  ctx.closed = true;
  const auto t0 = Clock::now();
  int comms = 0;
  std::string errors;
  auto close_one = [&](void*& comm, int peer, void (Plugin::*close)(void*, int)) {
    if (comm == nullptr) return;
    ++comms;
    try {
      (ctx.net.get()->*close)(comm, peer);
    } catch (const BenchError& e) {
      errors += fmt::format("; {}", e.what());
    }
    comm = nullptr;
  };
  for (PeerLink* lp : ctx.all_links()) {
    PeerLink& l = *lp;
    close_one(l.send_comm, l.peer, &Plugin::close_send);
    close_one(l.recv_comm, l.peer, &Plugin::close_recv);
    close_one(l.listen_comm, l.peer, &Plugin::close_listen);
    l.tcp = Fd();
  }
  try {
    ctx.net->finalize();
  } catch (const BenchError& e) {
    errors += fmt::format("; {}", e.what());
  }
  const double took = since(t0);
  ctx.rdv.reset();  // the bench's own sockets: what is left open after this is the plugin's
  std::string leaks;
  if (after_failure && __lsan_do_recoverable_leak_check != nullptr) {
    leaks = __lsan_do_recoverable_leak_check() != 0 ? ", LeakSanitizer: LEAKS (report above)"
                                                    : ", LeakSanitizer: no leaks";
  }
  // TSan's runtime starts a background thread at the first pthread_create (after the baseline)
  // and keeps it (tests/netns/cases.py allows it too).
#if defined(__SANITIZE_THREAD__)
  const int want = ctx.threads_at_start + 1;
#else
  const int want = ctx.threads_at_start;
#endif
  const int threads = count_threads_settled(want, 1.0);
  const std::string left = threads > want ? "; threads still running: " + threads_but_main() : "";
  fmt::print(stderr,
             "CLOSE rank {}: {}{} comm(s) closed and finalize returned in {:.3f} s; fds {} -> {}, "
             "threads {} -> {} (before init -> after close){}{}{}\n",
             ctx.rank, after_failure ? "after the failure, " : "", comms, took, ctx.fds_at_start,
             count_open_fds(), ctx.threads_at_start, threads, left, leaks,
             errors.empty() ? "" : "; close errors" + errors);
  std::fflush(stderr);
  if (!after_failure && !errors.empty()) {
    throw BenchError(kExitPlugin, fmt::format("ERROR rank {}: closing failed{}", ctx.rank, errors));
  }
}

}  // namespace mesh::bench
