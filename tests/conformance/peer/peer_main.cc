// SPDX-License-Identifier: Apache-2.0
// mesh_conformance_peer: the second rank of the conformance suite. It loads the plugin in its own
// process, as another NCCL rank would, and executes the test process's requests (listen,
// connect/accept, transfers, close, finalize) arriving over the control socket on fd 3.
//
// Usage: mesh_conformance_peer <plugin.so> <control fd>
//        mesh_conformance_peer --hold <plugin.so> <seconds>
// --hold: a host that only keeps the plugin initialised (v12, one context) on
// MESH_CONFORMANCE_PEER_IFNAME's interfaces, so that its relay agent relays other ranks'
// connections (the Soft-RoCE lane's relay step); it prints one "holding" line, and finalizes and
// exits 0 on SIGTERM or SIGINT, or after <seconds>.
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "harness/call_timer.h"
#include "harness/env.h"
#include "harness/establish.h"
#include "harness/log_capture.h"
#include "harness/plugin.h"
#include "harness/protocol.h"
#include "harness/transfer.h"
#include "harness/wire.h"

namespace conformance {
namespace {

// fds a plugin in the test process created without O_CLOEXEC leak into this process. They are
// counted (the test asserts there are none) and closed, so a leaked socket cannot keep a dead
// connection of the test process half alive.
uint32_t close_inherited_fds(int control_fd) {
  uint32_t count = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  std::vector<int> leaked;
  while (dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 2 || fd == control_fd || fd == dirfd(dir)) continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) < 0) continue;
    // Only what a network plugin creates; files a sanitizer runtime may hold are left alone.
    if (std::strncmp(target, "socket:", 7) == 0 || std::strncmp(target, "pipe:", 5) == 0 ||
        std::strncmp(target, "anon_inode:", 11) == 0) {
      std::fprintf(stderr, "[peer %d] inherited fd %d -> %s from the test process\n", getpid(), fd,
                   target);
      leaked.push_back(fd);
    }
  }
  closedir(dir);
  for (int fd : leaked) {
    close(fd);
    ++count;
  }
  return count;
}

class Peer {
 public:
  Peer(std::string plugin_path, int fd, uint32_t inherited_fds)
      : plugin_path_(std::move(plugin_path)), fd_(fd), inherited_fds_(inherited_fds) {}

  // Serves requests until Quit or until the test process goes away. Returns the exit status.
  int serve() {
    for (;;) {
      std::vector<uint8_t> payload;
      std::string error;
      // The test process bounds every request; a very long wait here only means it is busy.
      const FrameStatus st = read_frame(fd_, Millis(3600 * 1000), &payload, &error);
      if (st == FrameStatus::kClosed) return 0;  // test process gone: nothing left to do
      if (st != FrameStatus::kOk) {
        std::fprintf(stderr, "[peer %d] control channel: %s\n", getpid(), error.c_str());
        return 3;
      }
      Reader r(std::move(payload));
      const auto op = static_cast<Op>(r.u8());
      Writer reply;
      bool quit = false;
      switch (op) {
        case Op::kInit:
          handle_init(r, reply);
          break;
        case Op::kListen:
          handle_listen(r, reply);
          break;
        case Op::kEstablish:
          handle_establish(r, reply);
          break;
        case Op::kTransfer:
          handle_transfer(r, reply);
          break;
        case Op::kClose:
          handle_close(r, reply);
          break;
        case Op::kFinalize:
          handle_finalize(r, reply);
          break;
        case Op::kWarnings:
          encode(reply, WarningsReply{warns_since(0)});
          break;
        case Op::kQuit:
          handle_quit(reply);
          quit = true;
          break;
        default:
          std::fprintf(stderr, "[peer %d] unknown request %d\n", getpid(), static_cast<int>(op));
          return 4;
      }
      if (!r.ok() || !r.at_end()) {
        std::fprintf(stderr, "[peer %d] malformed request %d\n", getpid(), static_cast<int>(op));
        return 4;
      }
      if (!write_frame(fd_, reply.data(), &error)) {
        std::fprintf(stderr, "[peer %d] reply: %s\n", getpid(), error.c_str());
        return 3;
      }
      if (quit) return 0;
    }
  }

 private:
  void* ctx(uint32_t index) const { return index < ctxs_.size() ? ctxs_[index] : nullptr; }
  static void* lookup(const std::vector<void*>& table, uint32_t id) {
    return id < table.size() ? table[id] : nullptr;
  }

  void handle_init(Reader& r, Writer& w) {
    InitRequest req;
    decode(r, &req);
    InitReply rep;
    rep.inherited_fds = inherited_fds_;
    net_ = open_net(plugin_path_, req.version, &rep.error);
    if (!net_) {
      rep.rc = ncclSystemError;
      encode(w, rep);
      return;
    }
    for (uint32_t i = 0; i < req.contexts; ++i) {
      void* c = nullptr;
      // Distinct commIds, as distinct NCCL communicators have.
      const ncclResult_t rc = net_->init(0x5EE7000000000000ull + i, &c);
      if (rc != ncclSuccess && rep.rc == ncclSuccess) {
        rep.rc = rc;
        rep.error = std::string("init returned ") + result_name(rc);
      }
      ctxs_.push_back(c);
      finalized_.push_back(false);
    }
    if (rep.rc == ncclSuccess) {
      const ncclResult_t rc = net_->devices(&rep.ndev);
      if (rc != ncclSuccess) {
        rep.rc = rc;
        rep.error = std::string("devices returned ") + result_name(rc);
      }
    }
    encode(w, rep);
  }

  void handle_listen(Reader& r, Writer& w) {
    ListenRequest req;
    decode(r, &req);
    ListenReply rep;
    for (uint32_t i = 0; i < req.count && net_ && rep.error.empty(); ++i) {
      HandleBytes handle{};
      void* comm = nullptr;
      uint64_t us = 0;
      if (!listen_once(*net_, ctx(req.ctx), req.dev, &handle, &comm, &us, &rep.error)) break;
      rep.listen_ids.push_back(static_cast<uint32_t>(listens_.size()));
      listens_.push_back(comm);
      rep.handles.push_back(handle);
    }
    if (!net_) rep.error = "plugin not initialised";
    encode(w, rep);
  }

  void handle_establish(Reader& r, Writer& w) {
    EstablishRequest req;
    decode(r, &req);
    EstablishReply rep;
    if (!net_) {
      rep.outcome.ok = false;
      rep.outcome.error = "plugin not initialised";
      encode(w, rep);
      return;
    }
    std::vector<ConnectItem> items;
    for (const RemoteConnect& c : req.connects) {
      items.push_back(ConnectItem{ctx(c.ctx), c.dev, c.handle, c.expect_error});
    }
    std::vector<void*> lcomms;
    for (uint32_t id : req.accepts) lcomms.push_back(lookup(listens_, id));
    rep.outcome = establish(*net_, items, lcomms, deadline_after(Millis(req.timeout_ms)));
    for (const CallOutcome& c : rep.outcome.connects) {
      rep.send_ids.push_back(c.comm != nullptr ? static_cast<uint32_t>(sends_.size()) : kNoId);
      if (c.comm != nullptr) sends_.push_back(c.comm);
    }
    for (size_t i = 0; i < rep.outcome.accepts.size(); ++i) {
      const CallOutcome& a = rep.outcome.accepts[i];
      rep.recv_ids.push_back(a.comm != nullptr ? static_cast<uint32_t>(recvs_.size()) : kNoId);
      if (a.comm != nullptr) {
        recvs_.push_back(a.comm);
        listens_[req.accepts[i]] = nullptr;  // establish() closed it after the accept
      }
    }
    encode(w, rep);
  }

  void handle_transfer(Reader& r, Writer& w) {
    TransferRequest req;
    decode(r, &req);
    TransferReply rep;
    std::vector<void*> comms;
    for (const StreamSpec& s : req.streams) {
      comms.push_back(lookup(s.dir == Direction::kSend ? sends_ : recvs_, s.comm_id));
    }
    if (net_) {
      rep.results = run_streams(*net_, req.streams, comms, deadline_after(Millis(req.timeout_ms)));
    } else {
      rep.results.resize(req.streams.size());
      for (StreamResult& s : rep.results) s.error = "plugin not initialised";
    }
    encode(w, rep);
  }

  StatusReply close_one(CommKind kind, uint32_t id) {
    StatusReply rep;
    std::vector<void*>& table =
        kind == CommKind::kSend ? sends_ : (kind == CommKind::kRecv ? recvs_ : listens_);
    void* comm = lookup(table, id);
    if (comm == nullptr || !net_) {
      rep.rc = ncclInvalidArgument;
      rep.error = "no such comm";
      return rep;
    }
    CallTimer timer;
    rep.rc = kind == CommKind::kSend   ? net_->close_send(comm)
             : kind == CommKind::kRecv ? net_->close_recv(comm)
                                       : net_->close_listen(comm);
    timer.stop();
    rep.call_us = timer.charged_us();
    table[id] = nullptr;
    if (rep.rc != ncclSuccess) {
      rep.error = std::string("close returned ") + result_name(static_cast<ncclResult_t>(rep.rc));
    }
    return rep;
  }

  void handle_close(Reader& r, Writer& w) {
    CloseRequest req;
    decode(r, &req);
    encode(w, close_one(req.kind, req.id));
  }

  void handle_finalize(Reader& r, Writer& w) {
    FinalizeRequest req;
    decode(r, &req);
    StatusReply rep;
    if (!net_ || req.ctx >= ctxs_.size() || finalized_[req.ctx]) {
      rep.rc = ncclInvalidArgument;
      rep.error = "no such context";
    } else {
      CallTimer timer;
      rep.rc = net_->finalize(ctxs_[req.ctx]);
      timer.stop();
      rep.call_us = timer.charged_us();
      finalized_[req.ctx] = true;
      if (rep.rc != ncclSuccess) rep.error = "finalize failed";
    }
    encode(w, rep);
  }

  // Closes whatever the test left open, then finalizes (v11), as NCCL does at comm destruction.
  void handle_quit(Writer& w) {
    StatusReply rep;
    const std::pair<CommKind, std::vector<void*>*> tables[] = {
        {CommKind::kSend, &sends_}, {CommKind::kRecv, &recvs_}, {CommKind::kListen, &listens_}};
    for (const auto& [kind, table] : tables) {
      for (uint32_t id = 0; id < table->size(); ++id) {
        if ((*table)[id] == nullptr) continue;
        StatusReply one = close_one(kind, id);
        if (one.rc != ncclSuccess && rep.rc == ncclSuccess) rep = one;
      }
    }
    for (size_t i = 0; net_ && i < ctxs_.size(); ++i) {
      if (finalized_[i]) continue;
      const ncclResult_t rc = net_->finalize(ctxs_[i]);
      if (rc != ncclSuccess && rep.rc == ncclSuccess) {
        rep.rc = rc;
        rep.error = std::string("finalize returned ") + result_name(rc);
      }
    }
    encode(w, rep);
  }

  std::string plugin_path_;
  int fd_;
  uint32_t inherited_fds_;
  std::unique_ptr<NetApi> net_;
  std::vector<void*> ctxs_;
  std::vector<bool> finalized_;
  std::vector<void*> listens_, sends_, recvs_;  // indexed by id; nullptr once closed
};

}  // namespace
}  // namespace conformance

namespace conformance {
namespace {
// --hold: see the usage above. The signals are blocked before the plugin starts its threads, so
// they all inherit the mask and sigtimedwait here is the one place that takes them.
int hold(const std::string& plugin_path, const char* seconds_text) {
  char* end = nullptr;
  const long seconds = std::strtol(seconds_text, &end, 10);
  if (*end != '\0' || seconds < 1) {
    std::fprintf(stderr, "--hold wants a number of seconds >= 1, not '%s'\n", seconds_text);
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  set_plugin_environment(Rank::kPeer);
  set_log_prefix("hold " + std::to_string(getpid()));
  std::string error;
  const std::unique_ptr<NetApi> net = open_net(plugin_path, 12, &error);
  if (!net) {
    std::fprintf(stderr, "[hold %d] %s\n", getpid(), error.c_str());
    return 1;
  }
  void* ctx = nullptr;
  int ndev = 0;
  if (net->init(0x401D000000000000ull, &ctx) != ncclSuccess || net->devices(&ndev) != ncclSuccess ||
      ndev < 1) {
    std::fprintf(stderr, "[hold %d] plugin init failed or found no device on %s\n", getpid(),
                 rank_ifname(Rank::kPeer).c_str());
    return 1;
  }
  std::printf("[hold %d] holding the plugin initialised on %s (%d device(s)) for up to %ld s\n",
              getpid(), rank_ifname(Rank::kPeer).c_str(), ndev, seconds);
  std::fflush(stdout);
  const timespec limit{seconds, 0};
  const int sig = sigtimedwait(&stop, nullptr, &limit);
  const ncclResult_t rc = net->finalize(ctx);
  std::printf("[hold %d] %s; finalize returned %d\n", getpid(),
              sig > 0 ? (sig == SIGTERM ? "SIGTERM" : "SIGINT") : "time is up",
              static_cast<int>(rc));
  return rc == ncclSuccess ? 0 : 1;
}
}  // namespace
}  // namespace conformance

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--hold") == 0) return conformance::hold(argv[2], argv[3]);
  if (argc != 3) {
    std::fprintf(stderr,
                 "usage: %s <plugin.so> <control fd>\n       %s --hold <plugin.so> <seconds>\n",
                 argv[0], argv[0]);
    return 2;
  }
  // Never outlive the test process, even if it is killed before it can reap us.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const int fd = std::atoi(argv[2]);
  conformance::set_plugin_environment(conformance::Rank::kPeer);
  conformance::set_log_prefix("peer " + std::to_string(getpid()));
  const uint32_t inherited = conformance::close_inherited_fds(fd);
  conformance::Peer peer(argv[1], fd, inherited);
  // A normal return runs static destructors, as a real NCCL application's exit does: a plugin
  // whose globals cannot be destroyed while its threads run fails the test through our exit status.
  return peer.serve();
}
