// SPDX-License-Identifier: GPL-2.0
/*
 * XDP programs for the kernel chain-call tests (xdpchain.c). Each program
 * handles only test packets - UDP to port XDPCHAIN_PORT, which is what the
 * test runs and the veth traffic carry - and passes anything else untouched,
 * so ARP and the like never disturb a count. For a test packet a program
 * bumps its own slot in `hits` and returns its action:
 *
 *   pass_a, pass_b       slot 0, 1   XDP_PASS
 *   drop_c               slot 2      XDP_DROP
 *   tx_d                 slot 3      XDP_TX
 *   aborted_e            slot 4      XDP_ABORTED
 *   mark_f               slot 5      writes MARK into the first payload byte, XDP_PASS
 *   check_g              slot 6      XDP_DROP if the payload starts with MARK, else
 *                                    XDP_ABORTED: the buffer it got is the one
 *                                    the previous program changed
 *   ret_cfg              slot 7      returns cfg[0] (any value, also invalid ones)
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define XDPCHAIN_PORT 47001
#define MARK 0xf5

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cfg SEC(".maps");

/* The first payload byte of a test packet, or NULL for other packets. */
static __always_inline __u8 *test_payload(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	__u8 *payload = (void *)(udp + 1);

	if ((void *)(payload + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return NULL;
	if (ip->protocol != IPPROTO_UDP || ip->ihl != 5 || udp->dest != bpf_htons(XDPCHAIN_PORT))
		return NULL;
	return payload;
}

static __always_inline void count(__u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(&hits, &slot);

	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline int count_and_return(struct xdp_md *ctx, __u32 slot, int action)
{
	if (!test_payload(ctx))
		return XDP_PASS;
	count(slot);
	return action;
}

SEC("xdp")
int pass_a(struct xdp_md *ctx)
{
	return count_and_return(ctx, 0, XDP_PASS);
}

SEC("xdp")
int pass_b(struct xdp_md *ctx)
{
	return count_and_return(ctx, 1, XDP_PASS);
}

SEC("xdp")
int drop_c(struct xdp_md *ctx)
{
	return count_and_return(ctx, 2, XDP_DROP);
}

SEC("xdp")
int tx_d(struct xdp_md *ctx)
{
	return count_and_return(ctx, 3, XDP_TX);
}

SEC("xdp")
int aborted_e(struct xdp_md *ctx)
{
	return count_and_return(ctx, 4, XDP_ABORTED);
}

SEC("xdp")
int mark_f(struct xdp_md *ctx)
{
	__u8 *payload = test_payload(ctx);

	if (!payload)
		return XDP_PASS;
	count(5);
	*payload = MARK;
	return XDP_PASS;
}

SEC("xdp")
int check_g(struct xdp_md *ctx)
{
	__u8 *payload = test_payload(ctx);

	if (!payload)
		return XDP_PASS;
	count(6);
	return *payload == MARK ? XDP_DROP : XDP_ABORTED;
}

SEC("xdp")
int ret_cfg(struct xdp_md *ctx)
{
	__u32 zero = 0, *ret;

	if (!test_payload(ctx))
		return XDP_PASS;
	count(7);
	ret = bpf_map_lookup_elem(&cfg, &zero);
	return ret ? *ret : XDP_ABORTED;
}

char LICENSE[] SEC("license") = "GPL";
