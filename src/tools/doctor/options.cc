// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/options.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "tools/doctor/probe_protocol.h"

#ifndef MESH_DOCTOR_VERSION
#define MESH_DOCTOR_VERSION "dev"
#endif

namespace mesh::doctor {
namespace {

constexpr const char* kDescription =
    "nccl-mesh-doctor - check a host of a switchless NCCL mesh before NCCL runs on it\n"
    "\n"
    "Shows what the nccl-mesh plugin would see and do on this host under the current\n"
    "NCCL_* / NCCL_MESH_* environment: every interface (address, MTU, speed, state, PCI\n"
    "function, NUMA node, RDMA port, GID index and why), which interfaces the plugin uses\n"
    "and why the others are skipped, and the NCCL devices it exposes. Then it runs checks,\n"
    "each with a verdict (ok, warn, fail) and a concrete fix. It only reads the machine;\n"
    "it changes nothing.\n";

constexpr const char* kFooter = R"(CHECKS
  mesh-interfaces  the plugin has at least one usable (up, IPv4) interface
  ifname           NCCL_MESH_IFNAME matches existing interfaces
  ipv4-address     RDMA, named or up physical interfaces without an IPv4 address
  shared-subnet    two interfaces on one subnet (rails to one peer, e.g. the two PCIe
                   halves of a DGX Spark port, or asymmetric routing)
  mtu              jumbo frames on fast links; with --probe, both ends of every cable
  rp-filter        strict reverse-path filtering (net.ipv4.conf.{all,IF}.rp_filter=1)
  arp-halves       arp_ignore=1, arp_announce=2 on interfaces that share a subnet
  accept-local     needed only when both ends of a cable are in one host
  rdma-core        libibverbs.so.1 loadable, RDMA devices and /dev/infiniband/uverbs*
  roce-gid         a RoCE v2 GID (::ffff:a.b.c.d) for every RDMA port's IPv4 address;
                   NCCL_MESH_GID_INDEX overrides the choice; IB ports use their LID
  gpudirect        nvidia_peermem loaded, or dma-buf (not verifiable without a GPU)
  nccl-env         NCCL_NET / NCCL_NET_PLUGIN / NCCL_IB_HCA that would bypass the plugin
  mesh-settings    NCCL_MESH_* values the plugin would reject, unknown NCCL_MESH_* names
  gin              GIN/RMA tables the plugin exports, GPU or host memory (libcuda.so.1),
                   the GPUs' VMM/GPUDirect attribute, transport, NCCL version (libnccl.so.2)
                   and the NCCL_* settings that turn GIN off; warnings only
  peer-cable       (peer mode) a local interface on each peer's subnet
  peer-probe       (--probe) TCP round trip and MB/s per cable, against the peer's --serve
  netmask          (--probe) the same prefix length on both ends of every cable
  shared-settings  (--probe) NCCL_MESH_TUNER and NCCL_MESH_TUNER_MIN_BYTES equal here and on
                   every peer (else the plugin refuses connections between the two hosts)

PEER MODE
  --peers 198.18.1.2,198.18.2.3 (one peer per address) or --hosts FILE (lines "ADDR" or
  "NAME ADDR[,ADDR...]", '#' comments; the line of this host is recognised and skipped)
  prints, for each peer address, the local interface (cable) that reaches it, as the
  plugin's connect() would choose, and the peers without a cable. With --probe, each cable
  is measured against `nccl-mesh-doctor --serve` on the peer: round trip in us, MB/s each
  way, the peer's MTU and prefix on that cable, and the peer's interface list, from which
  the cables between the peers are shown too.

SERVE MODE
  --serve listens on --port of every address the plugin would use on this host (never on
  other addresses), answers INFO/PING and sinks or sources data for at most 10 s per
  request. It runs until SIGINT/SIGTERM or --serve-for seconds.

EXIT STATUS
  0  no check failed (warnings allowed)      1  at least one check failed
  2  usage error, unreadable hosts file, or --serve could not listen

OUTPUT
  A report for people by default; --json prints one document with the same content
  (interfaces, netdevs, rdma_ports with GID tables, selection, devices, checks, summary,
  exit_code, and in peer mode peers and links_between_peers).

EXAMPLES
  nccl-mesh-doctor                                   # this host
  nccl-mesh-doctor --json | jq '.checks[] | select(.verdict != "ok")'
  nccl-mesh-doctor --serve &                         # on every node, then on one node:
  nccl-mesh-doctor --hosts mesh.txt --probe
  NCCL_MESH_IFNAME=lo nccl-mesh-doctor --peers 127.0.0.1 --probe   # single-host smoke test)";

}  // namespace

std::optional<int> parse_options(int argc, char** argv, Options* opts) {
  CLI::App app(kDescription, "nccl-mesh-doctor");
  app.footer(kFooter);
  app.get_formatter()->column_width(30);
  app.set_version_flag("--version", MESH_DOCTOR_VERSION);

  app.add_flag("--json", opts->json, "Print one JSON document instead of the report");
  app.add_flag("--settings", opts->settings,
               "Print the NCCL_MESH_* settings table (markdown, as in the README) and exit");

  auto* peers = app.add_option("--peers", opts->peers,
                               "Peer mode: comma-separated peer addresses, one peer each")
                    ->group("Peer mode");
  auto* hosts = app.add_option("--hosts", opts->hosts_file,
                               "Peer mode: hosts file, lines 'ADDR' or 'NAME ADDR[,ADDR]'")
                    ->check(CLI::ExistingFile)
                    ->group("Peer mode");
  peers->excludes(hosts);
  app.add_flag("--probe", opts->probe,
               "Measure every cable against `nccl-mesh-doctor --serve` on the peers")
      ->group("Peer mode");
  opts->port = probe::kDefaultPort;
  app.add_option("--port", opts->port, "TCP port of --serve (with --serve, 0 picks a free one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535))
      ->group("Peer mode");
  app.add_option("--probe-time", opts->probe_seconds, "Seconds per direction and cable (max 10)")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 10.0))
      ->group("Peer mode");
  app.add_option("--streams", opts->streams,
                 "TCP streams per direction (default: NCCL_MESH_TCP_STREAMS)")
      ->check(CLI::Range(1, 64))
      ->group("Peer mode");

  auto* serve = app.add_flag("--serve", opts->serve,
                             "Answer probes on the mesh addresses until SIGINT/SIGTERM")
                    ->group("Serve mode");
  app.add_option("--serve-for", opts->serve_for, "Stop serving after this many seconds")
      ->check(CLI::PositiveNumber)
      ->group("Serve mode");
  serve->excludes(peers)->excludes(hosts);

  app.add_option("--sysfs-root", opts->sysfs_root, "Read sysfs from here")
      ->capture_default_str()
      ->group("Testing");
  app.add_option("--proc-root", opts->proc_root, "Read procfs from here")
      ->capture_default_str()
      ->group("Testing");
  app.add_option("--dev-root", opts->dev_root, "Look for infiniband/uverbs* here")
      ->capture_default_str()
      ->group("Testing");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (opts->probe && !opts->peer_mode()) {
    std::cerr << "--probe needs --peers or --hosts\n";
    return 2;
  }
  if (opts->probe && opts->port == 0) {
    std::cerr << "--probe needs the port of the peers' --serve (--port 1..65535)\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace mesh::doctor
