// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/probe_protocol.h"

#include <nlohmann/json.hpp>

#include "util/byte_order.h"

namespace mesh::doctor::probe {
namespace {

using nlohmann::json;

json interface_json(const PeerInterface& i) {
  return {{"name", i.name}, {"addr", format_ipv4(i.addr.addr)}, {"prefix", i.addr.prefix},
          {"mtu", i.mtu},   {"speed_mbps", i.speed_mbps},       {"used", i.used}};
}

PeerInterface interface_from(const json& j) {
  PeerInterface i;
  i.name = j.at("name").get<std::string>();
  const auto addr = parse_ipv4(j.at("addr").get<std::string>());
  if (!addr) throw std::runtime_error("bad address " + j.at("addr").get<std::string>());
  const int prefix = j.at("prefix").get<int>();
  if (prefix < 0 || prefix > 32) throw std::runtime_error("bad prefix");
  i.addr = {*addr, static_cast<uint8_t>(prefix)};
  i.mtu = j.value("mtu", -1);
  i.speed_mbps = j.value("speed_mbps", -1);
  i.used = j.value("used", false);
  return i;
}

}  // namespace

std::array<uint8_t, kRequestSize> encode_request(const Request& r) {
  std::array<uint8_t, kRequestSize> b{};
  put_u32(b.data(), kMagic);
  b[4] = kVersion;
  b[5] = static_cast<uint8_t>(r.op);
  put_u16(b.data() + 6, 0);
  put_u32(b.data() + 8, r.arg);
  return b;
}

std::optional<Request> decode_request(const uint8_t* p, std::string* why) {
  if (get_u32(p) != kMagic) {
    *why = "bad magic (not a nccl-mesh-doctor probe)";
    return std::nullopt;
  }
  if (p[4] != kVersion) {
    *why = "unsupported probe version " + std::to_string(p[4]);
    return std::nullopt;
  }
  if (get_u16(p + 6) != 0) {
    *why = "reserved field is not zero";
    return std::nullopt;
  }
  const uint8_t op = p[5];
  if (op < static_cast<uint8_t>(Op::kInfo) || op > static_cast<uint8_t>(Op::kSource)) {
    *why = "unknown operation " + std::to_string(op);
    return std::nullopt;
  }
  return Request{static_cast<Op>(op), get_u32(p + 8)};
}

std::string encode_info(const PeerInfo& info) {
  json j = {{"host", info.host}, {"interfaces", json::array()}};
  for (const PeerInterface& i : info.interfaces) j["interfaces"].push_back(interface_json(i));
  if (info.arrived_on) j["arrived_on"] = interface_json(*info.arrived_on);
  if (!info.shared_settings.empty()) j["shared_settings"] = info.shared_settings;
  return j.dump();
}

std::optional<PeerInfo> decode_info(const std::string& text, std::string* why) {
  try {
    const json j = json::parse(text);
    PeerInfo info;
    info.host = j.value("host", "");
    for (const json& i : j.at("interfaces")) info.interfaces.push_back(interface_from(i));
    if (j.contains("arrived_on")) info.arrived_on = interface_from(j.at("arrived_on"));
    if (j.contains("shared_settings")) {
      for (const auto& [name, value] : j.at("shared_settings").items()) {
        if (info.shared_settings.size() >= 64) throw std::runtime_error("too many shared settings");
        info.shared_settings[name] = value.get<std::string>();
      }
    }
    return info;
  } catch (const std::exception& e) {
    *why = std::string("malformed INFO reply: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace mesh::doctor::probe
