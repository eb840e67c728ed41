// SPDX-License-Identifier: GPL-2.0
/*
 * Test programs for `bpfmux xdp`. Each program looks only at the test traffic
 * (UDP to port XDP_TEST_PORT, see xdp-traffic.c) and passes everything else
 * untouched, so ARP and the like never disturb a count. For test packets
 * each program bumps its own counter in a map pinned by name (shared by
 * every load of this object, so counts survive set replacement) and returns
 * its action:
 *
 *   pass_a, pass_b, pass_c   count in slot 0, 1, 2; XDP_PASS
 *   drop_d                   count in slot 3;      XDP_DROP
 *   aborted_e                count in slot 4;      XDP_ABORTED
 *   bad_verify               rejected by the verifier (reads past the packet)
 *   not_xdp                  a tc program (attach must refuse it)
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define XDP_TEST_PORT 47000

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bpfmux_test_hits SEC(".maps");

static __always_inline int is_test_packet(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	if (ip->protocol != IPPROTO_UDP || ip->ihl != 5)
		return 0;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end)
		return 0;
	return udp->dest == bpf_htons(XDP_TEST_PORT);
}

static __always_inline int count_and_return(struct xdp_md *ctx, __u32 slot, int action)
{
	__u64 *hits;

	if (!is_test_packet(ctx))
		return XDP_PASS;
	hits = bpf_map_lookup_elem(&bpfmux_test_hits, &slot);
	if (hits)
		__sync_fetch_and_add(hits, 1);
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
int pass_c(struct xdp_md *ctx)
{
	return count_and_return(ctx, 2, XDP_PASS);
}

SEC("xdp")
int drop_d(struct xdp_md *ctx)
{
	return count_and_return(ctx, 3, XDP_DROP);
}

SEC("xdp")
int aborted_e(struct xdp_md *ctx)
{
	return count_and_return(ctx, 4, XDP_ABORTED);
}

SEC("xdp")
int bad_verify(struct xdp_md *ctx)
{
	/* no bounds check: the verifier must refuse this */
	unsigned char *data = (void *)(long)ctx->data;

	return data[100] ? XDP_PASS : XDP_DROP;
}

SEC("tc")
int not_xdp(struct __sk_buff *skb)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
