// SPDX-License-Identifier: Apache-2.0
// IfnameFilter: NCCL_SOCKET_IFNAME syntax for NCCL_MESH_IFNAME.
#include "topology/ifname_filter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mesh::topology {
namespace {

using Names = std::vector<std::string>;

TEST(IfnameFilter, EmptySpecAcceptsEverything) {
  const IfnameFilter f = IfnameFilter::parse("");
  EXPECT_TRUE(f.empty());
  EXPECT_FALSE(f.exclude());
  EXPECT_FALSE(f.exact());
  for (const char* name : {"lo", "eth0", "docker0", "enp1s0f0np0", ""}) {
    EXPECT_TRUE(f.accepts(name)) << name;
  }
}

TEST(IfnameFilter, SinglePrefix) {
  const IfnameFilter f = IfnameFilter::parse("eth");
  EXPECT_FALSE(f.empty());
  EXPECT_FALSE(f.exclude());
  EXPECT_FALSE(f.exact());
  EXPECT_EQ(f.names(), (Names{"eth"}));
  EXPECT_TRUE(f.accepts("eth"));
  EXPECT_TRUE(f.accepts("eth0"));
  EXPECT_TRUE(f.accepts("eth10"));
  EXPECT_TRUE(f.accepts("eth0.100"));
  EXPECT_FALSE(f.accepts("veth0"));  // prefix, not substring
  EXPECT_FALSE(f.accepts("et"));     // shorter than the prefix
  EXPECT_FALSE(f.accepts("ETH0"));   // case-sensitive
  EXPECT_FALSE(f.accepts("lo"));
}

TEST(IfnameFilter, PrefixList) {
  const IfnameFilter f = IfnameFilter::parse("enp1,enp2");
  EXPECT_EQ(f.names(), (Names{"enp1", "enp2"}));
  EXPECT_TRUE(f.accepts("enp1s0f0np0"));
  EXPECT_TRUE(f.accepts("enp2s0f1"));
  EXPECT_FALSE(f.accepts("enp3s0"));
  EXPECT_FALSE(f.accepts("enp"));
  EXPECT_FALSE(f.accepts("lo"));
}

TEST(IfnameFilter, CaretExcludesPrefixes) {
  const IfnameFilter f = IfnameFilter::parse("^docker,virbr");
  EXPECT_TRUE(f.exclude());
  EXPECT_FALSE(f.exact());
  EXPECT_EQ(f.names(), (Names{"docker", "virbr"}));
  EXPECT_FALSE(f.accepts("docker0"));
  EXPECT_FALSE(f.accepts("virbr0"));
  EXPECT_FALSE(f.accepts("virbr0-nic"));
  EXPECT_TRUE(f.accepts("eth0"));
  EXPECT_TRUE(f.accepts("lo"));
  EXPECT_TRUE(f.accepts("vir"));  // shorter than "virbr": not excluded
}

TEST(IfnameFilter, CaretPrefixDoesNotExcludeLongerNamesContainingIt) {
  const IfnameFilter f = IfnameFilter::parse("^eth");
  EXPECT_FALSE(f.accepts("eth0"));
  EXPECT_TRUE(f.accepts("veth0"));
}

TEST(IfnameFilter, EqualsMeansExactNames) {
  const IfnameFilter f = IfnameFilter::parse("=eth0");
  EXPECT_FALSE(f.exclude());
  EXPECT_TRUE(f.exact());
  EXPECT_EQ(f.names(), (Names{"eth0"}));
  EXPECT_TRUE(f.accepts("eth0"));
  EXPECT_FALSE(f.accepts("eth01"));
  EXPECT_FALSE(f.accepts("eth0.100"));
  EXPECT_FALSE(f.accepts("eth"));
  EXPECT_FALSE(f.accepts("eth1"));
}

TEST(IfnameFilter, EqualsListAppliesToEveryEntry) {
  const IfnameFilter f = IfnameFilter::parse("=eth0,eth1");
  EXPECT_TRUE(f.accepts("eth0"));
  EXPECT_TRUE(f.accepts("eth1"));
  EXPECT_FALSE(f.accepts("eth10"));
  EXPECT_FALSE(f.accepts("eth2"));
}

TEST(IfnameFilter, CaretEqualsExcludesExactNames) {
  const IfnameFilter f = IfnameFilter::parse("^=lo");
  EXPECT_TRUE(f.exclude());
  EXPECT_TRUE(f.exact());
  EXPECT_EQ(f.names(), (Names{"lo"}));
  EXPECT_FALSE(f.accepts("lo"));
  EXPECT_TRUE(f.accepts("lo0"));  // exact: only "lo" itself is excluded
  EXPECT_TRUE(f.accepts("eth0"));
}

TEST(IfnameFilter, CaretEqualsWithList) {
  const IfnameFilter f = IfnameFilter::parse("^=eth0,docker0");
  EXPECT_FALSE(f.accepts("eth0"));
  EXPECT_FALSE(f.accepts("docker0"));
  EXPECT_TRUE(f.accepts("eth01"));
  EXPECT_TRUE(f.accepts("docker"));
  EXPECT_TRUE(f.accepts("eth1"));
}

TEST(IfnameFilter, CaretAfterEqualsIsPartOfTheName) {
  // '=' is only recognised after any '^'; "=^lo" is an exact match for the name "^lo".
  const IfnameFilter f = IfnameFilter::parse("=^lo");
  EXPECT_FALSE(f.exclude());
  EXPECT_TRUE(f.exact());
  EXPECT_EQ(f.names(), (Names{"^lo"}));
  EXPECT_FALSE(f.accepts("lo"));
  EXPECT_TRUE(f.accepts("^lo"));
}

TEST(IfnameFilter, SpacesAroundEntriesAreTrimmed) {
  const IfnameFilter f = IfnameFilter::parse(" eth0 ,  eth1  ");
  EXPECT_EQ(f.names(), (Names{"eth0", "eth1"}));
  EXPECT_TRUE(f.accepts("eth0"));
  EXPECT_TRUE(f.accepts("eth1"));
  EXPECT_FALSE(f.accepts(" eth0"));

  const IfnameFilter g = IfnameFilter::parse("^ docker , virbr");
  EXPECT_TRUE(g.exclude());
  EXPECT_EQ(g.names(), (Names{"docker", "virbr"}));
  EXPECT_FALSE(g.accepts("docker0"));

  const IfnameFilter h = IfnameFilter::parse("= eth0");
  EXPECT_TRUE(h.exact());
  EXPECT_EQ(h.names(), (Names{"eth0"}));
  EXPECT_TRUE(h.accepts("eth0"));
}

TEST(IfnameFilter, EmptyEntriesAreSkipped) {
  const IfnameFilter f = IfnameFilter::parse("eth0,,eth1,");
  EXPECT_EQ(f.names(), (Names{"eth0", "eth1"}));
  const IfnameFilter g = IfnameFilter::parse(",eth0, ,");
  EXPECT_EQ(g.names(), (Names{"eth0"}));
  EXPECT_FALSE(g.accepts("eth1"));
}

TEST(IfnameFilter, OnlySeparatorsOrMarkersIsAnEmptyFilter) {
  for (const char* spec : {",", ",,,", " , ", "^", "=", "^=", "^,", "  "}) {
    const IfnameFilter f = IfnameFilter::parse(spec);
    EXPECT_TRUE(f.empty()) << "'" << spec << "'";
    EXPECT_TRUE(f.names().empty()) << "'" << spec << "'";
    EXPECT_TRUE(f.accepts("eth0")) << "'" << spec << "'";
    EXPECT_TRUE(f.accepts("lo")) << "'" << spec << "'";
  }
}

}  // namespace
}  // namespace mesh::topology
