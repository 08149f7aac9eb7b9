/* test_wal_visible.c - write-ahead log records not yet durable: invisible
 * to lookups and reads and safe from truncation until their own appender's
 * fence, never visible after a store failure, visible at once without
 * durability (NONE). */
#include "wal_fixture.h"

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

int main(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/paste-walvis-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_visibility_across_lanes();
	rmdir(dir);
	return check_done();
}
