/*
 * test_port_limits.c - what a client may cost the port, in every engine.
 * Over max_conns: a connection the port has no slot for is sent the
 * listener's refusal and closed (its request read first, so the client
 * sees the answer and then end-of-file, not a reset); a listener without
 * one leaves it waiting in the backlog until a slot frees; two listeners
 * near the limit each still get connections. Backpressure: a client that
 * sends requests and never reads stops being read once its unsent replies
 * pass max_output, so they stay bounded, and once it reads everything
 * flows again. The memory a burst took goes back. A client dropped
 * (paste_port_drop_conn) goes at once, its unsent output with it. See docs/design.md,
 * "Memory per client". Shared helpers: port_fixture.h.
 * Without io_uring the epoll half runs and the exit status is 77 (skip).
 */
#include <fcntl.h>

#include "port_fixture.h"
#include "../../lib/port_internal.h"   /* white box: queued, read_paused, queue capacity */

static struct paste_store *st;

#define REFUSAL "-ERR max number of clients reached\r\n"

static struct paste_port *open_limited(enum paste_engine e, uint32_t max_conns, uint32_t nports,
				       const char *refuse, uint64_t max_output)
{
	struct paste_port_config c = { .engine = e, .ring_bufs = 16, .max_conns = max_conns,
				       .store = st, .max_output = max_output, .nports = nports };
	for (uint32_t i = 0; i < PASTE_PORT_MAX_LISTEN; i++)
		c.refuse[i] = refuse;
	return pf_port_open(&c);
}

/* The client's next bytes until EOF (2 s at most); -1 after a reset. */
static ssize_t read_to_eof(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 2000) <= 0)
			return -2;                  /* neither data nor EOF: a hang */
		ssize_t r = read(fd, buf + got, cap - got);
		if (r < 0)
			return -1;
		if (r == 0)
			return (ssize_t)got;
		got += (size_t)r;
		if (got == cap)
			return (ssize_t)got;
	}
}

/* max_conns 4, 10 clients that each send a request at once: 4 are
 * accepted, the other 6 read the refusal and then EOF; none hangs. A slot
 * that frees takes the next client, which is served, not refused. */
static void test_refuse(enum paste_engine e)
{
	struct paste_port *pt = open_limited(e, 4, 0, REFUSAL, 0);
	CHECK(pt != NULL);
	if (!pt)
		return;
	uint16_t port = paste_port_local_port(pt);
	int fds[10];
	struct seen s = { 0 };
	for (int i = 0; i < 10; i++) {
		fds[i] = pf_client(port);
		CHECK(fds[i] >= 0 && write(fds[i], "hello", 5) == 5);
		pf_pump(pt, &s, 1, false);          /* in order: the first four get slots */
	}
	pf_pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 4);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 4);
	CHECK_EQ(ps.refused, 6);
	int refused = 0, open = 0;
	for (int i = 0; i < 10; i++) {
		char buf[64] = { 0 };
		struct pollfd p = { fds[i], POLLIN, 0 };
		if (poll(&p, 1, 200) == 0) {
			open++;                         /* accepted: nothing sent to it */
			continue;
		}
		ssize_t n = read_to_eof(fds[i], buf, sizeof(buf));
		CHECK_EQ(n, (ssize_t)strlen(REFUSAL));
		CHECK(!strcmp(buf, REFUSAL));
		refused++;
	}
	CHECK_EQ(refused, 6);
	CHECK_EQ(open, 4);
	/* one accepted client goes: the next one is served */
	for (int i = 0; i < 10; i++) {
		struct pollfd p = { fds[i], POLLIN, 0 };
		if (poll(&p, 1, 0) == 0) {
			close(fds[i]);
			fds[i] = -1;
			break;
		}
	}
	for (int i = 0; i < 20 && s.closes < 1; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.closes, 1);
	pf_pump(pt, &s, 2, false);              /* the slot is released */
	int late = pf_client(port);
	CHECK(write(late, "x", 1) == 1);
	for (int i = 0; i < 50 && s.accepts < 5; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 5);
	paste_port_send(pt, s.last_conn, "ok", 2, 0);
	pf_pump(pt, &s, 3, false);
	char buf[4];
	CHECK_EQ(pf_read_all(late, buf, 2, 1000), 2);
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.refused, 6);
	close(late);
	for (int i = 0; i < 10; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	pf_pump(pt, &s, 5, false);
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	CHECK_EQ(ps.accepts, ps.closes);
	paste_port_close(pt);
}

/* Two listeners and max_conns 4: each listener's clients are accepted up
 * to the limit, whichever came first (neither holds the last slots for
 * itself), and beyond it both refuse. */
static void test_refuse_two_listeners(enum paste_engine e)
{
	struct paste_port *pt = open_limited(e, 4, 2, REFUSAL, 0);
	CHECK(pt != NULL);
	if (!pt)
		return;
	uint16_t p0 = paste_port_listener_port(pt, 0), p1 = paste_port_listener_port(pt, 1);
	struct seen s = { 0 };
	int fds[6];
	for (int i = 0; i < 6; i++) {           /* listener 1 first: 1, 1, 1, 0, then 0, 1 */
		fds[i] = pf_client(i == 3 || i == 4 ? p0 : p1);
		CHECK(fds[i] >= 0 && write(fds[i], "q", 1) == 1);
		pf_pump(pt, &s, 2, false);
	}
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 4);
	for (int i = 0; i < 6; i++) {
		char buf[64] = { 0 };
		struct pollfd p = { fds[i], POLLIN, 0 };
		bool answered = poll(&p, 1, i < 4 ? 100 : 2000) == 1;
		CHECK_EQ(answered, i >= 4);         /* the first four were served */
		if (answered)
			CHECK_EQ(read_to_eof(fds[i], buf, sizeof(buf)), (ssize_t)strlen(REFUSAL));
		close(fds[i]);
	}
	pf_pump(pt, &s, 5, false);
	paste_port_close(pt);
}

/* No refusal: the connection over the limit is neither answered nor
 * closed; it waits in the backlog and is served once a slot frees. */
static void test_wait_without_refusal(enum paste_engine e)
{
	struct paste_port *pt = open_limited(e, 2, 0, NULL, 0);
	CHECK(pt != NULL);
	if (!pt)
		return;
	uint16_t port = paste_port_local_port(pt);
	int a = pf_client(port), b = pf_client(port), c = pf_client(port);
	CHECK(write(c, "c", 1) == 1);
	struct seen s = { 0 };
	pf_pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 2);
	struct pollfd p = { c, POLLIN, 0 };
	CHECK_EQ(poll(&p, 1, 100), 0);          /* waiting, not closed */
	close(a);
	for (int i = 0; i < 50 && s.accepts < 3; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 3);
	for (int i = 0; i < 50 && s.bytes < 1; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.bytes, 1);                   /* c's request, once it had a slot */
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.refused, 0);
	close(b);
	close(c);
	pf_pump(pt, &s, 5, false);
	paste_port_close(pt);
}

/* Backpressure. The client sends 4 MiB of requests and reads nothing;
 * the app answers 8 bytes per byte received. With max_output 128 KiB the
 * connection's unsent replies stay within the limit plus one pass's
 * replies (one read: at most 64 KiB received, 512 KiB of replies), its
 * reading is paused, and it counts as paused. Without the limit the port
 * would take in the 4 MiB and queue up to 32 MiB. Once the client reads,
 * everything flows: all 4 MiB are received and 32 MiB answered. */
#define BP_SEND (4u << 20)
#define BP_AMP 8u
#define BP_LIMIT (128u << 10)

static void bp_pump(struct paste_port *pt, uint64_t *in, int ms)
{
	static char reply[BP_AMP * 65536];
	struct paste_event *evs;
	int n = paste_port_poll(pt, &evs, ms);
	for (int j = 0; j < n; j++) {
		if (evs[j].type != PASTE_EV_DATA)
			continue;
		*in += evs[j].len;
		for (uint32_t off = 0; off < evs[j].len; off += 65536) {
			uint32_t k = evs[j].len - off < 65536 ? evs[j].len - off : 65536;
			CHECK_EQ(paste_port_send(pt, evs[j].conn, reply, (size_t)k * BP_AMP, 0), 0);
		}
	}
}

static void test_backpressure(enum paste_engine e)
{
	struct paste_port *pt = open_limited(e, 4, 0, NULL, BP_LIMIT);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fd = pf_client(paste_port_local_port(pt));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	static char req[65536];
	uint64_t sent = 0, in = 0, got = 0, worst = 0;
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 1);
	uint32_t slot = s.last_conn;
	struct conn *c = &pt->conns[slot];
	int stalled = 0;
	for (int i = 0; i < 2000 && sent < BP_SEND && stalled < 50; i++) {
		size_t want = BP_SEND - sent < sizeof(req) ? BP_SEND - sent : sizeof(req);
		ssize_t w = write(fd, req, want);
		stalled = w > 0 ? 0 : stalled + 1;
		sent += w > 0 ? (uint64_t)w : 0;
		bp_pump(pt, &in, w > 0 ? 0 : 5);
		worst = c->queued > worst ? c->queued : worst;
	}
	CHECK(in < BP_SEND);                    /* the port stopped reading */
	CHECK(c->read_paused);
	CHECK(worst <= BP_LIMIT + BP_AMP * 65536u);
	if (worst > BP_LIMIT + BP_AMP * 65536u)
		fprintf(stderr, "  %s: %llu bytes of replies queued for a %u-byte limit\n",
			paste_engine_name(e), (unsigned long long)worst, BP_LIMIT);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.paused, 1);
	CHECK(ps.pauses >= 1);
	/* The client reads now, and sends the rest. */
	static char sink[1 << 20];
	uint64_t t0 = paste_clock_ns();
	while ((got < (uint64_t)BP_SEND * BP_AMP || in < BP_SEND) &&
	       paste_clock_ns() - t0 < 20000000000ull) {
		ssize_t r = read(fd, sink, sizeof(sink));
		got += r > 0 ? (uint64_t)r : 0;
		if (sent < BP_SEND) {
			size_t want = BP_SEND - sent < sizeof(req) ? BP_SEND - sent : sizeof(req);
			ssize_t w = write(fd, req, want);
			sent += w > 0 ? (uint64_t)w : 0;
		}
		bp_pump(pt, &in, r > 0 ? 0 : 1);
	}
	CHECK_EQ(sent, BP_SEND);
	CHECK_EQ(in, BP_SEND);
	CHECK_EQ(got, (uint64_t)BP_SEND * BP_AMP);
	CHECK(!c->read_paused);
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.paused, 0);
	/* Drained: no queue keeps more than a connection may keep between
	 * bursts (OUT_SHRINK, lib/port_out.c) ... */
	CHECK(c->inflight.cap_bytes <= (1u << 20) && c->pending.cap_bytes <= (1u << 20));
	close(fd);
	for (int i = 0; i < 20 && s.closes < 1; i++)
		pf_pump(pt, &s, 1, false);
	pf_pump(pt, &s, 2, false);
	/* ... and a slot whose connection went keeps at most 4 KiB each. */
	CHECK(c->state == CONN_FREE);
	CHECK(c->inflight.cap_bytes <= 4096 && c->pending.cap_bytes <= 4096);
	paste_port_close(pt);
}

/* A paused connection whose client goes is ended as any other: CLOSED,
 * the gauge back to 0, no buffer kept. */
static void test_paused_client_goes(enum paste_engine e)
{
	uint32_t held0 = paste_store_nheld(st);
	struct paste_port *pt = open_limited(e, 4, 0, NULL, 4096);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	uint32_t slot = s.last_conn;
	CHECK(write(fd, "q", 1) == 1);
	pf_pump_bytes(pt, &s, 1);
	static char big[1 << 16];
	CHECK_EQ(paste_port_send(pt, slot, big, sizeof(big), 0), 0);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.paused, 1);
	CHECK(pt->conns[slot].read_paused);
	pf_pump(pt, &s, 3, false);
	close(fd);
	for (int i = 0; i < 50 && s.closes < 1; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.closes, 1);
	pf_pump(pt, &s, 3, false);
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.paused, 0);
	CHECK_EQ(ps.conns, 0);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nheld(st), held0);
}

/* A client that never reads, dropped: its unsent output goes at once
 * (a pinned store buffer among it), its CLOSED comes in the next poll,
 * the peer sees the end; the queue had stayed as it was until the drop. */
static void test_drop(enum paste_engine e)
{
	uint32_t held0 = paste_store_nheld(st);
	struct paste_port *pt = open_limited(e, 4, 0, NULL, 1u << 30);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	uint32_t slot = s.last_conn;
	static char big[1 << 20];
	for (int i = 0; i < 16; i++)
		CHECK_EQ(paste_port_send(pt, slot, big, sizeof(big), 0), 0);
	uint32_t b;
	CHECK_EQ(paste_store_alloc(st, &b, 1), 1);
	CHECK_EQ(paste_port_send_store(pt, slot, b, 0, 64, 0), 0);
	paste_store_unref(st, b, false);                 /* the queue's pin keeps it */
	for (int i = 0; i < 5; i++)
		pf_pump(pt, &s, 2, false);
	uint64_t q = paste_port_conn_queued(pt, slot);
	CHECK(q > 0 && q <= (16u << 20) + 64);           /* the kernel took at most the rest */
	CHECK_EQ(s.closes, 0);
	struct paste_port_stats before;
	paste_port_stats(pt, &before);
	CHECK_EQ(before.queued, q);                      /* the port's total is the one queue */
	paste_port_drop_conn(pt, slot);
	struct paste_port_stats dropped;
	paste_port_stats(pt, &dropped);
	/* All of it leaves the total at the drop (a send in flight is
	 * cancelled with the release). */
	CHECK_EQ(dropped.queued, 0);
	CHECK_EQ(paste_port_conn_queued(pt, slot), 0);
	paste_port_drop_conn(pt, slot);                  /* twice: the same */
	CHECK_EQ(paste_port_send(pt, slot, "x", 1, 0), -ENOTCONN);
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.closes, 1);
	CHECK_EQ(paste_port_conn_queued(pt, slot), 0);
	for (int i = 0; i < 5; i++)
		pf_pump(pt, &s, 2, false);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	CHECK_EQ(ps.queued, 0);
	/* The peer sees the end (after what the kernel had taken). */
	char sink[65536];
	ssize_t r;
	size_t got = 0;
	while ((r = read(fd, sink, sizeof(sink))) > 0)
		got += (size_t)r;
	CHECK(r == 0 || r == -1);                        /* EOF, or a reset */
	CHECK(got < (16u << 20));
	close(fd);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nheld(st), held0);
}

static void run(enum paste_engine e)
{
	test_refuse(e);
	test_refuse_two_listeners(e);
	test_wait_without_refusal(e);
	test_backpressure(e);
	test_paused_client_goes(e);
	test_drop(e);
}

int main(void)
{
	bool uring = pf_uring_usable();
	struct pf_store s;
	if (pf_store_open(&s, "/dev/shm", "port-limits", 8 << 20))
		return 1;
	st = s.st;
	paste_store_start(st);
	run(PASTE_ENGINE_EPOLL);
	run(PASTE_ENGINE_EPOLL_BATCH);
	if (uring)
		run(PASTE_ENGINE_URING);
	pf_store_close(&s);
	return pf_done(uring);
}
