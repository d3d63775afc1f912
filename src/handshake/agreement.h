// SPDX-License-Identifier: Apache-2.0
// The settings every host of a job must share because they change what NCCL does: the tuner's
// mode and threshold (plugin/tuner_policy.h). NCCL asks each rank's tuner separately; hosts
// whose settings differ would pick different algorithms and hang NCCL later. So the values
// travel in every handle (the listener's) and every hello (the connector's): a listener refuses
// a hello whose values differ from its own (HelloReply::kSettingsDiffer) and fails that listen's
// accept, the connector fails its connect, and both log one WARN naming the setting, both values
// and both hosts. A hang becomes an error at the first connection between the two hosts.
//
// Wire form (kAgreementSize bytes, big-endian): u8 NCCL_MESH_TUNER (TunerMode), then
// NCCL_MESH_TUNER_MIN_BYTES as a 56-bit integer (its range ends at 2^40).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/settings.h"

namespace mesh::handshake {

inline constexpr size_t kAgreementSize = 8;

// Defaults: the settings' defaults, so that a hello built without thought agrees with a host
// that sets nothing.
struct Agreement {
  TunerMode tuner = Settings{}.tuner;
  uint64_t tuner_min_bytes = static_cast<uint64_t>(Settings{}.tuner_min_bytes);
  bool operator==(const Agreement&) const = default;
};

// This process's values (settings()).
Agreement local_agreement();

void encode_agreement(const Agreement& a, uint8_t* out);
// False with *why for an unknown mode or a threshold beyond the setting's range.
bool decode_agreement(const uint8_t* in, Agreement* out, std::string* why);

// "" when the two agree; otherwise one clause per differing setting:
// "NCCL_MESH_TUNER is 'ring' on <mine_host> but 'auto' on <their_host>".
std::string describe_disagreement(const Agreement& mine, const std::string& mine_host,
                                  const Agreement& theirs, const std::string& their_host);

}  // namespace mesh::handshake
