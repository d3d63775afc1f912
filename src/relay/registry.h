// SPDX-License-Identifier: Apache-2.0
// The relay agent's local socket (docs/relay.md, threat model): plugin processes of this host
// register their handshake listeners with the host's relay agent, and the agent, as the last hop
// of a relayed connection, connects only to a registered listener for a request that proves it
// holds that listener's handle (relay/request.h).
//
// The socket is an abstract Unix socket (so it belongs to the network namespace, like the relay
// port), SOCK_SEQPACKET (one message per registration). local_socket_name() names it. Each end
// checks the other with SO_PEERCRED: the agent admits only processes of its own user, root, or
// a configured group; a plugin process registers only with an agent of its own user or root
// (a squatter of another user that bound the name first learns nothing). A registration carries
// the handshake port, the listener tag and the derived key (relay_listener_key), never the
// handle's nonce: the agent can let a relayed socket in, but cannot forge the hello.
//
// Messages (big-endian): [0] u8 op (1 register, 2 unregister) [1] u8 0 [2] u16 port
// [4] 8 B listener tag [12] 32 B key (op 1; zero for op 2): kRegistrationSize bytes.
// Route query (a standby asks the agent where a connection to a non-adjacent peer goes first,
// to open its RDMA QPs on that cable): [0] u8 3 [1] u8 address count N (1..8) [2] u16 stream
// [4] u32 query id [8] u32 age of the connect in ms [12] N x {u32 address, u8 prefix}, zero
// padding: kRouteQuerySize bytes. The agent answers [0] u8 4 [1] u8 status (HopStatus)
// [2] u16 cables [4] u32 query id [8] u32 local address [12] u8 its prefix [13] u8 0
// [14] u16 relay port [16] u32 first relay's address [20] u16 why length W [22] u16 path length
// P [24] W bytes why, P bytes path (each at most kMaxRouteText).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "relay/request.h"
#include "relay/sock_diag.h"

namespace mesh::relay {

inline constexpr size_t kRegistrationSize = 44;
inline constexpr size_t kMaxRegistrationsPerClient = 65536;
inline constexpr size_t kRouteQuerySize = 52;
inline constexpr size_t kRouteAnswerHeader = 24;
inline constexpr size_t kMaxRouteText = 1024;

struct RouteQuery {
  uint32_t id = 0;
  uint16_t stream = 0;
  uint32_t age_ms = 0;
  std::vector<Ipv4Prefix> dest;  // 1..8
};
struct RouteAnswer {
  uint32_t id = 0;
  uint8_t status = 0;  // HopStatus
  uint16_t cables = 0;
  Ipv4Prefix local{};
  uint16_t port = 0;
  uint32_t peer = 0;
  std::string why, path;
};
void encode_route_query(const RouteQuery& q, uint8_t* out);
bool decode_route_query(const uint8_t* in, size_t len, RouteQuery* out, std::string* why);
std::vector<uint8_t> encode_route_answer(const RouteAnswer& a);
bool decode_route_answer(const uint8_t* in, size_t len, RouteAnswer* out, std::string* why);

// "\0nccl-mesh-relay.<port>" for the host's agent; with a scope id (an agent of its own per
// process or emulated host: AgentConfig::bind_interface_addresses) ".<id in hex>" is appended.
std::string local_socket_name(uint16_t port, uint32_t scope_id);

struct Registration {
  bool add = true;
  uint16_t port = 0;
  ListenerTag tag{};
  Sha256 key{};
};

void encode_registration(const Registration& r, uint8_t* out);
bool decode_registration(const uint8_t* in, size_t len, Registration* out, std::string* why);

// Whether a peer of the local socket with these credentials may use it: `self_uid` (the other
// end's own user), root, or the group `allowed_gid` (-1: none).
bool peer_allowed(uid_t peer_uid, gid_t peer_gid, uid_t self_uid, long allowed_gid);

// The check of a registration's port (docs/relay.md, "Registration"). The agent connects to a
// registered listener at one of its own addresses, so without a check a process allowed on the
// local socket could register any port (sshd's) and expose that service to relay requests
// under a key of its choice. A process of user `uid` may register `port` only where a TCP
// listener of that same user is: at one of `addrs` (host byte order) at least, some IPv4
// listener on `port` is reached (bound to that address or to 0.0.0.0) and every one reached
// there belongs to `uid`. IPv4 only: the agent connects over IPv4, and the kernel refuses a
// dual-stack [::] listener beside an IPv4 one on the same port (SO_REUSEPORT groups share one
// uid), so a listener of another user cannot hide behind the registrant's.
enum class ListenerCheck {
  kOk,
  kNone,       // no TCP listener on the port at all
  kElsewhere,  // listeners on the port, none at `addrs` nor 0.0.0.0
  kOtherUser,  // a listener reached at `addrs` belongs to another user
  kUnreadable  // the socket table cannot be read (no tcp_diag: accepted unchecked, one WARN)
};
// Where a registration's listener may be (host byte order): the agent's addresses and every
// other non-loopback address of the host. Another plugin process of the host can use other
// cables (or the other port half of a cable) than the process that runs the agent, and it
// registers every listen comm whether or not one is ever relayed to it; no relay connects to a
// loopback address (the agent's own, in tests, are its interfaces). Where the agent connects is
// checked per request, at that one address, at the last hop.
std::vector<uint32_t> registration_addresses(const std::vector<uint32_t>& agent,
                                             const std::vector<uint32_t>& host);
// Over `listeners` (the LISTEN sockets on `port`); *why says what is there when not kOk.
ListenerCheck check_listener(const std::vector<TcpSocketInfo>& listeners, uint16_t port, uid_t uid,
                             const std::vector<uint32_t>& addrs, std::string* why);
// check_listener over this network namespace's socket table, read now (one bounded dump).
ListenerCheck check_listener_now(uint16_t port, uid_t uid, const std::vector<uint32_t>& addrs,
                                 std::string* why);

// The agent's table of registered listeners (agent thread only).
class Registry {
 public:
  struct Entry {
    uint16_t port = 0;
    Sha256 key{};
    int client = -1;  // the local socket it came by (dropped with it)
  };
  // False (with *why) for a tag already registered by another client, or a client at its cap.
  bool add(int client, const Registration& r, std::string* why);
  void remove(int client, const ListenerTag& tag);
  void drop_client(int client);
  const Entry* find(const ListenerTag& tag) const;
  size_t size() const { return entries_.size(); }

 private:
  std::map<ListenerTag, Entry> entries_;
  std::map<int, size_t> per_client_;
};

// Proofs seen within the window (replays are refused), bounded: the oldest go first.
class ReplayCache {
 public:
  explicit ReplayCache(size_t cap = 1 << 17) : cap_(cap) {}
  // False when `proof` was seen before (a replay); records it until now + ttl.
  bool insert(const std::array<uint8_t, kProofSize>& proof, int64_t now_ms, int64_t ttl_ms);

 private:
  size_t cap_;
  std::map<std::array<uint8_t, kProofSize>, int64_t> seen_;
  std::multimap<int64_t, std::array<uint8_t, kProofSize>> by_expiry_;
};

}  // namespace mesh::relay
