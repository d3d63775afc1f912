// SPDX-License-Identifier: Apache-2.0
// nccl-mesh-doctor: inventory and checks of one host of a switchless mesh (default), the mesh
// map and cable probes (--peers/--hosts [--probe]), or the probe responder (--serve).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <iostream>

#include "tools/doctor/checks.h"
#include "tools/doctor/gather.h"
#include "tools/doctor/model.h"
#include "tools/doctor/options.h"
#include "tools/doctor/peers.h"
#include "tools/doctor/probe_client.h"
#include "tools/doctor/probe_server.h"
#include "tools/doctor/report.h"

namespace mesh::doctor {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int) {
  g_stop = true;
}

// What --serve reports about this host: every IPv4 interface, marked used or not.
PeerInfo self_info(const Inventory& inv, const Model& m) {
  PeerInfo info;
  info.host = inv.hostname;
  for (const InterfaceView& v : m.interfaces) {
    const topology::Interface& itf = inv.interfaces[v.interface];
    info.interfaces.push_back({itf.name, itf.addr, itf.mtu, itf.speed_mbps, v.used});
  }
  info.shared_settings = shared_settings_of(inv.settings);
  return info;
}

int run_serve(const Options& opts, const Model& m) {
  if (m.selection.used.empty()) {
    std::cerr << "nccl-mesh-doctor --serve: the plugin would use no interface here, so there is "
                 "no mesh address to listen on (run nccl-mesh-doctor without --serve)\n";
    return 2;
  }
  probe::ProbeServer server;
  std::string error;
  // Each INFO reads the host afresh: an MTU, speed or link changed while serving is reported as
  // it is now, not as it was at start.
  const GatherOptions where{opts.sysfs_root, opts.proc_root, opts.dev_root};
  auto fresh = [where] {
    const Inventory now = gather_inventory(where);
    return self_info(now, build_model(now));
  };
  if (!server.start(m.selection.used, opts.port, probe::ProbeServer::SelfInfo(fresh), &std::cout,
                    &error)) {
    std::cerr << "nccl-mesh-doctor --serve: " << error << "\n";
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  for (const std::string& e : server.endpoints()) std::cout << "serving probes on " << e << "\n";
  if (opts.serve_for > 0) {
    std::cout << "for " << opts.serve_for << " s" << std::endl;
  } else {
    std::cout << "until SIGINT/SIGTERM" << std::endl;
  }
  const size_t served = server.run(opts.serve_for, g_stop);
  std::cout << "served " << served << " connection(s)" << std::endl;
  return 0;
}

bool read_peers(const Options& opts, std::vector<PeerSpec>* peers) {
  std::string error;
  bool ok = false;
  if (!opts.peers.empty()) {
    ok = parse_peer_list(opts.peers, peers, &error);
  } else {
    std::ifstream f(opts.hosts_file);
    ok = f && parse_hosts(f, peers, &error);
    if (!f) error = "cannot read " + opts.hosts_file;
  }
  if (!ok) std::cerr << "nccl-mesh-doctor: " << error << "\n";
  return ok;
}

void probe_all(const Options& opts, const Inventory& inv, std::vector<PeerRoute>* routes) {
  probe::ProbeParams params;
  params.port = opts.port;
  params.seconds = opts.probe_seconds;
  params.streams = opts.streams > 0 ? opts.streams : static_cast<int>(inv.settings.tcp_streams);
  const bool progress = isatty(STDERR_FILENO) != 0;
  for (PeerRoute& r : *routes) {
    if (r.self) continue;
    for (const topology::Rail& rail : r.rails) {
      if (progress) {
        std::cerr << "probing " << r.peer.name << " via " << format_ipv4(rail.local.addr) << " -> "
                  << format_ipv4(rail.peer_addr) << " ...\n";
      }
      r.probes.push_back(probe::probe_cable(rail.local.addr, rail.peer_addr, params));
    }
  }
}

int run(int argc, char** argv) {
  Options opts;
  if (const auto rc = parse_options(argc, argv, &opts)) return *rc;
  if (opts.settings) {
    print_settings_table(std::cout);
    return 0;
  }
  const Inventory inv = gather_inventory({opts.sysfs_root, opts.proc_root, opts.dev_root});
  const Model model = build_model(inv);
  if (opts.serve) return run_serve(opts, model);

  Findings findings = run_local_checks(inv, model);
  std::vector<PeerRoute> routes;
  std::vector<PeerLink> links;
  if (opts.peer_mode()) {
    std::vector<PeerSpec> peers;
    if (!read_peers(opts, &peers)) return 2;
    routes = map_peers(peers, inv, model);
    if (opts.probe) probe_all(opts, inv, &routes);
    const Findings cables = check_peer_cables(inv, model, routes);
    const Findings probes = check_peer_probes(inv, model, routes);
    findings.insert(findings.end(), cables.begin(), cables.end());
    findings.insert(findings.end(), probes.begin(), probes.end());
    links = links_between_peers(routes);
  }

  const Report report{inv, model, findings, opts.peer_mode(), opts.probe, routes, links};
  if (opts.json) {
    std::cout << to_json(report).dump(2) << "\n";
  } else {
    print_text(std::cout, report);
  }
  return exit_code(findings);
}

}  // namespace
}  // namespace mesh::doctor

int main(int argc, char** argv) {
  return mesh::doctor::run(argc, argv);
}
