/*
 * test_port.c - the paste port's basics, both engines, over real loopback
 * sockets driven from this same thread: accept/data/close events, hold and
 * recycle, ring exhaustion (ENOBUFS) without data loss, partial sends of
 * large replies, zero-copy sends from store buffers, peers that reset, a
 * full connection table, generations past 28 bits, the epoll engine out
 * of descriptors, and buffer accounting exact to one buffer (the
 * allocation cache in the stats). One file per feature, like liburing's
 * test/: the slot lifecycle under short connections test_port_slots.c;
 * defer accept, the first receive and accept-heavy waits
 * test_port_accept.c; an open failing part way and the batch-wait knobs
 * test_port_open.c; the durability gate and the failed store
 * test_port_durable.c. Shared helpers: port_fixture.h.
 * Without io_uring the epoll half runs and the exit status is 77 (skip).
 */
#include <sys/resource.h>

#include <pthread.h>
#include "port_fixture.h"
#include "../../lib/port_internal.h"   /* white box: test_gen_wrap */

static struct paste_store *st;

static void test_echo(enum paste_engine e)
{
	struct paste_port *pt = pf_open_port(st, e, 64, 64);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fd = pf_client(paste_port_local_port(pt));
	CHECK(fd >= 0);
	struct seen s = { 0 };
	pf_pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 1);
	CHECK(write(fd, "hello", 5) == 5);
	pf_pump(pt, &s, 5, false);
	CHECK_EQ(s.bytes, 5);
	CHECK(!memcmp(s.data, "hello", 5));
	/* a reply made of a copied piece and a zero-copy store piece */
	uint32_t idx;
	CHECK_EQ(paste_store_alloc(st, &idx, 1), 1);
	memcpy(paste_store_buf(st, idx), "WORLD", 5);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "hi ", 3, 0), 0);
	CHECK_EQ(paste_port_send_store(pt, s.last_conn, idx, 0, 5, 0), 0);
	CHECK_EQ(paste_store_refcount(st, idx), 2);          /* pinned by the send */
	paste_store_unref(st, idx, false);
	pf_pump(pt, &s, 3, false);
	char buf[16] = { 0 };
	CHECK_EQ(pf_read_all(fd, buf, 8, 1000), 8);
	CHECK(!memcmp(buf, "hi WORLD", 8));
	CHECK_EQ(paste_store_refcount(st, idx), 0);          /* unpinned, freed */
	CHECK_EQ(paste_port_send_store(pt, s.last_conn, st ? UINT32_MAX - 1 : 0, 0, 1, 0), -EINVAL);
	/* Extents outside the store: refused whether the range is copied
	 * (short) or pinned (long), nothing queued. */
	const struct paste_store_geom *g = paste_store_geom(st);
	struct paste_extent bad[2] = { { g->nbufs, 0, 8 }, { 0, g->buf_size - 4, 600 } };
	CHECK_EQ(paste_port_send_extents(pt, s.last_conn, &bad[0], 1, 0, 8, 0), -EINVAL);
	CHECK_EQ(paste_port_send_extents(pt, s.last_conn, &bad[1], 1, 0, 100, 0), -EINVAL);
	CHECK_EQ(paste_port_send_extents(pt, s.last_conn, &bad[1], 1, 0, 600, 0), -EINVAL);
	CHECK_EQ(paste_port_conn_queued(pt, s.last_conn), 0);
	close(fd);
	pf_pump(pt, &s, 5, false);
	CHECK_EQ(s.closes, 1);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "x", 1, 0), -ENOTCONN);
	paste_port_close(pt);
}

/* 8 buffers in the ring, 16 connections each sending 3 KiB: the ring runs
 * dry, recv re-arms after the batch, and every byte arrives. */
static void test_enobufs(void)
{
	uint32_t before = paste_store_nfree(st);
	struct paste_port *pt = pf_open_port(st, PASTE_ENGINE_URING, 8, 64);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fds[16];
	char msg[3072];
	memset(msg, 'a', sizeof(msg));
	for (int i = 0; i < 16; i++)
		fds[i] = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 16);
	for (int i = 0; i < 16; i++)
		CHECK(write(fds[i], msg, sizeof(msg)) == (ssize_t)sizeof(msg));
	for (int i = 0; i < 200 && s.bytes < 16 * sizeof(msg); i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.bytes, 16 * sizeof(msg));
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK(ps.enobufs > 0);
	for (int i = 0; i < 16; i++)
		close(fds[i]);
	pf_pump(pt, &s, 10, false);
	CHECK_EQ(s.closes, 16);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nfree(st), before);            /* no buffer leaked */
}

/* Held buffers keep their bytes; the ring gets replacements. */
static void test_hold(void)
{
	uint32_t before = paste_store_nfree(st);
	struct paste_port *pt = pf_open_port(st, PASTE_ENGINE_URING, 8, 16);
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	struct paste_event *evs;
	uint32_t held = PASTE_NO_BUF;
	CHECK(write(fd, "keep me", 7) == 7);
	for (int i = 0; i < 50 && held == PASTE_NO_BUF; i++) {
		int n = paste_port_poll(pt, &evs, 20);
		for (int j = 0; j < n; j++)
			if (evs[j].type == PASTE_EV_DATA && paste_port_hold(pt, &evs[j]) == 0)
				held = evs[j].buf;
	}
	CHECK(held != PASTE_NO_BUF);
	/* push more data through: the held buffer must never be reused */
	char msg[1500];
	memset(msg, 'z', sizeof(msg));
	for (int i = 0; i < 40; i++) {
		CHECK(write(fd, msg, sizeof(msg)) == (ssize_t)sizeof(msg));
		pf_pump(pt, &s, 2, false);
	}
	CHECK(!memcmp(paste_store_buf(st, held), "keep me", 7));
	CHECK_EQ(paste_store_refcount(st, held), 1);
	paste_store_unref(st, held, false);
	close(fd);
	pf_pump(pt, &s, 5, false);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nfree(st), before);
}

/* A 16 MiB reply cannot leave in one send (socket buffers are ~4 MiB on
 * loopback): partial sends resume where they stopped. Meanwhile the
 * connection is "sending" (paste_port_conn_sending), also while its
 * reader does not read, and no longer once all of it has left. */
static void test_partial_send(enum paste_engine e)
{
	struct paste_port *pt = pf_open_port(st, e, 16, 16);
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK(write(fd, "go", 2) == 2);
	pf_pump(pt, &s, 3, false);
	size_t big = 16u << 20;
	char *out = malloc(big), *in = malloc(big);
	for (size_t i = 0; i < big; i++)
		out[i] = (char)(i * 7);
	CHECK(!paste_port_conn_sending(pt, s.last_conn));
	CHECK_EQ(paste_port_send(pt, s.last_conn, out, big, 0), 0);
	CHECK(paste_port_conn_sending(pt, s.last_conn));   /* queued */
	pf_pump(pt, &s, 5, false);                          /* the kernel took what fits */
	CHECK(paste_port_conn_sending(pt, s.last_conn));   /* nobody reads */
	CHECK(!paste_port_conn_sending(pt, 1000000));
	size_t got = 0;
	for (int i = 0; i < 20000 && got < big; i++) {
		struct paste_event *evs;
		paste_port_poll(pt, &evs, 1);
		struct pollfd p = { fd, POLLIN, 0 };
		while (poll(&p, 1, 0) > 0 && got < big) {
			ssize_t r = read(fd, in + got, big - got);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
	}
	CHECK_EQ(got, big);
	CHECK(!memcmp(in, out, big));
	for (int i = 0; i < 100 && paste_port_conn_sending(pt, s.last_conn); i++)
		pf_pump(pt, &s, 1, false);                  /* the last completion */
	CHECK(!paste_port_conn_sending(pt, s.last_conn));
	free(out);
	free(in);
	close(fd);
	pf_pump(pt, &s, 3, false);
	paste_port_close(pt);
}

struct trickle {
	int fd;
	size_t want, got;
};

/* Read 64 KiB every 3 ms (~20 MB/s) until `want` bytes came: often
 * enough that the sender's socket is writable again within any poll. */
static void *trickle_reader(void *arg)
{
	struct trickle *t = arg;
	static char buf[65536];
	while (t->got < t->want) {
		ssize_t r = read(t->fd, buf, sizeof(buf));
		if (r <= 0)
			break;
		t->got += (size_t)r;
		usleep(3000);
	}
	return NULL;
}

/* While a slow reader drains a big reply the port's own work (epoll:
 * EPOLLOUT, then the next write) brings the app no event; timeout_ms must
 * still bound paste_port_poll, or the app's timers stop meanwhile. */
static void test_poll_timeout_slow_reader(enum paste_engine e)
{
	struct paste_port *pt = pf_open_port(st, e, 16, 16);
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK(write(fd, "go", 2) == 2);
	pf_pump_bytes(pt, &s, 2);
	size_t big = 48u << 20;
	char *out = calloc(1, big);
	CHECK_EQ(paste_port_send(pt, s.last_conn, out, big, 0), 0);
	struct trickle t = { fd, big, 0 };
	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, trickle_reader, &t), 0);
	double worst = 0;
	int polls = 0;
	while (paste_port_conn_sending(pt, s.last_conn) && polls < 400) {
		double t0 = pf_now_s();
		struct paste_event *evs;
		paste_port_poll(pt, &evs, 100);
		double took = pf_now_s() - t0;
		worst = took > worst ? took : worst;
		polls++;
	}
	pthread_join(th, NULL);
	CHECK_EQ(t.got, big);
	CHECK(polls >= 4);            /* ~2.4 s of draining, in 100 ms polls */
	CHECK(worst < 0.6);
	if (worst >= 0.6 || polls < 4)
		fprintf(stderr, "  %s: %d polls while a slow reader drained, the longest %.2f s\n",
			paste_engine_name(e), polls, worst);
	free(out);
	close(fd);
	pf_pump(pt, &s, 3, false);
	paste_port_close(pt);
}

/* A peer that resets (SO_LINGER 0) gives CLOSED and leaks nothing. */
static void test_reset(enum paste_engine e)
{
	struct paste_port *pt = pf_open_port(st, e, 16, 16);
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK(write(fd, "x", 1) == 1);
	pf_pump(pt, &s, 3, false);
	paste_port_send(pt, s.last_conn, "reply", 5, 0);
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
	pf_pump(pt, &s, 10, false);
	CHECK_EQ(s.closes, 1);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	paste_port_close(pt);
}

/* More connections than slots: the extra ones wait in the backlog and
 * are served once a slot frees; the others keep working meanwhile. */
static void test_table_full(void)
{
	struct paste_port *pt = pf_open_port(st, PASTE_ENGINE_URING, 16, 2);
	uint16_t port = paste_port_local_port(pt);
	int a = pf_client(port), b = pf_client(port), c = pf_client(port);
	struct seen s = { 0 };
	pf_pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 2);
	CHECK(write(a, "1", 1) == 1);
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.bytes, 1);      /* existing connections still served */
	close(a);
	for (int i = 0; i < 30 && s.accepts < 3; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 3);
	close(b);
	close(c);
	pf_pump(pt, &s, 10, false);
	paste_port_close(pt);
}

/* user_data keeps 28 bits of a slot's generation; the slot's counter runs
 * on (the lowest slots are reused the most), and completions must still
 * match once it passes 2^28. */
static void test_gen_wrap(void)
{
	struct paste_port *pt = pf_open_port(st, PASTE_ENGINE_URING, 16, 4);
	CHECK(pt != NULL);
	if (!pt)
		return;
	for (uint32_t i = 0; i < 4; i++)
		pt->conns[i].gen = 0x0fffffffu;
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 1);
	CHECK(pt->conns[s.last_conn].gen > 0x0fffffffu);
	CHECK(write(fd, "hi", 2) == 2);
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.bytes, 2);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "yo", 2, 0), 0);
	pf_pump(pt, &s, 2, false);
	char buf[2];
	CHECK_EQ(pf_read_all(fd, buf, 2, 1000), 2);
	close(fd);
	pf_pump(pt, &s, 5, false);
	CHECK_EQ(s.closes, 1);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	paste_port_close(pt);
}

/* epoll engine out of descriptors (EMFILE): the listener sheds the new
 * connection instead of spinning, and the existing one is still served. */
static void test_emfile_epoll(void)
{
	struct paste_port *pt = pf_open_port(st, PASTE_ENGINE_EPOLL, 16, 64);
	uint16_t port = paste_port_local_port(pt);
	int a = pf_client(port);
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 1);
	struct rlimit old, low;
	getrlimit(RLIMIT_NOFILE, &old);
	int probe = dup(0);              /* the lowest free descriptor */
	close(probe);
	int b = pf_client(port);            /* takes `probe`; the server gets none */
	low = old;
	low.rlim_cur = (rlim_t)probe + 1;
	setrlimit(RLIMIT_NOFILE, &low);
	for (int i = 0; i < 5; i++)
		pf_pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 1);
	char c;                         /* b was shed: the peer closed it */
	struct pollfd pb = { b, POLLIN, 0 };
	CHECK(poll(&pb, 1, 1000) == 1 && read(b, &c, 1) <= 0);
	CHECK(write(a, "still", 5) == 5);
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(s.bytes, 5);
	setrlimit(RLIMIT_NOFILE, &old);
	close(a);
	close(b);
	pf_pump(pt, &s, 3, false);
	paste_port_close(pt);
}

/* The store counts as in use every buffer posted in a ring, delivered in a
 * batch, held, or sitting free in a uring port's allocation cache; the
 * stats name the ring and the cache, so an app can account for every
 * buffer (phttpd's bufs_held) and a single leaked one shows. Holding a
 * buffer takes a replacement from the cache (the store hands out 64 at a
 * time). */
static void test_buffer_accounting(void)
{
	uint32_t held0 = paste_store_nheld(st);
	pf_whole_buffers = true;       /* a held buffer leaves the ring at once */
	struct paste_port *pt = pf_open_port(st, PASTE_ENGINE_URING, 8, 16);
	pf_whole_buffers = false;
	CHECK(pt != NULL);
	if (!pt)
		return;
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.ring_free, 8);
	CHECK_EQ(ps.cached, 0);
	CHECK_EQ(paste_store_nheld(st) - held0, ps.ring_free + ps.cached);
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK(write(fd, "keep", 4) == 4);
	uint32_t held = PASTE_NO_BUF;
	for (int i = 0; i < 50 && held == PASTE_NO_BUF; i++) {
		struct paste_event *evs;
		int n = paste_port_poll(pt, &evs, 20);
		for (int j = 0; j < n; j++)
			if (evs[j].type == PASTE_EV_DATA && paste_port_hold(pt, &evs[j]) == 0)
				held = evs[j].buf;
	}
	CHECK(held != PASTE_NO_BUF);
	pf_pump(pt, &s, 2, false);                     /* the held buffer was replaced */
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.ring_free, 8);
	CHECK(ps.cached > 0 && ps.cached < 64);
	/* ring + cache + the one the test holds: not one buffer unaccounted */
	CHECK_EQ(paste_store_nheld(st) - held0, ps.ring_free + ps.cached + 1);
	if (held != PASTE_NO_BUF)
		paste_store_unref(st, held, false);
	close(fd);
	pf_pump(pt, &s, 5, false);
	paste_port_stats(pt, &ps);
	CHECK_EQ(paste_store_nheld(st) - held0, ps.ring_free + ps.cached);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nheld(st), held0);
}

/* Dense receives: small reads of two connections share the ring's first
 * buffer at increasing offsets; a hold keeps that buffer (its bytes are
 * the app's) while the kernel goes on filling it, and once the kernel is
 * done with it the port's reference goes and a fresh buffer takes its
 * place. Not one buffer unaccounted at any point. */
static void test_dense_accounting(void)
{
	uint32_t held0 = paste_store_nheld(st);
	struct paste_port *pt = pf_open_port(st, PASTE_ENGINE_URING, 8, 16);
	CHECK(pt != NULL);
	if (!pt)
		return;
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	if (!ps.dense_recv) {
		fprintf(stderr, "  dense receives: not offered by this kernel (6.12+), skipped\n");
		paste_port_close(pt);
		return;
	}
	uint32_t bs = paste_store_geom(st)->buf_size;
	int fd[2] = { pf_client(paste_port_local_port(pt)), pf_client(paste_port_local_port(pt)) };
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	uint32_t buf = PASTE_NO_BUF, next_off = 0;
	bool held = false, dense = true;
	for (int round = 0; round < 6; round++) {
		CHECK(write(fd[round & 1], "0123456789", 10) == 10);
		bool got = false;
		for (int i = 0; i < 50 && !got; i++) {
			struct paste_event *evs;
			int n = paste_port_poll(pt, &evs, 20);
			for (int j = 0; j < n; j++) {
				if (evs[j].type != PASTE_EV_DATA)
					continue;
				got = true;
				if (buf == PASTE_NO_BUF)
					buf = evs[j].buf;
				dense &= evs[j].buf == buf && evs[j].off == next_off &&
					 memcmp(evs[j].data, "0123456789", 10) == 0;
				next_off += evs[j].len;
				if (!held)
					held = paste_port_hold(pt, &evs[j]) == 0;
			}
		}
		CHECK(got);
	}
	CHECK(dense);                           /* six reads, one buffer, back to back */
	pf_pump(pt, &s, 2, false);
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.ring_free, 8);              /* the buffer is still posted ... */
	CHECK_EQ(paste_store_refcount(st, buf), 2);   /* ... and held */
	CHECK_EQ(paste_store_nheld(st) - held0, ps.ring_free + ps.cached);
	/* Fill the rest of it: the kernel is done, the port lets go of it and
	 * posts another in its place. */
	static char more[4096];
	memset(more, 'x', sizeof(more));
	CHECK(write(fd[0], more, bs - next_off + 100) == (ssize_t)(bs - next_off + 100));
	pf_pump(pt, &s, 5, false);
	paste_port_stats(pt, &ps);
	CHECK_EQ(paste_store_refcount(st, buf), 1);   /* the test's hold alone */
	CHECK_EQ(ps.ring_free, 8);
	CHECK_EQ(paste_store_nheld(st) - held0, ps.ring_free + ps.cached + 1);
	paste_store_unref(st, buf, false);
	close(fd[0]);
	close(fd[1]);
	pf_pump(pt, &s, 5, false);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nheld(st), held0);
}

int main(void)
{
	bool uring = pf_uring_usable();
	struct pf_store s;
	if (pf_store_open(&s, "/dev/shm", "port", 8 << 20))
		return 1;
	st = s.st;
	paste_store_start(st);
	for (enum paste_engine e = PASTE_ENGINE_EPOLL; e <= PASTE_ENGINE_EPOLL_BATCH; e++) {
		test_echo(e);
		test_partial_send(e);
		test_poll_timeout_slow_reader(e);
		test_reset(e);
	}
	test_emfile_epoll();
	if (uring) {
		test_echo(PASTE_ENGINE_URING);
		test_enobufs();
		test_hold();
		test_partial_send(PASTE_ENGINE_URING);
		test_poll_timeout_slow_reader(PASTE_ENGINE_URING);
		test_reset(PASTE_ENGINE_URING);
		test_table_full();
		test_gen_wrap();
		test_buffer_accounting();
		test_dense_accounting();
	}
	pf_store_close(&s);
	return pf_done(uring);
}
