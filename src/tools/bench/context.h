// SPDX-License-Identifier: Apache-2.0
// Everything one rank holds while it runs: the loaded plugin, its connections to every peer
// (plugin send/recv comms and the TCP baseline socket), the rendezvous, and the counters that
// decide the exit code. setup() builds it, teardown() closes it in the order NCCL would.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nccl/net.h"
#include "options.h"
#include "paths.h"
#include "pattern.h"
#include "plugin.h"
#include "rendezvous.h"
#include "socket_io.h"

namespace mesh::bench {

struct PeerLink {
  int peer = -1;
  // Plugin side. listen_handle is what this rank's listen() wrote for `peer` to connect to;
  // connect_handle is the peer's, passed to connect() unchanged on every retry.
  std::array<uint8_t, NCCL_NET_HANDLE_MAXSIZE> listen_handle{};
  std::array<uint8_t, NCCL_NET_HANDLE_MAXSIZE> connect_handle{};
  void* listen_comm = nullptr;
  void* send_comm = nullptr;
  void* recv_comm = nullptr;
  // What the plugin logged during connect() / accept() for this peer (route_log.h).
  std::vector<std::string> send_log;
  std::vector<std::string> recv_log;

  // TCP baseline: one socket per pair, opened by the lower rank from the address its topology
  // choice gives (path), used in both directions.
  BaselinePath path;
  Fd tcp;
  std::string tcp_local;  // actual endpoints of the socket
  std::string tcp_remote;
  std::string tcp_ifname;  // local interface carrying it
};

struct Context {
  Options opt;
  int rank = 0;
  int nranks = 0;
  bool local_mode = false;  // spawned by the local launcher: loopback only

  std::unique_ptr<Plugin> net;
  int ndev = 0;
  ncclNetProperties_v11_t props{};
  std::string dev_name;

  LocalNet local_net;
  std::unique_ptr<Rendezvous> rdv;
  std::vector<std::string> hosts;                    // per rank
  std::vector<std::vector<std::string>> rank_addrs;  // per rank: its mesh addresses ("a.b.c.d")
  std::vector<PeerLink> links;                       // index = peer rank; links[rank] unused
  // ring-traffic --channels C: the connections of channels 1..C-1 to each peer, index
  // (channel - 1) * nranks + peer (channel 0 is `links`).
  std::vector<PeerLink> channel_links;
  std::vector<std::string> path_lines;  // this rank's "which cable" lines

  uint64_t mismatches = 0;

  // Open file descriptors and threads of this process when setup() began (before the plugin's
  // init), for the --duration mode's CLOSE line; -1 when unknown.
  int fds_at_start = -1;
  int threads_at_start = -1;
  bool closed = false;  // close_and_report() ran

  PeerLink& link(int peer) { return links[static_cast<size_t>(peer)]; }
  PeerLink& link(int peer, int channel) {
    return channel == 0 ? link(peer)
                        : channel_links[static_cast<size_t>((channel - 1) * nranks + peer)];
  }
  int channels() const { return 1 + static_cast<int>(channel_links.size()) / std::max(nranks, 1); }
  // Every link to a peer, of every channel (for setup and teardown loops).
  std::vector<PeerLink*> all_links() {
    std::vector<PeerLink*> all;
    for (auto* v : {&links, &channel_links})
      for (auto& l : *v)
        if (l.peer >= 0) all.push_back(&l);
    return all;
  }
  bool has_tcp(int peer) const { return static_cast<bool>(links[static_cast<size_t>(peer)].tcp); }

  // "[rank R] ..." on stderr unless --quiet.
  void progress(const std::string& line) const;

  // Wrong data of any kind: counted (exit code 2); the first few are printed on stderr as
  // "VERIFY rank R: <detail>".
  void report_failure(const std::string& detail);
  // A received message that is not what was sent (wrong size, or wrong bytes when m is set).
  void report_mismatch(const char* transport, int sender, uint64_t index, size_t expected_size,
                       size_t got_size, const std::optional<Mismatch>& m);
  // Checks a received message against the pattern; false (and a report) on a mismatch.
  bool verify_message(const char* transport, const void* buf, size_t got_size, size_t expected_size,
                      int sender, uint64_t index);
};

// Mappings (Arena's, GIN's windows) are whole pages.
inline constexpr uint64_t kPage = 4096;
inline uint64_t whole_pages(uint64_t bytes) {
  return (bytes + kPage - 1) / kPage * kPage;
}

// Memory the patterns move data in: page-aligned, pre-faulted (page faults are not what the
// bench measures), registered with regMr(NCCL_PTR_HOST) once on every send and recv comm.
class Arena {
 public:
  Arena(Context& ctx, size_t bytes);
  ~Arena();  // unmaps only; release() deregisters (a failing plugin call must not run in a
             // destructor while an error is already propagating)
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void release();
  uint8_t* data() const { return base_; }
  size_t size() const { return size_; }
  void* send_mh(int peer, int channel = 0) const { return mh(send_mh_, peer, channel); }
  void* recv_mh(int peer, int channel = 0) const { return mh(recv_mh_, peer, channel); }

 private:
  void* mh(const std::vector<void*>& v, int peer, int channel) const {
    return v[static_cast<size_t>(channel * ctx_.nranks + peer)];
  }
  Context& ctx_;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::vector<void*> send_mh_;  // index channel * nranks + peer
  std::vector<void*> recv_mh_;
};

// Loads and initializes the plugin, joins the rendezvous, connects every pair (plugin and TCP).
void setup(Context& ctx);
// closeSend/closeRecv on every comm, then finalize. In --duration mode: close_and_report().
void teardown(Context& ctx);
// --duration (fault-injection) mode, also after a failure, as NCCL's abort does: closes every
// comm still open (listen, send, receive), finalizes, drops the rendezvous and prints
// "CLOSE rank R: ..." with how long that took and the open file descriptors and threads before
// init and after. A close that fails is printed; with `after_failure` false it is then thrown
// (exit 3). Under LeakSanitizer a failed run also runs a leak check (_exit skips the one at exit).
// Runs once.
void close_and_report(Context& ctx, bool after_failure);

}  // namespace mesh::bench
