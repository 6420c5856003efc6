/* The init and exec server of a local sandbox (sandbox-init.c), a mode of rollout-sandbox-helper. */
#ifndef ROLLOUT_SANDBOX_INIT_H
#define ROLLOUT_SANDBOX_INIT_H
int init_main(int argc, char **argv);
#endif
