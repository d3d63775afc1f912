// SPDX-License-Identifier: Apache-2.0
// parse_setting, load_settings and setting_table: every NCCL_MESH_* setting.
#include "util/settings.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mesh {
namespace {

// Parses `text` into a default Settings; returns the error text ("" on success).
std::string parse_error(const std::string& env, const std::string& text) {
  Settings s;
  std::string why;
  if (parse_setting(env, text, &s, &why)) return "";
  EXPECT_FALSE(why.empty()) << env << "=" << text;
  return why.empty() ? "(no reason given)" : why;
}

TEST(Settings, Defaults) {
  const Settings s;
  EXPECT_EQ(s.ifname, "");
  EXPECT_EQ(s.connect_timeout_ms, 30000);
  EXPECT_EQ(s.tcp_streams, 4);
  EXPECT_EQ(s.tcp_min_chunk, 131072);
  EXPECT_EQ(s.tcp_inline_bytes, 65536);
  EXPECT_EQ(s.tcp_user_timeout_ms, 20000);
  EXPECT_EQ(s.max_pending_handshakes, 256);
  EXPECT_EQ(s.handshake_port, 0);
}

TEST(ParseSetting, IfnameTakesAnyText) {
  for (const char* text : {"", "eth0", "^docker,lo", "^=lo", " enp1 , enp2 "}) {
    Settings s;
    s.ifname = "previous";
    std::string why;
    ASSERT_TRUE(parse_setting("NCCL_MESH_IFNAME", text, &s, &why)) << why;
    EXPECT_EQ(s.ifname, text);
  }
}

// One integer setting: its valid values (text -> value) and rejected texts.
struct IntCase {
  const char* env;
  int64_t Settings::*field;
  std::vector<std::pair<std::string, int64_t>> valid;
  std::vector<std::string> out_of_range;
};

const std::vector<IntCase>& int_cases() {
  static const std::vector<IntCase> cases = {
      {"NCCL_MESH_CONNECT_TIMEOUT_MS",
       &Settings::connect_timeout_ms,
       {{"100", 100},
        {"30000", 30000},
        {"3600000", 3600000},
        {"1k", 1024},
        {"1M", 1048576},
        {"3M", 3145728}},
       {"99", "0", "-1", "3600001", "4M", "1G", "-100"}},
      {"NCCL_MESH_TCP_STREAMS",
       &Settings::tcp_streams,
       {{"1", 1}, {"4", 4}, {"64", 64}, {"16", 16}},
       {"0", "65", "-4", "1K", "1000"}},
      {"NCCL_MESH_TCP_MIN_CHUNK",
       &Settings::tcp_min_chunk,
       {{"4096", 4096},
        {"4K", 4096},
        {"128k", 131072},
        {"1M", 1048576},
        {"1G", 1073741824},
        {"1024M", 1073741824},
        {"1073741824", 1073741824}},
       {"4095", "3K", "0", "-4K", "1073741825", "1025M", "2G", "1048577K"}},
      {"NCCL_MESH_TCP_INLINE_BYTES",
       &Settings::tcp_inline_bytes,
       {{"0", 0},
        {"65536", 65536},
        {"64K", 65536},
        {"16M", 16777216},
        {"16384K", 16777216},
        {"16777216", 16777216},
        {"0K", 0}},
       {"-1", "16777217", "17M", "16385K", "1G", "-1K"}},
      {"NCCL_MESH_TCP_EAGER_BYTES",
       &Settings::tcp_eager_bytes,
       {{"0", 0}, {"65536", 65536}, {"64K", 65536}, {"1M", 1048576}},
       {"-1", "1048577", "2M", "1025K"}},
      {"NCCL_MESH_TCP_EAGER_WINDOW",
       &Settings::tcp_eager_window,
       {{"0", 0}, {"1M", 1048576}, {"16M", 16777216}},
       {"-1", "16777217", "17M"}},
      {"NCCL_MESH_TCP_USER_TIMEOUT_MS",
       &Settings::tcp_user_timeout_ms,
       {{"0", 0}, {"20000", 20000}, {"3600000", 3600000}},
       {"-1", "3600001", "4M"}},
      {"NCCL_MESH_MAX_PENDING_HANDSHAKES",
       &Settings::max_pending_handshakes,
       {{"1", 1}, {"256", 256}, {"65536", 65536}, {"64K", 65536}},
       {"0", "65537", "-1", "65K", "1M"}},
      {"NCCL_MESH_HANDSHAKE_PORT",
       &Settings::handshake_port,
       {{"0", 0}, {"1", 1}, {"29500", 29500}, {"65535", 65535}},
       {"-1", "65536", "64K", "70000", "1M"}},
  };
  return cases;
}

TEST(ParseSetting, IntegerValidValuesAndSuffixes) {
  for (const IntCase& c : int_cases()) {
    for (const auto& [text, value] : c.valid) {
      Settings s;
      std::string why;
      ASSERT_TRUE(parse_setting(c.env, text, &s, &why)) << c.env << "=" << text << ": " << why;
      EXPECT_EQ(s.*c.field, value) << c.env << "=" << text;
    }
  }
}

TEST(ParseSetting, IntegerOutOfRangeIsRejectedAndKeepsTheValue) {
  for (const IntCase& c : int_cases()) {
    for (const std::string& text : c.out_of_range) {
      Settings s;
      const int64_t before = s.*c.field;
      std::string why;
      EXPECT_FALSE(parse_setting(c.env, text, &s, &why)) << c.env << "=" << text;
      EXPECT_NE(why.find("outside"), std::string::npos) << c.env << "=" << text << ": " << why;
      EXPECT_EQ(s.*c.field, before) << c.env << "=" << text;
    }
  }
}

TEST(ParseSetting, IntegerGarbageIsRejected) {
  for (const IntCase& c : int_cases()) {
    for (const char* text : {"abc", "K", "M", "-", "x12", "four", "1.5"}) {
      const std::string why = parse_error(c.env, text);
      EXPECT_FALSE(why.empty()) << c.env << "=" << text << " was accepted";
    }
    EXPECT_NE(parse_error(c.env, "").find("empty"), std::string::npos) << c.env;
    EXPECT_NE(parse_error(c.env, "abc").find("not an integer"), std::string::npos) << c.env;
  }
}

TEST(ParseSetting, IntegerTrailingCharactersAreRejected) {
  for (const IntCase& c : int_cases()) {
    for (const char* text : {"12ms", "1KB", "1Ki", "4 ", "4\t", "1T", "1KK", "64,", "1e3", "2x"}) {
      const std::string why = parse_error(c.env, text);
      EXPECT_NE(why.find("trailing"), std::string::npos)
          << c.env << "=" << text << ": '" << why << "'";
    }
  }
}

TEST(ParseSetting, HugeValuesDoNotOverflow) {
  for (const char* text :
       {"99999999999999999999", "9223372036854775807", "9223372036854775807K", "9007199254740993G",
        "-9223372036854775808", "-9223372036854775808G", "8796093022208G" /* 2^43 G = 2^73 */}) {
    Settings s;
    std::string why;
    EXPECT_FALSE(parse_setting("NCCL_MESH_TCP_MIN_CHUNK", text, &s, &why)) << text;
    EXPECT_EQ(s.tcp_min_chunk, 131072) << text;
  }
}

TEST(ParseSetting, UnknownNameIsRejected) {
  for (const char* env :
       {"NCCL_MESH_BOGUS", "nccl_mesh_ifname", "NCCL_MESH_TCP_STREAM", "NCCL_SOCKET_IFNAME", ""}) {
    Settings s;
    std::string why;
    EXPECT_FALSE(parse_setting(env, "4", &s, &why)) << env;
    EXPECT_NE(why.find("unknown setting"), std::string::npos) << why;
    EXPECT_EQ(s.tcp_streams, 4);
  }
}

// A fake environment for load_settings (a plain function pointer: no captures).
std::map<std::string, std::string>& fake_env() {
  static std::map<std::string, std::string> env;
  return env;
}
std::vector<std::string>& queried() {
  static std::vector<std::string> names;
  return names;
}
const char* fake_getenv(const char* name) {
  queried().push_back(name);
  const auto it = fake_env().find(name);
  return it == fake_env().end() ? nullptr : it->second.c_str();
}

class LoadSettings : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_env().clear();
    queried().clear();
  }
  void TearDown() override { fake_env().clear(); }
};

TEST_F(LoadSettings, EmptyEnvironmentGivesDefaults) {
  std::vector<std::string> warnings;
  const Settings s = load_settings(fake_getenv, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(s.ifname, "");
  EXPECT_EQ(s.connect_timeout_ms, 30000);
  EXPECT_EQ(s.tcp_streams, 4);
  EXPECT_EQ(s.tcp_min_chunk, 131072);
  EXPECT_EQ(s.tcp_inline_bytes, 65536);
  EXPECT_EQ(s.tcp_user_timeout_ms, 20000);
  EXPECT_EQ(s.max_pending_handshakes, 256);
  EXPECT_EQ(s.handshake_port, 0);
}

TEST_F(LoadSettings, AsksForEverySetting) {
  std::vector<std::string> warnings;
  load_settings(fake_getenv, &warnings);
  const std::set<std::string> asked(queried().begin(), queried().end());
  const std::set<std::string> want = {"NCCL_MESH_IFNAME",
                                      "NCCL_MESH_CONNECT_TIMEOUT_MS",
                                      "NCCL_MESH_TCP_STREAMS",
                                      "NCCL_MESH_TCP_IO_THREADS",
                                      "NCCL_MESH_TCP_MIN_CHUNK",
                                      "NCCL_MESH_TCP_INLINE_BYTES",
                                      "NCCL_MESH_TCP_EAGER_BYTES",
                                      "NCCL_MESH_TCP_EAGER_WINDOW",
                                      "NCCL_MESH_TCP_USER_TIMEOUT_MS",
                                      "NCCL_MESH_MAX_PENDING_HANDSHAKES",
                                      "NCCL_MESH_HANDSHAKE_PORT",
                                      "NCCL_MESH_TRANSPORT",
                                      "NCCL_MESH_GID_INDEX",
                                      "NCCL_MESH_QPS_PER_CONN",
                                      "NCCL_MESH_IB_TIMEOUT",
                                      "NCCL_MESH_IB_RETRY_CNT",
                                      "NCCL_MESH_TEST_HOST_AS_GPU",
                                      "NCCL_MESH_TUNER",
                                      "NCCL_MESH_TUNER_MIN_BYTES",
                                      "NCCL_MESH_RELAY",
                                      "NCCL_MESH_RELAY_PORT",
                                      "NCCL_MESH_RELAY_RDMA_SLOTS",
                                      "NCCL_MESH_RELAY_RDMA_SLOT_BYTES",
                                      "NCCL_MESH_RELAY_RDMA_DRAIN_MS",
                                      "NCCL_MESH_RELAY_VIA",
                                      "NCCL_MESH_RELAY_SCOPE",
                                      "NCCL_MESH_RELAY_KEY_FILE",
                                      "NCCL_MESH_RELAY_GROUP",
                                      "NCCL_MESH_EMULATE",
                                      "NCCL_MESH_TEST_GIN_CUDA_LIBRARY"};
  EXPECT_EQ(asked, want);
}

TEST_F(LoadSettings, ValidValuesAreApplied) {
  fake_env() = {{"NCCL_MESH_IFNAME", "^docker"},
                {"NCCL_MESH_CONNECT_TIMEOUT_MS", "5000"},
                {"NCCL_MESH_TCP_STREAMS", "8"},
                {"NCCL_MESH_TCP_MIN_CHUNK", "256K"},
                {"NCCL_MESH_TCP_INLINE_BYTES", "0"},
                {"NCCL_MESH_TCP_USER_TIMEOUT_MS", "0"},
                {"NCCL_MESH_MAX_PENDING_HANDSHAKES", "16"},
                {"NCCL_MESH_HANDSHAKE_PORT", "29500"},
                {"NCCL_MESH_TUNER", "off"},
                {"NCCL_MESH_TUNER_MIN_BYTES", "4M"},
                {"NCCL_MESH_EMULATE", "ring:4:1"}};
  std::vector<std::string> warnings;
  const Settings s = load_settings(fake_getenv, &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_EQ(s.tuner, TunerMode::kOff);
  EXPECT_EQ(s.tuner_min_bytes, 4 << 20);
  EXPECT_EQ(s.emulate, "ring:4:1");
  EXPECT_EQ(s.ifname, "^docker");
  EXPECT_EQ(s.connect_timeout_ms, 5000);
  EXPECT_EQ(s.tcp_streams, 8);
  EXPECT_EQ(s.tcp_min_chunk, 262144);
  EXPECT_EQ(s.tcp_inline_bytes, 0);
  EXPECT_EQ(s.tcp_user_timeout_ms, 0);
  EXPECT_EQ(s.max_pending_handshakes, 16);
  EXPECT_EQ(s.handshake_port, 29500);
}

TEST_F(LoadSettings, MalformedValuesKeepTheDefaultAndWarn) {
  fake_env() = {{"NCCL_MESH_TCP_STREAMS", "lots"},
                {"NCCL_MESH_HANDSHAKE_PORT", "70000"},
                {"NCCL_MESH_TCP_MIN_CHUNK", "64KB"},
                {"NCCL_MESH_CONNECT_TIMEOUT_MS", "1500"}};
  std::vector<std::string> warnings;
  const Settings s = load_settings(fake_getenv, &warnings);
  EXPECT_EQ(s.tcp_streams, 4);
  EXPECT_EQ(s.handshake_port, 0);
  EXPECT_EQ(s.tcp_min_chunk, 131072);
  EXPECT_EQ(s.connect_timeout_ms, 1500);  // the valid one still applies
  ASSERT_EQ(warnings.size(), 3u);
  const auto warning_for = [&](const std::string& env) -> std::string {
    for (const std::string& w : warnings) {
      if (w.rfind(env + ":", 0) == 0) return w;
    }
    return "";
  };
  const std::string streams = warning_for("NCCL_MESH_TCP_STREAMS");
  EXPECT_NE(streams.find("lots"), std::string::npos) << streams;
  EXPECT_NE(streams.find("using the default 4"), std::string::npos) << streams;
  const std::string port = warning_for("NCCL_MESH_HANDSHAKE_PORT");
  EXPECT_NE(port.find("70000"), std::string::npos) << port;
  EXPECT_NE(port.find("0..65535"), std::string::npos) << port;
  EXPECT_NE(port.find("using the default 0"), std::string::npos) << port;
  const std::string chunk = warning_for("NCCL_MESH_TCP_MIN_CHUNK");
  EXPECT_NE(chunk.find("trailing"), std::string::npos) << chunk;
  EXPECT_NE(chunk.find("using the default 131072"), std::string::npos) << chunk;
}

TEST_F(LoadSettings, EmptyIntegerIsAWarningButEmptyIfnameIsNot) {
  fake_env() = {{"NCCL_MESH_TCP_STREAMS", ""}, {"NCCL_MESH_IFNAME", ""}};
  std::vector<std::string> warnings;
  const Settings s = load_settings(fake_getenv, &warnings);
  EXPECT_EQ(s.tcp_streams, 4);
  EXPECT_EQ(s.ifname, "");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("NCCL_MESH_TCP_STREAMS:", 0), 0u) << warnings[0];
}

TEST(SettingTable, ListsEverySettingWithItsDefault) {
  struct Row {
    const char* env;
    const char* type;
    const char* def;
    const char* range;
  };
  const Row want[] = {
      {"NCCL_MESH_IFNAME", "string", "", ""},
      {"NCCL_MESH_CONNECT_TIMEOUT_MS", "integer", "30000", "100..3600000"},
      {"NCCL_MESH_TCP_STREAMS", "integer", "4", "1..64"},
      {"NCCL_MESH_TCP_IO_THREADS", "integer", "-1", "-1..64"},
      {"NCCL_MESH_TCP_MIN_CHUNK", "integer", "131072", "4096..1073741824"},
      {"NCCL_MESH_TCP_INLINE_BYTES", "integer", "65536", "0..16777216"},
      {"NCCL_MESH_TCP_EAGER_BYTES", "integer", "65536", "0..1048576"},
      {"NCCL_MESH_TCP_EAGER_WINDOW", "integer", "1048576", "0..16777216"},
      {"NCCL_MESH_TCP_USER_TIMEOUT_MS", "integer", "20000", "0..3600000"},
      {"NCCL_MESH_MAX_PENDING_HANDSHAKES", "integer", "256", "1..65536"},
      {"NCCL_MESH_HANDSHAKE_PORT", "integer", "0", "0..65535"},
      {"NCCL_MESH_TRANSPORT", "enum", "auto", "auto, rdma, tcp"},
      {"NCCL_MESH_GID_INDEX", "integer", "-1", "-1..1023"},
      {"NCCL_MESH_QPS_PER_CONN", "integer", "2", "1..8"},
      {"NCCL_MESH_IB_TIMEOUT", "integer", "20", "1..31"},
      {"NCCL_MESH_IB_RETRY_CNT", "integer", "6", "0..6"},
      {"NCCL_MESH_TEST_HOST_AS_GPU", "integer", "0", "0..1"},
      {"NCCL_MESH_TUNER", "enum", "auto", "auto, ring, off"},
      {"NCCL_MESH_TUNER_MIN_BYTES", "integer", "131072", "0..1099511627776"},
      {"NCCL_MESH_RELAY", "integer", "1", "0..1"},
      {"NCCL_MESH_RELAY_RDMA_SLOTS", "integer", "8", "1..64"},
      {"NCCL_MESH_RELAY_RDMA_SLOT_BYTES", "integer", "524288", "4096..16777216"},
      {"NCCL_MESH_RELAY_RDMA_DRAIN_MS", "integer", "60000", "0..3600000"},
      {"NCCL_MESH_RELAY_PORT", "integer", "18515", "1..65535"},
      {"NCCL_MESH_RELAY_VIA", "string", "", ""},
      {"NCCL_MESH_RELAY_SCOPE", "enum", "host", "host, process"},
      {"NCCL_MESH_RELAY_KEY_FILE", "string", "", ""},
      {"NCCL_MESH_RELAY_GROUP", "string", "", ""},
      {"NCCL_MESH_EMULATE", "string", "", ""},
      {"NCCL_MESH_TEST_GIN_CUDA_LIBRARY", "string", "", ""},
  };
  const std::vector<SettingInfo> table = setting_table();
  ASSERT_EQ(table.size(), std::size(want));
  for (size_t i = 0; i < table.size(); ++i) {
    SCOPED_TRACE(want[i].env);
    EXPECT_STREQ(table[i].env, want[i].env);
    EXPECT_STREQ(table[i].type, want[i].type);
    EXPECT_EQ(table[i].default_value, want[i].def);
    EXPECT_EQ(table[i].range, want[i].range);
    ASSERT_NE(table[i].help, nullptr);
    EXPECT_GT(std::string(table[i].help).size(), 20u);
  }
}

TEST(SettingTable, EveryDefaultParsesBackToItself) {
  // The documented default is a value parse_setting accepts, and it equals the struct default.
  const Settings defaults;
  const std::map<std::string, int64_t Settings::*> fields = {
      {"NCCL_MESH_CONNECT_TIMEOUT_MS", &Settings::connect_timeout_ms},
      {"NCCL_MESH_TCP_STREAMS", &Settings::tcp_streams},
      {"NCCL_MESH_TCP_IO_THREADS", &Settings::tcp_io_threads},
      {"NCCL_MESH_TCP_MIN_CHUNK", &Settings::tcp_min_chunk},
      {"NCCL_MESH_TCP_INLINE_BYTES", &Settings::tcp_inline_bytes},
      {"NCCL_MESH_TCP_EAGER_BYTES", &Settings::tcp_eager_bytes},
      {"NCCL_MESH_TCP_EAGER_WINDOW", &Settings::tcp_eager_window},
      {"NCCL_MESH_TCP_USER_TIMEOUT_MS", &Settings::tcp_user_timeout_ms},
      {"NCCL_MESH_MAX_PENDING_HANDSHAKES", &Settings::max_pending_handshakes},
      {"NCCL_MESH_HANDSHAKE_PORT", &Settings::handshake_port},
      {"NCCL_MESH_GID_INDEX", &Settings::gid_index},
      {"NCCL_MESH_QPS_PER_CONN", &Settings::qps_per_conn},
      {"NCCL_MESH_IB_TIMEOUT", &Settings::ib_timeout},
      {"NCCL_MESH_IB_RETRY_CNT", &Settings::ib_retry_cnt},
      {"NCCL_MESH_TEST_HOST_AS_GPU", &Settings::test_host_as_gpu},
      {"NCCL_MESH_TUNER_MIN_BYTES", &Settings::tuner_min_bytes},
      {"NCCL_MESH_RELAY", &Settings::relay},
      {"NCCL_MESH_RELAY_PORT", &Settings::relay_port},
      {"NCCL_MESH_RELAY_RDMA_SLOTS", &Settings::relay_rdma_slots},
      {"NCCL_MESH_RELAY_RDMA_SLOT_BYTES", &Settings::relay_rdma_slot_bytes},
      {"NCCL_MESH_RELAY_RDMA_DRAIN_MS", &Settings::relay_rdma_drain_ms},
  };
  const std::map<std::string, std::string Settings::*> strings = {
      {"NCCL_MESH_IFNAME", &Settings::ifname},
      {"NCCL_MESH_EMULATE", &Settings::emulate},
      {"NCCL_MESH_RELAY_VIA", &Settings::relay_via},
      {"NCCL_MESH_TEST_GIN_CUDA_LIBRARY", &Settings::test_gin_cuda_library},
      {"NCCL_MESH_RELAY_KEY_FILE", &Settings::relay_key_file},
      {"NCCL_MESH_RELAY_GROUP", &Settings::relay_group},
  };
  for (const SettingInfo& info : setting_table()) {
    Settings s;
    for (const auto& [env, field] : strings) s.*field = "changed";
    for (const auto& [env, field] : fields) s.*field = -7;
    s.transport = TransportMode::kTcp;
    s.tuner = TunerMode::kOff;
    s.relay_scope = RelayScope::kProcess;
    std::string why;
    ASSERT_TRUE(parse_setting(info.env, info.default_value, &s, &why)) << info.env << ": " << why;
    const auto it = fields.find(info.env);
    if (std::string(info.env) == "NCCL_MESH_TRANSPORT") {
      EXPECT_EQ(s.transport, defaults.transport);
    } else if (std::string(info.env) == "NCCL_MESH_TUNER") {
      EXPECT_EQ(s.tuner, defaults.tuner);
    } else if (std::string(info.env) == "NCCL_MESH_RELAY_SCOPE") {
      EXPECT_EQ(s.relay_scope, defaults.relay_scope);
    } else if (it == fields.end()) {
      const auto str = strings.find(info.env);
      ASSERT_NE(str, strings.end()) << info.env;
      EXPECT_EQ(s.*(str->second), defaults.*(str->second));
    } else {
      EXPECT_EQ(s.*(it->second), defaults.*(it->second)) << info.env;
    }
  }
}

}  // namespace
}  // namespace mesh

namespace {
using namespace mesh;
TEST(ParseSetting, TransportAcceptsOnlyItsThreeValues) {
  const std::pair<const char*, TransportMode> oks[] = {
      {"auto", TransportMode::kAuto}, {"rdma", TransportMode::kRdma}, {"tcp", TransportMode::kTcp}};
  for (const auto& [ok, mode] : oks) {
    Settings s;
    s.transport = mode == TransportMode::kAuto ? TransportMode::kTcp : TransportMode::kAuto;
    std::string why;
    EXPECT_TRUE(parse_setting("NCCL_MESH_TRANSPORT", ok, &s, &why)) << ok;
    EXPECT_EQ(s.transport, mode) << ok;
  }
  for (const char* bad : {"", "RDMA", "ib", "tcp ", "socket"}) {
    Settings s;
    std::string why;
    EXPECT_FALSE(parse_setting("NCCL_MESH_TRANSPORT", bad, &s, &why)) << bad;
    EXPECT_NE(why.find("auto, rdma or tcp"), std::string::npos) << why;
    EXPECT_EQ(s.transport, TransportMode::kAuto);
  }
}
}  // namespace

namespace {
using namespace mesh;
// NCCL_MESH_RELAY_SCOPE: host by default; process only when spelled exactly; anything else keeps
// host and is a warning that names the accepted values (a typo must not silently leave the
// test's processes standing by behind one agent, or turn a real host's agent into many).
TEST(ParseSetting, RelayScopeAcceptsHostOrProcessAndWarnsOnAnythingElse) {
  EXPECT_EQ(Settings{}.relay_scope, RelayScope::kHost);
  Settings s;
  std::string why;
  EXPECT_TRUE(parse_setting("NCCL_MESH_RELAY_SCOPE", "process", &s, &why)) << why;
  EXPECT_EQ(s.relay_scope, RelayScope::kProcess);
  EXPECT_TRUE(parse_setting("NCCL_MESH_RELAY_SCOPE", "host", &s, &why)) << why;
  EXPECT_EQ(s.relay_scope, RelayScope::kHost);
  for (const char* bad : {"", "Process", "proc", "per-process", "host "}) {
    Settings b;
    b.relay_scope = RelayScope::kHost;
    EXPECT_FALSE(parse_setting("NCCL_MESH_RELAY_SCOPE", bad, &b, &why)) << bad;
    EXPECT_NE(why.find("host or process"), std::string::npos) << why;
    EXPECT_EQ(b.relay_scope, RelayScope::kHost) << bad;
  }
}

TEST_F(LoadSettings, BadRelayScopeKeepsHostAndWarns) {
  fake_env() = {{"NCCL_MESH_RELAY_SCOPE", "namespace"}};
  std::vector<std::string> warnings;
  const Settings s = load_settings(fake_getenv, &warnings);
  EXPECT_EQ(s.relay_scope, RelayScope::kHost);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("NCCL_MESH_RELAY_SCOPE:", 0), 0u) << warnings[0];
  EXPECT_NE(warnings[0].find("namespace"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("using the default host"), std::string::npos) << warnings[0];
}
}  // namespace
