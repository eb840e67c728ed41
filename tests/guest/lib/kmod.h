/* SPDX-License-Identifier: GPL-2.0 */
/* Loading and unloading the guest tests' kernel modules. */
#ifndef BPFMUX_TEST_KMOD_H
#define BPFMUX_TEST_KMOD_H

#include <stddef.h>

/*
 * The file of module @name: @name.ko in $BPFMUX_KMOD_DIR (modules built for another
 * kernel build: tests/guest/kasan.sh, the KASAN one), else in @dir.
 */
void kmod_file(char *buf, size_t size, const char *dir, const char *name);

/* Whether module @name is loaded. */
int kmod_is_loaded(const char *name);

/* Load the module file @path with @params: 0, or the errno (its init's error, e.g.). */
int kmod_insert(const char *path, const char *params);

/* Unload module @name without waiting for its users: 0 or the errno. */
int kmod_remove(const char *name);

#endif
