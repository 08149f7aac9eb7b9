/*
 * test_port.c - the paste port's edge cases, both engines, over real
 * loopback sockets driven from this same thread: accept/data/close
 * events, hold and recycle, ring exhaustion (ENOBUFS) without data loss,
 * partial sends of large replies, zero-copy sends from store buffers,
 * peers that reset, a full connection table, the slot lifecycle under
 * many short connections (client threads), a port whose open fails part
 * way, the batch-wait knobs, and what short connections rely on:
 * TCP_DEFER_ACCEPT, the single-shot first receive and its upgrade to
 * multishot, buffer accounting exact to one buffer (the allocation cache
 * in the stats), and waits without the min_wait timer under accept-heavy
 * load. The durability gate and what a failed store does
 * to it: test_port_durable.c.
 * Without io_uring the epoll half runs and the exit status is 77 (skip).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "paste.h"
#include "../../lib/port_internal.h"   /* white box: test_gen_wrap */

static char store_path[64];
static struct paste_store *st;

static int client(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Poll the port until pred(evs) is satisfied or 2 s pass; collects events
 * of all rounds into `all` (type, conn, bytes). */
struct seen {
	int accepts, closes;
	size_t bytes;
	char data[1 << 16];
	uint32_t last_conn;
	int holds;
};

static void pump(struct paste_port *pt, struct seen *s, int rounds, bool hold)
{
	for (int i = 0; i < rounds; i++) {
		struct paste_event *evs;
		int n = paste_port_poll(pt, &evs, 20);
		for (int j = 0; j < n; j++) {
			struct paste_event *ev = &evs[j];
			s->last_conn = ev->conn;
			if (ev->type == PASTE_EV_ACCEPT)
				s->accepts++;
			else if (ev->type == PASTE_EV_CLOSED)
				s->closes++;
			else if (ev->type == PASTE_EV_DATA) {
				if (s->bytes + ev->len <= sizeof(s->data))
					memcpy(s->data + s->bytes, ev->data, ev->len);
				s->bytes += ev->len;
				if (hold && paste_port_hold(pt, ev) == 0)
					s->holds++;
			}
		}
	}
}

static struct paste_port *open_port(enum paste_engine e, uint32_t ring, uint32_t max_conns,
				    struct paste_persist *p)
{
	struct paste_port_config c = { .engine = e, .port = 0, .ring_bufs = ring,
				       .max_conns = max_conns, .store = st, .persist = p };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	if (paste_port_open(&pt, &c, &err)) {
		fprintf(stderr, "port open: %s\n", err.msg);
		return NULL;
	}
	return pt;
}

static ssize_t read_all(int fd, char *buf, size_t want, int ms)
{
	size_t got = 0;
	while (got < want) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, ms) <= 0)
			break;
		ssize_t r = read(fd, buf + got, want - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static void test_echo(enum paste_engine e)
{
	struct paste_port *pt = open_port(e, 64, 64, NULL);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fd = client(paste_port_local_port(pt));
	CHECK(fd >= 0);
	struct seen s = { 0 };
	pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 1);
	CHECK(write(fd, "hello", 5) == 5);
	pump(pt, &s, 5, false);
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
	pump(pt, &s, 3, false);
	char buf[16] = { 0 };
	CHECK_EQ(read_all(fd, buf, 8, 1000), 8);
	CHECK(!memcmp(buf, "hi WORLD", 8));
	CHECK_EQ(paste_store_refcount(st, idx), 0);          /* unpinned, freed */
	CHECK_EQ(paste_port_send_store(pt, s.last_conn, st ? UINT32_MAX - 1 : 0, 0, 1, 0), -EINVAL);
	close(fd);
	pump(pt, &s, 5, false);
	CHECK_EQ(s.closes, 1);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "x", 1, 0), -ENOTCONN);
	paste_port_close(pt);
}

/* 8 buffers in the ring, 16 connections each sending 3 KiB: the ring runs
 * dry, recv re-arms after the batch, and every byte arrives. */
static void test_enobufs(void)
{
	uint32_t before = paste_store_nfree(st);
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 8, 64, NULL);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fds[16];
	char msg[3072];
	memset(msg, 'a', sizeof(msg));
	for (int i = 0; i < 16; i++)
		fds[i] = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 16);
	for (int i = 0; i < 16; i++)
		CHECK(write(fds[i], msg, sizeof(msg)) == (ssize_t)sizeof(msg));
	for (int i = 0; i < 200 && s.bytes < 16 * sizeof(msg); i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.bytes, 16 * sizeof(msg));
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK(ps.enobufs > 0);
	for (int i = 0; i < 16; i++)
		close(fds[i]);
	pump(pt, &s, 10, false);
	CHECK_EQ(s.closes, 16);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nfree(st), before);            /* no buffer leaked */
}

/* Held buffers keep their bytes; the ring gets replacements. */
static void test_hold(void)
{
	uint32_t before = paste_store_nfree(st);
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 8, 16, NULL);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
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
		pump(pt, &s, 2, false);
	}
	CHECK(!memcmp(paste_store_buf(st, held), "keep me", 7));
	CHECK_EQ(paste_store_refcount(st, held), 1);
	paste_store_unref(st, held, false);
	close(fd);
	pump(pt, &s, 5, false);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nfree(st), before);
}

/* A 16 MiB reply cannot leave in one send (socket buffers are ~4 MiB on
 * loopback): partial sends resume where they stopped. */
static void test_partial_send(enum paste_engine e)
{
	struct paste_port *pt = open_port(e, 16, 16, NULL);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK(write(fd, "go", 2) == 2);
	pump(pt, &s, 3, false);
	size_t big = 16u << 20;
	char *out = malloc(big), *in = malloc(big);
	for (size_t i = 0; i < big; i++)
		out[i] = (char)(i * 7);
	CHECK_EQ(paste_port_send(pt, s.last_conn, out, big, 0), 0);
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
	free(out);
	free(in);
	close(fd);
	pump(pt, &s, 3, false);
	paste_port_close(pt);
}

/* A peer that resets (SO_LINGER 0) gives CLOSED and leaks nothing. */
static void test_reset(enum paste_engine e)
{
	struct paste_port *pt = open_port(e, 16, 16, NULL);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK(write(fd, "x", 1) == 1);
	pump(pt, &s, 3, false);
	paste_port_send(pt, s.last_conn, "reply", 5, 0);
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
	pump(pt, &s, 10, false);
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
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 16, 2, NULL);
	uint16_t port = paste_port_local_port(pt);
	int a = client(port), b = client(port), c = client(port);
	struct seen s = { 0 };
	pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 2);
	CHECK(write(a, "1", 1) == 1);
	pump(pt, &s, 3, false);
	CHECK_EQ(s.bytes, 1);      /* existing connections still served */
	close(a);
	for (int i = 0; i < 30 && s.accepts < 3; i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 3);
	close(b);
	close(c);
	pump(pt, &s, 10, false);
	paste_port_close(pt);
}

/* user_data keeps 28 bits of a slot's generation; the slot's counter runs
 * on (the lowest slots are reused the most), and completions must still
 * match once it passes 2^28. */
static void test_gen_wrap(void)
{
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 16, 4, NULL);
	CHECK(pt != NULL);
	if (!pt)
		return;
	for (uint32_t i = 0; i < 4; i++)
		pt->conns[i].gen = 0x0fffffffu;
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 1);
	CHECK(pt->conns[s.last_conn].gen > 0x0fffffffu);
	CHECK(write(fd, "hi", 2) == 2);
	pump(pt, &s, 3, false);
	CHECK_EQ(s.bytes, 2);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "yo", 2, 0), 0);
	pump(pt, &s, 2, false);
	char buf[2];
	CHECK_EQ(read_all(fd, buf, 2, 1000), 2);
	close(fd);
	pump(pt, &s, 5, false);
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
	struct paste_port *pt = open_port(PASTE_ENGINE_EPOLL, 16, 64, NULL);
	uint16_t port = paste_port_local_port(pt);
	int a = client(port);
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 1);
	struct rlimit old, low;
	getrlimit(RLIMIT_NOFILE, &old);
	int probe = dup(0);              /* the lowest free descriptor */
	close(probe);
	int b = client(port);            /* takes `probe`; the server gets none */
	low = old;
	low.rlim_cur = (rlim_t)probe + 1;
	setrlimit(RLIMIT_NOFILE, &low);
	for (int i = 0; i < 5; i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 1);
	char c;                         /* b was shed: the peer closed it */
	struct pollfd pb = { b, POLLIN, 0 };
	CHECK(poll(&pb, 1, 1000) == 1 && read(b, &c, 1) <= 0);
	CHECK(write(a, "still", 5) == 5);
	pump(pt, &s, 3, false);
	CHECK_EQ(s.bytes, 5);
	setrlimit(RLIMIT_NOFILE, &old);
	close(a);
	close(b);
	pump(pt, &s, 3, false);
	paste_port_close(pt);
}

/* ---- the slot lifecycle under many short connections ---------------- */

/* Clients: each connection sends "Q" + kind + "\n" and then, by kind:
 * 'c' the server replies "R\n" and closes (the client reads to EOF);
 * 'e' the server replies, the client reads it and closes (EOF first);
 * 'r' the client resets at once (SO_LINGER 0) without reading. */
#define LIFE_THREADS 8
#define LIFE_PER_THREAD 128
#define LIFE_MAX_CONNS 64

struct life {
	uint16_t port;
	const char *kinds;                /* cycled through per connection */
	int answered, expected, failed;   /* __atomic */
	int done_threads;                 /* __atomic */
};

struct life_data {                    /* the app's per-connection state */
	uint32_t id;                      /* set at ACCEPT, nonzero */
	uint32_t got;         /* request bytes; 4: answered; 5: closed */
	char req[4];
};

static void *life_client(void *arg)
{
	struct life *l = arg;
	for (int i = 0; i < LIFE_PER_THREAD; i++) {
		char kind = l->kinds[i % strlen(l->kinds)];
		int fd = client(l->port);
		if (fd < 0) {
			__atomic_add_fetch(&l->failed, 1, __ATOMIC_RELAXED);
			continue;
		}
		char req[3] = { 'Q', kind, '\n' };
		if (write(fd, req, 3) != 3)
			__atomic_add_fetch(&l->failed, 1, __ATOMIC_RELAXED);
		if (kind == 'r') {
			struct linger lg = { 1, 0 };
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			close(fd);
			continue;
		}
		__atomic_add_fetch(&l->expected, 1, __ATOMIC_RELAXED);
		char buf[8];
		ssize_t n = read_all(fd, buf, kind == 'c' ? sizeof(buf) : 2, 2000);
		if (n == 2 && !memcmp(buf, "R\n", 2))
			__atomic_add_fetch(&l->answered, 1, __ATOMIC_RELAXED);
		close(fd);
	}
	__atomic_add_fetch(&l->done_threads, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Per slot the app must see ACCEPT, DATA..., CLOSED: never DATA or CLOSED
 * without an ACCEPT, never an ACCEPT before the previous CLOSED, and the
 * app's data of a connection intact until its CLOSED (an ACCEPT that
 * reused the slot too early would have zeroed it). */
struct life_track {
	uint32_t expect_id[LIFE_MAX_CONNS];   /* 0: the slot has no connection */
	uint32_t next_id;
	int order_errors, accepts, closes;
};

/* Check ev against the lifecycle; the app data of a DATA event that may
 * be served, else NULL. */
static struct life_data *life_check(struct paste_port *pt, struct life_track *t,
				    const struct paste_event *ev)
{
	struct life_data *d = paste_port_conn_data(pt, ev->conn);
	if (ev->conn >= LIFE_MAX_CONNS || !d) {
		t->order_errors++;
		return NULL;
	}
	uint32_t *want = &t->expect_id[ev->conn];
	switch (ev->type) {
	case PASTE_EV_ACCEPT:
		t->accepts++;
		if (*want || d->id)
			t->order_errors++;   /* previous CLOSED not seen, or data not zeroed */
		d->id = *want = ++t->next_id;
		return NULL;
	case PASTE_EV_DATA:
		if (!*want || d->id != *want) {
			t->order_errors++;
			return NULL;
		}
		return d;
	case PASTE_EV_CLOSED:
		t->closes++;
		if (!*want || d->id != *want)
			t->order_errors++;
		*want = 0;
		d->got = 5;   /* like an app marking it dead: the wrong conn = a lost reply */
		return NULL;
	}
	t->order_errors++;
	return NULL;
}

static struct paste_port *life_port(enum paste_engine e)
{
	struct paste_port_config c = { .engine = e, .ring_bufs = 64, .max_conns = LIFE_MAX_CONNS,
				       .conn_data_size = sizeof(struct life_data), .store = st };
	struct paste_port *pt = NULL;
	struct paste_error err;
	CHECK_EQ(paste_port_open(&pt, &c, &err), 0);
	return pt;
}

/* Many short connections from client threads while the port is polled:
 * the lifecycle holds, every request is answered (a lost reply is a 2 s
 * client timeout), accepts == closes + open, and no buffer leaked. */
static void test_short_conns(enum paste_engine e, const char *kinds)
{
	uint32_t before = paste_store_nfree(st);
	struct paste_port *pt = life_port(e);
	struct life l = { .port = paste_port_local_port(pt), .kinds = kinds };
	int total = LIFE_THREADS * LIFE_PER_THREAD, idle = 0, expected = 0;
	for (int i = 0; i < LIFE_PER_THREAD; i++)
		expected += kinds[i % strlen(kinds)] != 'r' ? LIFE_THREADS : 0;
	struct life_track t = { 0 };
	pthread_t th[LIFE_THREADS];
	for (int i = 0; i < LIFE_THREADS; i++)
		pthread_create(&th[i], NULL, life_client, &l);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		/* A reset connection may still sit in the backlog when its
		 * client thread is done: give it 100 quiet passes. */
		bool clients_done = __atomic_load_n(&l.done_threads, __ATOMIC_ACQUIRE) == LIFE_THREADS;
		if (clients_done && t.closes == t.accepts && (t.accepts == total || idle > 100))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 60)
			break;
		struct paste_event *evs;
		int n = paste_port_poll(pt, &evs, 5);
		idle = n > 0 ? 0 : idle + 1;
		for (int j = 0; j < n; j++) {
			struct life_data *d = life_check(pt, &t, &evs[j]);
			for (uint32_t k = 0; d && k < evs[j].len && d->got < 3; k++)
				d->req[d->got++] = (char)evs[j].data[k];
			if (d && d->got == 3) {
				d->got = 4;       /* answered */
				paste_port_send(pt, evs[j].conn, "R\n", 2, 0);
				if (d->req[1] == 'c')
					paste_port_close_conn(pt, evs[j].conn);
			}
		}
	}
	for (int i = 0; i < LIFE_THREADS; i++)
		pthread_join(th[i], NULL);
	if (t.order_errors)
		fprintf(stderr, "%s, %s: %d events out of slot order\n",
			e == PASTE_ENGINE_URING ? "uring" : "epoll", kinds, t.order_errors);
	CHECK_EQ(t.order_errors, 0);
	CHECK_EQ(l.failed, 0);
	CHECK_EQ(l.expected, expected);
	CHECK_EQ(l.answered, l.expected);
	CHECK(t.accepts >= l.expected && t.accepts <= total);   /* resets may die in the backlog */
	CHECK_EQ(t.closes, t.accepts);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.accepts, (uint64_t)t.accepts);
	CHECK_EQ(ps.accepts, ps.closes + ps.conns);
	if (e == PASTE_ENGINE_URING) {
		/* every buffer a CQE carried came back: all in use are the ring's
		 * and the cache's (exact, unlike the free count after close,
		 * which the cache would hide) */
		struct paste_event *evs;
		paste_port_poll(pt, &evs, 0);
		paste_port_poll(pt, &evs, 0);
		paste_port_stats(pt, &ps);
		CHECK_EQ(paste_store_nheld(st), ps.ring_free + ps.cached);
	}
	paste_port_close(pt);
	CHECK_EQ(paste_store_nfree(st), before);
	CHECK_EQ(paste_store_nheld(st), 0);
}

/* The same race made deterministic: the app closes A, and B connects
 * where the kernel would hand B A's slot at once. epoll: B waits in the
 * ready list behind A's data, so the pass that closes A accepts B; uring:
 * B connects after the pass that queued A's close, so the enter that
 * runs the close also runs B's accept (deferred task work). B must get
 * another slot, or A's slot only after the app saw A's CLOSED. */
static void test_reuse_after_close(enum paste_engine e)
{
	struct paste_port *pt = life_port(e);
	struct life_track t = { 0 };
	struct paste_event *evs;
	int a = client(paste_port_local_port(pt)), b = -1;
	for (int i = 0; i < 100 && !t.accepts; i++) {
		int n = paste_port_poll(pt, &evs, 10);
		for (int j = 0; j < n; j++)
			life_check(pt, &t, &evs[j]);
	}
	int fill[LIFE_MAX_CONNS], nfill = 0;
	if (e == PASTE_ENGINE_EPOLL) {
		/* fds below A's are taken, so a close of A's makes it the
		 * lowest free; an empty pass drops the listener from epoll's
		 * ready list, so A's data comes before B's connection in it */
		uint32_t fa = UINT32_MAX;
		for (uint32_t s2 = 0; s2 < LIFE_MAX_CONNS; s2++)
			if (t.expect_id[s2])
				fa = s2;
		for (int f; nfill < LIFE_MAX_CONNS && (f = open("/dev/null", O_RDONLY)) >= 0; ) {
			if ((uint32_t)f > fa) {
				close(f);
				break;
			}
			fill[nfill++] = f;
		}
		paste_port_poll(pt, &evs, 0);
	}
	CHECK(write(a, "x", 1) == 1);
	if (e == PASTE_ENGINE_EPOLL) {
		usleep(10000);
		b = client(paste_port_local_port(pt));
	}
	uint32_t slot = UINT32_MAX;
	for (int i = 0; i < 100 && slot == UINT32_MAX; i++) {
		int n = paste_port_poll(pt, &evs, 10);
		for (int j = 0; j < n; j++)
			if (life_check(pt, &t, &evs[j]))
				slot = evs[j].conn;
	}
	CHECK(slot != UINT32_MAX);
	CHECK_EQ(paste_port_send(pt, slot, "R\n", 2, 0), 0);
	paste_port_close_conn(pt, slot);
	for (int i = 0; i < 6; i++) {
		int n = paste_port_poll(pt, &evs, 10);
		for (int j = 0; j < n; j++)
			life_check(pt, &t, &evs[j]);
		if (b < 0)
			b = client(paste_port_local_port(pt));
	}
	CHECK_EQ(t.order_errors, 0);
	CHECK_EQ(t.accepts, 2);
	CHECK_EQ(t.closes, 1);
	char buf[4];
	CHECK_EQ(read_all(a, buf, sizeof(buf), 1000), 2);   /* the reply, then EOF */
	close(a);
	close(b);
	while (nfill)
		close(fill[--nfill]);
	paste_port_close(pt);
}

/* ---- short connections: defer accept, the first receive -------------- */

static struct paste_port *open_defer(enum paste_engine e, uint32_t defer_s)
{
	struct paste_port_config c = { .engine = e, .ring_bufs = 16, .max_conns = 16,
				       .store = st, .defer_accept_s = defer_s };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	if (paste_port_open(&pt, &c, &err)) {
		fprintf(stderr, "port open: %s\n", err.msg);
		return NULL;
	}
	return pt;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* defer_accept_s: a connection that has sent nothing is not accepted (no
 * ACCEPT event, no slot) until its first data, which then comes with it;
 * a silent one is accepted after about the timeout (1 s: the SYN-ACK is
 * resent after 1 s and the client's answer completes it). Without the
 * option the silent connection is accepted at once (test_echo). */
static void test_defer_accept(enum paste_engine e)
{
	struct paste_port *pt = open_defer(e, 1);
	CHECK(pt != NULL);
	if (!pt)
		return;
	uint16_t port = paste_port_local_port(pt);
	double t0 = now_s();
	int silent = client(port), talker = client(port);
	CHECK(silent >= 0 && talker >= 0);
	struct seen s = { 0 };
	pump(pt, &s, 10, false);                 /* ~200 ms */
	CHECK_EQ(s.accepts, 0);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	CHECK(write(talker, "hi", 2) == 2);
	for (int i = 0; i < 50 && s.bytes < 2; i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 1);                  /* the talker, with its data */
	CHECK_EQ(s.bytes, 2);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "yo", 2, 0), 0);
	paste_port_close_conn(pt, s.last_conn);
	pump(pt, &s, 3, false);
	char buf[4];
	CHECK_EQ(read_all(talker, buf, sizeof(buf), 1000), 2);   /* reply, then EOF */
	for (int i = 0; i < 250 && s.accepts < 2; i++)           /* <= 5 s */
		pump(pt, &s, 1, false);
	double t = now_s() - t0;
	CHECK_EQ(s.accepts, 2);                  /* the silent one, at last */
	CHECK(t >= 0.8 && t < 5.0);
	if (t < 0.8 || t >= 5.0)
		fprintf(stderr, "  silent connection accepted after %.2f s (defer 1 s)\n", t);
	close(silent);
	close(talker);
	for (int i = 0; i < 50 && s.closes < 2; i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.closes, 2);
	paste_port_close(pt);
	/* more than an hour is refused, not silently clamped */
	struct paste_port_config c = { .engine = e, .ring_bufs = 16, .max_conns = 16, .store = st,
				       .defer_accept_s = 3601 };
	struct paste_error err = { 0 };
	CHECK_EQ(paste_port_open(&pt, &c, &err), -EINVAL);
	CHECK(strstr(err.msg, "defer_accept_s") != NULL);
}

/* Poll until the connection's DATA events have brought `want` bytes. */
static void pump_bytes(struct paste_port *pt, struct seen *s, size_t want)
{
	for (int i = 0; i < 100 && s->bytes < want; i++)
		pump(pt, s, 1, false);
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
	int fd = client(port);
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 1);
	uint32_t slot = s.last_conn;
	CHECK(pt->conns[slot].recv_armed);          /* the single-shot, waiting */
	CHECK(write(fd, "one", 3) == 3);
	pump_bytes(pt, &s, 3);
	CHECK_EQ(s.bytes, 3);
	CHECK(!pt->conns[slot].recv_armed);         /* done with its one CQE */
	CHECK(write(fd, "two", 3) == 3);            /* before any receive is armed */
	CHECK_EQ(paste_port_send(pt, slot, "1", 1, 0), 0);
	pump_bytes(pt, &s, 6);
	CHECK_EQ(s.bytes, 6);
	CHECK(!memcmp(s.data, "onetwo", 6));
	CHECK(pt->conns[slot].recv_armed);          /* multishot from now on */
	CHECK(write(fd, "three", 5) == 5);
	pump_bytes(pt, &s, 11);
	CHECK_EQ(s.bytes, 11);
	CHECK(pt->conns[slot].recv_armed);          /* still armed: multishot */
	char buf[8];
	CHECK_EQ(read_all(fd, buf, 1, 1000), 1);
	close(fd);
	for (int i = 0; i < 20 && s.closes < 1; i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.closes, 1);
	/* one request, the app replies and closes: no receive is armed again */
	fd = client(port);
	pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 2);
	slot = s.last_conn;
	CHECK(write(fd, "q", 1) == 1);
	pump_bytes(pt, &s, 12);
	CHECK_EQ(s.bytes, 12);
	CHECK_EQ(paste_port_send(pt, slot, "r", 1, 0), 0);
	paste_port_close_conn(pt, slot);
	struct paste_event *evs;
	int n = paste_port_poll(pt, &evs, 20);      /* submits the reply */
	CHECK(!pt->conns[slot].recv_armed);         /* and no receive with it */
	for (int i = 0; i < n; i++)
		s.closes += evs[i].type == PASTE_EV_CLOSED;
	for (int i = 0; i < 20 && s.closes < 2; i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.closes, 2);
	CHECK_EQ(read_all(fd, buf, sizeof(buf), 1000), 1);       /* reply, then EOF */
	close(fd);
	pump(pt, &s, 3, false);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	CHECK_EQ(ps.accepts, ps.closes);
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
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 8, 16, NULL);
	CHECK(pt != NULL);
	if (!pt)
		return;
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.ring_free, 8);
	CHECK_EQ(ps.cached, 0);
	CHECK_EQ(paste_store_nheld(st) - held0, ps.ring_free + ps.cached);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
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
	pump(pt, &s, 2, false);                     /* the held buffer was replaced */
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.ring_free, 8);
	CHECK(ps.cached > 0 && ps.cached < 64);
	/* ring + cache + the one the test holds: not one buffer unaccounted */
	CHECK_EQ(paste_store_nheld(st) - held0, ps.ring_free + ps.cached + 1);
	if (held != PASTE_NO_BUF)
		paste_store_unref(st, held, false);
	close(fd);
	pump(pt, &s, 5, false);
	paste_port_stats(pt, &ps);
	CHECK_EQ(paste_store_nheld(st) - held0, ps.ring_free + ps.cached);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nheld(st), held0);
}

/* One request on a connection of its own (close_conn after the reply), or
 * `rounds` on one kept connection: drives the accept-heavy judgement. */
static void one_short_conn(struct paste_port *pt, uint16_t port)
{
	int fd = client(port);
	struct seen s = { 0 };
	CHECK(write(fd, "q", 1) == 1);
	for (int i = 0; i < 100 && !s.bytes; i++)
		pump(pt, &s, 1, false);
	if (s.bytes) {
		paste_port_send(pt, s.last_conn, "r", 1, 0);
		paste_port_close_conn(pt, s.last_conn);
	}
	for (int i = 0; i < 100 && !s.closes; i++)
		pump(pt, &s, 1, false);
	char b;
	CHECK_EQ(read_all(fd, &b, 1, 1000), 1);   /* the EOF waits for the next poll */
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
	int fd = client(port);
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	for (int i = 0; i < 300; i++) {             /* keep-alive: no accepts */
		size_t want = s.bytes + 1;
		CHECK(write(fd, "k", 1) == 1);
		for (int j = 0; j < 100 && s.bytes < want; j++)
			pump(pt, &s, 1, false);
		paste_port_send(pt, s.last_conn, "r", 1, 0);
		pump(pt, &s, 1, false);
		char b;
		CHECK_EQ(read_all(fd, &b, 1, 1000), 1);
	}
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.accept_heavy, 0);
	close(fd);
	pump(pt, &s, 3, false);
	paste_port_close(pt);
}

/* ---- open failing part way, and the batch-wait knobs ----------------- */

/* Run body() in a child: it must exit 0, not crash. */
static void in_child(const char *what, void (*body)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		check_fail = 0;
		body();
		_exit(check_fail ? 1 : 0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fprintf(stderr, "  (%s: child status %#x)\n", what, status);
}

/* Too few descriptors for the direct-descriptor table: the error names
 * the limit to raise, and every buffer taken so far goes back. */
static void open_low_nofile(void)
{
	uint32_t before = paste_store_nfree(st);
	struct rlimit low = { 64, 64 };
	setrlimit(RLIMIT_NOFILE, &low);
	struct paste_port_config c = { .ring_bufs = 16, .max_conns = 4096, .store = st };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	CHECK(paste_port_open(&pt, &c, &err) < 0);
	CHECK(strstr(err.msg, "RLIMIT_NOFILE") != NULL);
	CHECK(pt == NULL);
	CHECK_EQ(paste_store_nfree(st), before);
}

static void test_open_fails(void)
{
	in_child("RLIMIT_NOFILE 64", open_low_nofile);
	/* more ring buffers than the store has free */
	uint32_t before = paste_store_nfree(st);
	struct paste_port_config c = { .ring_bufs = 32768, .max_conns = 16, .store = st };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_port_open(&pt, &c, &err), -ENOSPC);
	CHECK(strstr(err.msg, "free buffers") != NULL);
	CHECK_EQ(paste_store_nfree(st), before);
}

/* The old environment knob PASTE_WANT_DIV=0 divided by zero; the knobs
 * are config fields now (0 = default) and the environment is ignored. */
static void wait_knobs_env(void)
{
	setenv("PASTE_WANT_DIV", "0", 1);
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 16, 16, NULL);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 5, false);   /* waits with a connection open */
	CHECK_EQ(s.accepts, 1);
	close(fd);
	pump(pt, &s, 3, false);
	paste_port_close(pt);
}

static void test_wait_knobs(void)
{
	in_child("PASTE_WANT_DIV=0", wait_knobs_env);
	struct paste_port_config c = { .ring_bufs = 16, .max_conns = 16, .store = st,
				       .min_wait_us = 2000000 };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_port_open(&pt, &c, &err), -EINVAL);
	CHECK(strstr(err.msg, "min_wait_us") != NULL);
	/* min_wait off, a divisor of 1: still one request, one reply */
	c.min_wait_us = 0;
	c.no_min_wait = true;
	c.want_div = 1;
	CHECK_EQ(paste_port_open(&pt, &c, &err), 0);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK(write(fd, "x", 1) == 1);
	pump(pt, &s, 3, false);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "y", 1, 0), 0);
	pump(pt, &s, 2, false);
	char b;
	CHECK_EQ(read_all(fd, &b, 1, 1000), 1);
	close(fd);
	pump(pt, &s, 3, false);
	paste_port_close(pt);
}

int main(void)
{
	struct paste_error err;
	bool uring = paste_uring_probe(&err) == 0;
	if (!uring)
		printf("skipping the uring tests: %s\n", err.msg);
	snprintf(store_path, sizeof(store_path), "/dev/shm/paste-test-port-%d", getpid());
	struct paste_store_config c = { .size = 8 << 20 };
	if (paste_store_open(&st, store_path, &c, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	paste_store_start(st);
	test_echo(PASTE_ENGINE_EPOLL);
	test_partial_send(PASTE_ENGINE_EPOLL);
	test_reset(PASTE_ENGINE_EPOLL);
	test_emfile_epoll();
	test_reuse_after_close(PASTE_ENGINE_EPOLL);
	test_short_conns(PASTE_ENGINE_EPOLL, "c");
	test_short_conns(PASTE_ENGINE_EPOLL, "ccer");
	test_defer_accept(PASTE_ENGINE_EPOLL);
	if (uring) {
		test_echo(PASTE_ENGINE_URING);
		test_enobufs();
		test_hold();
		test_partial_send(PASTE_ENGINE_URING);
		test_reset(PASTE_ENGINE_URING);
		test_table_full();
		test_gen_wrap();
		test_reuse_after_close(PASTE_ENGINE_URING);
		test_short_conns(PASTE_ENGINE_URING, "c");
		test_short_conns(PASTE_ENGINE_URING, "ccer");
		test_defer_accept(PASTE_ENGINE_URING);
		test_first_recv();
		test_buffer_accounting();
		test_accept_heavy(1);
		test_accept_heavy(0);
		test_open_fails();
		test_wait_knobs();
	}
	paste_store_close(st);
	unlink(store_path);
	int r = check_done();
	return r ? r : uring ? 0 : 77;   /* 77: meson's "skipped" */
}
