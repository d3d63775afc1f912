// SPDX-License-Identifier: Apache-2.0
#include "util/host_roster.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <utility>

#include "util/random.h"

namespace mesh {

namespace {

constexpr char kEntryPrefix = 'p';         // a joined process: "p<pid>-<random>"
constexpr const char* kTempPrefix = ".t";  // being written: never counted
// A temporary entry is its writer's for the moment between create and rename; one this old was
// left by a process that died in between.
constexpr time_t kStaleTempSeconds = 60;

// Whether some process holds a lock on the open file (F_GETLK: the lock is not taken).
bool locked_by_someone(int fd) {
  struct flock query {};
  query.l_type = F_WRLCK;
  query.l_whence = SEEK_SET;
  return fcntl(fd, F_GETLK, &query) == 0 && query.l_type != F_UNLCK;
}

}  // namespace

bool allowed_cpus(cpu_set_t* cpus) {
  CPU_ZERO(cpus);
  return sched_getaffinity(0, sizeof(*cpus), cpus) == 0;
}

std::string format_cpu_list(const cpu_set_t& cpus) {
  std::string out;
  for (int c = 0; c < CPU_SETSIZE;) {
    if (!CPU_ISSET(c, &cpus)) {
      ++c;
      continue;
    }
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &cpus)) ++last;
    if (!out.empty()) out += ',';
    out += std::to_string(c);
    if (last > c) out += '-' + std::to_string(last);
    c = last + 1;
  }
  return out;
}

bool parse_cpu_list(std::string_view text, cpu_set_t* cpus) {
  CPU_ZERO(cpus);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return true;
  auto number = [&](int* out) {
    const auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
    if (r.ec != std::errc() || *out < 0 || *out >= CPU_SETSIZE) return false;
    text.remove_prefix(static_cast<size_t>(r.ptr - text.data()));
    return true;
  };
  for (;;) {
    int first = 0;
    if (!number(&first)) return false;
    int last = first;
    if (!text.empty() && text.front() == '-') {
      text.remove_prefix(1);
      if (!number(&last) || last < first) return false;
    }
    for (int c = first; c <= last; ++c) CPU_SET(c, cpus);
    if (text.empty()) return true;
    if (text.front() != ',') return false;
    text.remove_prefix(1);
  }
}

HostRoster::HostRoster(std::string dir) : dir_(std::move(dir)) {}

HostRoster::~HostRoster() {
  leave();
}

std::string HostRoster::default_dir() {
  struct stat st {};
  const bool shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode);
  return std::string(shm ? "/dev/shm" : "/tmp") + "/nccl-mesh-" + std::to_string(geteuid());
}

UniqueFd HostRoster::open_dir(std::string* why) const {
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = "cannot create " + dir_ + ": " + errno_text(errno);
    return UniqueFd();
  }
  // O_NOFOLLOW: a symlink planted at the path is refused, not followed into someone's folder.
  UniqueFd fd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    *why = "cannot open " + dir_ + ": " + errno_text(errno);
    return UniqueFd();
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    *why = "cannot stat " + dir_ + ": " + errno_text(errno);
    return UniqueFd();
  }
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    *why = dir_ + " is not this user's private directory (owner uid " + std::to_string(st.st_uid) +
           ", mode " + mode + "; expected uid " + std::to_string(geteuid()) +
           ", mode 0700): remove it";
    return UniqueFd();
  }
  return fd;
}

bool HostRoster::join(const cpu_set_t& cpus, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entry_fd_.valid() && joined_pid_ == getpid()) return true;
  const UniqueFd dir = open_dir(why);
  if (!dir.valid()) return false;
  uint8_t nonce[8];
  fill_random(nonce, sizeof(nonce));
  char tail[40];
  snprintf(tail, sizeof(tail), "%d-%02x%02x%02x%02x%02x%02x%02x%02x", static_cast<int>(getpid()),
           nonce[0], nonce[1], nonce[2], nonce[3], nonce[4], nonce[5], nonce[6], nonce[7]);
  const std::string name = std::string(1, kEntryPrefix) + tail;
  const std::string temp = std::string(kTempPrefix) + tail;
  UniqueFd fd(
      openat(dir.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    *why = "cannot create an entry in " + dir_ + ": " + errno_text(errno);
    return false;
  }
  struct flock hold {};
  hold.l_type = F_WRLCK;
  hold.l_whence = SEEK_SET;
  const std::string text = format_cpu_list(cpus) + "\n";
  const bool ok = fcntl(fd.get(), F_SETLK, &hold) == 0 &&
                  write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  renameat(dir.get(), temp.c_str(), dir.get(), name.c_str()) == 0;
  if (!ok) {
    *why = "cannot write an entry in " + dir_ + ": " + errno_text(errno);
    (void)unlinkat(dir.get(), temp.c_str(), 0);
    return false;
  }
  entry_fd_ = std::move(fd);
  entry_name_ = name;
  joined_pid_ = getpid();
  return true;
}

size_t HostRoster::sharing(const cpu_set_t& cpus, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  const UniqueFd dir = open_dir(why);
  if (!dir.valid()) return 1;
  // fdopendir owns what it is given: a descriptor of its own, so `dir` stays ours.
  const int listing = openat(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = listing < 0 ? nullptr : fdopendir(listing);
  if (d == nullptr) {
    *why = "cannot list " + dir_ + ": " + errno_text(errno);
    if (listing >= 0) close(listing);
    return 1;
  }
  const bool mine = entry_fd_.valid() && joined_pid_ == getpid();
  size_t count = 1;  // this process
  size_t seen = 0;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    const std::string_view name(e->d_name);
    const bool entry = !name.empty() && name.front() == kEntryPrefix;
    const bool temp = name.rfind(kTempPrefix, 0) == 0;
    if ((!entry && !temp) || (mine && name == entry_name_)) continue;
    if (++seen > kMaxEntries) break;
    UniqueFd fd(openat(dir.get(), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid()) {
      continue;  // gone meanwhile, or not an entry: neither counted nor touched
    }
    if (!locked_by_someone(fd.get())) {
      // Its process is gone (or, for a temporary one, is just writing it: only old ones go).
      if (entry || now - st.st_mtime > kStaleTempSeconds) (void)unlinkat(dir.get(), e->d_name, 0);
      continue;
    }
    if (temp) continue;
    char buf[kMaxEntryBytes];
    const ssize_t n = pread(fd.get(), buf, sizeof(buf), 0);
    cpu_set_t theirs;
    // A live entry that does not parse (another version's format) counts: sharing assumed.
    if (n < 0 || !parse_cpu_list(std::string_view(buf, static_cast<size_t>(n)), &theirs)) {
      ++count;
      continue;
    }
    cpu_set_t both;
    CPU_AND(&both, &theirs, &cpus);
    if (CPU_COUNT(&both) > 0) ++count;
  }
  closedir(d);
  return count;
}

void HostRoster::leave() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!entry_fd_.valid()) return;
  // A child forked without exec shares the descriptor but not the lock, nor the entry.
  if (joined_pid_ == getpid()) {
    std::string why;
    const UniqueFd dir = open_dir(&why);
    if (dir.valid()) (void)unlinkat(dir.get(), entry_name_.c_str(), 0);
  }
  entry_fd_.reset();  // the lock goes with it
  entry_name_.clear();
}

}  // namespace mesh
