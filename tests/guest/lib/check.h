/* SPDX-License-Identifier: GPL-2.0 */
/* TAP-like checks for the guest test programs: "ok - ..." / "FAIL - ..." lines. */
#ifndef BPFMUX_TEST_CHECK_H
#define BPFMUX_TEST_CHECK_H

#include <stddef.h>
#include <stdio.h>

/* Failed checks so far; a program exits non-zero when this is not 0. */
extern int check_failures;

void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* CLOCK_MONOTONIC in seconds. */
double now(void);

/* The directory of the running program (from argv[0]), where its .bpf.o files sit. */
void prog_dir(char *buf, size_t size, const char *argv0);

/* fflush, fsync and fclose: a result file that survives a guest dying right after. */
int close_synced(FILE *f);

#endif
