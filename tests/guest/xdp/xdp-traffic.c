// SPDX-License-Identifier: GPL-2.0
/*
 * Traffic and counters for the `bpfmux xdp` guest checks.
 *
 *   xdp-traffic send SRC_NS DST_NS DST_IP COUNT PPS
 *       sends COUNT numbered UDP packets (port 47000) from network namespace
 *       SRC_NS to DST_IP, received by a socket in DST_NS; prints
 *       "sent N received M". With COUNT 0 it sends until SIGTERM/SIGINT.
 *   xdp-traffic hits            counters of the test programs (pinned map),
 *                               one line: "a=N b=N c=N d=N e=N"
 *   xdp-traffic reset           zeroes them
 *   xdp-traffic progs           names of every loaded BPF program, one a line
 *   xdp-traffic foreign IFACE OBJ PROG
 *                               attaches PROG of OBJ to IFACE through netlink,
 *                               as a tool other than bpfmux would
 *
 * Namespaces are names under /run/netns (ip netns add). Exit status 0 on
 * success; errors are printed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define TEST_PORT 47000
#define HITS_PIN "/sys/fs/bpf/bpfmux_test_hits"
#define NR_HITS 5

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void die(const char *what)
{
	fprintf(stderr, "xdp-traffic: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void enter_netns(const char *name)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path);
	if (setns(fd, CLONE_NEWNET))
		die("setns");
	close(fd);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads every datagram waiting; marks each sequence number seen once. */
static void drain(int rx, unsigned char *seen, long cap, long *received)
{
	uint64_t seq;

	while (recv(rx, &seq, sizeof(seq), MSG_DONTWAIT) == sizeof(seq)) {
		if ((long)seq < cap && !seen[seq]) {
			seen[seq] = 1;
			(*received)++;
		}
	}
}

static int cmd_send(const char *src, const char *dst, const char *ip, long count, long pps)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(TEST_PORT) };
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(TEST_PORT) };
	long cap = count ? count : 10 * 1000 * 1000, sent = 0, received = 0;
	unsigned char *seen = calloc(cap, 1);
	int rx, tx, big = 8 << 20;
	double start, end;

	if (!seen)
		die("calloc");
	if (inet_pton(AF_INET, ip, &to.sin_addr) != 1) {
		fprintf(stderr, "xdp-traffic: bad address %s\n", ip);
		return 1;
	}
	/* A socket stays in the namespace it was created in. */
	enter_netns(dst);
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	if (rx < 0)
		die("socket");
	setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	if (bind(rx, (struct sockaddr *)&any, sizeof(any)))
		die("bind");
	enter_netns(src);
	tx = socket(AF_INET, SOCK_DGRAM, 0);
	if (tx < 0)
		die("socket");
	if (connect(tx, (struct sockaddr *)&to, sizeof(to)))
		die("connect");

	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	start = now();
	while (!stop && (count == 0 || sent < count) && sent < cap) {
		uint64_t seq = sent;

		/* pace: packet i leaves at start + i/pps */
		while (now() < start + (double)sent / pps)
			drain(rx, seen, cap, &received);
		if (send(tx, &seq, sizeof(seq), 0) != sizeof(seq)) {
			if (errno == ENOBUFS || errno == EAGAIN)
				continue;
			die("send");
		}
		sent++;
		drain(rx, seen, cap, &received);
	}
	/* let the last packets arrive */
	end = now() + 0.5;
	while (now() < end && received < sent)
		drain(rx, seen, cap, &received);
	printf("sent %ld received %ld\n", sent, received);
	return 0;
}

static int cmd_hits(int reset)
{
	int fd = bpf_obj_get(HITS_PIN);
	const char *names = "abcde";

	if (fd < 0)
		die(HITS_PIN);
	for (__u32 i = 0; i < NR_HITS; i++) {
		__u64 v = 0;

		if (reset) {
			if (bpf_map_update_elem(fd, &i, &v, BPF_ANY))
				die("reset counter");
			continue;
		}
		if (bpf_map_lookup_elem(fd, &i, &v))
			die("read counter");
		printf("%s%c=%llu", i ? " " : "", names[i], (unsigned long long)v);
	}
	if (!reset)
		putchar('\n');
	return 0;
}

static int cmd_progs(void)
{
	__u32 id = 0;

	while (!bpf_prog_get_next_id(id, &id)) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(id);

		if (fd < 0)
			continue;	/* freed meanwhile */
		if (!bpf_prog_get_info_by_fd(fd, &info, &len))
			printf("%u %s\n", id, info.name);
		close(fd);
	}
	return 0;
}

static int cmd_foreign(const char *iface, const char *obj_path, const char *name)
{
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	struct bpf_program *prog;
	int ifindex = if_nametoindex(iface), err;

	if (!ifindex)
		die(iface);
	if (!obj)
		die(obj_path);
	bpf_object__for_each_program(prog, obj)
		bpf_program__set_autoload(prog, !strcmp(bpf_program__name(prog), name));
	err = bpf_object__load(obj);
	if (err) {
		errno = -err;
		die("load");
	}
	prog = bpf_object__find_program_by_name(obj, name);
	if (!prog) {
		fprintf(stderr, "xdp-traffic: no program %s\n", name);
		return 1;
	}
	err = bpf_xdp_attach(ifindex, bpf_program__fd(prog), XDP_FLAGS_UPDATE_IF_NOEXIST, NULL);
	if (err) {
		errno = -err;
		die("bpf_xdp_attach");
	}
	printf("attached %s to %s through netlink\n", name, iface);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(cmd, "send") && argc == 7)
		return cmd_send(argv[2], argv[3], argv[4], atol(argv[5]), atol(argv[6]));
	if (!strcmp(cmd, "hits") && argc == 2)
		return cmd_hits(0);
	if (!strcmp(cmd, "reset") && argc == 2)
		return cmd_hits(1);
	if (!strcmp(cmd, "progs") && argc == 2)
		return cmd_progs();
	if (!strcmp(cmd, "foreign") && argc == 5)
		return cmd_foreign(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: xdp-traffic send SRC_NS DST_NS DST_IP COUNT PPS | hits | reset | progs\n"
			"       xdp-traffic foreign IFACE OBJ PROG\n");
	return 2;
}
