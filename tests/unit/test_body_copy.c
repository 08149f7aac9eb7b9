/*
 * test_body_copy.c - request bodies held or copied, checked against
 * phttpd's wal_body (the reference in body_fixture.h): many tiny reads
 * (never out of extents, held space within max_held), copy mode byte
 * exact, holding again after copying, and random splits checked step by
 * step; and paste_body_copy, bytes the service holds copied the same way.
 * The feed tests need io_uring: without it only the copy test runs and
 * the exit status is 77 (meson's skip).
 */
#include "body_fixture.h"

/* A body trickling in one byte per read. Without max_held: 63 reads are
 * held (each pins a buffer), then the extents left can only take the rest
 * copied, so the rest goes into one copy buffer: 64 extents, never more.
 * With max_held = 8 buffers: 7 held, the rest copied, never more than 8
 * buffers pinned. */
static void tiny_reads(uint64_t max_held, uint32_t len, uint32_t want_held, uint32_t want_n)
{
	struct rig r;
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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
	body_settled(&r, &b, &ref);   /* the reference held the same buffers */
	body_released(&r, &b, base);
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
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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
	body_end_held(&r, &b, base);
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
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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
	body_settled(&r, &b, &ref);
	body_released(&r, &b, base);
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
	int64_t base;
	if (!rig_start(&r, PASTE_ENGINE_URING, &base))
		return;
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
		body_settled(&r, &b, &ref);   /* the reference held the same buffers */
		body_released(&r, &b, base);
	}
	free(msg);
	rig_close(&r);
}

/* paste_body_copy: bytes the service holds, copied densely in any
 * pieces (each fills the last buffer before taking another), a piece
 * longer than what is left refused with b unchanged, and the reserve:
 * below it the body fails with 507 and releases what it took, and later
 * pieces are still counted off b->left. No port involved. */
static void test_copy_bytes(void)
{
	uint32_t len = 2 * bs + 300;
	uint8_t *msg = malloc(len);
	fill(msg, len, 7);
	uint32_t free0 = paste_store_nfree(st);
	struct paste_body b = { 0 };
	CHECK_EQ(paste_body_begin(&b, NULL, st, len), 0);
	uint32_t cuts[] = { 100, bs, 1, len - bs - 101 };
	uint32_t at = 0;
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		CHECK_EQ(paste_body_copy(&b, NULL, st, msg + at, cuts[i]), 0);
		at += cuts[i];
		CHECK_EQ(b.left, (uint64_t)(len - at));
	}
	CHECK_EQ(b.n, 3u);                       /* dense: 2 full buffers and 300 bytes */
	CHECK(body_equals(&b, msg, len));
	check_one_ref_each(&b);
	CHECK_EQ(paste_body_copy(&b, NULL, st, msg, 1), -EINVAL);   /* nothing left */
	CHECK_EQ(b.n, 3u);
	paste_body_release(&b, st);
	check_idle(&b);
	CHECK_EQ(paste_store_nfree(st), free0);

	struct paste_body_config tight = { .reserve = free0 };  /* one buffer, not two */
	CHECK_EQ(paste_body_begin(&b, &tight, st, len), 0);
	CHECK_EQ(paste_body_copy(&b, &tight, st, msg, bs + 1), -ENOSPC);  /* 2nd buffer */
	CHECK_EQ(b.error, 507);
	CHECK_EQ(b.n, 0u);
	CHECK_EQ(paste_store_nfree(st), free0);  /* the first buffer went back */
	CHECK_EQ(paste_body_copy(&b, &tight, st, msg, len - bs - 1), -ENOSPC);
	CHECK_EQ(b.left, 0u);
	paste_body_release(&b, st);
	check_idle(&b);
	free(msg);
}

int main(void)
{
	static const struct body_test tests[] = {
		{ test_tiny_reads, true },
		{ test_copy_mode, true },
		{ test_hold_after_copy, true },
		{ test_random_vs_reference, true },
		{ test_copy_bytes, false },
	};
	return body_run(tests, sizeof(tests) / sizeof(tests[0]));
}
