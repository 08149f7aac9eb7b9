/*
 * test_port_slots.c - the port's slot lifecycle under many short
 * connections, both engines: client threads connect, send a request and
 * either read the reply to the server's close, close first, or reset,
 * while this thread polls; per slot the app must see ACCEPT, DATA...,
 * CLOSED (never an ACCEPT before the previous CLOSED, app data intact
 * until it), every request is answered, accepts == closes + open, and no
 * buffer leaks. Then the same race made deterministic: a slot closed and
 * a new connection where the kernel would hand it the same slot at once.
 * See docs/design.md, "Slot lifecycle". Shared helpers: port_fixture.h.
 * Without io_uring the epoll half runs and the exit status is 77 (skip).
 */
#include <fcntl.h>
#include <pthread.h>

#include "port_fixture.h"

static struct paste_store *st;

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
		int fd = pf_client(l->port);
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
		ssize_t n = pf_read_all(fd, buf, kind == 'c' ? sizeof(buf) : 2, 2000);
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
	uint64_t t0 = paste_clock_ns();
	for (;;) {
		/* A reset connection may still sit in the backlog when its
		 * client thread is done: give it 100 quiet passes. */
		bool clients_done = __atomic_load_n(&l.done_threads, __ATOMIC_ACQUIRE) == LIFE_THREADS;
		if (clients_done && t.closes == t.accepts && (t.accepts == total || idle > 100))
			break;
		if (paste_clock_ns() - t0 > 60 * 1000000000ull)
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
			paste_engine_name(e), kinds, t.order_errors);
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
	int a = pf_client(paste_port_local_port(pt)), b = -1;
	for (int i = 0; i < 100 && !t.accepts; i++) {
		int n = paste_port_poll(pt, &evs, 10);
		for (int j = 0; j < n; j++)
			life_check(pt, &t, &evs[j]);
	}
	int fill[LIFE_MAX_CONNS], nfill = 0;
	if (e != PASTE_ENGINE_URING) {
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
	if (e != PASTE_ENGINE_URING) {
		usleep(10000);
		b = pf_client(paste_port_local_port(pt));
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
			b = pf_client(paste_port_local_port(pt));
	}
	CHECK_EQ(t.order_errors, 0);
	CHECK_EQ(t.accepts, 2);
	CHECK_EQ(t.closes, 1);
	char buf[4];
	CHECK_EQ(pf_read_all(a, buf, sizeof(buf), 1000), 2);   /* the reply, then EOF */
	close(a);
	close(b);
	while (nfill)
		close(fill[--nfill]);
	paste_port_close(pt);
}

int main(void)
{
	bool uring = pf_uring_usable();
	struct pf_store s;
	if (pf_store_open(&s, "/dev/shm", "port-slots", 8 << 20))
		return 1;
	st = s.st;
	paste_store_start(st);
	for (enum paste_engine e = PASTE_ENGINE_EPOLL; e <= PASTE_ENGINE_EPOLL_BATCH; e++) {
		test_reuse_after_close(e);
		test_short_conns(e, "c");
		test_short_conns(e, "ccer");
	}
	if (uring) {
		test_reuse_after_close(PASTE_ENGINE_URING);
		test_short_conns(PASTE_ENGINE_URING, "c");
		test_short_conns(PASTE_ENGINE_URING, "ccer");
	}
	pf_store_close(&s);
	return pf_done(uring);
}
