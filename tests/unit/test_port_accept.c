/*
 * test_port_accept.c - what short connections rely on: TCP_DEFER_ACCEPT
 * (both engines: a silent connection is accepted only after about the
 * timeout, one that speaks comes with its data), the uring engine's
 * single-shot first receive and its upgrade to multishot once the app
 * keeps the connection, and the switch to waits without the min_wait
 * timer under accept-heavy load (defer accept only) and back under
 * keep-alive load. Shared helpers: port_fixture.h.
 * Without io_uring the epoll half runs and the exit status is 77 (skip).
 */
#include "port_fixture.h"
#include "../../lib/port_internal.h"   /* white box: recv_armed */

static struct paste_store *st;

static struct paste_port *open_defer(enum paste_engine e, uint32_t defer_s)
{
	struct paste_port_config c = { .engine = e, .ring_bufs = 16, .max_conns = 16,
				       .store = st, .defer_accept_s = defer_s };
	return pf_port_open(&c);
}

/* defer_accept_s: a connection that has sent nothing is not accepted (no
 * ACCEPT event, no slot) until its first data, which then comes with it;
 * a silent one is accepted after about the timeout (1 s: the SYN-ACK is
 * resent after 1 s and the client's answer completes it). Without the
 * option the silent connection is accepted at once (test_port.c,
 * test_echo). */
static void test_defer_accept(enum paste_engine e)
{
	struct paste_port *pt = open_defer(e, 1);
	CHECK(pt != NULL);
	if (!pt)
		return;
	uint16_t port = paste_port_local_port(pt);
	double t0 = pf_now_s();
	int silent = pf_client(port), talker = pf_client(port);
	CHECK(silent >= 0 && talker >= 0);
	struct seen s = { 0 };
	pf_pump(pt, &s, 10, false);                 /* ~200 ms */
	CHECK_EQ(s.accepts, 0);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	CHECK(write(talker, "hi", 2) == 2);
	for (int i = 0; i < 50 && s.bytes < 2; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 1);                  /* the talker, with its data */
	CHECK_EQ(s.bytes, 2);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "yo", 2, 0), 0);
	paste_port_close_conn(pt, s.last_conn);
	pf_pump(pt, &s, 3, false);
	char buf[4];
	CHECK_EQ(pf_read_all(talker, buf, sizeof(buf), 1000), 2);   /* reply, then EOF */
	for (int i = 0; i < 250 && s.accepts < 2; i++)           /* <= 5 s */
		pf_pump(pt, &s, 1, false);
	double t = pf_now_s() - t0;
	CHECK_EQ(s.accepts, 2);                  /* the silent one, at last */
	CHECK(t >= 0.8 && t < 5.0);
	if (t < 0.8 || t >= 5.0)
		fprintf(stderr, "  silent connection accepted after %.2f s (defer 1 s)\n", t);
	close(silent);
	close(talker);
	for (int i = 0; i < 50 && s.closes < 2; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.closes, 2);
	paste_port_close(pt);
	/* more than an hour is refused, not silently clamped */
	struct paste_port_config c = { .engine = e, .ring_bufs = 16, .max_conns = 16, .store = st,
				       .defer_accept_s = 3601 };
	struct paste_error err = { 0 };
	CHECK_EQ(paste_port_open(&pt, &c, &err), -EINVAL);
	CHECK(strstr(err.msg, "defer_accept_s") != NULL);
}

/* The first receive after accept is single-shot: once its data is in, no
 * receive is armed (nothing to cancel at close, no empty retry). A
 * connection the app keeps gets a multishot receive at the next pass, and
 * bytes sent in between are not lost; one the app closes gets none. */
static void test_first_recv(void)
{
	struct paste_port *pt = open_defer(PASTE_ENGINE_URING, 0);
	CHECK(pt != NULL);
	if (!pt)
		return;
	uint16_t port = paste_port_local_port(pt);
	/* keep-alive: request, reply, the next request */
	int fd = pf_client(port);
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 1);
	uint32_t slot = s.last_conn;
	CHECK(pt->conns[slot].recv_armed);          /* the single-shot, waiting */
	CHECK(write(fd, "one", 3) == 3);
	pf_pump_bytes(pt, &s, 3);
	CHECK_EQ(s.bytes, 3);
	CHECK(!pt->conns[slot].recv_armed);         /* done with its one CQE */
	CHECK(write(fd, "two", 3) == 3);            /* before any receive is armed */
	CHECK_EQ(paste_port_send(pt, slot, "1", 1, 0), 0);
	pf_pump_bytes(pt, &s, 6);
	CHECK_EQ(s.bytes, 6);
	CHECK(!memcmp(s.data, "onetwo", 6));
	CHECK(pt->conns[slot].recv_armed);          /* multishot from now on */
	CHECK(write(fd, "three", 5) == 5);
	pf_pump_bytes(pt, &s, 11);
	CHECK_EQ(s.bytes, 11);
	CHECK(pt->conns[slot].recv_armed);          /* still armed: multishot */
	char buf[8];
	CHECK_EQ(pf_read_all(fd, buf, 1, 1000), 1);
	close(fd);
	for (int i = 0; i < 20 && s.closes < 1; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.closes, 1);
	/* one request, the app replies and closes: no receive is armed again */
	fd = pf_client(port);
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 2);
	slot = s.last_conn;
	CHECK(write(fd, "q", 1) == 1);
	pf_pump_bytes(pt, &s, 12);
	CHECK_EQ(s.bytes, 12);
	CHECK_EQ(paste_port_send(pt, slot, "r", 1, 0), 0);
	paste_port_close_conn(pt, slot);
	struct paste_event *evs;
	int n = paste_port_poll(pt, &evs, 20);      /* submits the reply */
	CHECK(!pt->conns[slot].recv_armed);         /* and no receive with it */
	for (int i = 0; i < n; i++)
		s.closes += evs[i].type == PASTE_EV_CLOSED;
	for (int i = 0; i < 20 && s.closes < 2; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.closes, 2);
	CHECK_EQ(pf_read_all(fd, buf, sizeof(buf), 1000), 1);       /* reply, then EOF */
	close(fd);
	pf_pump(pt, &s, 3, false);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	CHECK_EQ(ps.accepts, ps.closes);
	paste_port_close(pt);
}

/* One request on a connection of its own (close_conn after the reply), or
 * `rounds` on one kept connection: drives the accept-heavy judgement. */
static void one_short_conn(struct paste_port *pt, uint16_t port)
{
	int fd = pf_client(port);
	struct seen s = { 0 };
	CHECK(write(fd, "q", 1) == 1);
	for (int i = 0; i < 100 && !s.bytes; i++)
		pf_pump(pt, &s, 1, false);
	if (s.bytes) {
		paste_port_send(pt, s.last_conn, "r", 1, 0);
		paste_port_close_conn(pt, s.last_conn);
	}
	for (int i = 0; i < 100 && !s.closes; i++)
		pf_pump(pt, &s, 1, false);
	char b;
	CHECK_EQ(pf_read_all(fd, &b, 1, 1000), 1);   /* the EOF waits for the next poll */
	close(fd);
}

/* With defer accept, short connections (>= 1 accept per 4 reads over a
 * window of 64 passes) switch the uring port's waits to "one completion,
 * no min_wait timer" (the timer's expiries cost ~2 us per connection
 * there); keep-alive traffic switches them back. Without defer accept
 * they never switch (the client would pay more than the server saves). */
static void test_accept_heavy(uint32_t defer_s)
{
	struct paste_port *pt = open_defer(PASTE_ENGINE_URING, defer_s);
	CHECK(pt != NULL);
	if (!pt)
		return;
	uint16_t port = paste_port_local_port(pt);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.accept_heavy, 0);
	for (int i = 0; i < 200; i++)
		one_short_conn(pt, port);
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.accept_heavy, defer_s ? 1 : 0);
	int fd = pf_client(port);
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	for (int i = 0; i < 300; i++) {             /* keep-alive: no accepts */
		size_t want = s.bytes + 1;
		CHECK(write(fd, "k", 1) == 1);
		for (int j = 0; j < 100 && s.bytes < want; j++)
			pf_pump(pt, &s, 1, false);
		paste_port_send(pt, s.last_conn, "r", 1, 0);
		pf_pump(pt, &s, 1, false);
		char b;
		CHECK_EQ(pf_read_all(fd, &b, 1, 1000), 1);
	}
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.accept_heavy, 0);
	close(fd);
	pf_pump(pt, &s, 3, false);
	paste_port_close(pt);
}

int main(void)
{
	bool uring = pf_uring_usable();
	struct pf_store s;
	if (pf_store_open(&s, "/dev/shm", "port-accept", 8 << 20))
		return 1;
	st = s.st;
	paste_store_start(st);
	test_defer_accept(PASTE_ENGINE_EPOLL);
	test_defer_accept(PASTE_ENGINE_EPOLL_BATCH);
	if (uring) {
		test_defer_accept(PASTE_ENGINE_URING);
		test_first_recv();
		test_accept_heavy(1);
		test_accept_heavy(0);
	}
	pf_store_close(&s);
	return pf_done(uring);
}
