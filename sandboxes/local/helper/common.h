/*
 * What the helper's modes (sandbox-helper.c) and the sandbox's init (sandbox-init.c), one binary,
 * both do: name capabilities and lower the bounding set to a kept few, and read a process's start
 * time from /proc, by which a pid is told from a recycled one.
 */
#ifndef ROLLOUT_SANDBOX_COMMON_H
#define ROLLOUT_SANDBOX_COMMON_H
#include <stddef.h>
#include <stdint.h>

/* Capability names in kernel order (chown is 0), as setpriv and bwrap's --cap-add take them without "cap_". */
extern const char *const CAP_NAMES[];
extern const int CAP_NAME_COUNT;

/*
 * A comma-separated list of capability names ("-": none) as a bit set, bit N for capability N.
 * Cuts up `list` (strtok). -1 for a name not in CAP_NAMES, said on stderr as "WHO: unknown capability NAME".
 */
int parse_capabilities(char *list, uint64_t *set, const char *who);

/*
 * Drops from the bounding set every capability not in `keep`, of those the kernel knows (up to the
 * first that PR_CAPBSET_READ refuses). 0, or -1 with errno set and *failed the capability that stayed.
 */
int lower_bounding_set(uint64_t keep, int *failed);

/*
 * Field 22 of /proc/<pid>/stat (the start time in clock ticks) as text, read from the open stat file.
 * 0, or -1 when the file cannot be read, the process is a zombie or dead, or the field does not fit `size`.
 */
int read_start_time(int stat_fd, char *out, size_t size);

#endif
