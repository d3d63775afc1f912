// SPDX-License-Identifier: Apache-2.0
// The host's roster of plugin processes (util/host_roster.h), which sizes the TCP I/O threads
// by a process's share of the cores: processes are real (fork), liveness is the kernel's lock,
// and the directory is refused where another user could have planted or opened it.
#include "util/host_roster.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace mesh {
namespace {

cpu_set_t cpu_set(std::initializer_list<int> cpus) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int c : cpus) CPU_SET(c, &s);
  return s;
}

class RosterDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mesh-roster-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << strerror(errno);
    base_ = tmpl;
    dir_ = base_ + "/roster";
  }
  void TearDown() override {
    for (pid_t p : children_) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    const std::string cmd = "rm -rf '" + base_ + "'";
    (void)!system(cmd.c_str());
  }

  // Names in the roster directory that start with `prefix`.
  std::vector<std::string> entries(const char* prefix = "p") const {
    std::vector<std::string> out;
    DIR* d = opendir(dir_.c_str());
    if (d == nullptr) return out;
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) out.push_back(e->d_name);
    }
    closedir(d);
    return out;
  }

  // A child process that joins the roster with `cpus` (its own HostRoster, as another rank
  // would) and stays until killed. Returns once it has joined.
  pid_t spawn_member(const cpu_set_t& cpus) {
    int ready[2];
    if (pipe(ready) != 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      HostRoster roster(dir_);
      std::string why;
      const char ok = roster.join(cpus, &why) ? 1 : 0;
      (void)!write(ready[1], &ok, 1);
      for (;;) pause();
    }
    close(ready[1]);
    char ok = 0;
    const bool joined = read(ready[0], &ok, 1) == 1 && ok == 1;
    close(ready[0]);
    if (pid > 0) children_.push_back(pid);
    return joined ? pid : -1;
  }

  void end_child(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    std::erase(children_, pid);
  }

  std::string base_;
  std::string dir_;
  std::vector<pid_t> children_;
};

TEST(CpuList, WritesAndReadsTheKernelsListFormat) {
  const cpu_set_t s = cpu_set({0, 1, 2, 3, 8, 10, 11});
  EXPECT_EQ(format_cpu_list(s), "0-3,8,10-11");
  cpu_set_t back;
  ASSERT_TRUE(parse_cpu_list("0-3,8,10-11\n", &back));
  EXPECT_TRUE(CPU_EQUAL(&s, &back));
  ASSERT_TRUE(parse_cpu_list("", &back));
  EXPECT_EQ(CPU_COUNT(&back), 0);
  EXPECT_EQ(format_cpu_list(back), "");
  for (const char* bad : {"3-1", "x", "1,", ",1", "1-", "-1", "99999", "1 2", "0-3;4"}) {
    EXPECT_FALSE(parse_cpu_list(bad, &back)) << bad;
  }
}

TEST_F(RosterDir, CountsTheLiveProcessesThatMayRunOnTheseCpus) {
  HostRoster roster(dir_);
  std::string why;
  ASSERT_TRUE(roster.join(cpu_set({0, 1}), &why)) << why;
  struct stat st {};
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(roster.sharing(cpu_set({0, 1}), &why), 1u) << why;  // alone

  const pid_t a = spawn_member(cpu_set({0}));
  const pid_t b = spawn_member(cpu_set({1, 2}));
  const pid_t c = spawn_member(cpu_set({5}));  // bound elsewhere: shares nothing with us
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  ASSERT_GT(c, 0);
  EXPECT_EQ(entries().size(), 4u);
  EXPECT_EQ(roster.sharing(cpu_set({0, 1}), &why), 3u) << why;  // us, a, b
  EXPECT_EQ(roster.sharing(cpu_set({0}), &why), 2u) << why;     // us (always), a
  EXPECT_EQ(roster.sharing(cpu_set({5}), &why), 2u) << why;     // us, c

  // A process that dies without a word (SIGKILL) drops its lock with it: no longer counted,
  // and its entry is removed by the next count.
  end_child(a);
  EXPECT_EQ(roster.sharing(cpu_set({0, 1}), &why), 2u) << why;
  EXPECT_EQ(entries().size(), 3u);

  roster.leave();
  EXPECT_EQ(entries().size(), 2u);
  EXPECT_EQ(roster.sharing(cpu_set({0, 1}), &why), 2u) << why;  // not joined: still counts itself
  // The plugin leaves at its last finalize and joins again at the next init.
  ASSERT_TRUE(roster.join(cpu_set({0, 1}), &why)) << why;
  EXPECT_EQ(entries().size(), 3u);
  EXPECT_EQ(roster.sharing(cpu_set({0, 1}), &why), 2u) << why;
}

// POSIX record locks, not flock: a child forked without exec (a data loader worker) does not
// inherit the lock, so a rank that died leaves no live-looking entry behind while its children
// run, and a child's exit does not remove its living parent's entry.
TEST_F(RosterDir, AForkedChildNeitherKeepsNorRemovesItsParentsEntry) {
  // A rank (child 1) joins, forks a worker (grandchild) and dies; the worker lives on.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t rank = fork();
  if (rank == 0) {
    close(ready[0]);
    auto* roster = new HostRoster(dir_);  // never destroyed: the rank "crashes"
    std::string why;
    if (!roster->join(cpu_set({0}), &why)) _exit(1);
    const pid_t worker = fork();
    if (worker == 0) {
      for (;;) pause();
    }
    (void)!write(ready[1], &worker, sizeof(worker));
    _exit(0);  // no leave(): as a crash would
  }
  close(ready[1]);
  pid_t worker = -1;
  ASSERT_EQ(read(ready[0], &worker, sizeof(worker)), static_cast<ssize_t>(sizeof(worker)));
  close(ready[0]);
  children_.push_back(worker);
  int status = 0;
  ASSERT_EQ(waitpid(rank, &status, 0), rank);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(entries().size(), 1u);
  HostRoster roster(dir_);
  std::string why;
  EXPECT_EQ(roster.sharing(cpu_set({0}), &why), 1u)
      << "the dead rank's worker kept its entry alive" << why;
  EXPECT_EQ(entries().size(), 0u);

  // A living rank forks a child whose exit handlers run leave(): the rank's entry stays.
  ASSERT_TRUE(roster.join(cpu_set({0}), &why)) << why;
  const pid_t child = fork();
  if (child == 0) {
    roster.leave();
    _exit(0);
  }
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(entries().size(), 1u);
  const pid_t other = spawn_member(cpu_set({0}));
  ASSERT_GT(other, 0);
  // The other rank still sees this one alive (the child's exit closed its copy of the
  // descriptor, which must not drop the parent's lock).
  int counted[2];
  ASSERT_EQ(pipe(counted), 0);
  const pid_t counter = fork();
  if (counter == 0) {
    HostRoster view(dir_);
    std::string w;
    const size_t n = view.sharing(cpu_set({0}), &w);
    (void)!write(counted[1], &n, sizeof(n));
    _exit(0);
  }
  size_t n = 0;
  ASSERT_EQ(read(counted[0], &n, sizeof(n)), static_cast<ssize_t>(sizeof(n)));
  waitpid(counter, nullptr, 0);
  close(counted[0]);
  close(counted[1]);
  EXPECT_EQ(n, 3u) << "the counter, the other rank and this one";
}

TEST_F(RosterDir, ALiveEntryItCannotReadCountsAsSharing) {
  HostRoster roster(dir_);
  std::string why;
  ASSERT_TRUE(roster.join(cpu_set({0}), &why)) << why;
  // Another version's entry: locked (alive), not a CPU list.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open((dir_ + "/pnewer-format").c_str(), O_WRONLY | O_CREAT, 0600);
    struct flock hold {};
    hold.l_type = F_WRLCK;
    const bool ok = fd >= 0 && fcntl(fd, F_SETLK, &hold) == 0 && write(fd, "{cpus: all}", 11) == 11;
    (void)!write(ready[1], &ok, 1);
    for (;;) pause();
  }
  children_.push_back(pid);
  bool ok = false;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_TRUE(ok);
  EXPECT_EQ(roster.sharing(cpu_set({0}), &why), 2u) << why;
}

TEST_F(RosterDir, StaleHalfWrittenEntriesGoAndFreshOnesStay) {
  HostRoster roster(dir_);
  std::string why;
  ASSERT_TRUE(roster.join(cpu_set({0}), &why)) << why;
  for (const char* name : {".told", ".tnew"}) {
    const int fd = open((dir_ + "/" + name).c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  struct timespec old[2] = {{time(nullptr) - 120, 0}, {time(nullptr) - 120, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (dir_ + "/.told").c_str(), old, 0), 0);
  EXPECT_EQ(roster.sharing(cpu_set({0}), &why), 1u) << why;  // never counted
  EXPECT_EQ(entries(".t"), std::vector<std::string>{".tnew"});
}

// Another user could have made the path first (to read the entries, or to remove them): only
// this user's own mode-0700 directory is used, and never through a symlink.
TEST_F(RosterDir, RefusesADirectoryThatIsNotThisUsersPrivateOne) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  {
    HostRoster roster(dir_);
    std::string why;
    EXPECT_FALSE(roster.join(cpu_set({0}), &why));
    EXPECT_NE(why.find("not this user's private directory"), std::string::npos) << why;
    EXPECT_NE(why.find("mode 0755"), std::string::npos) << why;
    why.clear();
    EXPECT_EQ(roster.sharing(cpu_set({0}), &why), 1u);
    EXPECT_FALSE(why.empty());
  }
  ASSERT_EQ(rmdir(dir_.c_str()), 0);
  const std::string elsewhere = base_ + "/elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), dir_.c_str()), 0);
  HostRoster roster(dir_);
  std::string why;
  EXPECT_FALSE(roster.join(cpu_set({0}), &why));
  EXPECT_NE(why.find("cannot open"), std::string::npos) << why;
  DIR* d = opendir(elsewhere.c_str());
  ASSERT_NE(d, nullptr);
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  EXPECT_EQ(n, 0) << "an entry was written through the symlink";
}

TEST(HostRosterDefault, IsThisUsersFolderInSharedMemory) {
  const std::string dir = HostRoster::default_dir();
  EXPECT_NE(dir.find("/nccl-mesh-" + std::to_string(geteuid())), std::string::npos) << dir;
  EXPECT_TRUE(dir.rfind("/dev/shm/", 0) == 0 || dir.rfind("/tmp/", 0) == 0) << dir;
}

}  // namespace
}  // namespace mesh
