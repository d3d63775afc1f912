// SPDX-License-Identifier: Apache-2.0
#include "rendezvous.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <cstring>

#include "errors.h"

namespace mesh::bench {
namespace {

constexpr uint32_t kMagic = 0x4D424E31;  // "MBN1"
constexpr uint32_t kMaxBlob = 64u << 20;

void put_u32(std::string& out, uint32_t v) {
  const uint32_t be = htonl(v);
  out.append(reinterpret_cast<const char*>(&be), 4);
}

uint32_t read_u32(int fd, Waiter& w) {
  uint32_t be = 0;
  recv_all(fd, &be, 4, w);
  return ntohl(be);
}

void write_u32(int fd, uint32_t v, Waiter& w) {
  const uint32_t be = htonl(v);
  send_all(fd, &be, 4, w);
}

std::string read_blob(int fd, Waiter& w) {
  const uint32_t len = read_u32(fd, w);
  if (len > kMaxBlob) throw setup_error(fmt::format("rendezvous: blob of {} bytes", len));
  std::string s(len, '\0');
  if (len > 0) recv_all(fd, s.data(), len, w);
  return s;
}

}  // namespace

Rendezvous::Rendezvous(int rank, int nranks, HostPort where, int listen_fd, double timeout_s)
    : rank_(rank), nranks_(nranks), timeout_s_(timeout_s) {
  const std::string endpoint =
      fmt::format("{}.{}.{}.{}:{}", where.addr >> 24, (where.addr >> 16) & 255,
                  (where.addr >> 8) & 255, where.addr & 255, where.port);
  if (rank == 0) {
    Fd listener =
        listen_fd >= 0 ? Fd(listen_fd) : tcp_listen(where.addr, where.port, nranks + 8, nullptr);
    clients_.resize(static_cast<size_t>(nranks));
    int joined = 1;
    Waiter w(timeout_s, -1, [&] {
      std::string missing;
      for (int r = 1; r < nranks_; ++r) {
        if (!clients_[static_cast<size_t>(r)]) missing.append(" ").append(std::to_string(r));
      }
      return fmt::format("ranks{} to join the rendezvous on {}", missing, endpoint);
    });
    while (joined < nranks) {
      Fd c = tcp_accept(listener.get(), w);
      if (read_u32(c.get(), w) != kMagic) {
        // Someone else's connection (a port scanner, a stale run): ignore it.
        continue;
      }
      const uint32_t r = read_u32(c.get(), w);
      const uint32_t n = read_u32(c.get(), w);
      if (n != static_cast<uint32_t>(nranks) || r == 0 || r >= n) {
        throw setup_error(
            fmt::format("rendezvous: a rank says it is rank {} of {}, rank 0 "
                        "expects {} ranks",
                        r, n, nranks));
      }
      if (clients_[r]) throw setup_error(fmt::format("rendezvous: rank {} joined twice", r));
      write_u32(c.get(), kMagic, w);
      clients_[r] = std::move(c);
      ++joined;
    }
  } else {
    Waiter w(timeout_s, 0, [&] { return fmt::format("rank 0's rendezvous on {}", endpoint); });
    server_ = tcp_connect(0, where.addr, where.port, /*retry_refused=*/true, w);
    write_u32(server_.get(), kMagic, w);
    write_u32(server_.get(), static_cast<uint32_t>(rank), w);
    write_u32(server_.get(), static_cast<uint32_t>(nranks), w);
    if (read_u32(server_.get(), w) != kMagic) {
      throw setup_error("rendezvous: " + endpoint + " is not a nccl-mesh-bench rank 0");
    }
  }
}

std::vector<std::string> Rendezvous::allgather(const std::string& mine, double wait_s) {
  try {
    return exchange_all(mine, wait_s);
  } catch (const BenchError& e) {
    if (e.exit_code() != kExitPeerFailed) throw;
    // A dead rank shows up as a reset or EOF on its rendezvous connection.
    throw BenchError(kExitPeerFailed,
                     fmt::format("ABORT rank {}: lost the rendezvous ({}): another rank failed",
                                 rank_, e.what()));
  }
}

std::vector<std::string> Rendezvous::exchange_all(const std::string& mine, double wait_s) {
  const PeerWatchPause pause;
  const uint32_t seq = ++seq_;
  std::vector<std::string> all(static_cast<size_t>(nranks_));
  if (rank_ == 0) {
    all[0] = mine;
    for (int r = 1; r < nranks_; ++r) {
      const int fd = clients_[static_cast<size_t>(r)].get();
      Waiter w(wait_s, r,
               [r, seq] { return fmt::format("rank {} at rendezvous step {}", r, seq); });
      const uint32_t got = read_u32(fd, w);
      if (got != seq) {
        throw setup_error(
            fmt::format("rendezvous: rank {} is at step {}, rank 0 at {}", r, got, seq));
      }
      all[static_cast<size_t>(r)] = read_blob(fd, w);
    }
    std::string reply;
    put_u32(reply, seq);
    for (const auto& b : all) {
      put_u32(reply, static_cast<uint32_t>(b.size()));
      reply += b;
    }
    for (int r = 1; r < nranks_; ++r) {
      Waiter w(timeout_s_, r, [r] { return fmt::format("rendezvous reply to rank {}", r); });
      send_all(clients_[static_cast<size_t>(r)].get(), reply.data(), reply.size(), w);
    }
  } else {
    Waiter w(wait_s, 0, [seq] { return fmt::format("rank 0 at rendezvous step {}", seq); });
    std::string msg;
    put_u32(msg, seq);
    put_u32(msg, static_cast<uint32_t>(mine.size()));
    msg += mine;
    send_all(server_.get(), msg.data(), msg.size(), w);
    const uint32_t got = read_u32(server_.get(), w);
    if (got != seq) {
      throw setup_error(
          fmt::format("rendezvous: rank 0 is at step {}, rank {} at {}", got, rank_, seq));
    }
    for (int r = 0; r < nranks_; ++r) all[static_cast<size_t>(r)] = read_blob(server_.get(), w);
  }
  return all;
}

void Rendezvous::check_peers() {
  if (rank_ == 0) {
    for (int r = 1; r < nranks_; ++r) {
      const Fd& c = clients_[static_cast<size_t>(r)];
      if (c && peer_closed(c.get())) {
        throw BenchError(kExitPeerFailed,
                         fmt::format("ABORT rank 0: rank {} left the rendezvous (it failed or was "
                                     "killed)",
                                     r));
      }
    }
  } else if (server_ && peer_closed(server_.get())) {
    throw BenchError(
        kExitPeerFailed,
        fmt::format("ABORT rank {}: rank 0 left the rendezvous (a rank failed)", rank_));
  }
}

}  // namespace mesh::bench
