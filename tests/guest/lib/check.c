// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

int check_failures;

void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!ok)
		check_failures++;
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void prog_dir(char *buf, size_t size, const char *argv0)
{
	char *slash;

	snprintf(buf, size, "%s", argv0);
	slash = strrchr(buf, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(buf, size, ".");
}

int close_synced(FILE *f)
{
	fflush(f);
	fsync(fileno(f));
	return fclose(f);
}
