/**
 * The fixed text a local sandbox is built from: the shell scripts of the
 * program chain (used when the compiled helper is absent), the keeper that is
 * the sandbox's pid 1, and the synthetic /etc files.
 */

export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Shell run by `unshare --mount`: mounts the writable layer and overlay in the
 * private namespace, runs bwrap, and writes how the sandbox's init ended to
 * `init-exit` in the state directory (bwrap's status: 137 when the host
 * SIGKILLed it; anything else means it exited on its own). Failure
 * attribution reads it (lossEvidence). The helper's launch mode does the same.
 */
export const MOUNT_SCRIPT = [
  'set -e',
  'state=$1; lower=$2; layer=$3; shift 3',
  // The writable layer: a loop device of its file on disk (diskLayer.ts), else a tmpfs of that size.
  'case $layer in /*) mount -t ext4 -o noatime "$layer" "$state/rw" ;; *) mount -t tmpfs -o "size=$layer,mode=0755" rollout-rw "$state/rw" ;; esac',
  'mkdir "$state/rw/upper" "$state/rw/work"',
  'mount -t overlay overlay -o "lowerdir=$lower,upperdir=$state/rw/upper,workdir=$state/rw/work" "$state/merged"',
  'set +e',
  '"$@"',
  'echo $? > "$state/init-exit"',
].join('\n');
/**
 * Shell run by `nsenter --mount=... --net=...` and `unshare --mount` for a sandbox beside another (its
 * verifier, provisionBeside): the other launcher's mount namespace is already entered and copied, so
 * there is nothing to mount; runs bwrap and writes how its init ended, as MOUNT_SCRIPT does.
 */
export const BESIDE_SCRIPT = ['exit_file=$1; shift', '"$@"', 'echo $? > "$exit_file"'].join('\n');
export const INIT_EXIT_FILE = 'init-exit';
/** The exec server's socket in the state directory (helper/sandbox-init.c). */
export const EXEC_SOCKET_FILE = 'exec.sock';

/** Joins the sandbox's cgroups (paths in ROLLOUT_CGROUP_PROCS), then becomes the given command. */
export const JOIN_CGROUP_SCRIPT = 'for f in $ROLLOUT_CGROUP_PROCS; do echo $$ > "$f" || exit 97; done; unset ROLLOUT_CGROUP_PROCS; exec "$@"';

/**
 * The sandbox's init (pid 1, bwrap --as-pid-1): tells the host it is up (fd 4),
 * then idles until teardown, reaping orphans as they die. The kernel drops
 * every signal that processes of a pid namespace send its init unless the init
 * handles it, and this one ignores all it could handle, so nothing inside the
 * sandbox can end it: an agent that kills every process it may signal
 * (`kill -9 -1`) leaves a live sandbox to verify. Only the host ends it.
 * Builtins only (read -t, wait): no child of its own for stopProcesses to kill.
 */
export const KEEPER_SCRIPT = [
  "trap '' HUP INT QUIT TERM USR1 USR2 ALRM PIPE TSTP TTIN TTOU",
  // Reaps at once when an orphan dies: a killed fork bomb's zombies would hold the pids limit.
  "trap 'wait' CHLD",
  'mkfifo /tmp/.rollout-init && exec 5<>/tmp/.rollout-init && rm -f /tmp/.rollout-init || exit 96',
  'echo ready >&4; exec 4>&-',
  'while :; do read -r -t 1 -u 5 _ || wait; done',
].join('\n');

export const PASSWD = 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n';
export const GROUP = 'root:x:0:\nnogroup:x:65534:\n';
/**
 * The name service switch of a verifier beside the agent when the image has none of its own (glibc's
 * defaults, written out): the verifier's lookups never read the agent's (integrity: loaderView.ts).
 */
export const NSSWITCH = 'passwd: files\ngroup: files\nshadow: files\ngshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\nethers: files\nrpc: files\nnetgroup: files\n';
export const HOSTS = '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n';
/** Parts of /proc that write to the host kernel; the sysctls under /proc/sys/net stay per namespace when bound from the host. */
export const PROC_READ_ONLY = ['/proc/sys', '/proc/sysrq-trigger', '/proc/fs', '/proc/bus', '/proc/irq'];
/** Host /etc entries that programs need and that say nothing about the host. */
export const HOST_ETC_ENTRIES = [
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'alternatives',
  'nsswitch.conf',
  'localtime',
  'ssl',
  'ca-certificates',
  'mime.types',
  'python3',
  'python3.11',
  'bash.bashrc',
  'inputrc',
  'profile',
];
