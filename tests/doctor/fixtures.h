// SPDX-License-Identifier: Apache-2.0
// Helpers of the doctor tests: temporary directory trees and synthetic inventories.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tools/doctor/checks.h"
#include "tools/doctor/inventory.h"
#include "tools/doctor/model.h"
#include "util/ipv4.h"

namespace mesh::doctor::testing {

// A directory under $TMPDIR removed with everything in it at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "doctor-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `content` (plus a newline, as sysfs does) to <root>/<rel>, creating directories.
  void write(const std::string& rel, const std::string& content) const {
    const std::filesystem::path p = std::filesystem::path(path_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content << "\n";
  }
  void mkdir(const std::string& rel) const {
    std::filesystem::create_directories(std::filesystem::path(path_) / rel);
  }

 private:
  std::string path_;
};

inline Ipv4Prefix prefix(const std::string& text) {
  const size_t slash = text.find('/');
  Ipv4Prefix p;
  p.addr = *parse_ipv4(text.substr(0, slash));
  p.prefix =
      slash == std::string::npos ? 32 : static_cast<uint8_t>(std::stoi(text.substr(slash + 1)));
  return p;
}

inline uint32_t addr(const std::string& text) {
  return *parse_ipv4(text);
}

// An up interface; `pci` empty makes it virtual.
inline topology::Interface iface(const std::string& name, const std::string& cidr, int mtu = 9000,
                                 int speed = -1, const std::string& pci = "") {
  topology::Interface i;
  i.name = name;
  i.addr = prefix(cidr);
  i.up = true;
  i.loopback = name == "lo";
  i.mtu = mtu;
  i.speed_mbps = speed;
  i.pci_path = pci;
  i.numa_node = pci.empty() ? -1 : 0;
  return i;
}

inline Netdev netdev(const std::string& name, const std::string& operstate = "up",
                     const std::string& pci = "", const std::string& driver = "") {
  Netdev n;
  n.name = name;
  n.operstate = operstate;
  n.loopback = name == "lo";
  n.mtu = 9000;
  n.pci_path = pci;
  n.driver = driver;
  return n;
}

// Adds a netdev entry for every interface that has none (the inventory gather would).
inline void add_netdevs(Inventory& inv) {
  for (const topology::Interface& i : inv.interfaces) {
    if (inv.netdev(i.name) == nullptr) inv.netdevs.push_back(netdev(i.name, "up", i.pci_path));
  }
}

// Findings of one check id.
inline Findings only(const Findings& all, const std::string& id) {
  Findings out;
  for (const Finding& f : all) {
    if (f.check == id) out.push_back(f);
  }
  return out;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace mesh::doctor::testing
