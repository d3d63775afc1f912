// SPDX-License-Identifier: Apache-2.0
// Entry point of mesh_conformance_test: the plugin environment must be in place before the first
// test dlopens the plugin, and before the first peer process inherits the environment.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "harness/env.h"

namespace {

// Descriptors this process inherited (from ctest, a shell, a CI runner) are not the plugin's:
// mark them close-on-exec so the peer's count of leaked descriptors only sees the plugin's.
void keep_inherited_fds_from_peers() {
  std::vector<int> fds;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir)) {
      const int fd = std::atoi(e->d_name);
      if (e->d_name[0] != '.' && fd > 2 && fd != dirfd(dir)) fds.push_back(fd);
    }
    closedir(dir);
  }
  for (int fd : fds) {
    const int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

}  // namespace

int main(int argc, char** argv) {
  conformance::set_plugin_environment();
  keep_inherited_fds_from_peers();
  // SIGPIPE keeps its default action on purpose: a plugin that writes to a dead peer's socket
  // without MSG_NOSIGNAL would kill NCCL's process too, and the peer-death test must see that.
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
