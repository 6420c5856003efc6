/* What sandbox-helper.c and sandbox-init.c share (common.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "common.h"

const char *const CAP_NAMES[] = {
    "chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid",
    "setpcap", "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw",
    "ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
    "sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time", "sys_tty_config", "mknod",
    "lease", "audit_write", "audit_control", "setfcap", "mac_override", "mac_admin", "syslog",
    "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
};
const int CAP_NAME_COUNT = (int)(sizeof(CAP_NAMES) / sizeof(CAP_NAMES[0]));

int parse_capabilities(char *list, uint64_t *set, const char *who) {
  *set = 0;
  if (strcmp(list, "-") == 0) return 0;
  for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
    int found = -1;
    for (int i = 0; i < CAP_NAME_COUNT; i++) if (strcmp(CAP_NAMES[i], name) == 0) found = i;
    if (found < 0) {
      fprintf(stderr, "%s: unknown capability %s\n", who, name);
      return -1;
    }
    *set |= 1ull << found;
  }
  return 0;
}

int lower_bounding_set(uint64_t keep, int *failed) {
  for (int cap = 0; cap < 64; cap++) {
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) break;
    if (!(keep >> cap & 1) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      *failed = cap;
      return -1;
    }
  }
  return 0;
}

int read_start_time(int stat_fd, char *out, size_t size) {
  char buf[4096];
  ssize_t n = read(stat_fd, buf, sizeof buf - 1);
  if (n <= 0) return -1;
  buf[n] = '\0';
  /* The command (field 2) may hold spaces and parentheses: the fields after it follow the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p || p[1] == '\0') return -1;
  p += 2; /* field 3, the state */
  if (*p == 'Z' || *p == 'X') return -1;
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p) return -1;
    p++;
  }
  size_t len = strcspn(p, " ");
  if (len >= size) return -1;
  memcpy(out, p, len);
  out[len] = '\0';
  return 0;
}
