/*
 * test_body.c - request body collection (lib/body.c) against a real store
 * and real ports: paste_body_max / begin's -E2BIG and -EBUSY and feed's
 * argument checks, the epoll engine (no store buffer: copied), one read
 * held in place, a body spanning several buffers, two bodies in one read,
 * and release mid-body. Copy mode and the comparison with phttpd's
 * wal_body are in test_body_copy.c, the reserve in test_body_reserve.c;
 * the rig and the reference in body_fixture.h. Without io_uring only the
 * epoll and API parts run, and the exit status is 77 (meson's skip).
 */
#include "body_fixture.h"

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

/* The epoll engine delivers from a private buffer (PASTE_NO_BUF): the
 * body is copied even when holding is allowed. */
static void test_epoll(void)
{
	struct rig r;
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_EPOLL, &base))
		return;
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

/* One read, held where it landed: one extent naming the event's buffer. */
static void test_one_event(void)
{
	struct rig r;
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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
	body_end_held(&r, &b, base);
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
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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

/* Close or timeout in the middle of a body: release gives everything back
 * and the next body starts clean. */
static void test_release_mid_body(void)
{
	struct rig r;
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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

/* Dense receives: two bodies land one after the other in one buffer, each
 * held by an extent at its offset; the buffer stays posted (the kernel
 * fills the rest of it) and carries one reference per hold beside the
 * port's, so it goes back exactly when the last of them does. */
static void test_dense_holds(void)
{
	pf_whole_buffers = false;
	struct rig r;
	int64_t base;
	bool ok = rig_start(&r, PASTE_ENGINE_URING, &base);
	pf_whole_buffers = true;
	if (!ok)
		return;
	struct paste_port_stats ps;
	paste_port_stats(r.pt, &ps);
	if (!ps.dense_recv) {
		fprintf(stderr, "  dense receives: not offered by this kernel (6.12+), skipped\n");
		rig_close(&r);
		return;
	}
	static uint8_t m1[700], m2[500];
	fill(m1, sizeof(m1), 1);
	fill(m2, sizeof(m2), 2);
	struct paste_body_config cfg = { 0 };
	struct paste_body a = { 0 }, b = { 0 };
	CHECK_EQ(paste_body_begin(&a, &cfg, st, sizeof(m1)), 0);
	struct feeder fa = { .b = &a, .cfg = &cfg };
	CHECK_EQ(deliver(&r, m1, sizeof(m1), feed_cb, &fa), 1);
	CHECK_EQ(paste_body_begin(&b, &cfg, st, sizeof(m2)), 0);
	struct feeder fb = { .b = &b, .cfg = &cfg };
	CHECK_EQ(deliver(&r, m2, sizeof(m2), feed_cb, &fb), 1);
	settle(&r);
	CHECK(a.n == 1 && b.n == 1);
	CHECK_EQ(b.ext[0].buf, a.ext[0].buf);              /* one buffer ... */
	CHECK_EQ(b.ext[0].off, a.ext[0].off + sizeof(m1)); /* ... densely */
	CHECK(body_equals(&a, m1, sizeof(m1)) && body_equals(&b, m2, sizeof(m2)));
	uint32_t buf = a.ext[0].buf;
	CHECK_EQ(paste_store_refcount(st, buf), 3);          /* posted + two holds */
	paste_body_release(&a, st);
	CHECK_EQ(paste_store_refcount(st, buf), 2);
	CHECK(body_equals(&b, m2, sizeof(m2)));              /* not reused under b */
	paste_body_release(&b, st);
	CHECK_EQ(paste_store_refcount(st, buf), 1);          /* still the ring's */
	rig_close(&r);
	CHECK_EQ(paste_store_refcount(st, buf), 0);
}

int main(void)
{
	static const struct body_test tests[] = {
		{ test_dense_holds, true },
		{ test_api, false },
		{ test_epoll, false },
		{ test_one_event, true },
		{ test_spanning, true },
		{ test_pipelined, true },
		{ test_release_mid_body, true },
	};
	return body_run(tests, sizeof(tests) / sizeof(tests[0]));
}
