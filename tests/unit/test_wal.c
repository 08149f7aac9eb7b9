/* test_wal.c - write-ahead log: append/lookup/truncate, reads that pin,
 * extents shared between records, space, wrap, reopen, limits at open.
 * Truncation's order and failures are in test_wal_truncate.c, visibility of
 * records not yet durable in test_wal_visible.c, recovery of torn and
 * damaged stores in test_wal_recover.c. Small stores on /dev/shm,
 * persistence EMULATED without latency (wal_fixture.h). */
#include "wal_fixture.h"

static void test_bad_args(void)
{
	struct paste_wal *w = (struct paste_wal *)1;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_wal_open(&w, NULL, NULL, &err), -EINVAL);
	CHECK(err.msg[0] != 0);
	CHECK_EQ(paste_wal_lookup(NULL, 1, NULL, NULL, NULL), -EINVAL);
	CHECK_EQ(paste_wal_truncate(NULL, 1, NULL), -EINVAL);
	CHECK_EQ(paste_wal_foreach(NULL, collect, NULL), -EINVAL);
	CHECK(paste_wal_check(NULL, &err) < 0);
	struct paste_wal_info info = { .records = 7 };
	paste_wal_info(NULL, &info);
	CHECK_EQ(info.records, 0);
	paste_wal_close(NULL);
}

static void test_roundtrip(void)
{
	struct env e;
	if (!start(&e, "roundtrip"))
		return;
	CHECK_EQ(e.err.msg[0], 0);
	uint32_t b;
	CHECK_EQ(paste_store_alloc(e.st, &b, 1), 1);
	fill(e.st, b, 42);
	struct paste_extent ext = { b, 10, 100 };
	uint64_t lsn = 0;
	CHECK_EQ(paste_wal_append(e.w, 0, e.p, &ext, 1, &lsn), 0);
	CHECK(lsn > 0);
	CHECK(paste_persist_pending(e.p));   /* flushed, not fenced: the port fences */
	CHECK_EQ(paste_store_refcount(e.st, b), 2);

	const struct paste_extent *got = NULL;
	uint32_t n = 0, len = 0;
	CHECK_EQ(paste_wal_lookup(e.w, lsn, &got, &n, &len), -ENOENT);   /* not durable yet */
	CHECK_EQ(info_of(e.w).pending, 1);
	CHECK_EQ(paste_persist_fence(e.p), 0);
	CHECK_EQ(paste_wal_lookup(e.w, lsn, &got, &n, &len), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(len, 100);
	CHECK(got && got->buf == b && got->off == 10 && got->len == 100);
	CHECK_EQ(paste_wal_lookup(e.w, lsn + 1, &got, &n, &len), -ENOENT);
	CHECK_EQ(paste_wal_lookup(e.w, 0, &got, &n, &len), -ENOENT);

	struct paste_wal_info info = info_of(e.w);
	CHECK_EQ(info.records, 1);
	CHECK_EQ(info.first_lsn, lsn);
	CHECK_EQ(info.last_lsn, lsn);
	CHECK_EQ(info.bytes, 100);
	CHECK_EQ(info.log_used, 64);
	CHECK_EQ(info.log_size, LANES * LANE_SIZE);
	CHECK_EQ(info.epoch, 1);
	CHECK_EQ(info.pending, 0);

	struct seen s = { .st = e.st };
	CHECK_EQ(paste_wal_foreach(e.w, collect, &s), 0);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.bad_crc, 0);
	CHECK_EQ(s.lsn[0], lsn);

	/* Bad requests change nothing. */
	struct paste_extent bad[] = {
		{ geom.nbufs, 0, 1 }, { b, BUF_SIZE - 10, 11 }, { b, BUF_SIZE + 1, 0 },
		{ PASTE_NO_BUF, 0, 1 },
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(paste_wal_append(e.w, 0, e.p, &bad[i], 1, &lsn), -EINVAL);
	struct paste_extent many[PASTE_WAL_MAX_EXTENTS + 1];
	for (unsigned i = 0; i <= PASTE_WAL_MAX_EXTENTS; i++)
		many[i] = (struct paste_extent){ b, 0, 1 };
	CHECK_EQ(paste_wal_append(e.w, 0, e.p, many, PASTE_WAL_MAX_EXTENTS + 1, &lsn), -E2BIG);
	CHECK_EQ(paste_wal_append(e.w, LANES, e.p, &ext, 1, &lsn), -EINVAL);
	CHECK_EQ(paste_wal_append(e.w, 0, NULL, &ext, 1, &lsn), -EINVAL);
	CHECK_EQ(paste_wal_append(NULL, 0, e.p, &ext, 1, &lsn), -EINVAL);
	CHECK_EQ(paste_store_refcount(e.st, b), 2);
	CHECK_EQ(records(e.w), 1);

	/* The largest record: 64 extents, 832 bytes. */
	CHECK_EQ(paste_wal_append(e.w, 0, e.p, many, PASTE_WAL_MAX_EXTENTS, &lsn), 0);
	CHECK_EQ(paste_store_refcount(e.st, b), 2 + PASTE_WAL_MAX_EXTENTS);
	info = info_of(e.w);
	CHECK_EQ(info.log_used, 64 + 832);
	CHECK_EQ(paste_wal_check(e.w, &e.err), 0);
	paste_store_unref(e.st, b, false);
	finish(&e);
}

/* paste_wal_read: extents copied, buffers pinned; a truncation after the
 * read releases the log's references but not the reader's. */
static void test_read_pins(void)
{
	struct env e;
	if (!start(&e, "read"))
		return;
	uint32_t bufs[3];
	uint64_t lsn = put(&e, 0, 3, bufs);
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t n = 0, len = 0;
	CHECK_EQ(paste_wal_read(e.w, lsn, ext, &n, &len), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(len, 100 + 101 + 102);
	CHECK_EQ(ext[2].buf, bufs[2]);
	CHECK_EQ(ext[2].off, 6);
	for (uint32_t i = 0; i < 3; i++)
		CHECK_EQ(paste_store_refcount(e.st, bufs[i]), 2);
	uint32_t nfree = paste_store_nfree(e.st);
	CHECK_EQ(paste_wal_truncate(e.w, lsn, e.p), 1);
	CHECK_EQ(paste_wal_read(e.w, lsn, ext, &n, &len), -ENOENT);
	CHECK_EQ(paste_store_nfree(e.st), nfree);       /* still pinned */
	for (uint32_t i = 0; i < 3; i++) {
		CHECK_EQ(paste_store_refcount(e.st, bufs[i]), 1);
		paste_store_unref(e.st, bufs[i], false);
	}
	CHECK_EQ(paste_store_nfree(e.st), nfree + 3);
	CHECK_EQ(paste_wal_read(e.w, lsn, NULL, &n, &len), -EINVAL);
	finish(&e);
}

static void test_multi_extent_and_sharing(void)
{
	struct env e;
	if (!start(&e, "extents"))
		return;
	uint32_t b[2];
	CHECK_EQ(paste_store_alloc(e.st, b, 2), 2);
	fill(e.st, b[0], 1);
	fill(e.st, b[1], 2);
	/* Three extents over two buffers; b[0] named twice. */
	struct paste_extent ext[3] = { { b[0], 0, 200 }, { b[1], 50, 300 }, { b[0], 300, 212 } };
	uint64_t l1, l2;
	CHECK_EQ(paste_wal_append(e.w, 2, e.p, ext, 3, &l1), 0);
	CHECK_EQ(paste_persist_fence(e.p), 0);
	CHECK_EQ(paste_store_refcount(e.st, b[0]), 3);
	CHECK_EQ(paste_store_refcount(e.st, b[1]), 2);
	uint32_t n, len;
	const struct paste_extent *got;
	CHECK_EQ(paste_wal_lookup(e.w, l1, &got, &n, &len), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(len, 712);
	CHECK(got && memcmp(got, ext, sizeof(ext)) == 0);
	struct paste_wal_info info = info_of(e.w);
	CHECK_EQ(info.log_used, 128);   /* 36 + 3 * 12 bytes pad to 128 */

	/* A second record shares b[1]. */
	struct paste_extent ext2 = { b[1], 400, 50 };
	CHECK_EQ(paste_wal_append(e.w, 3, e.p, &ext2, 1, &l2), 0);
	CHECK_EQ(paste_persist_fence(e.p), 0);
	CHECK_EQ(paste_store_refcount(e.st, b[1]), 3);
	uint32_t free_before = paste_store_nfree(e.st);
	CHECK_EQ(paste_wal_truncate(e.w, l1, e.p), 1);
	info = info_of(e.w);
	CHECK_EQ(info.log_used, 64);   /* lane 3, untouched by this truncation */
	CHECK_EQ(paste_store_refcount(e.st, b[0]), 1);
	CHECK_EQ(paste_store_refcount(e.st, b[1]), 2);
	CHECK_EQ(paste_wal_lookup(e.w, l1, &got, &n, &len), -ENOENT);
	CHECK_EQ(paste_wal_lookup(e.w, l2, &got, &n, &len), 0);
	CHECK_EQ(paste_wal_truncate(e.w, l1, e.p), 0);   /* nothing left at or below l1 */
	CHECK_EQ(paste_wal_truncate(e.w, l2, e.p), 1);
	CHECK_EQ(paste_store_refcount(e.st, b[1]), 1);
	paste_store_unref(e.st, b[0], false);
	paste_store_unref(e.st, b[1], false);
	CHECK_EQ(paste_store_refcount(e.st, b[1]), 0);
	CHECK_EQ(paste_store_nfree(e.st), free_before + 2);
	info = info_of(e.w);
	CHECK_EQ(info.records, 0);
	CHECK_EQ(info.log_used, 0);
	CHECK_EQ(info.first_lsn, 0);
	finish(&e);
}

static void test_full_then_truncate(void)
{
	struct env e;
	if (!start(&e, "full"))
		return;
	uint64_t lsn[64];
	uint32_t buf[64];
	uint32_t held0 = paste_store_nheld(e.st);
	unsigned n = 0;
	while (n < 64 && try_put(&e, 1, 1, &buf[n], &lsn[n]) == 0)
		n++;
	CHECK_EQ(n, LANE_SIZE / 64 - 1);   /* the tail never reaches the head */
	CHECK_EQ(paste_store_nheld(e.st), held0 + n);
	CHECK_EQ(paste_wal_truncate(e.w, lsn[29], e.p), 30);
	CHECK(!paste_persist_pending(e.p));   /* the checkpoint was fenced */
	for (unsigned i = 0; i < 30; i++)
		CHECK_EQ(paste_store_refcount(e.st, buf[i]), 0);
	CHECK_EQ(paste_store_refcount(e.st, buf[30]), 1);
	CHECK_EQ(paste_store_nheld(e.st), held0 + n - 30);
	/* Exactly the freed space is usable again, across the lane's end. */
	unsigned more = 0;
	uint64_t l;
	while (try_put(&e, 1, 1, NULL, &l) == 0)
		more++;
	CHECK_EQ(more, 30);
	finish(&e);
}

/* The live set as the test keeps it: a FIFO of records, each in its own
 * buffers. */
struct model {
	uint64_t lsn[128];
	uint32_t buf[128][5];
	uint32_t n[128];
	unsigned first, count;
};

static void model_verify(struct env *e, const struct model *m)
{
	CHECK_EQ(records(e->w), m->count);
	uint32_t bufs = 0;
	for (unsigned k = 0; k < m->count; k++) {
		unsigned i = (m->first + k) % 128;
		const struct paste_extent *ext = NULL;
		uint32_t n = 0, len;
		CHECK_EQ(paste_wal_lookup(e->w, m->lsn[i], &ext, &n, &len), 0);
		CHECK_EQ(n, m->n[i]);
		for (uint32_t x = 0; ext && x < n && x < m->n[i]; x++) {
			CHECK_EQ(ext[x].buf, m->buf[i][x]);
			CHECK_EQ(paste_store_refcount(e->st, m->buf[i][x]), 1);
		}
		bufs += m->n[i];
	}
	CHECK_EQ(paste_store_nheld(e->st), bufs);
	CHECK_EQ(paste_wal_check(e->w, NULL), 0);
}

static void test_wrap_and_reopen(void)
{
	struct env e;
	if (!start(&e, "wrap"))
		return;
	struct model m = { .first = 0 };
	uint64_t last = 0, appended = 0;
	for (unsigned step = 0; step < 1500; step++) {
		uint32_t n = 1 + step % 5;   /* 64- or 128-byte records */
		unsigned i = (m.first + m.count) % 128;
		uint64_t lsn;
		int rc = try_put(&e, 1, n, m.buf[i], &lsn);
		if (rc == -ENOSPC) {
			/* Drop the oldest third and retry next step. */
			unsigned drop = m.count / 3 + 1;
			uint64_t upto = m.lsn[(m.first + drop - 1) % 128];
			CHECK_EQ(paste_wal_truncate(e.w, upto, e.p), (int64_t)drop);
			m.first = (m.first + drop) % 128;
			m.count -= drop;
			continue;
		}
		CHECK_EQ(rc, 0);
		CHECK(lsn > last);
		last = lsn;
		appended++;
		m.lsn[i] = lsn;
		m.n[i] = n;
		m.count++;
		if (step % 500 == 499) {
			model_verify(&e, &m);
			if (!env_reopen(&e))
				return;
			CHECK_EQ(e.err.msg[0], 0);
			model_verify(&e, &m);
			CHECK_EQ(info_of(e.w).last_lsn, last);
		}
	}
	CHECK(appended * 64 > 10 * LANE_SIZE);   /* wrapped many times */
	model_verify(&e, &m);
	finish(&e);
}

static void test_reopen_multilane(void)
{
	struct env e;
	if (!start(&e, "lanes"))
		return;
	uint64_t lsn[40];
	uint32_t bufs[40][2];
	for (unsigned i = 0; i < 40; i++)
		lsn[i] = put(&e, i % LANES, 1 + i % 2, bufs[i]);
	CHECK_EQ(paste_wal_truncate(e.w, lsn[9], e.p), 10);
	struct seen s = { .st = e.st };
	CHECK_EQ(paste_wal_foreach(e.w, collect, &s), 0);
	CHECK_EQ(s.n, 30);
	for (unsigned i = 0; i < 30 && i < s.n; i++) {
		CHECK_EQ(s.lsn[i], lsn[10 + i]);   /* one LSN order across lanes */
		CHECK_EQ(s.lane[i], (10 + i) % LANES);
	}
	struct paste_wal_info before = info_of(e.w);
	if (!env_reopen(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);
	struct paste_wal_info after = info_of(e.w);
	CHECK_EQ(after.records, 30);
	CHECK_EQ(after.first_lsn, lsn[10]);
	CHECK_EQ(after.last_lsn, lsn[39]);
	CHECK_EQ(after.bytes, before.bytes);
	CHECK_EQ(after.log_used, before.log_used);
	CHECK_EQ(after.epoch, before.epoch + 1);
	struct seen s2 = { .st = e.st };
	CHECK_EQ(paste_wal_foreach(e.w, collect, &s2), 0);
	CHECK_EQ(s2.n, 30);
	CHECK(memcmp(s.lsn, s2.lsn, 30 * sizeof(s.lsn[0])) == 0);
	CHECK_EQ(s2.bad_crc, 0);
	/* Held: exactly the buffers of live records, none of the dropped. */
	uint32_t held = 0;
	for (unsigned i = 0; i < 40; i++)
		for (unsigned x = 0; x < 1 + i % 2; x++) {
			CHECK_EQ(paste_store_refcount(e.st, bufs[i][x]), i >= 10);
			held += i >= 10;
		}
	CHECK_EQ(paste_store_nheld(e.st), held);
	/* LSNs continue above the recovered ones; the store hands out only
	 * buffers no live record names. */
	uint32_t nb[1];
	uint64_t next = put(&e, 0, 1, nb);
	CHECK(next > lsn[39]);
	for (unsigned i = 10; i < 40; i++)
		CHECK(nb[0] != bufs[i][0] && nb[0] != bufs[i][1 % (1 + i % 2)]);
	finish(&e);
}

/* A checkpoint whose head LSN or epoch is at its limit (damage that passed
 * the CRC): a writable open refuses rather than wrap, and gives back the
 * buffer references it took; a read-only open still works. */
static void test_limits(void)
{
	struct env e;
	if (!start(&e, "limits"))
		return;
	uint32_t b;
	put(&e, 0, 1, &b);
	env_close(&e);
	for (int which = 0; which < 2; which++) {
		struct { /* a checkpoint slot, as lib/wal.c lays it out */
			uint32_t magic, crc;
			uint64_t seq, head_off, head_lsn;
			uint32_t epoch, head_epoch;
			uint8_t zero[24];
		} c = { 0x504b4350u, 0, 100, 0, which ? 1 : UINT64_MAX - 3, which ? UINT32_MAX : 1, 0, { 0 } };
		c.crc = paste_crc32c(0, (const uint8_t *)&c + 8, 56);
		poke(geom.ckpt_offset + 1 * 128, &c, 64);   /* lane 1, slot 0 */
		struct paste_store *st;
		struct paste_persist *p;
		struct paste_wal *w = NULL;
		struct paste_error err = { 0 };
		struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
		CHECK_EQ(paste_store_open(&st, path, NULL, 0, &err), 0);
		CHECK_EQ(paste_persist_open(&p, st, &pc, &err), 0);
		CHECK_EQ(paste_wal_open(&w, st, p, &err), -EOVERFLOW);
		CHECK(w == NULL);
		CHECK(strstr(err.msg, "at its limit") != NULL);
		CHECK_EQ(paste_store_refcount(st, b), 0);
		CHECK_EQ(paste_store_nheld(st), 0);
		paste_persist_close(p);
		paste_store_close(st);
		CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err), 0);
		CHECK_EQ(paste_wal_open(&w, st, NULL, &err), 0);
		CHECK_EQ(records(w), 1);
		paste_wal_close(w);
		paste_store_close(st);
	}
	unlink(path);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/paste-wal-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	/* Every case twice: lanes behind their locks, then a one-thread
	 * store's, whose appends take none. */
	for (int pass = 0; pass < 2; pass++) {
		env_flags = pass ? PASTE_STORE_ONE_THREAD : 0;
		test_bad_args();
		test_roundtrip();
		test_read_pins();
		test_multi_extent_and_sharing();
		test_full_then_truncate();
		test_wrap_and_reopen();
		test_reopen_multilane();
		test_limits();
	}
	rmdir(dir);
	return check_done();
}
