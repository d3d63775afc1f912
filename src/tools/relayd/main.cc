// SPDX-License-Identifier: Apache-2.0
// nccl-mesh-relayd: the host's relay agent as a service of its own (docs/relay.md, "The host's
// relay service"). It runs the same relay::Agent a plugin process would, in the foreground,
// with no arguments: beacons, routes, relayed sockets and (where RDMA works) the RDMA relay
// forwarder, independent of any rank. Plugin processes of the host find it on the agent's local
// socket (relay/registry.h) and register their listeners there; while it runs, they stand by
// (their own agents cannot bind the port), so no plugin process's exit touches relayed
// connections, and a host without ranks relays.
//
// Settings: the plugin's NCCL_MESH_* environment (NCCL_MESH_IFNAME, NCCL_MESH_RELAY_PORT,
// _KEY_FILE, _GROUP, ...), and an optional file of KEY=VALUE lines (--config, default
// /etc/nccl-mesh/relayd.conf; the environment wins). Logs like the plugin, on stderr
// (NCCL_DEBUG=INFO for the INFO lines). SIGTERM or SIGINT stop it (exit 0).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifdef MESH_HAVE_SD_NOTIFY
#include <systemd/sd-daemon.h>
#endif

#include "config_file.h"
#include "relay/agent.h"
#include "relay/agent_config.h"
#include "topology/emulated_mesh.h"
#include "topology/ifname_filter.h"
#include "topology/selection.h"
#include "transport/rdma/options_from_settings.h"
#include "util/log.h"
#include "util/settings.h"

namespace {

const char* kUsage =
    "Usage: nccl-mesh-relayd [--config FILE]\n"
    "The relay agent of nccl-mesh as a host service: relays connections between hosts of a\n"
    "switchless mesh that share no cable, for every plugin process of this host (network\n"
    "namespace) and for hosts that run no rank. Runs in the foreground; stop with SIGTERM.\n"
    "\n"
    "Options:\n"
    "  --config FILE   NCCL_MESH_* settings, one KEY=VALUE a line (default\n"
    "                  /etc/nccl-mesh/relayd.conf if it exists; the environment wins)\n"
    "  --help          this text\n"
    "  --version       the version\n"
    "\n"
    "Settings (environment or the file): NCCL_MESH_IFNAME (the mesh interfaces),\n"
    "NCCL_MESH_RELAY_PORT, NCCL_MESH_RELAY_KEY_FILE, NCCL_MESH_RELAY_GROUP, NCCL_MESH_RELAY_VIA,\n"
    "NCCL_MESH_CONNECT_TIMEOUT_MS, NCCL_MESH_TCP_USER_TIMEOUT_MS, NCCL_DEBUG=INFO; see\n"
    "nccl-mesh-relayd(8) and docs/relay.md.\n";

void notify(const char* state) {
#ifdef MESH_HAVE_SD_NOTIFY
  sd_notify(0, state);
#else
  (void)state;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mesh;
  std::string config = relayd::kDefaultConfigFile;
  bool config_required = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--version") {
      std::printf("nccl-mesh-relayd %s\n", MESH_RELAYD_VERSION);
      return 0;
    }
    if (a == "--config" && i + 1 < argc) {
      config = argv[++i];
      config_required = true;
      continue;
    }
    std::fprintf(stderr, "nccl-mesh-relayd: unknown argument %s\n%s", a.c_str(), kUsage);
    return 2;
  }
  std::vector<std::string> applied;
  std::string why;
  if (!relayd::apply_config_file(config, config_required, &applied, &why)) {
    std::fprintf(stderr, "nccl-mesh-relayd: %s\n", why.c_str());
    return 1;
  }
  const Settings& s = settings();
  if (s.relay == 0) {
    std::fprintf(stderr, "nccl-mesh-relayd: NCCL_MESH_RELAY=0: nothing to do\n");
    return 1;
  }
  std::vector<topology::Interface> all;
  if (!topology::discover_mesh_interfaces(s.emulate, &all, &why)) {
    std::fprintf(stderr, "nccl-mesh-relayd: %s\n", why.c_str());
    return 1;
  }
  const topology::Selection sel =
      topology::select_interfaces(all, topology::IfnameFilter::parse(s.ifname));
  if (sel.used.empty()) {
    std::fprintf(stderr,
                 "nccl-mesh-relayd: no usable mesh interface with NCCL_MESH_IFNAME='%s' (%s; set "
                 "NCCL_MESH_IFNAME to the mesh interfaces' names; in the config file a '#' starts "
                 "a comment only at the beginning of a line)\n",
                 s.ifname.c_str(),
                 s.ifname.empty() ? "unset: the default choice of cables" : "as set");
    return 1;
  }
  // Relayed sockets of every rank of the host: as many descriptors as allowed (the agent sizes
  // its pair cap from the soft limit, relay::pairs_for_fd_limit).
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  // Every thread (the agent's, the forwarder's) inherits this mask: the signals go to sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  relay::AgentConfig cfg;
  if (!relay::agent_config_from_settings(s, sel.used, &cfg, &why)) {
    std::fprintf(stderr, "nccl-mesh-relayd: %s\n", why.c_str());
    return 1;
  }
  // The RDMA relay: as in the plugin, the agent hands requests with the RDMA flag to the
  // forwarder once the destination's agent admitted them.
  rdma::RdmaTransport rdma;
  rdma.bind(sel.used, rdma::rdma_options(s));
  rdma::RelayForwarder forwarder(rdma);
  if (rdma.any_usable()) {
    forwarder.configure(rdma::forwarder_options(s));
    cfg.rdma_forward = [&forwarder](relay::RdmaHandoff& h, std::string* w) {
      return forwarder.adopt(h, w);
    };
    cfg.rdma_usable_at = [&rdma](uint32_t local) { return rdma.usable_address(local); };
  }
  relay::Agent agent;
  if (!agent.start(cfg, &why)) {
    std::fprintf(stderr, "nccl-mesh-relayd: cannot start the relay agent: %s\n", why.c_str());
    return 1;
  }
  std::string itfs;
  for (const auto& i : sel.used)
    itfs += (itfs.empty() ? "" : ", ") + i.name + " " + format_prefix(i.addr);
  // Printed whatever NCCL_DEBUG says: the one line an operator looks for in the journal.
  std::fprintf(stderr,
               "nccl-mesh-relayd %s: relay agent on port %u of %s (%s; local socket @%s; %s; "
               "RDMA relay %s)%s\n",
               MESH_RELAYD_VERSION, static_cast<unsigned>(cfg.port), itfs.c_str(),
               agent.is_agent() ? "bound"
                                : "standing by: another process holds the port, taking over "
                                  "when it goes",
               relay::agent_socket_name(cfg).c_str() + 1,
               cfg.cluster_key.empty() ? "no cluster key" : "cluster key set",
               cfg.rdma_forward ? "on" : "off (no usable RDMA port)",
               applied.empty() ? "" : (" settings from " + config).c_str());
  std::fflush(stderr);
  notify("READY=1");
  int sig = 0;
  sigwait(&stop_signals, &sig);
  notify("STOPPING=1");
  MESH_INFO(NCCL_INIT, "nccl-mesh-relayd: %s: stopping", strsignal(sig));
  agent.stop();
  forwarder.stop();
  rdma.close_all();
  return 0;
}
