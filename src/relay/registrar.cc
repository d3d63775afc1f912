// SPDX-License-Identifier: Apache-2.0
#include "relay/registrar.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/clock.h"
#include "util/log.h"

namespace mesh::relay {

void Registrar::configure(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  name_ = name;
  fd_.reset();
  next_try_ms_ = 0;
}

void Registrar::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  fd_.reset();
  live_.clear();
  queue_.clear();
}

bool Registrar::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fd_.valid();
}

void Registrar::add(uint16_t port, const uint8_t* nonce, size_t len) {
  Registration r;
  r.port = port;
  r.tag = relay_listener_tag(nonce, len);
  r.key = relay_listener_key(nonce, len);
  std::lock_guard<std::mutex> lock(mu_);
  if (name_.empty()) return;
  live_[r.tag] = r;
  if (!fd_.valid() && !connect_locked()) return;  // sent with the others once connected
  queue_.push_back(r);
  flush_locked();
}

void Registrar::remove(uint16_t port, const uint8_t* nonce, size_t len) {
  Registration r;
  r.add = false;
  r.port = port;
  r.tag = relay_listener_tag(nonce, len);
  std::lock_guard<std::mutex> lock(mu_);
  if (live_.erase(r.tag) == 0 || !fd_.valid()) return;
  queue_.push_back(r);
  flush_locked();
}

bool Registrar::query(const std::vector<Ipv4Prefix>& dest, uint16_t stream, int64_t age_ms,
                      RouteAnswer* out) {
  std::vector<uint32_t> key;
  for (const Ipv4Prefix& d : dest) key.push_back(d.addr);
  const int64_t now = monotonic_ms();
  std::lock_guard<std::mutex> lock(mu_);
  if (name_.empty()) return false;
  read_answers_locked(now);
  Asked& a = asked_[{key, stream}];
  if (a.answered_ms >= 0 && now - a.answered_ms < kRouteAnswerTtlMs) {
    *out = a.answer;
    return true;
  }
  if (a.sent_ms >= 0 && now - a.sent_ms < kRouteAnswerTtlMs) return false;  // on its way
  if (!fd_.valid() && !connect_locked()) return false;
  RouteQuery q;
  q.id = a.id = next_id_++;
  q.stream = stream;
  q.age_ms = static_cast<uint32_t>(std::clamp<int64_t>(age_ms, 0, 0x7fffffff));
  q.dest = dest;
  uint8_t m[kRouteQuerySize];
  encode_route_query(q, m);
  if (send(fd_.get(), m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof(m)))
    a.sent_ms = now;
  if (asked_.size() > 4096) asked_.clear();  // bounded: old questions are asked again
  return false;
}

void Registrar::read_answers_locked(int64_t now_ms) {
  for (int i = 0; fd_.valid() && i < 256; ++i) {
    uint8_t m[kRouteAnswerHeader + 2 * kMaxRouteText];
    const ssize_t n = recv(fd_.get(), m, sizeof(m), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      drop_locked("the host's relay agent closed its local socket (its process exited?)");
      return;
    }
    RouteAnswer a;
    std::string why;
    if (!decode_route_answer(m, static_cast<size_t>(n), &a, &why)) continue;
    for (auto& [key, asked] : asked_) {
      if (asked.id == a.id) {
        asked.answer = std::move(a);
        asked.answered_ms = now_ms;
        break;
      }
    }
  }
}

void Registrar::tick(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (name_.empty()) return;
  read_answers_locked(now_ms);  // also notices a closed agent
  if (now_ms < next_try_ms_) return;
  next_try_ms_ = now_ms + kRegistrarRetryMs;
  if (fd_.valid()) {
    pollfd p{fd_.get(), POLLRDHUP, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR))) {
      drop_locked("the host's relay agent closed its local socket (its process exited?)");
    }
  }
  if (!fd_.valid()) {
    if (live_.empty() || !connect_locked()) return;
  }
  flush_locked();
}

bool Registrar::connect_locked() {
  UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return false;
  sockaddr_un sa{};
  const socklen_t len = make_unix_address(name_, &sa);
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    if (!said_missing_) {
      said_missing_ = true;
      MESH_INFO(NCCL_INIT | NCCL_NET,
                "relay: no relay agent on this host's local socket @%s yet (%s); this process's "
                "listeners are registered once one runs (until then relayed connections to "
                "them are refused)",
                name_.c_str() + 1, errno_text(errno).c_str());
    }
    return false;
  }
  ucred cred{};
  socklen_t cl = sizeof(cred);
  if (getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
      !peer_allowed(cred.uid, cred.gid, geteuid(), -1)) {
    if (!warned_foreign_) {
      warned_foreign_ = true;
      MESH_WARN(
          "relay: the local socket @%s of this host's relay agent belongs to user %u, not to "
          "this user (%u) or root: not registering this process's listeners with it (another "
          "user's process holds the relay agent's name: run nccl-mesh-relayd, or stop it)",
          name_.c_str() + 1, static_cast<unsigned>(cred.uid), static_cast<unsigned>(geteuid()));
    }
    return false;
  }
  said_missing_ = false;
  connected_ms_ = monotonic_ms();
  fd_ = std::move(s);
  queue_.clear();
  for (const auto& [tag, r] : live_) queue_.push_back(r);
  MESH_INFO(NCCL_INIT | NCCL_NET, "relay: registered with this host's relay agent (@%s, pid %d)",
            name_.c_str() + 1, static_cast<int>(cred.pid));
  return true;
}

void Registrar::flush_locked() {
  while (fd_.valid() && !queue_.empty()) {
    uint8_t m[kRegistrationSize];
    encode_registration(queue_.front(), m);
    const ssize_t n = send(fd_.get(), m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;  // the next tick
    if (n < 0) {
      drop_locked("sending a registration failed");
      return;
    }
    queue_.pop_front();
  }
}

void Registrar::drop_locked(const char* why) {
  MESH_INFO(NCCL_NET, "relay: %s; registering again with the next agent", why);
  // An agent that closes this process's socket at once, again and again, refuses its user
  // (nccl-mesh-relayd runs as root and admits other users only by NCCL_MESH_RELAY_GROUP).
  quick_drops_ = monotonic_ms() - connected_ms_ < 1000 ? quick_drops_ + 1 : 0;
  if (quick_drops_ >= 3 && !warned_refused_) {
    warned_refused_ = true;
    MESH_WARN(
        "relay: this host's relay agent (@%s) closes this process's local socket at once: it "
        "does not admit this user (uid %u), so relayed connections to this process's listeners "
        "are refused; where nccl-mesh-relayd runs, set its NCCL_MESH_RELAY_GROUP to this "
        "process's primary group (gid %u; the local socket reports no other group) or run the job "
        "with that group as its primary one (sg GROUP -c ...; see the service's log)",
        name_.c_str() + 1, static_cast<unsigned>(geteuid()), static_cast<unsigned>(getegid()));
  }
  fd_.reset();
  queue_.clear();
  asked_.clear();
}

}  // namespace mesh::relay
