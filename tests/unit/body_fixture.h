/*
 * body_fixture.h - what the tests of request body collection (lib/body.c,
 * test_body*.c) share: a started store, a port with one accepted loopback
 * connection driven from the test's own thread (a "rig"), delivering bytes
 * and feeding each DATA event to a body, the buffers the app holds, and
 * the reference the module is checked against: phttpd's wal_body (the code
 * lib/body.c replaces), transcribed below. Every body's extents are
 * compared with the bytes the client sent, and after every release the
 * buffers the app holds are back where they were. Header-only: each test
 * program includes it once.
 */
#ifndef PASTE_BODY_FIXTURE_H
#define PASTE_BODY_FIXTURE_H

#include <fcntl.h>

#include "port_fixture.h"

static struct paste_store *st;
static uint32_t bs;

/* ---- helpers (the store, ports, clients: port_fixture.h) ------------ */

static inline int client(uint16_t port)
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

static inline bool rig_open(struct rig *r, enum paste_engine e)
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

static inline void rig_close(struct rig *r)
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
static inline int deliver(struct rig *r, const void *p, size_t n, on_data_fn fn, void *arg)
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
static inline void settle(struct rig *r)
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
static inline int64_t app_held(struct rig *r)
{
	struct paste_port_stats s;
	paste_port_stats(r->pt, &s);
	return (int64_t)paste_store_nheld(st) - s.ring_free - s.cached;
}

static inline void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 8));
}

/* The bytes the extents name, in order, equal want[0..n). */
static inline bool body_equals(const struct paste_body *b, const uint8_t *want, uint64_t n)
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

static inline void ref_release(struct ref *h)
{
	for (uint32_t i = 0; i < h->next; i++)
		paste_store_unref(st, h->ext[i].buf, false);
	h->next = 0;
	h->copying = false;
}

static inline void ref_body(struct ref *h, bool copy, uint64_t max_held, struct paste_port *pt,
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

static inline bool matches_ref(const struct paste_body *b, const struct ref *h)
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

static inline void feed_cb(void *arg, struct rig *r, const struct paste_event *ev)
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

static inline bool is_event_buf(const struct feeder *f, uint32_t idx)
{
	for (uint32_t i = 0; i < f->nev; i++)
		if (f->evbuf[i] == idx)
			return true;
	return false;
}

/* After settle(): each extent's buffer carries exactly the body's one
 * reference (the port dropped its own on the held ones). */
static inline void check_one_ref_each(const struct paste_body *b)
{
	for (uint32_t i = 0; i < b->n; i++)
		CHECK_EQ(paste_store_refcount(st, b->ext[i].buf), 1);
}

static inline void check_idle(const struct paste_body *b)
{
	CHECK(b->n == 0 && b->bufs == 0 && b->len == 0 && b->left == 0 && !b->copying && !b->error);
}

/* rig_open, then settle: *base is what the app holds before the body. */
static inline bool rig_start(struct rig *r, enum paste_engine e, int64_t *base)
{
	if (!rig_open(r, e))
		return false;
	settle(r);
	*base = app_held(r);
	return true;
}

/* After the last byte: settle (the port drops its own references on the
 * held buffers), the reference (if any) lets go of its buffers, and each
 * extent's buffer carries exactly the body's one reference. */
static inline void body_settled(struct rig *r, const struct paste_body *b, struct ref *ref)
{
	settle(r);
	if (ref)
		ref_release(ref);
	check_one_ref_each(b);
}

/* Release the body: the app holds what it held at base again. */
static inline void body_released(struct rig *r, struct paste_body *b, int64_t base)
{
	paste_body_release(b, st);
	settle(r);
	CHECK_EQ(app_held(r), base);
}

/* The end of a body the app held whole: settled, its buffers are all the
 * app holds beyond base; released, back to base; the rig closed. */
static inline void body_end_held(struct rig *r, struct paste_body *b, int64_t base)
{
	body_settled(r, b, NULL);
	CHECK_EQ(app_held(r), base + b->n);
	body_released(r, b, base);
	rig_close(r);
}

/* A test program's tests: the uring ones run only where io_uring does. */
struct body_test {
	void (*fn)(void);
	bool uring;
};

/* main(): the test's store (16 MiB on /dev/shm, started), the tests, the
 * exit status (77 when the uring ones could not run). */
static inline int body_run(const struct body_test *t, size_t n)
{
	bool uring = pf_uring_usable();
	struct pf_store s;
	/* The body tests count what a hold does to a buffer's place in the
	 * ring: whole buffers per receive (test_body.c's dense case opts out). */
	pf_whole_buffers = true;
	if (pf_store_open(&s, "/dev/shm", "body", 16 << 20))
		return 1;
	st = s.st;
	paste_store_start(st);
	bs = paste_store_geom(st)->buf_size;
	for (size_t i = 0; i < n; i++)
		if (uring || !t[i].uring)
			t[i].fn();
	pf_store_close(&s);
	return pf_done(uring);
}

#endif
