// SPDX-License-Identifier: Apache-2.0
// The plugin as NCCL and RCCL find it: each case prepares a directory of names (symlinks to the
// built plugin) and an environment, and runs mesh_loader_probe in a fresh process, which resolves
// NCCL_NET_PLUGIN exactly as the chosen loader does (loader_emulation.h) and checks what it loaded
// (version_checks.h). A fresh process per case matters: once a library is loaded, dlopen by name
// can be satisfied by it without searching the path.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

struct ProbeResult {
  int exit_code = -1;
  std::string output;
  bool has(const std::string& line) const {
    return ("\n" + output).find("\n" + line + "\n") != std::string::npos;
  }
};

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/mesh-loader-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << "mkdtemp: " << std::strerror(errno);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& l : links_) unlink(l.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  // dir_/name -> the built plugin; returns the link's path.
  std::string link(const std::string& name) {
    const std::string path = dir_ + "/" + name;
    EXPECT_EQ(symlink(MESH_PLUGIN_PATH, path.c_str()), 0) << path << ": " << std::strerror(errno);
    links_.push_back(path);
    return path;
  }

  // Runs the probe with this process's environment minus the loader's variables, plus `env`.
  ProbeResult probe(const std::string& flavor, const std::vector<std::string>& env,
                    bool check_all = false) {
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string v = *e;
      if (v.rfind("NCCL_NET_PLUGIN=", 0) == 0 || v.rfind("NCCL_NET=", 0) == 0 ||
          v.rfind("LD_LIBRARY_PATH=", 0) == 0 || v.rfind("NCCL_MESH_", 0) == 0) {
        continue;
      }
      vars.push_back(v);
    }
    // Loopback only, and a connect timeout well inside the probe's own 20 s.
    vars.push_back("NCCL_MESH_IFNAME=lo");
    vars.push_back("NCCL_MESH_CONNECT_TIMEOUT_MS=5000");
    for (const std::string& v : env) vars.push_back(v);
    std::vector<char*> envp;
    for (std::string& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = {MESH_LOADER_PROBE_PATH, "--flavor", flavor};
    if (check_all) args.push_back("--check-all");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    ProbeResult r;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return r;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      r.output = std::string("posix_spawn: ") + std::strerror(rc);
      return r;
    }
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) r.output.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
  }

  std::string dir_;
  std::vector<std::string> links_;
};

// NCCL_NET_PLUGIN=mesh with the plugin on the loader path: "mesh" itself is not found, then
// libnccl-net-mesh.so is. NCCL 2.30 takes v12, NCCL 2.28 v11; every table v6..v12 passes the
// checks, device-handle pointers included.
TEST_F(LoaderTest, NcclOpensLibncclNetMeshByName) {
  const std::string lib = link("libnccl-net-mesh.so");
  const std::vector<std::string> env = {"LD_LIBRARY_PATH=" + dir_, "NCCL_NET_PLUGIN=mesh",
                                        "NCCL_NET=Mesh"};
  const ProbeResult r30 = probe("nccl-2.30", env, true);
  EXPECT_EQ(r30.exit_code, 0) << r30.output;
  EXPECT_TRUE(r30.has("try libnccl-net-mesh.so: opened")) << r30.output;
  EXPECT_TRUE(r30.has("assigned " + lib + " v12")) << r30.output;
  for (int v = 6; v <= 12; ++v) {
    EXPECT_TRUE(r30.has("check v" + std::to_string(v) + ": ok")) << r30.output;
  }
  const ProbeResult r28 = probe("nccl-2.28", env);
  EXPECT_EQ(r28.exit_code, 0) << r28.output;
  EXPECT_TRUE(r28.has("assigned " + lib + " v11")) << r28.output;
}

// RCCL opens librccl-net-<name>.so and probes v12 first.
TEST_F(LoaderTest, RcclOpensLibrcclNetMeshByName) {
  const std::string lib = link("librccl-net-mesh.so");
  const ProbeResult r =
      probe("rccl", {"LD_LIBRARY_PATH=" + dir_, "NCCL_NET_PLUGIN=mesh", "NCCL_NET=Mesh"}, true);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.has("assigned " + lib + " v12")) << r.output;
  for (int v = 6; v <= 12; ++v) {
    EXPECT_TRUE(r.has("check v" + std::to_string(v) + ": ok")) << r.output;
  }
}

// The two loaders look for different file names: each misses the other's (why the package
// installs both names).
TEST_F(LoaderTest, EachLoaderOnlyFindsItsOwnName) {
  link("libnccl-net-mesh.so");
  const ProbeResult rccl = probe("rccl", {"LD_LIBRARY_PATH=" + dir_, "NCCL_NET_PLUGIN=mesh"});
  EXPECT_EQ(rccl.exit_code, 2) << rccl.output;
  EXPECT_TRUE(rccl.has("no plugin assigned")) << rccl.output;
}

// A path is opened as given (no libnccl-net- variant is tried for it).
TEST_F(LoaderTest, FullPathIsOpenedAsGiven) {
  const ProbeResult r = probe("nccl-2.30", {std::string("NCCL_NET_PLUGIN=") + MESH_PLUGIN_PATH});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.has("assigned " + std::string(MESH_PLUGIN_PATH) + " v12")) << r.output;
}

// NCCL 2.28's comma list: entries are tried in order; one that does not exist (both names
// missing) or has no net table (libm) is skipped, and the next one is used.
TEST_F(LoaderTest, CommaListFallsThroughToMesh) {
  const std::string lib = link("libnccl-net-mesh.so");
  const ProbeResult r =
      probe("nccl-2.30", {"LD_LIBRARY_PATH=" + dir_, "NCCL_NET_PLUGIN=foo,libm.so.6,mesh"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.has("entry foo")) << r.output;
  EXPECT_NE(r.output.find("try libnccl-net-foo.so: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unsupported "), std::string::npos) << "libm has no table\n" << r.output;
  EXPECT_TRUE(r.has("assigned " + lib + " v12")) << r.output;
}

// Unset NCCL_NET_PLUGIN: the default name libnccl-net.so (a plugin installed under that name).
TEST_F(LoaderTest, DefaultNameWhenUnset) {
  const std::string lib = link("libnccl-net.so");
  const ProbeResult r = probe("nccl-2.30", {"LD_LIBRARY_PATH=" + dir_});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.has("assigned " + lib + " v12")) << r.output;
}

// NCCL_NET selects by table name (case-insensitive); "none" loads no external plugin.
TEST_F(LoaderTest, NcclNetAndNoneAreHonoured) {
  link("libnccl-net-mesh.so");
  const std::string path = "LD_LIBRARY_PATH=" + dir_;
  const ProbeResult mesh = probe("nccl-2.30", {path, "NCCL_NET_PLUGIN=mesh", "NCCL_NET=mesh"});
  EXPECT_EQ(mesh.exit_code, 0) << mesh.output;
  const ProbeResult socket = probe("nccl-2.30", {path, "NCCL_NET_PLUGIN=mesh", "NCCL_NET=Socket"});
  EXPECT_EQ(socket.exit_code, 2) << socket.output;
  EXPECT_NE(socket.output.find("is not NCCL_NET=Socket"), std::string::npos) << socket.output;
  const ProbeResult none = probe("nccl-2.30", {path, "NCCL_NET_PLUGIN=None"});
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_EQ(none.output.find("entry "), std::string::npos) << none.output;
}

}  // namespace
