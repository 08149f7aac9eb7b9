/*
 * test_body_reserve.c - request bodies and the store's reserve: a body
 * that finds the store below it fails (507, every reference released, the
 * rest consumed and dropped), one that starts below it fails at its first
 * byte, and one exactly at it is taken; held and copied. Needs io_uring:
 * without it nothing runs and the exit status is 77 (meson's skip).
 */
#include "body_fixture.h"

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
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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

static void test_reserve_held(void) { test_reserve(false); }
static void test_reserve_copied(void) { test_reserve(true); }

int main(void)
{
	static const struct body_test tests[] = {
		{ test_reserve_held, true },
		{ test_reserve_copied, true },
	};
	return body_run(tests, sizeof(tests) / sizeof(tests[0]));
}
