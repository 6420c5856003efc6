/*
 * rollout-sandbox-helper: what the local sandbox provider otherwise does with a
 * chain of programs, in one program start. Built by scripts/ensure-exec-helper.sh
 * (gcc, libc only); the provider finds it through ROLLOUT_EXEC_HELPER and falls
 * back to the chain when it is absent. Two modes:
 *
 *   exec <keeper-pid> <keeper-start-time> <cgroup-procs,...|-> <rlimit-as|0> <keep-caps,...|-> -- CMD ARGS...
 *     replaces `sh -c 'echo $$ > cgroup.procs' ; nsenter -t PID -m -p -n -i -u -r -w ;
 *     setpriv --bounding-set=-all,+KEEP --inh-caps=-all --no-new-privs ; prlimit --as=N`:
 *     joins the sandbox's cgroups (exit 97 if it cannot, as the join shell did), opens
 *     the keeper's namespaces through one /proc/<pid> directory after checking its start
 *     time (a recycled pid is another process: exit 1, as nsenter does for a gone pid),
 *     enters ipc, uts, net, pid, mnt (nsenter's order; the cgroup, user and time
 *     namespaces are not entered, as today), takes the keeper's root and working
 *     directory, forks once (a pid namespace applies to children only) and, in the
 *     child, lowers RLIMIT_AS, drops every capability from the bounding set but KEEP,
 *     clears the inheritable and ambient sets, sets no_new_privs and execs CMD with the
 *     environment it was given. uid, gid and groups stay what they were (root), as
 *     through nsenter and setpriv. The parent waits and exits as the child did (its
 *     status, or the same signal), like nsenter.
 *
 *   launch <cgroup-procs,...|-> <rlimit-as|0> <rw-dir> <merged-dir> <exit-file> <lower> <tmpfs-size|loop-device> <exec-socket|-> -- BWRAP ARGS...
 *     replaces `sh -c join ; prlimit ; unshare --mount --propagation private ; sh -c
 *     'mount tmpfs; mkdir; mount overlay; bwrap ...; echo $? > init-exit'`: joins the
 *     cgroups, lowers RLIMIT_AS, makes a private mount namespace, mounts the writable layer (a size-limited
 *     tmpfs, or the ext4 on the loop device given) and the overlay, runs bwrap and writes how it ended (its exit status, or
 *     128 + signal) to exit-file, then exits 0. It stays bwrap's parent for the sandbox's
 *     life and is the one process that holds the private mount namespace. With an exec socket it
 *     also binds and listens on that path (mode 0600) and passes the listening socket to bwrap as fd 5
 *     and this binary as fd 6, opened through a read-only bind of itself made in the private mount
 *     namespace, for bwrap to exec `/proc/self/fd/6 init 5 6 KEEP` as the sandbox's pid 1.
 *
 *   beside <cgroup-procs,...|-> <rlimit-as|0> <mount-pid> <mount-pid-start> <net-pid> <net-pid-start> <exit-file> <exec-socket|-> -- BWRAP ARGS...
 *     a sandbox beside a live one (its verifier): like launch, but instead of mounting a
 *     writable layer of its own it enters the mount namespace of the other sandbox's launcher
 *     (where that one's overlay is mounted, so bwrap can bind it) and takes a private copy of
 *     it, and it enters the other sandbox's network namespace (its services answer on its
 *     loopback). Both pids are checked against their start times first. bwrap then makes
 *     new pid, ipc and uts namespaces: the two sandboxes' processes cannot see each other.
 *     The exit file is opened before any namespace is entered.
 *
 *   init LISTEN-FD EXE-FD KEEP-CAPS
 *     the sandbox's pid 1 and the server of its execs: sandbox-init.c.
 *
 * What the modes here and the init both do (capability names and the bounding set, a process's
 * start time) is in common.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"
#include "sandbox-init.h"

extern char **environ;

static void die(int code, const char *what, const char *arg) {
  fprintf(stderr, "rollout-sandbox-helper: %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "", strerror(errno));
  exit(code);
}

static void usage(const char *message) {
  fprintf(stderr, "rollout-sandbox-helper: %s\n"
                  "usage: rollout-sandbox-helper exec PID START-TIME CGROUP-PROCS RLIMIT-AS KEEP-CAPS -- CMD...\n"
                  "       rollout-sandbox-helper launch CGROUP-PROCS RLIMIT-AS RW MERGED EXIT-FILE LOWER SIZE EXEC-SOCKET -- BWRAP...\n"
                  "       rollout-sandbox-helper beside CGROUP-PROCS RLIMIT-AS MOUNT-PID MOUNT-START NET-PID NET-START EXIT-FILE EXEC-SOCKET -- BWRAP...\n"
                  "       rollout-sandbox-helper init LISTEN-FD EXE-FD KEEP-CAPS\n",
          message);
  exit(2);
}

/* Writes this process's pid into every cgroup.procs file of a comma-separated list ("-": none). */
static void join_cgroups(char *list) {
  if (strcmp(list, "-") == 0) return;
  char pid[32];
  int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  for (char *file = strtok(list, ","); file; file = strtok(NULL, ",")) {
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, pid, (size_t)len) != len) die(97, "cannot join cgroup", file);
    close(fd);
  }
}

static void lower_address_space(const char *bytes) {
  unsigned long long limit = strtoull(bytes, NULL, 10);
  if (limit == 0) return;
  struct rlimit rl = {.rlim_cur = limit, .rlim_max = limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) die(1, "setrlimit RLIMIT_AS", bytes);
}

/* Exits like the child did: its exit status, or the signal that killed it (nsenter's continue_as_child). */
static void wait_and_mirror(pid_t child) {
  int status = 0;
  for (;;) {
    pid_t got = waitpid(child, &status, WUNTRACED);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) die(1, "waitpid", NULL);
    if (WIFSTOPPED(status)) {
      kill(getpid(), SIGSTOP);
      kill(child, SIGCONT);
      continue;
    }
    break;
  }
  if (WIFEXITED(status)) exit(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
  }
  exit(1);
}

/* Whether the process of the pid's directory fd started at `expected` (common.h read_start_time). */
static int start_time_matches(int proc_dir, const char *expected) {
  char now[64];
  int fd = openat(proc_dir, "stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int read_ok = read_start_time(fd, now, sizeof now) == 0;
  close(fd);
  return read_ok && strcmp(now, expected) == 0;
}

static void drop_capabilities(char *keep_list) {
  uint64_t keep;
  if (parse_capabilities(keep_list, &keep, "rollout-sandbox-helper") != 0) exit(2);
  /* The bounding set: every capability the kernel knows, up to the first it does not. */
  int failed;
  if (lower_bounding_set(keep, &failed) != 0) die(1, "drop capability from the bounding set", failed < CAP_NAME_COUNT ? CAP_NAMES[failed] : NULL);
  /* Inheritable cleared (which clears the ambient set with it); effective and permitted are left to execve, as setpriv does. */
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) != 0) die(1, "capget", NULL);
  data[0].inheritable = 0;
  data[1].inheritable = 0;
  if (syscall(SYS_capset, &header, data) != 0) die(1, "capset", NULL);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) die(1, "clear ambient capabilities", NULL);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(1, "set no_new_privs", NULL);
}

static void exec_or_die(char **argv) {
  execve(argv[0], argv, environ);
  die(errno == ENOENT ? 127 : 126, "cannot execute", argv[0]);
}

static int exec_mode(int argc, char **argv) {
  if (argc < 8 || strcmp(argv[7], "--") != 0 || argc < 9) usage("exec: wrong arguments");
  const char *pid = argv[2];
  char path[64];
  join_cgroups(argv[4]);
  snprintf(path, sizeof path, "/proc/%s", pid);
  int proc_dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc_dir < 0) die(1, "cannot open", path);
  /* Namespaces in nsenter's order; the mount namespace last, since it changes what paths mean. */
  static const struct { const char *name; int type; } NS[] = {
      {"ns/ipc", CLONE_NEWIPC}, {"ns/uts", CLONE_NEWUTS}, {"ns/net", CLONE_NEWNET}, {"ns/pid", CLONE_NEWPID}, {"ns/mnt", CLONE_NEWNS},
  };
  int fds[5];
  for (int i = 0; i < 5; i++) {
    fds[i] = openat(proc_dir, NS[i].name, O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0) die(1, "cannot open namespace of pid", pid);
  }
  int root_fd = openat(proc_dir, "root", O_RDONLY | O_CLOEXEC);
  int wd_fd = openat(proc_dir, "cwd", O_RDONLY | O_CLOEXEC);
  if (root_fd < 0 || wd_fd < 0) die(1, "cannot open root and working directory of pid", pid);
  /* Opened through the directory of the process checked here: a pid recycled since cannot slip in. */
  if (!start_time_matches(proc_dir, argv[3])) {
    errno = ESRCH;
    die(1, "the sandbox's init is gone: pid", pid);
  }
  close(proc_dir);
  for (int i = 0; i < 5; i++) {
    if (setns(fds[i], NS[i].type) != 0) die(1, "setns", NS[i].name);
    close(fds[i]);
  }
  if (fchdir(root_fd) != 0 || chroot(".") != 0 || chdir("/") != 0) die(1, "cannot take the root of pid", pid);
  if (fchdir(wd_fd) != 0) die(1, "cannot take the working directory of pid", pid);
  close(root_fd);
  close(wd_fd);

  signal(SIGCHLD, SIG_DFL);
  pid_t child = fork();
  if (child < 0) die(1, "fork", NULL);
  if (child > 0) wait_and_mirror(child);

  lower_address_space(argv[5]);
  drop_capabilities(argv[6]);
  exec_or_die(argv + 8);
  return 1;
}

/* Moves fd to exactly `target`, without close-on-exec, for bwrap to pass on. */
static void move_fd(int fd, int target) {
  if (fd == target) {
    fcntl(fd, F_SETFD, 0);
    return;
  }
  if (dup2(fd, target) != target) die(1, "dup2", NULL);
  close(fd);
}

/* The exec server's listening socket at `path` (fd 5), replacing a stale one. */
static void listen_at(const char *path) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    die(1, "exec socket path", path);
  }
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die(1, "socket", NULL);
  unlink(path);
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) die(1, "bind", path);
  if (chmod(path, 0600) != 0) die(1, "chmod", path);
  if (listen(fd, 512) != 0) die(1, "listen", path);
  move_fd(fd, 5);
}

/* This binary as fd 6, through a read-only bind of itself: what /proc/1/exe leads to cannot be written. */
static void pass_self(void) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) die(1, "readlink /proc/self/exe", NULL);
  self[n] = '\0';
  if (mount(self, self, NULL, MS_BIND, NULL) != 0) die(1, "bind", self);
  if (mount(NULL, self, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) die(1, "remount read-only", self);
  int fd = open(self, O_RDONLY | O_CLOEXEC);
  if (fd < 0) die(1, "open", self);
  move_fd(fd, 6);
}

/* The exit file, opened now (before any namespace is entered) on a descriptor above the ones passed to bwrap (3 to 6). */
static int open_exit_file(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die(1, "cannot write", path);
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 64);
  if (high < 0) die(1, "dup the exit file", path);
  close(fd);
  return high;
}

/* A namespace of `pid` (ns/mnt, ns/net), opened once its start time is checked: a recycled pid cannot slip in. */
static int open_namespace_of(const char *pid, const char *start_time, const char *ns) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%s", pid);
  int proc_dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc_dir < 0) die(1, "cannot open", path);
  int fd = openat(proc_dir, ns, O_RDONLY | O_CLOEXEC);
  if (fd < 0) die(1, "cannot open namespace of pid", pid);
  if (!start_time_matches(proc_dir, start_time)) {
    errno = ESRCH;
    die(1, "the sandbox beside which to launch is gone: pid", pid);
  }
  close(proc_dir);
  return fd;
}

/* Runs bwrap (argv), waits for it and writes how it ended to exit_fd; the exec socket and this binary were passed as fds 5 and 6. */
static int run_and_record(char **argv, int exit_fd, int passed_fds) {
  /* Descriptors the host left open (beyond bwrap's 3 and 4, the exec socket and this binary) do not enter the sandbox. */
  syscall(SYS_close_range, 7, ~0u, 4 /* CLOSE_RANGE_CLOEXEC */);
  signal(SIGCHLD, SIG_DFL);
  pid_t child = fork();
  if (child < 0) die(1, "fork", NULL);
  if (child == 0) exec_or_die(argv);
  /* The socket and the binary are the init's now: with them closed here, a dead init refuses connections. */
  if (passed_fds) {
    close(5);
    close(6);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) die(1, "waitpid", NULL);
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  char text[16];
  int len = snprintf(text, sizeof text, "%d\n", code);
  if (write(exit_fd, text, (size_t)len) != len) die(1, "cannot write the exit file", NULL);
  close(exit_fd);
  return 0;
}

static int beside_mode(int argc, char **argv) {
  if (argc < 12 || strcmp(argv[10], "--") != 0) usage("beside: wrong arguments");
  const char *exit_file = argv[8], *exec_socket = argv[9];
  int passed_fds = strcmp(exec_socket, "-") != 0;
  join_cgroups(argv[2]);
  lower_address_space(argv[3]);
  int exit_fd = open_exit_file(exit_file);
  int mount_ns = open_namespace_of(argv[4], argv[5], "ns/mnt");
  int net_ns = open_namespace_of(argv[6], argv[7], "ns/net");
  if (passed_fds) listen_at(exec_socket);
  if (setns(net_ns, CLONE_NEWNET) != 0) die(1, "setns", "ns/net");
  if (setns(mount_ns, CLONE_NEWNS) != 0) die(1, "setns", "ns/mnt");
  close(net_ns);
  close(mount_ns);
  /* A copy of its own: the bind of this binary below (and what bwrap does) stays out of the other launcher's namespace. */
  if (unshare(CLONE_NEWNS) != 0) die(1, "unshare the mount namespace", NULL);
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die(1, "make / private", NULL);
  if (passed_fds) pass_self();
  return run_and_record(argv + 11, exit_fd, passed_fds);
}

static int launch_mode(int argc, char **argv) {
  if (argc < 12 || strcmp(argv[10], "--") != 0) usage("launch: wrong arguments");
  const char *rw = argv[4], *merged = argv[5], *exit_file = argv[6], *lower = argv[7], *size = argv[8], *exec_socket = argv[9];
  int passed_fds = strcmp(exec_socket, "-") != 0;
  join_cgroups(argv[2]);
  lower_address_space(argv[3]);
  int exit_fd = open_exit_file(exit_file);
  if (passed_fds) listen_at(exec_socket);
  if (unshare(CLONE_NEWNS) != 0) die(1, "unshare the mount namespace", NULL);
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die(1, "make / private", NULL);
  if (passed_fds) pass_self();

  char options[8192];
  if (size[0] == '/') {
    /* The writable layer's file on disk, attached to this loop device by the host (diskLayer.ts). */
    if (mount(size, rw, "ext4", MS_NOATIME, NULL) != 0) die(1, "mount the writable layer's ext4 on", rw);
  } else {
    snprintf(options, sizeof options, "size=%s,mode=0755", size);
    if (mount("rollout-rw", rw, "tmpfs", 0, options) != 0) die(1, "mount tmpfs on", rw);
  }
  char upper[4096], work[4096];
  snprintf(upper, sizeof upper, "%s/upper", rw);
  snprintf(work, sizeof work, "%s/work", rw);
  if (mkdir(upper, 0777) != 0) die(1, "mkdir", upper);
  if (mkdir(work, 0777) != 0) die(1, "mkdir", work);
  if ((size_t)snprintf(options, sizeof options, "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work) >= sizeof options) {
    errno = ENAMETOOLONG;
    die(1, "overlay options for", lower);
  }
  if (mount("overlay", merged, "overlay", 0, options) != 0) die(1, "mount overlay on", merged);

  return run_and_record(argv + 11, exit_fd, passed_fds);
}

int main(int argc, char **argv) {
  if (argc < 2) usage("no mode");
  if (strcmp(argv[1], "exec") == 0) return exec_mode(argc, argv);
  if (strcmp(argv[1], "launch") == 0) return launch_mode(argc, argv);
  if (strcmp(argv[1], "beside") == 0) return beside_mode(argc, argv);
  if (strcmp(argv[1], "init") == 0) return init_main(argc, argv);
  if (strcmp(argv[1], "--version") == 0) {
    puts("rollout-sandbox-helper 4");
    return 0;
  }
  usage("unknown mode");
  return 2;
}
