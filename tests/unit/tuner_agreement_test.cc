// SPDX-License-Identifier: Apache-2.0
// Property: every member rank of a communicator makes the same tuner decision, for every
// collective and size, whatever its host's wiring. NCCL has no agreement step: ranks that differ
// hang (a 3-rank split of a 4-line did, on NCCL 2.28.9, when the tuner counted cables).
//
// The worlds: lines, rings, full and irregular meshes of 3..16 hosts (some hosts with a docker0
// bridge or a management NIC, the extras a real host has). The communicators: every run of
// consecutive ranks, and split-like subsets (every other rank, reversed, drop-first, drop-last,
// a shrink after one host's cables went down). Each member builds its context exactly as NCCL's
// tuner init does in its process (make_tuner_context with its own host's interface list) and
// applies it to the cost table NCCL gives every rank alike.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "nccl/tuner.h"
#include "plugin/tuner_context.h"
#include "plugin/tuner_policy.h"

namespace mesh {
namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;

struct World {
  std::string name;
  size_t hosts = 0;
  std::vector<std::pair<size_t, size_t>> cables;
  std::vector<bool> extras;  // host has docker0 and a management NIC
};

World line(size_t n) {
  World w{"line" + std::to_string(n), n, {}, std::vector<bool>(n, false)};
  for (size_t i = 0; i + 1 < n; ++i) w.cables.emplace_back(i, i + 1);
  return w;
}

World ring(size_t n) {
  World w = line(n);
  w.name = "ring" + std::to_string(n);
  w.cables.emplace_back(n - 1, 0);
  return w;
}

World full(size_t n) {
  World w{"full" + std::to_string(n), n, {}, std::vector<bool>(n, false)};
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) w.cables.emplace_back(i, j);
  return w;
}

// A connected graph with random chords and a dual cable; hosts with extras alternate.
World irregular(size_t n, uint32_t seed) {
  World w = line(n);
  w.name = "irregular" + std::to_string(n) + "s" + std::to_string(seed);
  std::mt19937 rng(seed);
  for (size_t k = 0; k < n; ++k) {
    const size_t a = rng() % n, b = rng() % n;
    if (a != b) w.cables.emplace_back(std::min(a, b), std::max(a, b));
  }
  w.cables.push_back(w.cables.front());  // two cables between hosts 0 and 1
  for (size_t i = 0; i < n; i += 2) w.extras[i] = true;
  return w;
}

// Host h's interfaces: one /30 per cable end (cables[k] gets 10.(k/64).(k%64*4)/30), down when
// the cable is cut, plus docker0 and mgmt0 on hosts with extras.
std::vector<topology::Interface> interfaces_of(const World& w, size_t h,
                                               const std::vector<bool>& cable_up) {
  std::vector<topology::Interface> out;
  for (size_t k = 0; k < w.cables.size(); ++k) {
    const auto [a, b] = w.cables[k];
    if (a != h && b != h) continue;
    topology::Interface itf;
    itf.name = "cable" + std::to_string(k);
    const uint32_t base = (10u << 24) | (static_cast<uint32_t>(k / 64) << 8) << 8 |
                          static_cast<uint32_t>((k % 64) * 4);
    itf.addr = {base + (a == h ? 1u : 2u), 30};
    itf.up = cable_up[k];
    itf.speed_mbps = 200000;
    out.push_back(itf);
  }
  if (w.extras[h]) {
    topology::Interface docker;
    docker.name = "docker0";
    docker.addr = {(172u << 24) | (17u << 16) | 1u, 16};
    docker.up = true;
    topology::Interface mgmt;
    mgmt.name = "mgmt0";
    mgmt.addr = {(192u << 24) | (168u << 16) | (1u << 8) | static_cast<uint32_t>(10 + h), 24};
    mgmt.up = true;
    out.push_back(docker);
    out.push_back(mgmt);
  }
  return out;
}

struct Comm {
  std::string name;
  std::vector<size_t> members;  // hosts, in rank order
  std::vector<bool> cable_up;
};

std::vector<Comm> communicators(const World& w) {
  std::vector<Comm> out;
  const std::vector<bool> all_up(w.cables.size(), true);
  for (size_t first = 0; first < w.hosts; ++first) {
    for (size_t last = first + 1; last < w.hosts; ++last) {
      Comm c{"ranks " + std::to_string(first) + ".." + std::to_string(last), {}, all_up};
      for (size_t h = first; h <= last; ++h) c.members.push_back(h);
      out.push_back(c);
    }
  }
  Comm every_other{"every other rank", {}, all_up};
  for (size_t h = 0; h < w.hosts; h += 2) every_other.members.push_back(h);
  out.push_back(every_other);
  Comm reversed{"reversed", {}, all_up};
  for (size_t h = w.hosts; h-- > 0;) reversed.members.push_back(h);
  out.push_back(reversed);
  Comm drop_first{"drop first", {}, all_up}, drop_last{"drop last", {}, all_up};
  for (size_t h = 1; h < w.hosts; ++h) drop_first.members.push_back(h);
  for (size_t h = 0; h + 1 < w.hosts; ++h) drop_last.members.push_back(h);
  out.push_back(drop_first);
  out.push_back(drop_last);
  // ncclCommShrink after the middle host died: its cables are down at its neighbours.
  const size_t dead = w.hosts / 2;
  Comm shrink{"shrink without host " + std::to_string(dead), {}, all_up};
  for (size_t k = 0; k < w.cables.size(); ++k)
    if (w.cables[k].first == dead || w.cables[k].second == dead) shrink.cable_up[k] = false;
  for (size_t h = 0; h < w.hosts; ++h)
    if (h != dead) shrink.members.push_back(h);
  out.push_back(shrink);
  return out;
}

// A table as NCCL fills it for one collective and size: identical on every rank (the same
// min-reduced graphs). Tree and PAT cheaper than Ring, so a steer shows.
std::vector<float> nccl_table(uint64_t n_bytes) {
  std::vector<float> t(kAlgos * kProtos, static_cast<float>(NCCL_ALGO_PROTO_IGNORE));
  const float size_cost = static_cast<float>(n_bytes) / 1e4f;
  for (int p = 0; p < kProtos; ++p) {
    t[NCCL_ALGO_TREE * kProtos + p] = 10.0f + static_cast<float>(p) + size_cost;
    t[NCCL_ALGO_RING * kProtos + p] = 20.0f + static_cast<float>(p) + size_cost;
    t[NCCL_ALGO_PAT * kProtos + p] = 5.0f + static_cast<float>(p) + size_cost;
  }
  return t;
}

// One rank's decisions for every collective and size, as a string ("R" Ring, "T" Tree ...).
std::string decisions_of(const TunerConfig& config, const TunerInit& init,
                         const std::vector<topology::Interface>& local) {
  TunerContext* ctx = make_tuner_context(config, init, local, "");
  std::string out;
  for (int coll = 0; coll <= ncclFuncAlltoAll; ++coll) {
    for (uint64_t size = 1; size <= (uint64_t{1} << 30); size <<= 3) {
      std::vector<float> t = nccl_table(size);
      steer_cost_table(ctx->state, coll, size, t.data(), kAlgos, kProtos);
      out += static_cast<char>('0' + picked_algorithm(t.data(), kAlgos, kProtos));
    }
  }
  destroy_tuner_context(ctx);
  return out;
}

std::vector<World> worlds() {
  std::vector<World> w;
  for (size_t n = 3; n <= 16; ++n) {
    w.push_back(line(n));
    w.push_back(ring(n));
    if (n <= 8) w.push_back(full(n));
    w.push_back(irregular(n, static_cast<uint32_t>(n)));
  }
  World ring_extras = ring(4);
  ring_extras.name = "ring4 with docker0 and mgmt0 on host 0";
  ring_extras.extras[0] = true;
  w.push_back(ring_extras);
  return w;
}

TEST(TunerAgreement, EveryMemberDecidesAlike) {
  size_t comms = 0, steered = 0;
  for (const TunerConfig& config :
       {TunerConfig{TunerMode::kAuto, 128 * 1024}, TunerConfig{TunerMode::kAuto, 0},
        TunerConfig{TunerMode::kRing, 1 << 20}, TunerConfig{TunerMode::kOff, 0}}) {
    for (const World& w : worlds()) {
      for (const Comm& c : communicators(w)) {
        const TunerInit init{0x1234, c.members.size(), c.members.size()};
        const std::string first =
            decisions_of(config, init, interfaces_of(w, c.members[0], c.cable_up));
        for (size_t i = 1; i < c.members.size(); ++i) {
          const std::string mine =
              decisions_of(config, init, interfaces_of(w, c.members[i], c.cable_up));
          ASSERT_EQ(mine, first) << w.name << ", communicator " << c.name << ": host "
                                 << c.members[i] << " decides unlike host " << c.members[0]
                                 << " (mode " << static_cast<int>(config.mode) << ")";
        }
        ++comms;
        if (first.find('0' + NCCL_ALGO_RING) != std::string::npos) ++steered;
      }
    }
  }
  std::printf("%zu communicators checked, %zu of them steered somewhere\n", comms, steered);
  EXPECT_GT(steered, 0u) << "the property must also hold where the tuner acts";
}

TEST(TunerAgreement, RingOnlyTracksWhatNcclPicked) {
  TunerContext* ctx = make_tuner_context({TunerMode::kAuto, 1024}, {0x77, 4, 4}, {}, "");
  EXPECT_FALSE(tuner_ring_only(0x77)) << "nothing picked yet";
  std::vector<float> t = nccl_table(1 << 20);
  ASSERT_TRUE(steer_cost_table(ctx->state, ncclFuncAllReduce, 1 << 20, t.data(), kAlgos, kProtos));
  note_picked_algorithm(ctx, picked_algorithm(t.data(), kAlgos, kProtos));
  EXPECT_TRUE(tuner_ring_only(0x77));
  EXPECT_FALSE(tuner_ring_only(0x78)) << "unknown communicator";
  std::vector<float> small = nccl_table(16);
  ASSERT_FALSE(steer_cost_table(ctx->state, ncclFuncAllReduce, 16, small.data(), kAlgos, kProtos));
  note_picked_algorithm(ctx, picked_algorithm(small.data(), kAlgos, kProtos));
  EXPECT_FALSE(tuner_ring_only(0x77)) << "PAT ran too: relayed connections are expected";
  destroy_tuner_context(ctx);
  EXPECT_FALSE(tuner_ring_only(0x77)) << "finalized";
}

}  // namespace
}  // namespace mesh
