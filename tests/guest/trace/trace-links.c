// SPDX-License-Identifier: GPL-2.0
/*
 * Lists the BPF links that exist in the kernel right now, whoever holds them (there is no
 * bpftool in the guest), for the `bpfmux trace` checks that nothing stays attached:
 *
 *   trace-links [PREFIX]
 *   trace-links --progs [PREFIX]
 *
 * Walks every link id (BPF_LINK_GET_NEXT_ID) and prints "id type prog_id prog_name" per
 * link whose program name starts with PREFIX (all links without one), then
 * "links: N" last. With --progs, the programs instead (BPF_PROG_GET_NEXT_ID), linked or
 * not, whoever holds them: "id prog_name" each, then "progs: N". Exit status 0 when the
 * walk worked, 1 on any error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

static int list_progs(const char *prefix)
{
	__u32 id = 0, n = 0;

	for (;;) {
		struct bpf_prog_info prog = {};
		__u32 len = sizeof(prog);
		int fd;

		if (bpf_prog_get_next_id(id, &id)) {
			if (errno == ENOENT)
				break;
			perror("trace-links: BPF_PROG_GET_NEXT_ID");
			return 1;
		}
		fd = bpf_prog_get_fd_by_id(id);
		if (fd < 0) {
			if (errno == ENOENT)	/* freed since the walk saw it */
				continue;
			fprintf(stderr, "trace-links: program %u: %s\n", id, strerror(errno));
			return 1;
		}
		if (bpf_prog_get_info_by_fd(fd, &prog, &len)) {
			fprintf(stderr, "trace-links: info of program %u: %s\n", id, strerror(errno));
			close(fd);
			return 1;
		}
		close(fd);
		if (strncmp(prog.name, prefix, strlen(prefix)))
			continue;
		printf("%u %s\n", id, prog.name);
		n++;
	}
	printf("progs: %u\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	const char *prefix;
	__u32 id = 0, n = 0;

	if (argc > 1 && !strcmp(argv[1], "--progs"))
		return list_progs(argc > 2 ? argv[2] : "");
	prefix = argc > 1 ? argv[1] : "";

	for (;;) {
		struct bpf_link_info link = {};
		struct bpf_prog_info prog = {};
		__u32 len = sizeof(link);
		int fd, pfd;

		if (bpf_link_get_next_id(id, &id)) {
			if (errno == ENOENT)
				break;
			perror("trace-links: BPF_LINK_GET_NEXT_ID");
			return 1;
		}
		/* EAGAIN: the link is being created (its id is not published yet): wait. */
		for (int tries = 0; (fd = bpf_link_get_fd_by_id(id)) < 0 && errno == EAGAIN &&
				    tries < 200; tries++)
			usleep(5000);
		if (fd < 0) {
			if (errno == ENOENT)	/* released since the walk saw it */
				continue;
			fprintf(stderr, "trace-links: link %u: %s\n", id, strerror(errno));
			return 1;
		}
		if (bpf_link_get_info_by_fd(fd, &link, &len)) {
			fprintf(stderr, "trace-links: info of link %u: %s\n", id, strerror(errno));
			close(fd);
			return 1;
		}
		close(fd);
		pfd = bpf_prog_get_fd_by_id(link.prog_id);
		if (pfd >= 0) {
			len = sizeof(prog);
			if (bpf_prog_get_info_by_fd(pfd, &prog, &len))
				prog.name[0] = 0;
			close(pfd);
		}
		if (strncmp(prog.name, prefix, strlen(prefix)))
			continue;
		printf("%u %u %u %s\n", id, link.type, link.prog_id, prog.name);
		n++;
	}
	printf("links: %u\n", n);
	return 0;
}
