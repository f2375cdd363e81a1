/*
 * linkrelay.c - a link with a delay and a loss, in user space: every
 * frame that arrives on one interface leaves by the other after a fixed
 * time, or is lost.
 *
 * usage: linkrelay [-d DELAY_US] [-l LOSS] [-s SEED] [-b BYTES] IF_A IF_B
 *
 * The test hosts (tests/hosts.sh) are network namespaces joined to a
 * bridge by veth pairs; a kernel without netem cannot delay what crosses
 * them.  Put between a host's veth and the bridge (a second veth pair
 * whose far end is in the bridge), linkrelay is that host's link: it
 * reads each Ethernet frame that arrives on IF_A or IF_B through a
 * packet socket, holds it DELAY_US microseconds (0), and sends it out of
 * the other interface, both ways, in the order it came; with -l it loses
 * each frame with probability LOSS (0 to 1, a generator seeded with
 * SEED, 1).  Every protocol crosses it (ARP, TCP, what gloo speaks), so
 * a TCP connection sees the round trip a WAN link would give, windows
 * and all.  Its rate is the veths' (tc tbf): frames it sends go through
 * the qdisc of the interface they leave by.
 *
 * The delay is a lower bound: a frame leaves no sooner than DELAY_US
 * after it was read, later when this process is not scheduled in time
 * (a loaded machine adds its own latency, as a real one does).  Frames
 * waiting in one direction are capped at BYTES (64 MiB): past it a
 * frame is dropped, as a full router queue drops one.  A frame the
 * kernel will not queue (ENOBUFS: the token bucket's queue is full) is
 * dropped too; one it cannot take yet (EAGAIN) waits.  GSO frames and
 * checksums left to the hardware cross whole, described by the virtio
 * header the packet sockets carry (PACKET_VNET_HDR).
 *
 * It runs until SIGTERM or SIGINT, or until an interface is removed
 * (exit 0: a run killed leaves none behind), prints nothing while it
 * runs, and on an error in setting up prints one line and exits 1 (2 for
 * a usage error).  It needs CAP_NET_RAW.  A test helper: not installed.
 */
#include <errno.h>
#include <limits.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

/* the largest frame read: a GSO frame of 64 KiB and its headers, and
 * room to tell a larger one (MSG_TRUNC) */
#define FRAME_MAX (256 * 1024)

struct frame {
	struct frame *next;
	uint64_t due; /* CLOCK_MONOTONIC, ns */
	size_t len;
	unsigned char data[]; /* virtio_net_hdr, then the Ethernet frame */
};

/* one direction: frames read from in, to leave by out */
struct way {
	int in, out;
	int in_index, out_index;
	struct frame *head, *tail;
	size_t bytes;
};

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: the loss draws */
static uint64_t rng_state;

static double
draw(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0;
}

/* open_if NAME INDEX: a packet socket bound to interface NAME, reading
 * every frame that arrives on it (not those sent from it), each behind a
 * virtio header; its index in *index.  -1 after a message. */
static int
open_if(const char *name, int *index)
{
	struct sockaddr_ll sll;
	struct packet_mreq mr;
	int fd, one = 1, ix;

	ix = (int)if_nametoindex(name);
	if (ix == 0) {
		fprintf(stderr, "linkrelay: %s: no such interface\n", name);
		return -1;
	}
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
	            htons(ETH_P_ALL));
	if (fd < 0) {
		fprintf(stderr, "linkrelay: packet socket: %s\n",
		        strerror(errno));
		return -1;
	}
	if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0) {
		fprintf(stderr, "linkrelay: %s: PACKET_VNET_HDR: %s\n", name,
		        strerror(errno));
		goto fail;
	}
	/* older kernels lack it: the address's packet type is checked too */
	(void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one,
	                 sizeof one);
	memset(&sll, 0, sizeof sll);
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = ix;
	if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) {
		fprintf(stderr, "linkrelay: %s: bind: %s\n", name,
		        strerror(errno));
		goto fail;
	}
	/* frames for any address: the hosts' MACs are not this side's */
	memset(&mr, 0, sizeof mr);
	mr.mr_ifindex = ix;
	mr.mr_type = PACKET_MR_PROMISC;
	if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) <
	    0) {
		fprintf(stderr, "linkrelay: %s: promiscuous mode: %s\n", name,
		        strerror(errno));
		goto fail;
	}
	*index = ix;
	return fd;
fail:
	close(fd);
	return -1;
}

/* take_in W BUF DELAY LOSS CAP: every frame waiting on W's socket read
 * and queued (or lost, or dropped past CAP bytes) */
static void
take_in(struct way *w, unsigned char *buf, uint64_t delay, double loss,
        size_t cap)
{
	struct sockaddr_ll from;
	socklen_t fl;
	struct frame *f;
	ssize_t n;

	for (;;) {
		fl = sizeof from;
		n = recvfrom(w->in, buf, FRAME_MAX, MSG_TRUNC,
		             (struct sockaddr *)&from, &fl);
		if (n < 0) {
			/* a link down reads ENETDOWN; gone (its namespace
			 * removed, a run killed), it ends the relay */
			if ((errno == ENETDOWN || errno == ENODEV ||
			     errno == ENXIO) &&
			    if_indextoname((unsigned)w->in_index,
			                   (char[IF_NAMESIZE]){0}) == NULL)
				stop = 1;
			return; /* EAGAIN: nothing more to read */
		}
		if (from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if ((size_t)n > FRAME_MAX ||
		    (size_t)n <= sizeof(struct virtio_net_hdr))
			continue;
		if (loss > 0 && draw() < loss)
			continue;
		if (w->bytes + (size_t)n > cap)
			continue;
		f = malloc(sizeof *f + (size_t)n);
		if (f == NULL)
			continue; /* a drop, as a router short of memory */
		f->next = NULL;
		f->due = now_ns() + delay;
		f->len = (size_t)n;
		memcpy(f->data, buf, (size_t)n);
		if (w->tail)
			w->tail->next = f;
		else
			w->head = f;
		w->tail = f;
		w->bytes += f->len;
	}
}

/* send_due W NOW: the frames of W that are due sent; 1 if one waits for
 * the socket to take it (EAGAIN), else 0 */
static int
send_due(struct way *w, uint64_t now)
{
	struct sockaddr_ll to;
	struct frame *f;
	ssize_t n;

	memset(&to, 0, sizeof to);
	to.sll_family = AF_PACKET;
	to.sll_ifindex = w->out_index;
	to.sll_halen = ETH_ALEN;
	while ((f = w->head) != NULL && f->due <= now) {
		/* the destination of the frame itself */
		memcpy(to.sll_addr, f->data + sizeof(struct virtio_net_hdr),
		       ETH_ALEN);
		n = sendto(w->out, f->data, f->len, 0, (struct sockaddr *)&to,
		           sizeof to);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 1;
		/* sent, or lost (ENOBUFS: the qdisc is full; a link down) */
		w->head = f->next;
		if (w->head == NULL)
			w->tail = NULL;
		w->bytes -= f->len;
		free(f);
	}
	return 0;
}

/* parse_num S MIN MAX: S as a number in [MIN, MAX], or -1 */
static double
parse_num(const char *s, double min, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min && v <= max))
		return -1;
	return v;
}

static void
usage(FILE *to)
{
	fprintf(to, "usage: linkrelay [-d DELAY_US] [-l LOSS] [-s SEED] "
	            "[-b BYTES] IF_A IF_B\n");
}

int
main(int argc, char **argv)
{
	static unsigned char buf[FRAME_MAX + 1];
	struct way ways[2];
	struct pollfd pf[2];
	struct sigaction sa;
	uint64_t delay = 0, now, next;
	double loss = 0, v;
	size_t cap = (size_t)64 << 20;
	int c, ia, ib, fa, fb, k, timeout, blocked[2] = {0, 0};

	rng_state = 1;
	while ((c = getopt(argc, argv, "b:d:hl:s:")) != -1) {
		switch (c) {
		case 'b':
			if ((v = parse_num(optarg, 1, 1e12)) < 0)
				goto bad;
			cap = (size_t)v;
			break;
		case 'd':
			/* up to an hour */
			if ((v = parse_num(optarg, 0, 3.6e9)) < 0)
				goto bad;
			delay = (uint64_t)(v * 1000);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'l':
			if ((v = parse_num(optarg, 0, 1)) < 0)
				goto bad;
			loss = v;
			break;
		case 's':
			if ((v = parse_num(optarg, 0, 1e15)) < 0)
				goto bad;
			rng_state = (uint64_t)v;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	if ((fa = open_if(argv[optind], &ia)) < 0)
		return 1;
	if ((fb = open_if(argv[optind + 1], &ib)) < 0)
		return 1;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	memset(ways, 0, sizeof ways);
	ways[0].in = fa, ways[0].out = fb;
	ways[0].in_index = ia, ways[0].out_index = ib;
	ways[1].in = fb, ways[1].out = fa;
	ways[1].in_index = ib, ways[1].out_index = ia;
	while (!stop) {
		now = now_ns();
		next = UINT64_MAX;
		for (k = 0; k < 2; k++) {
			blocked[k] = send_due(&ways[k], now);
			if (ways[k].head && !blocked[k] &&
			    ways[k].head->due < next)
				next = ways[k].head->due;
		}
		/* each socket read, and written where a frame waits for it */
		pf[0].fd = fa;
		pf[0].events = POLLIN | (blocked[1] ? POLLOUT : 0);
		pf[1].fd = fb;
		pf[1].events = POLLIN | (blocked[0] ? POLLOUT : 0);
		if (next == UINT64_MAX)
			timeout = -1;
		else if (next <= now)
			timeout = 0;
		else if (next - now > (uint64_t)INT_MAX * 1000000u)
			timeout = INT_MAX;
		else
			/* rounded up: never early */
			timeout = (int)((next - now + 999999) / 1000000);
		if (poll(pf, 2, timeout) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "linkrelay: poll: %s\n",
			        strerror(errno));
			return 1;
		}
		/* an error (a link down) is read, and so cleared */
		if (pf[0].revents & (POLLIN | POLLERR))
			take_in(&ways[0], buf, delay, loss, cap);
		if (pf[1].revents & (POLLIN | POLLERR))
			take_in(&ways[1], buf, delay, loss, cap);
	}
	return 0;
bad:
	fprintf(stderr, "linkrelay: -%c: '%s' is out of range\n", c, optarg);
	return 2;
}
