// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/probe_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "tools/doctor/probe_protocol.h"
#include "tools/doctor/probe_socket.h"
#include "util/accept_errors.h"
#include "util/byte_order.h"
#include "util/ipv4.h"

namespace mesh::doctor::probe {
namespace {

using Clock = std::chrono::steady_clock;

// A client that stops talking for this long is dropped.
constexpr int kIoTimeoutMs = 5000;
// Connections served at once; more are closed at once (three peers probing four streams each
// fit comfortably).
constexpr size_t kMaxSessions = 32;

const char* op_name(Op op) {
  switch (op) {
    case Op::kInfo:
      return "INFO";
    case Op::kPing:
      return "PING";
    case Op::kSink:
      return "SINK";
    case Op::kSource:
      return "SOURCE";
  }
  return "?";
}

}  // namespace

ProbeServer::~ProbeServer() {
  stopping_ = true;
  reap(true);
}

bool ProbeServer::start(const std::vector<topology::Interface>& bind, uint16_t port, SelfInfo self,
                        std::ostream* log, std::string* error) {
  self_ = std::move(self);
  log_ = log;
  port_ = port;
  std::vector<uint32_t> done;
  for (const topology::Interface& itf : bind) {
    if (std::find(done.begin(), done.end(), itf.addr.addr) != done.end()) continue;
    UniqueFd fd = listen_on(itf.addr.addr, port_, error);
    if (!fd.valid()) return false;
    if (port_ == 0) port_ = local_port(fd.get());
    done.push_back(itf.addr.addr);
    endpoints_.push_back(format_ipv4(itf.addr.addr) + ":" + std::to_string(port_) + " (" +
                         itf.name + ")");
    listeners_.push_back(std::move(fd));
  }
  if (listeners_.empty()) {
    *error = "no address to listen on";
    return false;
  }
  return true;
}

void ProbeServer::log_line(const std::string& line) {
  if (log_ == nullptr) return;
  std::lock_guard<std::mutex> lock(log_mutex_);
  *log_ << line << std::endl;
}

void ProbeServer::reap(bool all) {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (all || it->done->load()) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t ProbeServer::run(double seconds, const std::atomic<bool>& stop) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(seconds));
  size_t served = 0;
  std::vector<pollfd> fds;
  for (const UniqueFd& l : listeners_) fds.push_back({l.get(), POLLIN, 0});
  while (!stop && (seconds <= 0 || Clock::now() < deadline)) {
    reap(false);
    // Short timeout: the loop also notices `stop` and the deadline.
    const int rc = ::poll(fds.data(), fds.size(), 200);
    if (rc <= 0) continue;
    for (pollfd& p : fds) {
      if ((p.revents & POLLIN) == 0) continue;
      sockaddr_in sa{};
      socklen_t len = sizeof(sa);
      UniqueFd fd(::accept4(p.fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_CLOEXEC));
      if (!fd.valid()) {
        const int err = errno;
        if (err == EAGAIN || accept_error_is_per_connection(err)) continue;
        // Out of descriptors or memory: the connection stays in the backlog and poll() would
        // report it again at once (a loop at a whole core). Say why once, wait, try again.
        if (!accept_warned_) {
          log_line("cannot accept: " + errno_text(err) + "; " +
                   accept_error_advice(err, "each probe session holds one",
                                       "wait for the sessions to end"));
          accept_warned_ = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        break;
      }
      const std::string peer = format_endpoint(sa);
      if (workers_.size() >= kMaxSessions) {
        log_line(peer + ": busy, closed");
        continue;
      }
      ++served;
      auto done = std::make_shared<std::atomic<bool>>(false);
      workers_.push_back({std::thread([this, f = std::move(fd), peer, done]() mutable {
                            session(std::move(f), peer);
                            *done = true;
                          }),
                          done});
    }
  }
  stopping_ = true;
  reap(true);
  return served;
}

void ProbeServer::session(UniqueFd fd, std::string peer) {
  set_io_timeout(fd.get(), kIoTimeoutMs);
  uint8_t req_bytes[kRequestSize];
  if (!recv_all(fd.get(), req_bytes, sizeof(req_bytes))) return;
  std::string why;
  const auto req = decode_request(req_bytes, &why);
  if (!req) {
    log_line(peer + ": rejected: " + why);
    return;
  }
  log_line(peer + ": " + op_name(req->op));
  switch (req->op) {
    case Op::kInfo: {
      PeerInfo info = self_();
      const uint32_t here = local_address(fd.get());
      for (const PeerInterface& i : info.interfaces) {
        if (i.addr.addr == here) info.arrived_on = i;
      }
      const std::string text = encode_info(info);
      uint8_t len[4];
      put_u32(len, static_cast<uint32_t>(text.size()));
      if (send_all(fd.get(), len, sizeof(len))) send_all(fd.get(), text.data(), text.size());
      break;
    }
    case Op::kPing: {
      const uint32_t n = std::min(req->arg, kMaxPings);
      uint8_t stamp[8];
      for (uint32_t i = 0; i < n && !stopping_; ++i) {
        if (!recv_all(fd.get(), stamp, sizeof(stamp)) ||
            !send_all(fd.get(), stamp, sizeof(stamp))) {
          break;
        }
      }
      break;
    }
    case Op::kSink: {
      // Read until the client's EOF; a client that keeps sending past the limit is cut off
      // without an answer.
      const auto limit = Clock::now() + std::chrono::milliseconds(
                                            std::min(req->arg, kMaxDurationMs) + kIoTimeoutMs);
      std::vector<char> buf(kIoChunk);
      uint64_t total = 0;
      bool eof = false;
      while (!stopping_ && Clock::now() < limit) {
        const ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          eof = n == 0;
          break;
        }
        total += static_cast<uint64_t>(n);
      }
      if (eof) {
        uint8_t count[8];
        put_u64(count, total);
        send_all(fd.get(), count, sizeof(count));
      }
      break;
    }
    case Op::kSource: {
      const auto end = Clock::now() + std::chrono::milliseconds(std::min(req->arg, kMaxDurationMs));
      const std::vector<char> buf(kIoChunk, 'm');
      while (!stopping_ && Clock::now() < end) {
        if (!send_all(fd.get(), buf.data(), buf.size())) break;
      }
      ::shutdown(fd.get(), SHUT_WR);
      break;
    }
  }
}

}  // namespace mesh::doctor::probe
