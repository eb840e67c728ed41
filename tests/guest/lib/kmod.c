// SPDX-License-Identifier: GPL-2.0
/* Loading and unloading the guest tests' kernel modules. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "kmod.h"

void kmod_file(char *buf, size_t size, const char *dir, const char *name)
{
	const char *env = getenv("BPFMUX_KMOD_DIR");

	snprintf(buf, size, "%s/%s.ko", env ? env : dir, name);
}

int kmod_is_loaded(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	return access(path, F_OK) == 0;
}

int kmod_insert(const char *path, const char *params)
{
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (syscall(SYS_finit_module, fd, params, 0))
		err = errno;
	close(fd);
	return err;
}

int kmod_remove(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) ? errno : 0;
}
