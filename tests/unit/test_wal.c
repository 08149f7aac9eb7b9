/* test_wal.c - write-ahead log: append/lookup/truncate, space, wrap,
 * reopen, limits, visibility of records not yet durable, failed fences.
 * Recovery of torn and damaged stores is in test_wal_recover.c. Small
 * stores on /dev/shm, persistence EMULATED without latency (except the
 * tests that race a slow fence). The failed-fence test looks at a lane's
 * checkpoint state in DRAM, so the fixture includes the log's private
 * header. */
#include "wal_fixture.h"

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

/* Truncation must make the checkpoint durable before it releases buffers.
 * With a 30 ms emulated fence, a watcher thread sees the checkpoint change
 * first and the buffer come back only after the fence's wait. A watcher
 * that is late only makes the gap look longer, so this cannot fail for a
 * correct order. */
struct watch {
	struct paste_store *st;
	uint32_t buf;
	const uint8_t *slot[2];
	uint8_t before[2][64];
	volatile bool stop;
	bool ckpt_first;
	uint64_t released_ns;
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void *watcher(void *arg)
{
	struct watch *wt = arg;
	for (bool last = false; !last;) {
		last = wt->stop;   /* set once the truncation returned: one more look */
		if (paste_store_refcount(wt->st, wt->buf) == 0) {
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			wt->released_ns = now_ns();
			wt->ckpt_first = memcmp(wt->slot[0], wt->before[0], 64) ||
					 memcmp(wt->slot[1], wt->before[1], 64);
			break;
		}
	}
	return NULL;
}

static void test_truncate_persists_first(void)
{
	struct env e;
	if (!start(&e, "order"))
		return;
	struct paste_persist *slow;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED, .pm_latency_ns = 30000000 };
	CHECK_EQ(paste_persist_open(&slow, e.st, &pc, NULL), 0);
	uint32_t b;
	uint64_t lsn = put(&e, 3, 1, &b);
	CHECK_EQ(paste_store_refcount(e.st, b), 1);
	struct watch wt = { .st = e.st, .buf = b };
	for (int s = 0; s < 2; s++) {
		wt.slot[s] = paste_store_ckpt(e.st, 3, (uint32_t)s);
		memcpy(wt.before[s], wt.slot[s], 64);
	}
	pthread_t th;
	pthread_create(&th, NULL, watcher, &wt);
	uint64_t t0 = now_ns();
	CHECK_EQ(paste_wal_truncate(e.w, lsn, slow), 1);
	wt.stop = true;
	pthread_join(th, NULL);
	CHECK(wt.released_ns != 0);
	CHECK(wt.ckpt_first);
	CHECK(wt.released_ns - t0 >= 30000000);
	paste_persist_close(slow);
	/* And the truncation holds across a restart. */
	if (!env_reopen(&e))
		return;
	CHECK_EQ(paste_wal_lookup(e.w, lsn, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(paste_store_refcount(e.st, b), 0);
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

/* An unfenced append, as a server makes it before its batch's barrier. */
static uint64_t put_unfenced(struct env *e, uint32_t lane, struct paste_persist *p, uint32_t *buf)
{
	uint64_t lsn = 0;
	CHECK_EQ(paste_store_alloc(e->st, buf, 1), 1);
	fill(e->st, *buf, *buf);
	struct paste_extent ext = { *buf, 0, 100 };
	CHECK_EQ(paste_wal_append(e->w, lane, p, &ext, 1, &lsn), 0);
	paste_store_unref(e->st, *buf, false);
	return lsn;
}

static int read_unpin(struct env *e, uint64_t lsn)
{
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t n = 0;
	int rc = paste_wal_read(e->w, lsn, ext, &n, NULL);
	for (uint32_t i = 0; rc == 0 && i < n; i++)
		paste_store_unref(e->st, ext[i].buf, false);
	return rc;
}

/* Two lanes, two appenders (persist objects): a record is invisible to
 * lookups and reads, and safe from truncation, from every thread until its
 * own appender's fence made it durable; the other appender's fence does
 * not count. */
static void test_visibility_across_lanes(void)
{
	struct env e;
	if (!start(&e, "visible"))
		return;
	struct paste_persist *pa = e.p, *pb;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	CHECK_EQ(paste_persist_open(&pb, e.st, &pc, NULL), 0);
	uint32_t ba, bb, bc, bd;
	uint64_t la = put_unfenced(&e, 0, pa, &ba);
	uint64_t lb = put_unfenced(&e, 1, pb, &bb);
	CHECK_EQ(paste_wal_lookup(e.w, la, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(paste_wal_lookup(e.w, lb, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(read_unpin(&e, la), -ENOENT);
	CHECK_EQ(read_unpin(&e, lb), -ENOENT);
	struct paste_wal_info info = info_of(e.w);
	CHECK(info.records == 0 && info.pending == 2 && info.bytes == 0);
	CHECK(info.first_lsn == 0 && info.last_lsn == 0 && info.log_used == 128);
	struct seen s = { .st = e.st };
	CHECK_EQ(paste_wal_foreach(e.w, collect, &s), 0);
	CHECK_EQ(s.n, 2);                                   /* tools see everything */
	CHECK_EQ(paste_wal_truncate(e.w, UINT64_MAX, pa), 0);
	CHECK_EQ(paste_store_refcount(e.st, ba), 1);
	CHECK_EQ(paste_store_refcount(e.st, bb), 1);

	CHECK_EQ(paste_persist_fence(pa), 0);               /* lane 0's barrier */
	CHECK_EQ(paste_wal_lookup(e.w, la, NULL, NULL, NULL), 0);
	CHECK_EQ(read_unpin(&e, la), 0);
	CHECK_EQ(paste_wal_lookup(e.w, lb, NULL, NULL, NULL), -ENOENT);
	info = info_of(e.w);
	CHECK(info.records == 1 && info.pending == 1 && info.bytes == 100);
	CHECK(info.first_lsn == la && info.last_lsn == la);

	/* A younger record of lane 0 stays invisible behind the durable one,
	 * and truncation stops at it. The truncation's own fence (through pb)
	 * makes lb durable only after it chose what to drop: lb stays. */
	uint64_t lc = put_unfenced(&e, 0, pa, &bc);
	CHECK_EQ(paste_wal_lookup(e.w, lc, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(paste_wal_truncate(e.w, UINT64_MAX, pb), 1);
	CHECK_EQ(paste_store_refcount(e.st, ba), 0);
	CHECK_EQ(paste_store_refcount(e.st, bc), 1);
	CHECK_EQ(paste_wal_lookup(e.w, lb, NULL, NULL, NULL), 0);
	CHECK_EQ(paste_wal_lookup(e.w, lc, NULL, NULL, NULL), -ENOENT);
	info = info_of(e.w);
	CHECK(info.records == 1 && info.pending == 1 && info.last_lsn == lb);
	CHECK_EQ(paste_persist_fence(pa), 0);
	CHECK_EQ(paste_wal_truncate(e.w, UINT64_MAX, pa), 2);
	CHECK_EQ(info_of(e.w).records, 0);

	/* After a store failure nothing appended becomes visible, ever. */
	uint64_t ld = put_unfenced(&e, 0, pa, &bd);
	paste_store_fail(e.st, -EIO, "test_wal: injected failure");
	CHECK_EQ(paste_persist_fence(pa), -EIO);
	CHECK_EQ(paste_wal_lookup(e.w, ld, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(info_of(e.w).pending, 1);
	paste_wal_close(e.w);
	e.w = NULL;
	paste_persist_close(pb);
	finish(&e);

	/* Without durability (NONE) every record is visible at once. */
	struct paste_persist_config none = { .mode = PASTE_DUR_NONE };
	if (!start(&e, "visible-none"))
		return;
	CHECK_EQ(paste_persist_open(&pb, e.st, &none, NULL), 0);
	uint64_t ln = put_unfenced(&e, 1, pb, &bb);
	CHECK_EQ(paste_wal_lookup(e.w, ln, NULL, NULL, NULL), 0);
	paste_wal_close(e.w);
	e.w = NULL;
	paste_persist_close(pb);
	finish(&e);
}

/* A failed store: truncation writes nothing (no checkpoint that no fence
 * can make durable), keeps every record and buffer, returns the failure;
 * a restart finds the records. */
static void test_truncate_failed_store(void)
{
	struct env e;
	if (!start(&e, "failed"))
		return;
	uint32_t b[2];
	uint64_t l0 = put(&e, 0, 1, &b[0]);
	put(&e, 1, 1, &b[1]);
	uint8_t before[LANES][2][64];
	for (uint32_t i = 0; i < LANES; i++)
		for (uint32_t k = 0; k < 2; k++)
			memcpy(before[i][k], paste_store_ckpt(e.st, i, k), 64);
	paste_store_fail(e.st, -EIO, "test_wal: injected failure");
	CHECK_EQ(paste_wal_truncate(e.w, UINT64_MAX, e.p), -EIO);
	CHECK_EQ(paste_wal_truncate(e.w, UINT64_MAX, e.p), -EIO);
	for (uint32_t i = 0; i < LANES; i++)
		for (uint32_t k = 0; k < 2; k++)
			CHECK(memcmp(before[i][k], paste_store_ckpt(e.st, i, k), 64) == 0);
	CHECK_EQ(paste_wal_lookup(e.w, l0, NULL, NULL, NULL), 0);
	CHECK_EQ(paste_store_refcount(e.st, b[0]), 1);
	CHECK_EQ(paste_store_refcount(e.st, b[1]), 1);
	if (!env_reopen(&e))
		return;
	CHECK_EQ(records(e.w), 2);
	finish(&e);
}

/* The fence of a truncation fails after the checkpoint was written (the
 * store fails while the slow fence waits): the lane must not claim the
 * slot it wrote, so its next checkpoint would not overwrite the newest
 * durable one; buffers stay held, the error is returned. */
struct failer {
	struct paste_store *st;
	const uint8_t *slot[2];
	uint8_t before[2][64];
	volatile bool stop;
};

static void *fail_on_ckpt_write(void *arg)
{
	struct failer *f = arg;
	while (!f->stop) {
		if (memcmp(f->slot[0], f->before[0], 64) || memcmp(f->slot[1], f->before[1], 64)) {
			paste_store_fail(f->st, -EIO, "test_wal: failure during the fence");
			break;
		}
	}
	return NULL;
}

static void test_truncate_fence_fails(void)
{
	struct env e;
	if (!start(&e, "fencefail"))
		return;
	struct paste_persist *slow;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED, .pm_latency_ns = 400000000 };
	CHECK_EQ(paste_persist_open(&slow, e.st, &pc, NULL), 0);
	uint32_t b;
	uint64_t lsn = put(&e, 2, 1, &b);
	struct wal_lane *l = &e.w->lanes[2];
	int slot = l->ckpt_slot;
	uint64_t seq = l->ckpt_seq, head_lsn = l->head_lsn, head = l->head;
	uint32_t head_epoch = l->head_epoch, ckpt_epoch = l->ckpt_epoch;
	struct failer f = { .st = e.st };
	for (int k = 0; k < 2; k++) {
		f.slot[k] = paste_store_ckpt(e.st, 2, (uint32_t)k);
		memcpy(f.before[k], f.slot[k], 64);
	}
	pthread_t th;
	pthread_create(&th, NULL, fail_on_ckpt_write, &f);
	CHECK_EQ(paste_wal_truncate(e.w, lsn, slow), -EIO);
	f.stop = true;
	pthread_join(th, NULL);
	CHECK(memcmp(f.slot[slot == 0 ? 1 : 0], f.before[slot == 0 ? 1 : 0], 64) != 0);  /* written */
	CHECK_EQ(l->ckpt_slot, slot);                       /* but not claimed */
	CHECK_EQ(l->ckpt_seq, seq);
	CHECK_EQ(l->head_lsn, head_lsn);
	CHECK_EQ(l->head_epoch, head_epoch);
	CHECK_EQ(l->ckpt_epoch, ckpt_epoch);
	CHECK_EQ(l->head, head);
	CHECK_EQ(paste_store_refcount(e.st, b), 1);
	CHECK_EQ(paste_wal_lookup(e.w, lsn, NULL, NULL, NULL), 0);
	paste_persist_close(slow);
	finish(&e);
}

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

int main(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/paste-wal-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_bad_args();
	test_roundtrip();
	test_read_pins();
	test_multi_extent_and_sharing();
	test_full_then_truncate();
	test_wrap_and_reopen();
	test_reopen_multilane();
	test_truncate_persists_first();
	test_limits();
	test_visibility_across_lanes();
	test_truncate_failed_store();
	test_truncate_fence_fails();
	rmdir(dir);
	return check_done();
}
