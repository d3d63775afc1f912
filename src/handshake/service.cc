// SPDX-License-Identifier: Apache-2.0
// The handshake service's public calls (NCCL's threads) and its loop (the service thread);
// the listening side is in inbound.cc, the connecting side in outbound.cc.
#include "handshake/service.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "handshake/service_state.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/random.h"

namespace mesh::handshake {

namespace {
std::vector<WarnLimiter::Cause> warn_causes() {
  return {
      {"refused", "malformed handshakes"},
      {"refused", "handshakes with an unknown nonce"},
      {"refused", "handshakes whose transport setup failed"},
      {"closed", "handshake sockets that sent no complete hello in time"},
      {"dropped", "half-established connections"},
      {"closed", "unauthenticated sockets to make room (pending cap)"},
  };
}
}  // namespace

Service::Service() : warns_(warn_causes(), kWarnWindowMs) {}
Service::~Service() {
  stop();
}

bool Service::start(const std::vector<Ipv4Prefix>& addrs, uint16_t port, int64_t timeout_ms,
                    int64_t max_pending, std::string* why) {
  if (running()) return true;
  timeout_ms_ = timeout_ms;
  admission_ = AdmissionQueue(static_cast<size_t>(std::max<int64_t>(1, max_pending)));
  stop_.store(false);
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_fd_.valid()) {
    *why = "epoll/eventfd creation failed: " + errno_text(errno);
    return false;
  }
  if (!bind_listeners(addrs, port, why)) return false;
  auto add = [&](int fd, EpollTarget* w) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = w;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
  };
  wake_target_ = std::make_unique<EpollTarget>(EpollTarget::Type::kWake);
  wake_target_->fd = wake_fd_.get();
  add(wake_fd_.get(), wake_target_.get());
  for (UniqueFd& l : listeners_) {
    auto w = std::make_unique<EpollTarget>(EpollTarget::Type::kListener);
    w->fd = l.get();
    add(l.get(), w.get());
    listener_targets_.push_back(std::move(w));
  }
  thread_ = std::thread([this] {
    // Named for `top -H` and for tests that find it (a sanitizer runtime adds threads of its own).
    pthread_setname_np(pthread_self(), "mesh-handshake");
    loop();
  });
  return true;
}

void Service::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  wake();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  listener_targets_.clear();
  listeners_.clear();
  accept_pause_.reset();
  dead_incoming_.clear();
  incoming_.clear();
  admission_ = AdmissionQueue(admission_.max_pending());
  partial_.clear();
  for (auto& outgoing : outgoing_) {
    if (!outgoing->finished) {
      outgoing->shared->error = "plugin shut down during the handshake";
      outgoing->shared->status.store(ConnectStatus::kFailed);
    }
  }
  outgoing_.clear();
  for (auto& ep : listens_) {
    ep->ready.clear();
    ep->closed = true;
  }
  listens_.clear();
  registrar_.reset();
  epoll_.reset();
  wake_fd_.reset();
  port_ = 0;
}

void Service::wake() {
  uint64_t one = 1;
  if (wake_fd_.valid()) (void)!write(wake_fd_.get(), &one, sizeof(one));
}

std::shared_ptr<ListenEndpoint> Service::open_listen() {
  auto ep = std::make_shared<ListenEndpoint>();
  fill_random(ep->nonce.data(), ep->nonce.size());
  const auto lock = caller_lock();
  listens_.push_back(ep);
  // Relayed connections reach this listener only once the host's relay agent knows it.
  registrar_.add(port_, ep->nonce.data(), ep->nonce.size());
  return ep;
}

void Service::close_listen(const std::shared_ptr<ListenEndpoint>& ep) {
  const auto lock = caller_lock();
  ep->closed = true;
  ep->ready.clear();  // connections never accepted: their sockets close, the peer sees EOF
  std::erase(listens_, ep);
  registrar_.remove(port_, ep->nonce.data(), ep->nonce.size());
  for (auto it = partial_.begin(); it != partial_.end();) {
    it = it->first.first == ep.get() ? partial_.erase(it) : std::next(it);
  }
}

bool Service::take_ready(const std::shared_ptr<ListenEndpoint>& ep, ConnectedSockets* out,
                         std::string* failure) {
  const auto lock = caller_lock();
  if (ep->ready.empty()) {
    if (failure != nullptr) *failure = ep->failure;
    return false;
  }
  *out = std::move(ep->ready.front());
  ep->ready.pop_front();
  return true;
}

std::shared_ptr<OutgoingConnect> Service::start_connect(const ConnectRequest& req) {
  auto outgoing = std::make_unique<OutgoingState>();
  outgoing->shared = std::make_shared<OutgoingConnect>();
  outgoing->req = req;
  fill_random(&outgoing->conn_id, sizeof(outgoing->conn_id));
  outgoing->deadline_ms = monotonic_ms() + req.timeout_ms;
  const size_t nrails = req.rails.size();
  if (req.relay) {
    std::string dest;
    for (const Ipv4Prefix& a : req.relay_dest) {
      if (!dest.empty()) dest += '/';
      dest += format_ipv4(a.addr);
    }
    outgoing->shared->description = "peer " + dest + ":" + std::to_string(req.port) + " (relayed)";
  } else {
    outgoing->shared->description =
        "peer " + format_ipv4(req.rails[0].peer_addr) + ":" + std::to_string(req.port) + " from " +
        format_ipv4(req.rails[0].local.addr) +
        (nrails > 1 ? " (+" + std::to_string(nrails - 1) + " rails)" : "");
  }
  for (uint16_t i = 0; i <= req.ndata; ++i) {
    auto out = std::make_unique<OutgoingSocket>();
    out->role = i == 0 ? Role::kControl : Role::kData;
    out->index = static_cast<uint16_t>(i == 0 ? 0 : i - 1);
    out->rail = i == 0 || nrails == 0 ? 0 : out->index % nrails;
    out->owner = outgoing.get();
    const bool ext = i == 0 && !req.extension.empty();
    Hello hello{out->role,         out->index,
                req.ndata,         req.nonce,
                outgoing->conn_id, static_cast<uint16_t>(ext ? req.extension.size() : 0),
                agreement_,        req.tcp_window};
    out->hello.resize(kHelloSize);
    encode_hello(hello, out->hello.data());
    if (ext) {
      out->hello.insert(out->hello.end(), req.extension.begin(), req.extension.end());
      out->expect_ext = true;
    }
    outgoing->sockets.push_back(std::move(out));
  }
  std::shared_ptr<OutgoingConnect> shared = outgoing->shared;
  {
    const auto lock = caller_lock();
    if (!running()) {
      shared->error = "handshake service is not running";
      shared->status.store(ConnectStatus::kFailed);
      return shared;
    }
    outgoing_.push_back(
        std::move(outgoing));  // sockets open on the service thread (kBackoff, due now)
  }
  wake();
  return shared;
}

void Service::cancel_connect(const std::shared_ptr<OutgoingConnect>& which) {
  const auto lock = caller_lock();
  for (auto& outgoing : outgoing_) {
    if (outgoing->shared == which && !outgoing->finished) {
      close_outgoing_sockets(outgoing.get());
      outgoing->finished = true;
    }
  }
}

// NCCL's threads: announce themselves, then wait for mu_ as usual; the service thread lets
// them in before its next unit of work (service_lock).
std::unique_lock<std::mutex> Service::caller_lock() {
  callers_arrived_.fetch_add(1, std::memory_order_acq_rel);
  std::unique_lock<std::mutex> lock(mu_);
  callers_entered_.fetch_add(1, std::memory_order_acq_rel);
  callers_entered_.notify_one();
  return lock;
}

// The service thread, before each unit of work: wait until every caller that had begun
// caller_lock() has held mu_, then take it. Only those that came before are waited for (each
// holds mu_ for microseconds), so callers that keep coming cannot starve the service.
std::unique_lock<std::mutex> Service::service_lock() {
  const uint64_t arrived = callers_arrived_.load(std::memory_order_acquire);
  for (uint64_t entered = callers_entered_.load(std::memory_order_acquire); entered < arrived;
       entered = callers_entered_.load(std::memory_order_acquire)) {
    callers_entered_.wait(entered, std::memory_order_acquire);
  }
  return std::unique_lock<std::mutex>(mu_);
}

// The mutex is taken per event, not per batch, so that NCCL's calls wait for one event at most
// (service.h). That keeps the batch's pointers valid although NCCL's threads run between its
// events: events[] point at EpollTargets that only this thread frees, and only below, after the
// last event of the batch (an IncomingSocket that drop_incoming() ended waits in
// dead_incoming_, a finished OutgoingState with its sockets in outgoing_; the listener and wake
// targets live until stop(), after the join). NCCL's calls free none of them: close_listen()
// drops PartialConnections and ready connections (descriptors, no EpollTargets),
// cancel_connect() closes a connect's sockets and marks it finished without freeing it, and
// start_connect() appends to outgoing_ (a reallocation moves the unique_ptrs, not the states).
// A socket closed earlier in the batch, by either thread, has fd -1 (checked under the mutex
// below), so a later event for it is ignored, even when a new socket reuses its number.
void Service::loop() {
  epoll_event events[64];
  while (!stop_.load()) {
    const int n = epoll_wait(epoll_.get(), events, 64, 10);
    for (int i = 0; i < n; ++i) {
      auto* w = static_cast<EpollTarget*>(events[i].data.ptr);
      if (w->type == EpollTarget::Type::kWake) {  // wake_fd_ does not change while running
        uint64_t v;
        while (read(wake_fd_.get(), &v, sizeof(v)) > 0) {
        }
        continue;
      }
      auto lock = service_lock();
      switch (w->type) {
        case EpollTarget::Type::kListener:
          handle_listener(w->fd, lock);
          break;
        case EpollTarget::Type::kIncoming:
          if (w->fd >= 0) handle_incoming(static_cast<IncomingSocket*>(w), lock);
          break;
        case EpollTarget::Type::kOutgoing: {
          auto* out = static_cast<OutgoingSocket*>(w);
          if (out->fd >= 0) handle_outgoing(out->owner, out, events[i].events);
          break;
        }
        case EpollTarget::Type::kWake:
          break;
      }
    }
    expire(monotonic_ms());
    const auto lock = service_lock();
    std::erase_if(outgoing_, [](const std::unique_ptr<OutgoingState>& outgoing) {
      return outgoing->finished;
    });
    dead_incoming_.clear();
  }
}

// Every deadline, once per loop turn (at least once every 10 ms), each stage under the mutex on
// its own and retries one connect at a time (outgoing_ only grows until the batch's end, at the
// back, so an index stays valid while NCCL's threads run in between).
void Service::expire(int64_t now) {
  registrar_.tick(now);  // its own mutex
  {
    const auto lock = service_lock();
    expire_outgoing(now);
  }
  for (size_t i = 0;; ++i) {
    const auto lock = service_lock();
    if (i >= outgoing_.size()) break;
    retry_outgoing(outgoing_[i].get(), now);
  }
  const auto lock = service_lock();
  expire_incoming(now);  // at most kMaxExpiriesPerTurn sockets
  expire_partial_connections(now);
  resume_accepting(now);
  for (const std::string& line : warns_.poll(now)) {
    MESH_WARN("handshake service: %s", line.c_str());
  }
}

}  // namespace mesh::handshake
