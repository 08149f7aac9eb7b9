/*
 * test_body.c - request body collection (lib/body.c) against a real store
 * and real ports, fed by a loopback client driven from this same thread:
 * one read held in place, a body spanning several buffers, many tiny reads
 * (never out of extents, held space within max_held), copy mode byte
 * exact, the epoll engine (no store buffer: copied), two bodies in one
 * read, the reserve (507, every reference released, the rest consumed and
 * dropped), paste_body_max / begin's -E2BIG and -EBUSY, release mid-body,
 * and random splits checked step by step against phttpd's wal_body (the
 * code this module replaces, transcribed below as the reference).
 * Every body's extents are compared with the bytes the client sent, and
 * after every release the buffers the app holds are back where they were.
 * Without io_uring only the epoll and API parts run, and the exit status
 * is 77 (meson's skip).
 */
#include <fcntl.h>

#include "port_fixture.h"

static struct paste_store *st;
static uint32_t bs;

/* ---- helpers (the store, ports, clients: port_fixture.h) ------------ */

static int client(uint16_t port)
{
	int fd = pf_client(port);
	/* non-blocking: a large body is written between polls, never
	 * blocking the thread that must read it */
	if (fd >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* A port with one accepted loopback connection. */
struct rig {
	struct paste_port *pt;
	int fd;
	uint32_t conn;
};

static bool rig_open(struct rig *r, enum paste_engine e)
{
	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->pt = pf_open_port(st, e, 64, 16);
	if (!r->pt)
		return false;
	r->fd = client(paste_port_local_port(r->pt));
	CHECK(r->fd >= 0);
	for (int i = 0; i < 100 && r->fd >= 0; i++) {
		struct paste_event *evs;
		int n = paste_port_poll(r->pt, &evs, 20);
		for (int j = 0; j < n; j++)
			if (evs[j].type == PASTE_EV_ACCEPT) {
				r->conn = evs[j].conn;
				return true;
			}
	}
	CHECK(!"accepted");
	return false;
}

static void rig_close(struct rig *r)
{
	if (r->fd >= 0)
		close(r->fd);
	for (int i = 0; r->pt && i < 100; i++) {
		struct paste_event *evs;
		int n = paste_port_poll(r->pt, &evs, 20), closed = 0;
		for (int j = 0; j < n; j++)
			closed |= evs[j].type == PASTE_EV_CLOSED;
		if (closed)
			break;
	}
	if (r->pt)
		paste_port_close(r->pt);
	r->pt = NULL;
}

typedef void (*on_data_fn)(void *arg, struct rig *r, const struct paste_event *ev);

/* The client sends p[0..n) (as one write where the socket takes it);
 * poll until the server has seen all of it. Each DATA event goes to fn
 * inside its batch (a hold must happen there). Returns the DATA events. */
static int deliver(struct rig *r, const void *p, size_t n, on_data_fn fn, void *arg)
{
	size_t sent = 0, got = 0;
	int nev = 0;
	for (int i = 0; i < 400 && got < n; i++) {
		if (sent < n) {
			ssize_t w = write(r->fd, (const char *)p + sent, n - sent);
			if (w > 0)
				sent += (size_t)w;
		}
		struct paste_event *evs;
		int k = paste_port_poll(r->pt, &evs, 20);
		for (int j = 0; j < k; j++) {
			if (evs[j].type != PASTE_EV_DATA || evs[j].conn != r->conn)
				continue;
			got += evs[j].len;
			nev++;
			fn(arg, r, &evs[j]);
		}
	}
	CHECK_EQ(got, n);
	return nev;
}

/* Polls with nothing arriving: the last batch's buffers are recycled
 * (a held one replaced in the ring, its port reference dropped). */
static void settle(struct rig *r)
{
	for (int i = 0; i < 2; i++) {
		struct paste_event *evs;
		int n = paste_port_poll(r->pt, &evs, 0);
		for (int j = 0; j < n; j++)
			CHECK(evs[j].type != PASTE_EV_DATA);
	}
}

/* Buffers held outside the port: the store's in-use count minus what the
 * port owns while free (posted in its ring, in its allocation cache). Call
 * after settle(). */
static int64_t app_held(struct rig *r)
{
	struct paste_port_stats s;
	paste_port_stats(r->pt, &s);
	return (int64_t)paste_store_nheld(st) - s.ring_free - s.cached;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 8));
}

/* The bytes the extents name, in order, equal want[0..n). */
static bool body_equals(const struct paste_body *b, const uint8_t *want, uint64_t n)
{
	uint64_t at = 0;
	for (uint32_t i = 0; i < b->n; i++) {
		const struct paste_extent *e = &b->ext[i];
		if (e->off + e->len > bs || at + e->len > n ||
		    memcmp(paste_store_buf(st, e->buf) + e->off, want + at, e->len))
			return false;
		at += e->len;
	}
	return at == n;
}

/* ---- the reference: phttpd's wal_body (apps/phttpd_wal.c, cb078d5) --- */
/* Transcribed with srv->copy -> copy, srv->max_held -> max_held,
 * RESERVE_BUFS -> 256, h->next -> next, and a held[] flag per extent; the
 * caller subtracts len from body_left afterwards, as phttpd's on_data does. */

struct ref {
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	bool held[PASTE_WAL_MAX_EXTENTS];
	uint32_t next;
	bool copying, failed;
	uint16_t fail_status;
	uint64_t body_left;
};

static void ref_release(struct ref *h)
{
	for (uint32_t i = 0; i < h->next; i++)
		paste_store_unref(st, h->ext[i].buf, false);
	h->next = 0;
	h->copying = false;
}

static void ref_body(struct ref *h, bool copy, uint64_t max_held, struct paste_port *pt,
		     const struct paste_event *ev, uint32_t pos, uint32_t len)
{
	if (h->failed)
		return;
	if (!copy && ev->buf != PASTE_NO_BUF && h->next < PASTE_WAL_MAX_EXTENTS) {
		uint64_t rest = h->body_left - len;
		uint64_t room = (uint64_t)(PASTE_WAL_MAX_EXTENTS - h->next - 1) * bs;
		uint64_t pinned = ((uint64_t)h->next + 1 + (rest + bs - 1) / bs) * bs;
		if (room >= rest && (!max_held || pinned <= max_held) &&
		    paste_store_nfree(st) >= 256) {
			paste_port_hold(pt, ev);
			h->held[h->next] = true;
			h->ext[h->next++] = (struct paste_extent){ ev->buf, ev->off + pos, len };
			h->copying = false;
			return;
		}
	}
	while (len) {
		struct paste_extent *e = h->next ? &h->ext[h->next - 1] : NULL;
		if (!h->copying || e->len == bs) {
			uint32_t idx;
			if (h->next == PASTE_WAL_MAX_EXTENTS || paste_store_nfree(st) < 256 ||
			    paste_store_alloc(st, &idx, 1) != 1) {
				ref_release(h);
				h->failed = true;
				h->fail_status = 507;
				return;
			}
			h->held[h->next] = false;
			h->ext[h->next++] = (struct paste_extent){ idx, 0, 0 };
			h->copying = true;
			e = &h->ext[h->next - 1];
		}
		uint32_t n = bs - e->len < len ? bs - e->len : len;
		memcpy(paste_store_buf(st, e->buf) + e->len, ev->data + pos, n);
		e->len += n;
		pos += n;
		len -= n;
	}
}

/* ---- feeding ------------------------------------------------------- */

struct feeder {
	struct paste_body *b;
	const struct paste_body_config *cfg;
	int res;                 /* first negative feed result */
	int feeds;
	uint32_t evbuf[512];     /* event buffers, in order */
	uint32_t nev;
	uint32_t max_bufs;       /* most buffers the body held at once */
	uint32_t max_n;
	struct ref *ref;         /* optional: the reference, compared per event */
	bool ref_same;           /* every step matched */
};

static bool matches_ref(const struct paste_body *b, const struct ref *h)
{
	if (b->n != h->next || b->copying != h->copying || (b->error != 0) != h->failed ||
	    (h->failed && b->error != h->fail_status) || b->left != h->body_left)
		return false;
	for (uint32_t i = 0; i < b->n; i++) {
		if (b->ext[i].off != h->ext[i].off || b->ext[i].len != h->ext[i].len)
			return false;
		/* held: the same event buffer; copied: each its own fresh one */
		if (h->held[i] != (b->ext[i].buf == h->ext[i].buf))
			return false;
	}
	return true;
}

static void feed_cb(void *arg, struct rig *r, const struct paste_event *ev)
{
	struct feeder *f = arg;
	uint32_t take = ev->len < f->b->left ? ev->len : (uint32_t)f->b->left;
	if (f->nev < 512)
		f->evbuf[f->nev++] = ev->buf;
	if (f->ref) {
		ref_body(f->ref, f->cfg->copy, f->cfg->max_held, r->pt, ev, 0, take);
		f->ref->body_left -= take;
	}
	int x = paste_body_feed(f->b, f->cfg, r->pt, ev, 0, take);
	f->feeds++;
	if (x < 0 && !f->res)
		f->res = x;
	if (f->b->bufs > f->max_bufs)
		f->max_bufs = f->b->bufs;
	if (f->b->n > f->max_n)
		f->max_n = f->b->n;
	CHECK_EQ(f->b->bufs, f->b->n);
	if (f->ref && !matches_ref(f->b, f->ref))
		f->ref_same = false;
}

static bool is_event_buf(const struct feeder *f, uint32_t idx)
{
	for (uint32_t i = 0; i < f->nev; i++)
		if (f->evbuf[i] == idx)
			return true;
	return false;
}

/* After settle(): each extent's buffer carries exactly the body's one
 * reference (the port dropped its own on the held ones). */
static void check_one_ref_each(const struct paste_body *b)
{
	for (uint32_t i = 0; i < b->n; i++)
		CHECK_EQ(paste_store_refcount(st, b->ext[i].buf), 1);
}

static void check_idle(const struct paste_body *b)
{
	CHECK(b->n == 0 && b->bufs == 0 && b->len == 0 && b->left == 0 && !b->copying && !b->error);
}

/* ---- tests --------------------------------------------------------- */

/* One read, held where it landed: one extent naming the event's buffer. */
static void test_one_event(void)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	static uint8_t msg[1000];
	fill(msg, sizeof(msg), 1);
	struct paste_body_config cfg = { 0 };
	struct paste_body b = { 0 };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, sizeof(msg)), 0);
	struct feeder f = { .b = &b, .cfg = &cfg };
	CHECK_EQ(deliver(&r, msg, sizeof(msg), feed_cb, &f), 1);
	CHECK_EQ(f.res, 0);
	CHECK_EQ(b.n, 1);
	CHECK_EQ(b.bufs, 1);
	CHECK_EQ(b.left, 0);
	CHECK_EQ(b.len, sizeof(msg));
	CHECK(!b.copying);
	CHECK_EQ(b.ext[0].buf, f.evbuf[0]);
	CHECK_EQ(b.ext[0].off, 0);
	CHECK_EQ(b.ext[0].len, sizeof(msg));
	CHECK(body_equals(&b, msg, sizeof(msg)));
	settle(&r);
	check_one_ref_each(&b);
	CHECK(body_equals(&b, msg, sizeof(msg)));   /* the ring did not reuse it */
	CHECK_EQ(app_held(&r), base + 1);
	paste_body_release(&b, st);
	check_idle(&b);
	CHECK_EQ(paste_store_refcount(st, f.evbuf[0]), 0);   /* back on the free list */
	settle(&r);
	CHECK_EQ(app_held(&r), base);
	paste_body_release(&b, st);   /* idle: nothing to do */
	rig_close(&r);
}

/* A body larger than a buffer: one held extent per read, in order. */
static void test_spanning(void)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	static uint8_t msg[5 * 2048 + 123];
	fill(msg, sizeof(msg), 2);
	struct paste_body_config cfg = { .max_held = 1 << 20 };
	struct paste_body b = { 0 };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, sizeof(msg)), 0);
	struct feeder f = { .b = &b, .cfg = &cfg };
	int nev = deliver(&r, msg, sizeof(msg), feed_cb, &f);
	CHECK(nev >= 6);
	CHECK_EQ(f.res, 0);
	CHECK_EQ(b.n, (uint32_t)nev);
	CHECK_EQ(b.left, 0);
	for (uint32_t i = 0; i < b.n; i++)
		CHECK_EQ(b.ext[i].buf, f.evbuf[i]);
	CHECK(body_equals(&b, msg, sizeof(msg)));
	settle(&r);
	check_one_ref_each(&b);
	CHECK_EQ(app_held(&r), base + b.n);
	paste_body_release(&b, st);
	settle(&r);
	CHECK_EQ(app_held(&r), base);
	rig_close(&r);
}

/* A body trickling in one byte per read. Without max_held: 63 reads are
 * held (each pins a buffer), then the extents left can only take the rest
 * copied, so the rest goes into one copy buffer: 64 extents, never more.
 * With max_held = 8 buffers: 7 held, the rest copied, never more than 8
 * buffers pinned. */
static void tiny_reads(uint64_t max_held, uint32_t len, uint32_t want_held, uint32_t want_n)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	uint8_t *msg = malloc(len);
	fill(msg, len, 3);
	struct paste_body_config cfg = { .max_held = max_held };
	struct paste_body b = { 0 };
	struct ref ref = { .body_left = len };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, len), 0);
	struct feeder f = { .b = &b, .cfg = &cfg, .ref = &ref, .ref_same = true };
	for (uint32_t i = 0; i < len; i++)
		deliver(&r, msg + i, 1, feed_cb, &f);
	CHECK_EQ(f.res, 0);
	CHECK_EQ(f.feeds, (int)len);
	CHECK(f.ref_same);
	CHECK_EQ(b.left, 0);
	CHECK_EQ(b.n, want_n);
	CHECK(f.max_n <= PASTE_BODY_MAX_EXTENTS);
	if (max_held)
		CHECK((uint64_t)f.max_bufs * bs <= max_held);
	uint32_t held = 0;
	for (uint32_t i = 0; i < b.n; i++)
		held += is_event_buf(&f, b.ext[i].buf);
	CHECK_EQ(held, want_held);
	for (uint32_t i = 0; i < held; i++)
		CHECK(b.ext[i].len == 1 && is_event_buf(&f, b.ext[i].buf));
	CHECK(b.copying);
	CHECK_EQ(b.ext[b.n - 1].off, 0);
	CHECK_EQ(b.ext[b.n - 1].len, len - held);
	CHECK(body_equals(&b, msg, len));
	settle(&r);
	ref_release(&ref);          /* the reference held the same buffers */
	check_one_ref_each(&b);
	paste_body_release(&b, st);
	settle(&r);
	CHECK_EQ(app_held(&r), base);
	free(msg);
	rig_close(&r);
}

static void test_tiny_reads(void)
{
	tiny_reads(0, 200, 63, 64);
	tiny_reads(8ull * bs, 60, 7, 8);
}

/* Copy mode: dense copies (whole buffers filled, offset 0), none of them
 * an event buffer, byte exact, however the reads were split. */
static void test_copy_mode(void)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	static uint8_t msg[10000];
	fill(msg, sizeof(msg), 4);
	struct paste_body_config cfg = { .copy = true };
	struct paste_body b = { 0 };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, sizeof(msg)), 0);
	struct feeder f = { .b = &b, .cfg = &cfg };
	static const uint32_t cut[] = { 1, 777, 3000, 5, 2048 };
	uint32_t at = 0;
	for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
		deliver(&r, msg + at, cut[i], feed_cb, &f);
		at += cut[i];
	}
	deliver(&r, msg + at, sizeof(msg) - at, feed_cb, &f);
	CHECK_EQ(f.res, 0);
	CHECK_EQ(b.left, 0);
	CHECK_EQ(b.n, (sizeof(msg) + bs - 1) / bs);
	for (uint32_t i = 0; i < b.n; i++) {
		CHECK_EQ(b.ext[i].off, 0);
		CHECK(!is_event_buf(&f, b.ext[i].buf));
		if (i + 1 < b.n)
			CHECK_EQ(b.ext[i].len, bs);
	}
	CHECK(b.copying);
	CHECK(body_equals(&b, msg, sizeof(msg)));
	settle(&r);
	check_one_ref_each(&b);
	CHECK_EQ(app_held(&r), base + b.n);
	paste_body_release(&b, st);
	settle(&r);
	CHECK_EQ(app_held(&r), base);
	rig_close(&r);
}

/* The epoll engine delivers from a private buffer (PASTE_NO_BUF): the
 * body is copied even when holding is allowed. */
static void test_epoll(void)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_EPOLL))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	static uint8_t msg[7000];
	fill(msg, sizeof(msg), 5);
	struct paste_body_config cfg = { 0 };
	struct paste_body b = { 0 };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, sizeof(msg)), 0);
	struct feeder f = { .b = &b, .cfg = &cfg };
	deliver(&r, msg, 100, feed_cb, &f);
	deliver(&r, msg + 100, sizeof(msg) - 100, feed_cb, &f);
	CHECK_EQ(f.res, 0);
	CHECK_EQ(b.left, 0);
	CHECK_EQ(b.n, (sizeof(msg) + bs - 1) / bs);
	for (uint32_t i = 0; i < f.nev; i++)
		CHECK_EQ(f.evbuf[i], PASTE_NO_BUF);
	for (uint32_t i = 0; i < b.n; i++)
		CHECK_EQ(b.ext[i].off, 0);
	CHECK(body_equals(&b, msg, sizeof(msg)));
	check_one_ref_each(&b);
	CHECK_EQ(app_held(&r), base + b.n);
	paste_body_release(&b, st);
	CHECK_EQ(app_held(&r), base);
	rig_close(&r);
}

/* Pipelining: one read carries the end of body A and all of body B. B's
 * extent names the same buffer at the offset where B starts; each body
 * holds its own reference. */
struct pipe_state {
	struct paste_body a, b;
	const struct paste_body_config *cfg;
	uint32_t split;   /* bytes of A in the second read */
	int reads;
};

static void pipe_cb(void *arg, struct rig *r, const struct paste_event *ev)
{
	struct pipe_state *p = arg;
	if (p->reads++ == 0) {
		CHECK_EQ(paste_body_feed(&p->a, p->cfg, r->pt, ev, 0, ev->len), 0);
		return;
	}
	CHECK_EQ(ev->len, p->split + p->b.len);
	CHECK_EQ(paste_body_feed(&p->a, p->cfg, r->pt, ev, 0, p->split), 0);
	CHECK_EQ(paste_body_feed(&p->b, p->cfg, r->pt, ev, p->split, ev->len - p->split), 0);
}

static void test_pipelined(void)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	static uint8_t a[300], bb[200];
	fill(a, sizeof(a), 6);
	fill(bb, sizeof(bb), 7);
	struct paste_body_config cfg = { 0 };
	struct pipe_state p = { .cfg = &cfg, .split = 100 };
	CHECK_EQ(paste_body_begin(&p.a, &cfg, st, sizeof(a)), 0);
	CHECK_EQ(paste_body_begin(&p.b, &cfg, st, sizeof(bb)), 0);
	deliver(&r, a, sizeof(a) - p.split, pipe_cb, &p);
	uint8_t second[300];
	memcpy(second, a + sizeof(a) - p.split, p.split);
	memcpy(second + p.split, bb, sizeof(bb));
	deliver(&r, second, p.split + sizeof(bb), pipe_cb, &p);
	CHECK_EQ(p.reads, 2);
	CHECK_EQ(p.a.n, 2);
	CHECK_EQ(p.b.n, 1);
	CHECK_EQ(p.a.left, 0);
	CHECK_EQ(p.b.left, 0);
	CHECK_EQ(p.b.ext[0].buf, p.a.ext[1].buf);
	CHECK_EQ(p.b.ext[0].off, p.split);
	CHECK(body_equals(&p.a, a, sizeof(a)));
	CHECK(body_equals(&p.b, bb, sizeof(bb)));
	settle(&r);
	CHECK_EQ(paste_store_refcount(st, p.b.ext[0].buf), 2);
	CHECK_EQ(app_held(&r), base + 2);
	paste_body_release(&p.a, st);
	CHECK_EQ(paste_store_refcount(st, p.b.ext[0].buf), 1);
	CHECK(body_equals(&p.b, bb, sizeof(bb)));
	paste_body_release(&p.b, st);
	settle(&r);
	CHECK_EQ(app_held(&r), base);
	rig_close(&r);
}

/* Take buffers until the store has exactly `want` free (the port's cache
 * is not free, so poll first). Returns how many were taken into idx. */
static uint32_t drain_to(uint32_t want, uint32_t *idx, uint32_t cap)
{
	uint32_t nfree = paste_store_nfree(st), k = nfree > want ? nfree - want : 0;
	if (k > cap)
		k = cap;
	return paste_store_alloc(st, idx, k);
}

/* The store goes below the reserve in the middle of a body: the read that
 * finds it so fails the body (507, -ENOSPC), the buffers it held are
 * released at once, and the rest of the body is still consumed and
 * dropped. A body that starts below the reserve fails at its first byte,
 * held or copied. */
static void test_reserve(bool copy)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	static uint32_t taken[8192];
	const uint32_t reserve = 100;
	static uint8_t msg[6000];
	fill(msg, sizeof(msg), 8);
	struct paste_body_config cfg = { .copy = copy, .reserve = reserve };
	struct paste_body b = { 0 };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, sizeof(msg)), 0);
	struct feeder f = { .b = &b, .cfg = &cfg };
	deliver(&r, msg, 1000, feed_cb, &f);   /* plenty free: taken */
	CHECK_EQ(f.res, 0);
	CHECK_EQ(b.n, 1);
	settle(&r);
	CHECK_EQ(app_held(&r), base + 1);
	uint32_t ntaken = drain_to(reserve - 1, taken, 8192);
	CHECK_EQ(paste_store_nfree(st), reserve - 1);
	deliver(&r, msg + 1000, 2000, feed_cb, &f);
	CHECK_EQ(f.res, -ENOSPC);
	CHECK_EQ(b.error, 507);
	CHECK_EQ(b.n, 0);
	CHECK_EQ(b.bufs, 0);
	CHECK_EQ(b.left, sizeof(msg) - 3000);
	settle(&r);
	CHECK_EQ(app_held(&r), base + ntaken);   /* its buffer went back at once */
	int feeds = f.feeds;
	f.res = 0;
	deliver(&r, msg + 3000, sizeof(msg) - 3000, feed_cb, &f);   /* consumed, dropped */
	CHECK(f.feeds > feeds);
	CHECK_EQ(f.res, -ENOSPC);
	CHECK_EQ(b.left, 0);
	CHECK_EQ(b.n, 0);
	CHECK_EQ(b.error, 507);
	settle(&r);
	CHECK_EQ(app_held(&r), base + ntaken);
	paste_body_release(&b, st);
	check_idle(&b);
	/* a new body while still below the reserve fails at its first byte
	 * (the failed body's buffer went back to the free list: take it) */
	ntaken += drain_to(reserve - 1, taken + ntaken, 8192 - ntaken);
	CHECK_EQ(paste_store_nfree(st), reserve - 1);
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 10), 0);
	f = (struct feeder){ .b = &b, .cfg = &cfg };
	deliver(&r, msg, 10, feed_cb, &f);
	CHECK_EQ(f.res, -ENOSPC);
	CHECK_EQ(b.error, 507);
	CHECK_EQ(b.n, 0);
	CHECK_EQ(b.left, 0);
	paste_body_release(&b, st);
	/* exactly at the reserve: taken again */
	while (ntaken)
		paste_store_unref(st, taken[--ntaken], false);
	ntaken = drain_to(reserve, taken, 8192);
	CHECK_EQ(paste_store_nfree(st), reserve);
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 10), 0);
	f = (struct feeder){ .b = &b, .cfg = &cfg };
	deliver(&r, msg, 10, feed_cb, &f);
	CHECK_EQ(f.res, 0);
	CHECK_EQ(b.n, 1);
	CHECK_EQ(is_event_buf(&f, b.ext[0].buf), !copy);
	CHECK(body_equals(&b, msg, 10));
	paste_body_release(&b, st);
	while (ntaken)
		paste_store_unref(st, taken[--ntaken], false);
	settle(&r);
	CHECK_EQ(app_held(&r), base);
	rig_close(&r);
}

/* Close or timeout in the middle of a body: release gives everything back
 * and the next body starts clean. */
static void test_release_mid_body(void)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	static uint8_t msg[4];
	fill(msg, sizeof(msg), 9);
	struct paste_body_config cfg = { .max_held = 4ull * bs };
	struct paste_body b = { 0 };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 5000), 0);
	struct feeder f = { .b = &b, .cfg = &cfg };
	deliver(&r, msg, 2, feed_cb, &f);       /* (1 + 3) buffers <= 4: held */
	deliver(&r, msg + 2, 2, feed_cb, &f);   /* (1 + 1 + 3) > 4: copied */
	CHECK_EQ(f.res, 0);
	CHECK_EQ(b.n, 2);
	CHECK_EQ(b.left, 4996);
	CHECK(b.copying);
	CHECK(is_event_buf(&f, b.ext[0].buf));
	CHECK(!is_event_buf(&f, b.ext[b.n - 1].buf));
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 10), -EBUSY);   /* would leak */
	settle(&r);
	CHECK_EQ(app_held(&r), base + b.n);
	paste_body_release(&b, st);
	check_idle(&b);
	settle(&r);
	CHECK_EQ(app_held(&r), base);
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 10), 0);
	CHECK_EQ(b.left, 10);
	paste_body_release(&b, st);
	rig_close(&r);
}

/* Holding resumes after copying when a read is big enough to bring the
 * rest within max_held: max_held 3 buffers, 2135 bytes read as 2 (held:
 * 1 + 1 + 1 buffers), 1 (1 + 1 + 2 > 3: copied), 1000 and 1000 (copied
 * into the same buffer), 132 (the end: 2 + 1 + 0 = 3: held). The copy
 * buffer keeps its 2001 bytes (47 bytes of it unused), and a further copy
 * would start a fresh one. */
struct steps {
	struct feeder f;
	int i;
	bool copying[8];
	uint32_t n[8];
};

static void steps_cb(void *arg, struct rig *r, const struct paste_event *ev)
{
	struct steps *s = arg;
	feed_cb(&s->f, r, ev);
	if (s->i < 8) {
		s->copying[s->i] = s->f.b->copying;
		s->n[s->i++] = s->f.b->n;
	}
}

static void test_hold_after_copy(void)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	static uint8_t msg[2135];
	fill(msg, sizeof(msg), 10);
	struct paste_body_config cfg = { .max_held = 3ull * bs };
	struct paste_body b = { 0 };
	struct ref ref = { .body_left = sizeof(msg) };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, sizeof(msg)), 0);
	struct steps s = { .f = { .b = &b, .cfg = &cfg, .ref = &ref, .ref_same = true } };
	static const uint32_t cut[] = { 2, 1, 1000, 1000, 132 };
	uint32_t at = 0;
	for (int i = 0; i < 5; i++) {
		deliver(&r, msg + at, cut[i], steps_cb, &s);
		at += cut[i];
	}
	CHECK_EQ(s.i, 5);
	CHECK(s.f.ref_same);
	CHECK(!s.copying[0] && s.copying[1] && s.copying[2] && s.copying[3] && !s.copying[4]);
	CHECK(s.n[0] == 1 && s.n[1] == 2 && s.n[2] == 2 && s.n[3] == 2 && s.n[4] == 3);
	CHECK_EQ(b.n, 3);
	CHECK(is_event_buf(&s.f, b.ext[0].buf) && !is_event_buf(&s.f, b.ext[1].buf) &&
	      is_event_buf(&s.f, b.ext[2].buf));
	CHECK_EQ(b.ext[1].len, 2001);
	CHECK(body_equals(&b, msg, sizeof(msg)));
	settle(&r);
	ref_release(&ref);
	check_one_ref_each(&b);
	paste_body_release(&b, st);
	settle(&r);
	CHECK_EQ(app_held(&r), base);
	rig_close(&r);
}

/* Random bodies and splits, checked after every read against phttpd's
 * wal_body: the same extents (offsets, lengths; the same buffer where it
 * held, a fresh one where it copied), the same copying flag and failure. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void test_random_vs_reference(void)
{
	struct rig r;
	if (!rig_open(&r, PASTE_ENGINE_URING))
		return;
	settle(&r);
	int64_t base = app_held(&r);
	uint64_t helds[] = { 0, 4ull * bs, 16ull * bs + 100, 1 << 20, 3ull * bs - 1 };
	uint8_t *msg = malloc(64u * bs);
	for (int round = 0; round < 10; round++) {
		struct paste_body_config cfg = { .max_held = helds[round % 5], .copy = round == 7 };
		uint64_t max = paste_body_max(&cfg, st);
		uint32_t len = 1 + rnd((uint32_t)max);
		if (round % 3 == 0)
			len = (uint32_t)max;
		fill(msg, len, (unsigned)round);
		struct paste_body b = { 0 };
		struct ref ref = { .body_left = len };
		CHECK_EQ(paste_body_begin(&b, &cfg, st, len), 0);
		struct feeder f = { .b = &b, .cfg = &cfg, .ref = &ref, .ref_same = true };
		uint32_t at = 0;
		for (int c = 0; c < 30 && at < len; c++) {
			uint32_t k = rnd(3) ? 1 + rnd(16) : 1 + rnd(3 * bs);
			if (k > len - at)
				k = len - at;
			deliver(&r, msg + at, k, feed_cb, &f);
			at += k;
		}
		if (at < len)
			deliver(&r, msg + at, len - at, feed_cb, &f);
		CHECK(f.ref_same);
		CHECK_EQ(f.res, 0);
		CHECK_EQ(b.left, 0);
		CHECK(f.max_n <= PASTE_BODY_MAX_EXTENTS);
		if (cfg.max_held)
			CHECK((uint64_t)f.max_bufs * bs <= cfg.max_held);
		CHECK(body_equals(&b, msg, len));
		settle(&r);
		ref_release(&ref);      /* the reference held the same buffers */
		check_one_ref_each(&b);
		paste_body_release(&b, st);
		settle(&r);
		CHECK_EQ(app_held(&r), base);
	}
	free(msg);
	rig_close(&r);
}

/* paste_body_max, begin's limits, feed's argument checks: no port needed
 * beyond a fake event for the checks that refuse before touching it. */
static void test_api(void)
{
	struct paste_body_config cfg = { 0 };
	uint64_t cap = (uint64_t)PASTE_BODY_MAX_EXTENTS * bs;
	CHECK_EQ(paste_body_max(NULL, st), cap);
	CHECK_EQ(paste_body_max(&cfg, st), cap);
	cfg.max_held = 1 << 30;
	CHECK_EQ(paste_body_max(&cfg, st), cap);
	cfg.max_held = 2ull * bs + bs / 2;           /* whole buffers only */
	CHECK_EQ(paste_body_max(&cfg, st), 2ull * bs);
	cfg.max_held = bs - 1;                       /* not one buffer: nothing fits */
	CHECK_EQ(paste_body_max(&cfg, st), 0);
	struct paste_body b = { 0 };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 1), -E2BIG);
	check_idle(&b);
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 0), 0);   /* empty body: complete */
	CHECK_EQ(b.left, 0);
	cfg.max_held = 4ull * bs;
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 4ull * bs + 1), -E2BIG);
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 4ull * bs), 0);
	CHECK_EQ(b.len, 4ull * bs);
	CHECK_EQ(b.left, 4ull * bs);
	CHECK_EQ(paste_body_begin(&b, NULL, st, cap + 1), -E2BIG);
	CHECK_EQ(b.len, 4ull * bs);                  /* unchanged by the refusal */
	/* argument checks refuse before looking at the port */
	uint8_t data[16] = { 0 };
	struct paste_event ev = { .type = PASTE_EV_DATA, .buf = PASTE_NO_BUF, .len = 16, .data = data };
	CHECK_EQ(paste_body_begin(&b, &cfg, st, 8), 0);
	CHECK_EQ(paste_body_feed(&b, &cfg, NULL, &ev, 0, 9), -EINVAL);   /* more than left */
	CHECK_EQ(paste_body_feed(&b, &cfg, NULL, &ev, 10, 8), -EINVAL);  /* beyond the event */
	ev.type = PASTE_EV_CLOSED;
	CHECK_EQ(paste_body_feed(&b, &cfg, NULL, &ev, 0, 1), -EINVAL);
	CHECK_EQ(b.left, 8);
	CHECK_EQ(b.n, 0);
	paste_body_release(&b, st);
	check_idle(&b);
}

int main(void)
{
	bool uring = pf_uring_usable();
	struct pf_store s;
	if (pf_store_open(&s, "/dev/shm", "body", 16 << 20))
		return 1;
	st = s.st;
	paste_store_start(st);
	bs = paste_store_geom(st)->buf_size;
	test_api();
	test_epoll();
	if (uring) {
		test_one_event();
		test_spanning();
		test_tiny_reads();
		test_copy_mode();
		test_pipelined();
		test_reserve(false);
		test_reserve(true);
		test_release_mid_body();
		test_hold_after_copy();
		test_random_vs_reference();
	}
	pf_store_close(&s);
	return pf_done(uring);
}
