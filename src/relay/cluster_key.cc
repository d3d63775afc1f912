// SPDX-License-Identifier: Apache-2.0
#include "relay/cluster_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "relay/fail.h"
#include "util/socket_util.h"

namespace mesh::relay {

bool load_cluster_key(const std::string& path, ClusterKey* out, std::string* why) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return fail(why, "cannot open " + path + ": " + errno_text(errno));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return fail(why, "cannot stat " + path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return fail(why, path + " is not a regular file");
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return fail(
        why, path + " belongs to user " + std::to_string(st.st_uid) + ", not to this user or root");
  if ((st.st_mode & 077) != 0)
    return fail(why, path + " is accessible to group or others (chmod 600 it)");
  ClusterKey key(kMaxClusterKeyBytes + 1);
  size_t got = 0;
  while (got < key.size()) {
    const ssize_t n = read(fd.get(), key.data() + got, key.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(why, "cannot read " + path + ": " + errno_text(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  key.resize(got);
  while (!key.empty() &&
         (key.back() == '\n' || key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
    key.pop_back();
  if (key.size() < kMinClusterKeyBytes || key.size() > kMaxClusterKeyBytes)
    return fail(why, path + " holds " + std::to_string(key.size()) + " key bytes (" +
                         std::to_string(kMinClusterKeyBytes) + ".." +
                         std::to_string(kMaxClusterKeyBytes) + " needed)");
  *out = std::move(key);
  return true;
}

}  // namespace mesh::relay
