/*
 * `rollout-sandbox-helper init LISTEN-FD EXE-FD KEEP-CAPS`: a local sandbox's pid 1 when the compiled helper is
 * present, in place of the bash keeper, and the server of its execs. A command run through it costs one
 * program start (the command itself) instead of the helper's own start plus the fork after setns.
 *
 * The launcher (launch mode, sandbox-helper.c) binds the listening socket at <state>/exec.sock on the
 * host, passes it as LISTEN-FD and this binary as EXE-FD (opened through a read-only bind, so
 * /proc/1/exe cannot be written through by anyone inside); bwrap execs /proc/self/fd/EXE-FD. The socket
 * file is in the host's state directory, which no sandbox can see, and the init is not dumpable, so no
 * process in the sandbox can ptrace it, read its memory or take its descriptors: only the host reaches
 * the exec channel.
 *
 * As the keeper did, the init tells the host it is up (fd 4), ignores every signal it can (the kernel
 * then drops what processes of its pid namespace send it: `kill -9 -1` inside leaves a live sandbox),
 * and reaps orphans as they die. Each connection gets a session: a child of the init that reads one
 * request, runs the command in a session and process group of its own (setsid) with exactly the
 * environment given and no_new_privs, streams its stdout and stderr back (at most max-output bytes
 * each, the rest counted), and sends how it ended. Its capabilities are the sandbox's KEEP set (see
 * keep_only), its rlimits the launcher's (RLIMIT_AS).
 *
 * Frames, both ways: u8 type, u32 length (little-endian), payload.
 *   host -> init  'R' run:  u64 max-output, u32 argc, u32 envc, u32 stdin-length, argv and env as
 *                            NUL-terminated strings, then the stdin bytes (the pipe closes after them)
 *                 'Q' kill: u32 pid, then its start time as text: SIGKILLs that process group if the pid
 *                            is still that process, waits until it is gone, answers 'X'
 *                 'K' signal (after 'R'): i32 signal for the command's process group
 *   init -> host  'S' started: u32 pid (in the sandbox's pid namespace), then its start time as text
 *                 'O' stdout bytes, 'E' stderr bytes
 *                 'X' exit: i32 exit code (-1 when killed), i32 signal, u64 stdout total, u64 stderr total
 * A host that closes the connection before 'X' (its worker died, its activity was cancelled) has the
 * command's process group SIGKILLed. After 'X' the session waits for the host to close, still taking
 * 'K' (a timed-out command's stragglers); the process group then lives on, as any background job does.
 * After the command exits its pipes are read until they close or stay idle for 100 ms (at most 5 s):
 * a background process may hold them open forever. The init then keeps reading them and drops what it
 * reads until the last writer closes them: a background process that still writes to the stdout or
 * stderr it inherited (`server &`, `nohup cmd &` without a terminal, a setsid'd logger) keeps running
 * until teardown instead of dying of SIGPIPE on its first write after the command returned.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include "common.h"
#include "sandbox-init.h"

#define IDLE_AFTER_EXIT_MS 100
#define DRAIN_CAP_MS 5000
#define MAX_REQUEST_BYTES (1u << 30)

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t u32_at(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (v >> (8 * i)) & 0xff;
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (v >> (8 * i)) & 0xff;
}

/* The start time of `pid` as text (common.h read_start_time); empty when the process is gone or a zombie. */
static void start_time_of(pid_t pid, char *out, size_t size) {
  char path[64];
  out[0] = '\0';
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  if (read_start_time(fd, out, size) != 0) out[0] = '\0';
  close(fd);
}

static void reset_signals(void) {
  for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/*
 * The init's own capabilities become exactly KEEP (a comma-separated list of names, "-" for none):
 * bwrap gave it KEEP plus setpcap (--cap-add), in the permitted, effective, inheritable and ambient
 * sets, and left the bounding set full with SECBIT_NOROOT set (root gains nothing at execve). The
 * bounding set is lowered to KEEP while setpcap allows it, then setpcap goes unless kept. Commands
 * inherit KEEP through the ambient set, as bwrap's --cap-add intends, and the bounding set is KEEP,
 * as the helper's exec mode left it.
 */
static int keep_only(char *keep_list) {
  uint64_t keep;
  if (parse_capabilities(keep_list, &keep, "rollout-sandbox-init") != 0) return -1;
  int failed;
  if (lower_bounding_set(keep, &failed) != 0) {
    perror("rollout-sandbox-init: drop a capability from the bounding set");
    return -1;
  }
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) != 0) return -1;
  for (int i = 0; i < 2; i++) {
    uint32_t mask = (uint32_t)(keep >> (32 * i));
    data[i].effective &= mask;
    data[i].permitted &= mask;
    data[i].inheritable &= mask;
  }
  if (syscall(SYS_capset, &header, data) != 0) {
    perror("rollout-sandbox-init: capset");
    return -1;
  }
  return 0;
}

/*
 * One connection from the host. The init is the parent of every command itself and serves all
 * connections from one poll loop: a helper process per command would be a process in the sandbox
 * that the command could kill (`kill -9 -1`), taking its exit status and output with it; pid 1 is
 * the one process of the namespace the kernel shields.
 */
enum phase { READING, RUNNING, AFTER_EXIT, KILL_WAIT };

struct session {
  int conn;
  enum phase phase;
  unsigned char *req;
  size_t req_have, req_want;
  pid_t child;
  int out[2];                 /* stdout, stderr read ends; -1 once closed */
  uint64_t total[2];
  int in_fd;
  const unsigned char *stdin_data;
  uint32_t stdin_len, stdin_sent;
  uint64_t max_output;
  int exited, status;
  long long exited_at, last_data;
  unsigned char *pend;        /* bytes for the host that the socket did not take yet */
  size_t pend_len;
  unsigned char frame[9];     /* an incoming 'K' */
  size_t frame_have;
  int host_gone;
  pid_t kill_wait;            /* 'Q': answer once this child is reaped */
  struct session *next;
};

static struct session *sessions;

/*
 * Output pipes whose command has ended but which a background process still holds: read and dropped
 * until their last writer closes them (teardown at the latest), so that writer never meets a closed
 * pipe. Growable; a pipe past what one poll can watch waits for room (its writer blocks when the pipe
 * is full, and lives).
 */
static int *orphans;
static size_t orphan_count, orphan_room;

static void orphan_pipe(int fd) {
  if (orphan_count == orphan_room) {
    size_t room = orphan_room ? orphan_room * 2 : 64;
    int *grown = realloc(orphans, room * sizeof *orphans);
    if (!grown) {
      close(fd); /* out of memory: the old behaviour, a closed pipe */
      return;
    }
    orphans = grown;
    orphan_room = room;
  }
  orphans[orphan_count++] = fd;
}

/* Reads and drops what an orphaned pipe holds; 1 once it reached its end (and is closed). */
static int orphan_drain(int fd) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;
    close(fd);
    return 1;
  }
}

/* The command's output pipes once nothing more of them goes to the host. */
static void session_release_pipes(struct session *s) {
  for (int i = 0; i < 2; i++)
    if (s->out[i] >= 0) {
      orphan_pipe(s->out[i]);
      s->out[i] = -1;
    }
}

static void session_queue(struct session *s, char type, const void *payload, uint32_t len) {
  if (s->host_gone) return;
  unsigned char header[5] = {(unsigned char)type, len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff, (len >> 24) & 0xff};
  unsigned char *grown = realloc(s->pend, s->pend_len + 5 + len);
  if (!grown) {
    s->host_gone = 1;
    return;
  }
  s->pend = grown;
  memcpy(s->pend + s->pend_len, header, 5);
  if (len) memcpy(s->pend + s->pend_len + 5, payload, len);
  s->pend_len += 5 + len;
}

/* Sends what is pending without blocking; the rest waits for POLLOUT. */
static void session_flush(struct session *s) {
  while (s->pend_len > 0 && !s->host_gone) {
    ssize_t n = send(s->conn, s->pend, s->pend_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      s->host_gone = 1;
      break;
    }
    memmove(s->pend, s->pend + n, s->pend_len - (size_t)n);
    s->pend_len -= (size_t)n;
  }
  if (s->host_gone) s->pend_len = 0;
}

static void session_exit_frame(struct session *s, int code, int sig) {
  unsigned char x[24];
  put_u32(x, (uint32_t)code);
  put_u32(x + 4, (uint32_t)sig);
  put_u64(x + 8, s->total[0]);
  put_u64(x + 16, s->total[1]);
  session_queue(s, 'X', x, sizeof x);
  s->phase = AFTER_EXIT;
}

/* A command that never ran: a message on stderr and exit code 1, as the helper's exec mode dies. */
static void session_fail(struct session *s, const char *what) {
  char text[512];
  int len = snprintf(text, sizeof text, "rollout-sandbox-init: %s: %s\n", what, strerror(errno));
  s->total[1] = (uint64_t)len;
  session_queue(s, 'E', text, (uint32_t)len);
  session_exit_frame(s, 1, 0);
}

static struct session *find_child(pid_t pid) {
  for (struct session *s = sessions; s; s = s->next)
    if (s->child == pid && !s->exited) return s;
  return NULL;
}

/* 'Q': SIGKILL a command group left by an earlier exec under the same key, if its leader is still that process. */
static void session_kill_group(struct session *s, const unsigned char *payload, size_t len) {
  s->total[0] = s->total[1] = 0;
  if (len < 4) {
    session_exit_frame(s, 0, 0);
    return;
  }
  pid_t pid = (pid_t)u32_at(payload);
  char expected[64], now[64];
  size_t text = len - 4 < sizeof expected - 1 ? len - 4 : sizeof expected - 1;
  memcpy(expected, payload + 4, text);
  expected[text] = '\0';
  start_time_of(pid, now, sizeof now);
  if (pid > 1 && now[0] != '\0' && strcmp(now, expected) == 0) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    if (find_child(pid)) {
      s->phase = KILL_WAIT;
      s->kill_wait = pid;
      return;
    }
  }
  session_exit_frame(s, 0, 0);
}

static void session_start(struct session *s) {
  unsigned char *payload = s->req + 5;
  uint32_t len = (uint32_t)(s->req_want - 5);
  if (s->req[0] == 'Q') {
    session_kill_group(s, payload, len);
    return;
  }
  errno = EPROTO;
  if (s->req[0] != 'R' || len < 20) {
    session_fail(s, "bad request");
    return;
  }
  for (int i = 7; i >= 0; i--) s->max_output = s->max_output << 8 | payload[i];
  uint32_t argc = u32_at(payload + 8), envc = u32_at(payload + 12), stdin_len = u32_at(payload + 16);
  if (argc == 0 || argc > 65536 || envc > 65536 || stdin_len > len - 20) {
    session_fail(s, "bad request");
    return;
  }
  char **argv = calloc(argc + 1u, sizeof *argv), **envp = calloc(envc + 1u, sizeof *envp);
  if (!argv || !envp) {
    free(argv);
    free(envp);
    session_fail(s, "out of memory");
    return;
  }
  char *p = (char *)payload + 20, *strings_end = (char *)payload + len - stdin_len;
  for (uint32_t i = 0; i < argc + envc; i++) {
    if (p >= strings_end || !memchr(p, '\0', (size_t)(strings_end - p))) {
      free(argv);
      free(envp);
      session_fail(s, "bad request");
      return;
    }
    if (i < argc) argv[i] = p;
    else envp[i - argc] = p;
    p += strlen(p) + 1;
  }
  s->stdin_data = (const unsigned char *)strings_end;
  s->stdin_len = stdin_len;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    int saved = errno;
    for (int i = 0; i < 2; i++) {
      if (in[i] >= 0) close(in[i]);
      if (out[i] >= 0) close(out[i]);
      if (err[i] >= 0) close(err[i]);
    }
    free(argv);
    free(envp);
    errno = saved;
    session_fail(s, "pipe");
    return;
  }
  pid_t child = fork();
  if (child == 0) {
    setsid();
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    syscall(SYS_close_range, 3, ~0u, 0);
    reset_signals();
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    execve(argv[0], argv, envp);
    int code = errno == ENOENT ? 127 : 126;
    dprintf(2, "rollout-sandbox-init: cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(code);
  }
  int saved = errno;
  free(argv);
  free(envp);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (child < 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    errno = saved;
    session_fail(s, "fork");
    return;
  }
  s->child = child;
  s->phase = RUNNING;
  s->out[0] = out[0];
  s->out[1] = err[0];
  s->in_fd = in[1];
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  if (stdin_len == 0) {
    close(s->in_fd);
    s->in_fd = -1;
  }
  unsigned char started[4 + 64];
  char st[64];
  start_time_of(child, st, sizeof st);
  put_u32(started, (uint32_t)child);
  size_t stlen = strlen(st);
  memcpy(started + 4, st, stlen);
  session_queue(s, 'S', started, (uint32_t)(4 + stlen));
}

/* The host's bytes: the request first, then 'K' frames; its end or an error means it is gone. */
static void session_read(struct session *s) {
  for (;;) {
    if (s->phase == READING) {
      size_t want = s->req_have < 5 ? 5 : s->req_want;
      if (s->req_have == want && want >= 5) {
        if (s->req_have == 5) {
          uint32_t len = u32_at(s->req + 1);
          if (len > MAX_REQUEST_BYTES) {
            s->host_gone = 1;
            return;
          }
          s->req_want = 5 + (size_t)len;
          unsigned char *grown = realloc(s->req, s->req_want + 1);
          if (!grown) {
            s->host_gone = 1;
            return;
          }
          s->req = grown;
          if (len > 0) continue;
        }
        session_start(s);
        return;
      }
      ssize_t n = recv(s->conn, s->req + s->req_have, want - s->req_have, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (n <= 0) {
        s->host_gone = 1;
        return;
      }
      s->req_have += (size_t)n;
      continue;
    }
    ssize_t n = recv(s->conn, s->frame + s->frame_have, sizeof s->frame - s->frame_have, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      s->host_gone = 1;
      return;
    }
    s->frame_have += (size_t)n;
    if (s->frame_have == sizeof s->frame) {
      if (s->frame[0] == 'K' && s->child > 0) kill(-s->child, (int)u32_at(s->frame + 5));
      s->frame_have = 0;
    }
  }
}

/* Reads what a pipe has; the part within max-output goes to the host, the rest is only counted. */
static void session_pump(struct session *s, int which) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(s->out[which], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      close(s->out[which]);
      s->out[which] = -1;
      return;
    }
    s->last_data = now_ms();
    uint64_t room = s->total[which] < s->max_output ? s->max_output - s->total[which] : 0;
    s->total[which] += (uint64_t)n;
    if (room > 0) session_queue(s, which == 0 ? 'O' : 'E', buf, (uint32_t)((uint64_t)n < room ? (uint64_t)n : room));
    /* Backpressure: nothing more is read until the host took this. */
    session_flush(s);
    if (s->pend_len > 0) return;
  }
}

static void session_free(struct session *s) {
  session_release_pipes(s);
  if (s->in_fd >= 0) close(s->in_fd);
  close(s->conn);
  free(s->req);
  free(s->pend);
  free(s);
}

/* After the command exited: its pipes are read until they close or stay idle (a background job may hold them). */
static int drained(struct session *s, long long now) {
  return (s->out[0] < 0 && s->out[1] < 0) || now - s->last_data >= IDLE_AFTER_EXIT_MS || now - s->exited_at >= DRAIN_CAP_MS;
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (struct session *s = sessions; s; s = s->next) {
      if (s->phase == KILL_WAIT && s->kill_wait == pid) session_exit_frame(s, 0, 0);
      if (s->child == pid && !s->exited) {
        s->exited = 1;
        s->status = status;
        s->exited_at = s->last_data = now_ms();
        if (s->in_fd >= 0) close(s->in_fd);
        s->in_fd = -1;
      }
    }
  }
}

/* One pass over every session: what it waits for goes into fds (with the session beside it). */
static int session_polls(struct pollfd *fds, struct session **owner, int max) {
  int n = 0;
  for (struct session *s = sessions; s && n + 4 <= max; s = s->next) {
    short conn_events = s->host_gone ? 0 : (short)(POLLIN | (s->pend_len > 0 ? POLLOUT : 0));
    if (conn_events) { fds[n] = (struct pollfd){s->conn, conn_events, 0}; owner[n++] = s; }
    if (s->phase != RUNNING || s->pend_len > 0) continue;
    for (int i = 0; i < 2; i++)
      if (s->out[i] >= 0) { fds[n] = (struct pollfd){s->out[i], POLLIN, 0}; owner[n++] = s; }
    if (s->in_fd >= 0) { fds[n] = (struct pollfd){s->in_fd, POLLOUT, 0}; owner[n++] = s; }
  }
  return n;
}

static void session_event(struct session *s, struct pollfd *p) {
  if (p->fd == s->conn) {
    if (p->revents & POLLOUT) session_flush(s);
    if (p->revents & (POLLIN | POLLHUP | POLLERR)) session_read(s);
    return;
  }
  for (int i = 0; i < 2; i++)
    if (p->fd == s->out[i]) session_pump(s, i);
  if (p->fd == s->in_fd && s->in_fd >= 0) {
    ssize_t w = write(s->in_fd, s->stdin_data + s->stdin_sent, s->stdin_len - s->stdin_sent);
    if (w > 0) s->stdin_sent += (uint32_t)w;
    if ((w < 0 && errno != EAGAIN && errno != EINTR) || s->stdin_sent == s->stdin_len) {
      close(s->in_fd);
      s->in_fd = -1;
    }
  }
}

/* Moves every session on: a gone host kills its command, a drained command sends 'X', a finished session goes. */
static void sessions_advance(void) {
  long long now = now_ms();
  for (struct session **link = &sessions; *link;) {
    struct session *s = *link;
    if (s->pend_len > 0) session_flush(s);
    if (s->host_gone && s->phase == RUNNING && !s->exited && s->child > 0) kill(-s->child, SIGKILL);
    if (s->phase == RUNNING && s->exited && !s->host_gone && s->pend_len == 0) {
      /* What the pipes hold now counts as fresh output (reading may have waited for the host). */
      for (int i = 0; i < 2 && s->pend_len == 0; i++)
        if (s->out[i] >= 0) session_pump(s, i);
      now = now_ms();
    }
    if (s->phase == RUNNING && s->exited && (s->host_gone || (s->pend_len == 0 && drained(s, now)))) {
      int code = WIFEXITED(s->status) ? WEXITSTATUS(s->status) : -1;
      int sig = WIFSIGNALED(s->status) ? WTERMSIG(s->status) : 0;
      session_release_pipes(s);
      session_exit_frame(s, code, sig);
      session_flush(s);
    }
    int done = s->host_gone && (s->phase != RUNNING) && s->phase != KILL_WAIT;
    if (done) {
      *link = s->next;
      session_free(s);
    } else {
      link = &s->next;
    }
  }
}

/* How long poll may sleep: a command draining after its exit needs its idle clock checked. */
static int poll_timeout(void) {
  for (struct session *s = sessions; s; s = s->next)
    if (s->phase == RUNNING && s->exited) return IDLE_AFTER_EXIT_MS / 4;
  return -1;
}

int init_main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: rollout-sandbox-helper init LISTEN-FD EXE-FD KEEP-CAPS\n");
    return 2;
  }
  int listener = atoi(argv[2]);
  close(atoi(argv[3]));
  /* Whatever else the host left open stays out of the sandbox (fd 4 is the ready pipe, closed below). */
  for (int fd = 3; fd < 8; fd++)
    if (fd != listener && fd != 4) close(fd);
  syscall(SYS_close_range, 8, ~0u, 0);
  if (keep_only(argv[4]) != 0) return 96;
  /* Nothing in the sandbox may ptrace the init, read its memory or take its descriptors. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  /* What `ps` shows inside (exec'd as /proc/self/fd/6, it would be "6"). */
  prctl(PR_SET_NAME, "rollout-init", 0, 0, 0);
  fcntl(listener, F_SETFD, FD_CLOEXEC);
  fcntl(listener, F_SETFL, O_NONBLOCK);
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGCHLD && sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    perror("rollout-sandbox-init: signalfd");
    return 96;
  }
  if (write(4, "ready\n", 6) != 6) {
    perror("rollout-sandbox-init: cannot say ready on fd 4");
    return 96;
  }
  close(4);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    /* The launcher's log stays the launcher's: what the init would print has no reader. */
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    close(devnull);
  }
  enum { MAX_POLL = 4096 };
  static struct pollfd fds[MAX_POLL];
  static struct session *owner[MAX_POLL];
  for (;;) {
    fds[0] = (struct pollfd){listener, POLLIN, 0};
    fds[1] = (struct pollfd){sigfd, POLLIN, 0};
    int n = 2 + session_polls(fds + 2, owner + 2, MAX_POLL - 2);
    int first_orphan = n;
    for (size_t i = 0; i < orphan_count && n < MAX_POLL; i++) fds[n++] = (struct pollfd){orphans[i], POLLIN, 0};
    if (poll(fds, (nfds_t)n, poll_timeout()) < 0) continue;
    /* Orphaned pipes first: their slots in fds follow the order of orphans[], which this compacts. */
    size_t kept = 0;
    for (size_t i = 0; i < orphan_count; i++) {
      int watched = first_orphan + (int)i < n;
      if (watched && fds[first_orphan + i].revents && orphan_drain(orphans[i])) continue;
      orphans[kept++] = orphans[i];
    }
    orphan_count = kept;
    if (fds[1].revents) {
      struct signalfd_siginfo info;
      while (read(sigfd, &info, sizeof info) > 0) {}
      reap();
    }
    for (int i = 2; i < first_orphan; i++)
      if (fds[i].revents) session_event(owner[i], &fds[i]);
    if (fds[0].revents) {
      for (;;) {
        int conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (conn < 0) break;
        struct session *s = calloc(1, sizeof *s);
        unsigned char *req = malloc(6);
        if (!s || !req) {
          free(s);
          free(req);
          close(conn);
          continue;
        }
        *s = (struct session){.conn = conn, .phase = READING, .req = req, .req_want = 5, .out = {-1, -1}, .in_fd = -1, .next = sessions};
        sessions = s;
        session_read(s);
        session_flush(s);
      }
    }
    /* A command may have exited between the signalfd read and now: its SIGCHLD wakes the next poll. */
    sessions_advance();
  }
}
