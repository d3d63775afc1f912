// SPDX-License-Identifier: Apache-2.0
#include "handshake/agreement.h"

#include "util/byte_order.h"

namespace mesh::handshake {
namespace {

constexpr uint64_t kMaxMinBytes = uint64_t{1} << 40;  // NCCL_MESH_TUNER_MIN_BYTES's range

const char* mode_name(TunerMode m) {
  return SettingEnum<TunerMode>::names[static_cast<size_t>(m)];
}

}  // namespace

Agreement local_agreement() {
  const Settings& s = settings();
  return {s.tuner, static_cast<uint64_t>(s.tuner_min_bytes)};
}

void encode_agreement(const Agreement& a, uint8_t* out) {
  put_u64(out, a.tuner_min_bytes & ((uint64_t{1} << 56) - 1));
  out[0] = static_cast<uint8_t>(a.tuner);
}

bool decode_agreement(const uint8_t* in, Agreement* out, std::string* why) {
  if (in[0] >= SettingEnum<TunerMode>::names.size()) {
    *why = "unknown tuner mode " + std::to_string(in[0]);
    return false;
  }
  uint8_t bytes[8];
  for (size_t i = 0; i < 8; ++i) bytes[i] = i == 0 ? 0 : in[i];
  const uint64_t min_bytes = get_u64(bytes);
  if (min_bytes > kMaxMinBytes) {
    *why = "tuner threshold " + std::to_string(min_bytes) + " beyond 2^40";
    return false;
  }
  out->tuner = static_cast<TunerMode>(in[0]);
  out->tuner_min_bytes = min_bytes;
  return true;
}

std::string describe_disagreement(const Agreement& mine, const std::string& mine_host,
                                  const Agreement& theirs, const std::string& their_host) {
  std::string out;
  const auto clause = [&](const char* env, const std::string& a, const std::string& b) {
    out += (out.empty() ? "" : "; ") + std::string(env) + " is '" + a + "' on " + mine_host +
           " but '" + b + "' on " + their_host;
  };
  if (mine.tuner != theirs.tuner)
    clause("NCCL_MESH_TUNER", mode_name(mine.tuner), mode_name(theirs.tuner));
  if (mine.tuner_min_bytes != theirs.tuner_min_bytes)
    clause("NCCL_MESH_TUNER_MIN_BYTES", std::to_string(mine.tuner_min_bytes),
           std::to_string(theirs.tuner_min_bytes));
  return out;
}

}  // namespace mesh::handshake
