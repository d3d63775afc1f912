// SPDX-License-Identifier: Apache-2.0
// Every NCCL_MESH_* setting in one typed table: name, type, default, meaning. The README's
// settings table is generated from the same list (nccl-mesh-doctor --settings prints it).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mesh {

// NCCL_MESH_TRANSPORT: which transports a connection may use.
enum class TransportMode {
  kAuto,  // RDMA where both ends of the cable have a usable RDMA port, else TCP
  kRdma,  // RDMA or a WARN and an error, never a silent fallback
  kTcp,   // never RDMA
};

// NCCL_MESH_TUNER: what the tuner NCCL loads from this library does (plugin/tuner_policy.h).
enum class TunerMode {
  kAuto,  // steer ring-able collectives to Ring when this host looks like part of a partial mesh
  kRing,  // always steer them to Ring (a partial mesh the automatic test cannot see)
  kOff,   // never touch NCCL's choice
};

// NCCL_MESH_RELAY_SCOPE: which processes bind the relay agent's port (docs/relay.md).
enum class RelayScope {
  kHost,     // one agent per host (network namespace) on 0.0.0.0; the other processes stand by
  kProcess,  // every process is its own agent, bound to its interfaces' addresses (tests that
             // put several "hosts" into one namespace)
};

// The text values of an enum setting, indexed by the enum's value: specialised once per enum,
// so the table below parses it and documents its range (no string compares at the call sites).
template <typename E>
struct SettingEnum;
template <>
struct SettingEnum<TransportMode> {
  static constexpr std::array<const char*, 3> names = {"auto", "rdma", "tcp"};
};
template <>
struct SettingEnum<TunerMode> {
  static constexpr std::array<const char*, 3> names = {"auto", "ring", "off"};
};
template <>
struct SettingEnum<RelayScope> {
  static constexpr std::array<const char*, 2> names = {"host", "process"};
};

// X(type, field, ENV_NAME, default, min, max, help); min/max bound integer settings (0, 0 for
// the others). A type is std::string, int64_t, or an enum with a SettingEnum specialisation.
#define MESH_SETTINGS(X)                                                                          \
  X(std::string, ifname, "NCCL_MESH_IFNAME", "", 0, 0,                                            \
    "Interfaces to use, NCCL_SOCKET_IFNAME syntax: prefixes, ^ to exclude, = for exact names. "   \
    "Default: every up interface that looks like a cable: not the default route's, not a "        \
    "bridge, tunnel, VPN or container interface, not a subnet where several hosts answer "        \
    "(loopback only if nothing else is left). A list of names takes exactly those, whatever "     \
    "they look like; a ^ list removes names from the default choice.")                            \
  X(int64_t, connect_timeout_ms, "NCCL_MESH_CONNECT_TIMEOUT_MS", 30000, 100, 3600000,             \
    "How long connect() keeps trying to reach a peer's handshake service before failing.")        \
  X(int64_t, tcp_streams, "NCCL_MESH_TCP_STREAMS", 4, 1, 64,                                      \
    "Data sockets per connection (parallel TCP streams); rounded up to a multiple of the "        \
    "number of rails (cables) to the peer.")                                                      \
  X(int64_t, tcp_io_threads, "NCCL_MESH_TCP_IO_THREADS", -1, -1, 64,                              \
    "I/O threads per process that move TCP data sockets' bytes, shared by all connections. "      \
    "0: NCCL's progress thread moves them itself (no hand-off; best when one core fills the "     \
    "link). -1: a quarter of the usable cores, at most 8, no more than fit this process's "       \
    "share of them beside NCCL's proxy thread (other ranks on the same cores counted), and 0 "    \
    "below 8 cores or 2 threads.")                                                                \
  X(int64_t, tcp_min_chunk, "NCCL_MESH_TCP_MIN_CHUNK", 131072, 4096, 1073741824,                  \
    "Smallest slice of a message given to one data socket; smaller messages use fewer sockets.")  \
  X(int64_t, tcp_inline_bytes, "NCCL_MESH_TCP_INLINE_BYTES", 65536, 0, 16777216,                  \
    "Messages up to this size travel inline on the control socket with their header, "            \
    "progressed by NCCL's own thread (lowest latency, no thread hand-off).")                      \
  X(int64_t, tcp_eager_bytes, "NCCL_MESH_TCP_EAGER_BYTES", 65536, 0, 1048576,                    \
    "Bytes (headers included) a sender may write before the receiver has posted the matching "    \
    "receive, instead of waiting for its clear-to-send (saves a one-way trip per small message). "\
    "Keep it below the receivers' socket buffer (tcp_rmem); 0: every message waits.")             \
  X(int64_t, tcp_eager_window, "NCCL_MESH_TCP_EAGER_WINDOW", 1048576, 0, 16777216,                \
    "Bytes (headers included) beyond NCCL_MESH_TCP_EAGER_BYTES a sender may write before the "    \
    "clear-to-send when the receiver's kernel has already advertised TCP window room for them "   \
    "on every socket they use (direct connections only; needs NCCL_MESH_TCP_EAGER_BYTES > 0); "   \
    "four times that in messages under half of it. The sender then asks for the clear-to-sends "  \
    "it needs. 0: only the budget, and one clear-to-send per receive.")                           \
  X(int64_t, tcp_user_timeout_ms, "NCCL_MESH_TCP_USER_TIMEOUT_MS", 20000, 0, 3600000,             \
    "TCP_USER_TIMEOUT and keepalive budget: a peer or cable that stops acknowledging for this "   \
    "long turns into an error on the connection (0 = kernel defaults, many minutes).")            \
  X(int64_t, max_pending_handshakes, "NCCL_MESH_MAX_PENDING_HANDSHAKES", 256, 1, 65536,           \
    "Unauthenticated incoming handshake sockets held at once; further ones are closed.")          \
  X(int64_t, handshake_port, "NCCL_MESH_HANDSHAKE_PORT", 0, 0, 65535,                             \
    "TCP port of the handshake service (0 = any free port; set it for firewalls).")               \
  X(TransportMode, transport, "NCCL_MESH_TRANSPORT", TransportMode::kAuto, 0, 0,                  \
    "auto: RDMA to a peer when both ends of the cable have a usable RDMA port, else TCP; "        \
    "rdma: RDMA or fail with a WARN (no silent fallback); tcp: never RDMA.")                      \
  X(int64_t, gid_index, "NCCL_MESH_GID_INDEX", -1, -1, 1023,                                      \
    "RoCE GID index to use on every port (-1 = the RoCE v2 entry of the interface's IPv4 "        \
    "address, read from sysfs).")                                                                 \
  X(int64_t, qps_per_conn, "NCCL_MESH_QPS_PER_CONN", 2, 1, 8,                                     \
    "RDMA queue pairs per connection, rounded up to a multiple of the cables to the peer (at "    \
    "most 8); each message is split over all of them.")                                           \
  X(int64_t, ib_timeout, "NCCL_MESH_IB_TIMEOUT", 20, 1, 31,                                       \
    "RDMA ACK timeout exponent: 4.096 us * 2^N per retry (20 = about 4 s).")                      \
  X(int64_t, ib_retry_cnt, "NCCL_MESH_IB_RETRY_CNT", 6, 0, 6,                                     \
    "RDMA transport retries before a QP errors (at most 6: 7 means retry forever on some "        \
    "providers, which would turn a dead peer into a hang).")                                      \
  X(int64_t, test_host_as_gpu, "NCCL_MESH_TEST_HOST_AS_GPU", 0, 0, 1,                             \
    "Testing only: on RDMA devices without a GPU driver, advertise NCCL_PTR_CUDA so tests can "   \
    "drive the GPU paths with host memory registered as NCCL_PTR_CUDA (never touched by the "     \
    "CPU, flushed as GPU memory). Logs a WARN when on.")                                          \
  X(TunerMode, tuner, "NCCL_MESH_TUNER", TunerMode::kAuto, 0, 0,                                  \
    "Tuner NCCL loads from this library: auto steers AllReduce, AllGather, ReduceScatter, "       \
    "Broadcast and Reduce of NCCL_MESH_TUNER_MIN_BYTES or more to Ring when the communicator "    \
    "spans 3 or more nodes, ring does so from 2 nodes, off never touches NCCL's choice. Must be " \
    "the same on every host: a connection between hosts that differ fails with a WARN.")          \
  X(int64_t, tuner_min_bytes, "NCCL_MESH_TUNER_MIN_BYTES", 131072, 0, 1099511627776,              \
    "Smallest collective (bytes) the tuner steers to Ring; smaller ones keep NCCL's choice "      \
    "(Tree/PAT, whose non-neighbour pairs are relayed through the hosts between). Must be the "   \
    "same on every host, as NCCL_MESH_TUNER.")                                                    \
  X(int64_t, relay, "NCCL_MESH_RELAY", 1, 0, 1,                                                   \
    "1: a connection to a peer without a common subnet is relayed through neighbours (shortest "  \
    "paths of the cable graph, found at run time; RDMA through the relay hosts where every "      \
    "cable of the route has RDMA, else TCP; docs/relay.md); 0: it fails.")                        \
  X(int64_t, relay_rdma_slots, "NCCL_MESH_RELAY_RDMA_SLOTS", 8, 1, 64,                            \
    "RDMA relay: staging slots per relayed connection on the relay host (chunks in flight "       \
    "between the two cables; memory per connection = slots x slot bytes).")                       \
  X(int64_t, relay_rdma_slot_bytes, "NCCL_MESH_RELAY_RDMA_SLOT_BYTES", 524288, 4096, 16777216,    \
    "RDMA relay: bytes per staging slot (a multiple of 4096): the chunk size a relayed "          \
    "connection's messages are cut into.")                                                        \
  X(int64_t, relay_rdma_drain_ms, "NCCL_MESH_RELAY_RDMA_DRAIN_MS", 60000, 0, 3600000,             \
    "RDMA relay: after the sender closed its comm, how long the relay host keeps delivering the " \
    "complete messages it holds (waiting for the destination's receives); then it closes and "    \
    "the destination's receives fail.")                                                           \
  X(int64_t, relay_port, "NCCL_MESH_RELAY_PORT", 18515, 1, 65535,                                 \
    "TCP and UDP port of the host's relay agent (beacons, relayed sockets); the same on every "   \
    "host.")                                                                                      \
  X(std::string, relay_via, "NCCL_MESH_RELAY_VIA", "", 0, 0,                                      \
    "Pin relayed routes: <dest-address>/<prefix>=<neighbour-address>,... sends connections to "   \
    "that subnet through that neighbour first (default: every equal-cost shortest path).")        \
  X(RelayScope, relay_scope, "NCCL_MESH_RELAY_SCOPE", RelayScope::kHost, 0, 0,                    \
    "host: one relay agent per host, on its mesh interfaces' addresses (the first process to "    \
    "bind the port); process: every process is its own agent (tests that put several hosts "      \
    "into one network namespace).")                                                               \
  X(std::string, relay_key_file, "NCCL_MESH_RELAY_KEY_FILE", "", 0, 0,                            \
    "Cluster key for the relay agents' beacons: a file (mode 0600 or stricter, this user's or "   \
    "root's) with at least 16 bytes, the same on every host; every beacon entry is then "         \
    "authenticated (docs/relay.md, threat model). Empty: no key.")                                \
  X(std::string, relay_group, "NCCL_MESH_RELAY_GROUP", "", 0, 0,                                  \
    "The host's relay agent (nccl-mesh-relayd) also admits plugin processes whose primary group " \
    "is this (name or number) on its local socket; always admitted: its own user and root.")      \
  X(std::string, emulate, "NCCL_MESH_EMULATE", "", 0, 0,                                          \
    "Test and try-out: emulate this rank's place in a ring or line on one host, ring:N:R or "     \
    "line:N:R; the plugin then uses only loopback addresses 127.77.x.y/30, one per cable.")     \
  X(std::string, test_gin_cuda_library, "NCCL_MESH_TEST_GIN_CUDA_LIBRARY", "", 0, 0,             \
    "Testing only: the CUDA driver library GIN loads instead of libcuda.so.1 (the GIN suite's "   \
    "host-memory stand-in drives the GPU-memory paths without a GPU).")

struct Settings {
#define MESH_SETTINGS_FIELD(type, field, env, def, lo, hi, help) type field = def;
  MESH_SETTINGS(MESH_SETTINGS_FIELD)
#undef MESH_SETTINGS_FIELD
  // The variables whose value was malformed (their field kept its default). Settings that must
  // agree across hosts (the tuner's) refuse to run on a default nobody asked for.
  std::vector<std::string> malformed;
};

struct SettingInfo {
  const char* env;
  const char* type;  // "string", "integer" or "enum"
  std::string default_value;
  std::string range;  // "100..3600000"; an enum's values "auto, rdma, tcp"; empty for strings
  const char* help;
};

// Parses one setting's text; false with *why on a malformed or out-of-range value.
bool parse_setting(const std::string& env, const std::string& text, Settings* s, std::string* why);

// Reads every NCCL_MESH_* variable from `getenv`. Malformed values keep the default, add a line
// to *warnings (the caller logs them: a typo must not silently change behaviour unseen) and
// their variable's name to Settings::malformed.
Settings load_settings(const char* (*getenv_fn)(const char*), std::vector<std::string>* warnings);

// The process-wide settings, read once on first use.
const Settings& settings();

std::vector<SettingInfo> setting_table();

}  // namespace mesh
