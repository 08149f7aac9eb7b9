/* test_wal.c - write-ahead log: append/lookup/truncate, space, recovery of
 * torn and damaged records, epochs, read-only opens, visibility of records
 * not yet durable, failed fences. Small stores on /dev/shm, persistence
 * EMULATED without latency (except the tests that race a slow fence). The
 * failed-fence test looks at a lane's checkpoint state in DRAM, so this
 * file includes the log's private header. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "paste.h"
#include "../../lib/wal_internal.h"

#define LANES     4u
#define LANE_SIZE 4096u   /* 64 slots of 64 bytes: 63 one-extent records fit */
#define BUF_SIZE  512u

static char dir[64];
static char path[128];
static struct paste_store_geom geom;
static const struct paste_store_config cfg = {
	.size = 1u << 20, .buf_size = BUF_SIZE, .log_lanes = LANES, .log_size = LANES * LANE_SIZE,
};

struct env {
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_error err;   /* of paste_wal_open: the recovery note */
};

/* Open (creating if needed) store, persist and log, then start the store. */
static bool env_open(struct env *e)
{
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	memset(e, 0, sizeof(*e));
	if (paste_store_open(&e->st, path, &cfg, PASTE_STORE_CREATE, &e->err) < 0 ||
	    paste_persist_open(&e->p, e->st, &pc, &e->err) < 0 ||
	    paste_wal_open(&e->w, e->st, e->p, &e->err) < 0) {
		fprintf(stderr, "env_open: %s\n", e->err.msg);
		CHECK(0);
		return false;
	}
	geom = *paste_store_geom(e->st);
	paste_store_start(e->st);
	return true;
}

static void env_close(struct env *e)
{
	paste_wal_close(e->w);
	paste_persist_close(e->p);
	paste_store_close(e->st);
}

static bool env_reopen(struct env *e)
{
	env_close(e);
	return env_open(e);
}

static void fresh(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s.store", dir, name);
	unlink(path);
}

/* A new store named name, open and started. */
static bool start(struct env *e, const char *name)
{
	fresh(name);
	return env_open(e);
}

static void finish(struct env *e)
{
	env_close(e);
	unlink(path);
}

static struct paste_wal_info info_of(const struct paste_wal *w)
{
	struct paste_wal_info info;
	paste_wal_info(w, &info);
	return info;
}

static uint64_t records(const struct paste_wal *w)
{
	return info_of(w).records;
}

static void fill(struct paste_store *st, uint32_t buf, uint32_t seed)
{
	uint8_t *b = paste_store_buf(st, buf);
	for (uint32_t i = 0; i < BUF_SIZE; i++)
		b[i] = (uint8_t)(seed * 131u + i * 7u);
}

/* A record of n extents, each in a fresh buffer the log then owns alone,
 * made durable (fenced), as a server does before it acknowledges it. */
static int try_put(struct env *e, uint32_t lane, uint32_t n, uint32_t *bufs, uint64_t *lsn)
{
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t b[PASTE_WAL_MAX_EXTENTS];
	CHECK_EQ(paste_store_alloc(e->st, b, n), n);
	for (uint32_t i = 0; i < n; i++) {
		fill(e->st, b[i], b[i]);
		ext[i] = (struct paste_extent){ b[i], 3 * i, 100 + i };
	}
	int rc = paste_wal_append(e->w, lane, e->p, ext, n, lsn);
	if (rc == 0)
		CHECK_EQ(paste_persist_fence(e->p), 0);
	for (uint32_t i = 0; i < n; i++) {
		paste_store_unref(e->st, b[i], false);
		if (bufs)
			bufs[i] = b[i];
	}
	return rc;
}

static uint64_t put(struct env *e, uint32_t lane, uint32_t n, uint32_t *bufs)
{
	uint64_t lsn = 0;
	CHECK_EQ(try_put(e, lane, n, bufs, &lsn), 0);
	return lsn;
}

/* Write bytes into the (closed) store file, as a crash or a bit flip would. */
static void poke(uint64_t off, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY);
	CHECK_EQ(pwrite(fd, p, n, (off_t)off), (ssize_t)n);
	close(fd);
}

static void flip(uint64_t off)
{
	uint8_t b;
	int fd = open(path, O_RDWR);
	CHECK_EQ(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x10;
	CHECK_EQ(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

static uint64_t lane_off(uint32_t lane, uint64_t off)
{
	return geom.log_offset + lane * geom.lane_size + off;
}

/* Rewrite the LSN of the one-extent record at lane offset off and reseal its
 * header CRC: damage that passes the checksums, as no crash can make. */
static void forge_lsn(uint32_t lane, uint64_t off, uint64_t lsn)
{
	uint8_t rec[48];   /* 36-byte header + 12-byte extent */
	int fd = open(path, O_RDWR);
	CHECK_EQ(pread(fd, rec, sizeof(rec), (off_t)lane_off(lane, off)), (ssize_t)sizeof(rec));
	memcpy(rec + 8, &lsn, 8);
	uint32_t crc = paste_crc32c(0, rec + 8, sizeof(rec) - 8);
	memcpy(rec + 4, &crc, 4);
	CHECK_EQ(pwrite(fd, rec, sizeof(rec), (off_t)lane_off(lane, off)), (ssize_t)sizeof(rec));
	close(fd);
}

static uint64_t buf_off(uint32_t buf, uint32_t off)
{
	return geom.buf_offset + (uint64_t)buf * geom.buf_size + off;
}

struct seen {
	struct paste_store *st;
	uint64_t lsn[256];
	uint32_t lane[256];
	uint32_t n, bad_crc;
};

static int collect(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
		   uint32_t n, uint32_t len, uint32_t crc)
{
	struct seen *s = arg;
	uint32_t want = 0, total = 0;
	for (uint32_t i = 0; i < n; i++) {
		want = paste_crc32c(want, paste_store_buf(s->st, ext[i].buf) + ext[i].off, ext[i].len);
		total += ext[i].len;
	}
	if (want != crc || total != len)
		s->bad_crc++;
	if (s->n < 256) {
		s->lsn[s->n] = lsn;
		s->lane[s->n] = lane;
	}
	s->n++;
	return 0;
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

/* A new store with five one-extent records in lane 0 at offsets 0, 64, ...,
 * 256, closed (ready for damage). */
static bool five_records(struct env *e, const char *name, uint64_t *lsn, uint32_t *bufs)
{
	if (!start(e, name))
		return false;
	for (unsigned i = 0; i < 5; i++)
		lsn[i] = put(e, 0, 1, &bufs[i]);
	env_close(e);
	return true;
}

static void test_torn_tail(void)
{
	/* Torn data of the last record. */
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "torn", lsn, bufs))
		return;
	flip(buf_off(bufs[4], 5));
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 0: torn record at offset 256 (data crc mismatch), "
		     "4 valid records before it") != NULL);
	struct paste_wal_info info = info_of(e.w);
	CHECK_EQ(info.records, 4);
	CHECK_EQ(info.last_lsn, lsn[3]);
	CHECK_EQ(paste_store_refcount(e.st, bufs[4]), 0);
	CHECK_EQ(paste_store_refcount(e.st, bufs[3]), 1);
	CHECK_EQ(paste_wal_check(e.w, &e.err), 0);   /* a torn tail is not damage */
	/* The next record takes the torn one's place. */
	uint64_t l = put(&e, 0, 1, NULL);
	CHECK(l > lsn[3]);
	if (!env_reopen(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);
	info = info_of(e.w);
	CHECK_EQ(info.records, 5);
	CHECK_EQ(info.last_lsn, l);
	finish(&e);

	/* Torn header of the last record. */
	if (!five_records(&e, "torn-hdr", lsn, bufs))
		return;
	flip(lane_off(0, 256 + 24));   /* its len field */
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "torn record at offset 256 (header crc mismatch)") != NULL);
	CHECK_EQ(records(e.w), 4);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	finish(&e);
}

static void test_middle_damage(void)
{
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "middle", lsn, bufs))
		return;
	flip(lane_off(0, 128 + 8));   /* record 2's LSN */
	if (!env_open(&e))
		return;
	char want[160];
	snprintf(want, sizeof(want), "lane 0: damaged record at offset 128 (header crc mismatch) "
		 "followed by a valid record (lsn %llu)", (unsigned long long)lsn[3]);
	CHECK(strstr(e.err.msg, want) != NULL);
	CHECK_EQ(records(e.w), 2);
	struct paste_error err = { 0 };
	CHECK_EQ(paste_wal_check(e.w, &err), 1);
	CHECK(strstr(err.msg, "damaged record at offset 128") != NULL);
	finish(&e);
}

/* check re-reads the data: a logged buffer changed behind the log's back. */
static void test_check_rereads_data(void)
{
	struct env e;
	if (!start(&e, "reread"))
		return;
	uint32_t b[3];
	uint64_t l0 = put(&e, 0, 1, &b[0]);
	put(&e, 1, 2, &b[1]);
	(void)l0;
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	paste_store_buf(e.st, b[2])[3 + 5] ^= 1;   /* second extent of the second record */
	struct paste_error err = { 0 };
	CHECK_EQ(paste_wal_check(e.w, &err), 1);
	CHECK(strstr(err.msg, "lane 1: record lsn") != NULL);
	CHECK(strstr(err.msg, "data crc mismatch") != NULL);
	finish(&e);
}

/* A crash left a torn record B with a valid C of the same run behind it.
 * New records overwrite B and end exactly where C starts; C's LSN is above
 * theirs (LSNs restart above the highest recovered one), so only its lower
 * epoch keeps it from being taken as their successor. */
static void test_epoch_blocks_old_records(void)
{
	struct env e;
	if (!start(&e, "epoch"))
		return;
	uint32_t ba, bb[3], bp, bq, bc;
	uint64_t a = put(&e, 0, 1, &ba);      /* lane 0 @0 */
	put(&e, 0, 3, bb);                    /* lane 0 @64, 128 bytes */
	put(&e, 1, 1, &bp);                   /* lane 1 @0: will be torn */
	uint64_t q = put(&e, 1, 1, &bq);      /* lane 1 @64: lost behind it */
	uint64_t c = put(&e, 0, 1, &bc);      /* lane 0 @192 */
	env_close(&e);
	flip(buf_off(bb[1], 10));
	flip(buf_off(bp, 10));
	if (!env_open(&e))
		return;
	char want[160];
	snprintf(want, sizeof(want), "lane 0: damaged record at offset 64 (data crc mismatch) "
		 "followed by a valid record (lsn %llu)", (unsigned long long)c);
	CHECK(strstr(e.err.msg, want) != NULL);
	snprintf(want, sizeof(want), "lane 1: damaged record at offset 0 (data crc mismatch) "
		 "followed by a valid record (lsn %llu)", (unsigned long long)q);
	CHECK(strstr(e.err.msg, want) != NULL);
	struct paste_wal_info info = info_of(e.w);
	CHECK_EQ(info.records, 1);
	CHECK_EQ(info.epoch, 2);
	CHECK_EQ(paste_wal_check(e.w, NULL), 2);
	uint64_t d = put(&e, 0, 1, NULL);    /* @64 */
	uint64_t f = put(&e, 0, 1, NULL);    /* @128: the next offset is C's */
	CHECK(d == a + 1 && f == a + 2 && c > f);
	if (!env_reopen(&e))
		return;
	info = info_of(e.w);
	CHECK_EQ(info.records, 3);
	CHECK_EQ(info.last_lsn, f);
	CHECK_EQ(paste_wal_lookup(e.w, c, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(paste_store_refcount(e.st, bc), 0);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);   /* the old records are just stale now */
	CHECK_EQ(e.err.msg[0], 0);
	finish(&e);
}

/* Both checkpoint slots lost while the lane holds records: recovery keeps
 * nothing, says so, and the next run's checkpoint makes sure those records
 * can never come back (their buffers were free in between). */
static void test_lost_checkpoint(void)
{
	struct env e;
	if (!start(&e, "ckpt"))
		return;
	uint32_t b[3];
	for (unsigned i = 0; i < 3; i++)
		put(&e, 2, 1, &b[i]);
	env_close(&e);
	uint8_t zero[128] = { 0 };
	poke(geom.ckpt_offset + 2 * 128, zero, sizeof(zero));
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 2: both checkpoint slots are invalid") != NULL);
	CHECK_EQ(records(e.w), 0);
	CHECK_EQ(paste_store_refcount(e.st, b[0]), 0);
	CHECK_EQ(paste_wal_check(e.w, NULL), 1);
	if (!env_reopen(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);
	CHECK_EQ(records(e.w), 0);
	finish(&e);

	/* The newest slot torn (a crash while the second open wrote it): the
	 * older one serves. The epoch is one above the newest of all lanes. */
	if (!start(&e, "ckpt1"))
		return;
	for (unsigned i = 0; i < 3; i++)
		put(&e, 2, 1, &b[i]);
	env_close(&e);
	if (!env_open(&e))   /* epoch 2 goes to slot 1 */
		return;
	env_close(&e);
	flip(geom.ckpt_offset + 2 * 128 + 64 + 20);
	if (!env_open(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);
	CHECK_EQ(records(e.w), 3);
	CHECK_EQ(info_of(e.w).epoch, 3);
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

static uint8_t *slurp(size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat s;
	if (fd < 0 || fstat(fd, &s) < 0)
		return NULL;
	uint8_t *b = malloc((size_t)s.st_size);
	*len = (size_t)pread(fd, b, (size_t)s.st_size, 0);
	close(fd);
	return b;
}

static void test_read_only(void)
{
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "rdonly", lsn, bufs))
		return;
	flip(buf_off(bufs[4], 0));   /* a torn tail to report */
	size_t n0, n1;
	uint8_t *before = slurp(&n0);

	struct paste_store *st;
	struct paste_wal *w;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err), 0);
	CHECK_EQ(paste_wal_open(&w, st, NULL, &err), 0);
	CHECK(strstr(err.msg, "torn record at offset 256") != NULL);
	CHECK_EQ(records(w), 4);
	CHECK_EQ(info_of(w).epoch, 1);   /* not advanced: nothing written */
	CHECK_EQ(paste_store_nheld(st), 4);
	CHECK_EQ(paste_wal_check(w, &err), 0);
	struct seen s = { .st = st };
	CHECK_EQ(paste_wal_foreach(w, collect, &s), 0);
	CHECK_EQ(s.n, 4);
	CHECK_EQ(paste_wal_lookup(w, lsn[2], NULL, NULL, NULL), 0);
	struct paste_extent ext = { bufs[0], 0, 1 };
	uint64_t l;
	CHECK_EQ(paste_wal_append(w, 0, NULL, &ext, 1, &l), -EROFS);
	CHECK_EQ(paste_wal_truncate(w, lsn[4], NULL), -EROFS);
	/* A persist object cannot make a read-only mapping writable. */
	struct paste_persist *p = NULL;
	struct paste_wal *w2 = NULL;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	if (paste_persist_open(&p, st, &pc, NULL) == 0) {
		CHECK_EQ(paste_wal_open(&w2, st, p, &err), -EROFS);
		CHECK(w2 == NULL);
		paste_persist_close(p);
	}
	paste_wal_close(w);
	paste_store_close(st);
	uint8_t *after = slurp(&n1);
	CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
	free(before);
	free(after);
	unlink(path);
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

/* A record whose checksums hold but whose LSN is 2^64-1: damage, and the
 * records after it (lower LSNs) must not be taken as its successors. */
static void test_lsn_at_limit(void)
{
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "lsnmax", lsn, bufs))
		return;
	forge_lsn(0, 64, UINT64_MAX);
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "record at offset 64 (impossible type or lsn)") != NULL);
	CHECK_EQ(records(e.w), 1);
	CHECK_EQ(paste_wal_check(e.w, NULL), 1);
	CHECK(put(&e, 0, 1, NULL) > lsn[0]);
	finish(&e);
}

/* Two lanes holding one LSN cannot come from the writer (one counter), but
 * a forged record with valid checksums can say so: the later lane ends at
 * it, as at any corrupt record, and every LSN names one record. */
static void test_duplicate_lsn_across_lanes(void)
{
	struct env e;
	if (!start(&e, "duplsn"))
		return;
	uint64_t lsn[5];
	uint32_t lanes[5] = { 0, 1, 0, 1, 1 };
	for (int i = 0; i < 5; i++)
		lsn[i] = put(&e, lanes[i], 1, NULL);
	env_close(&e);
	forge_lsn(1, 64, lsn[2]);   /* lane 1's second record takes lane 0's second LSN */
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 1: corrupt record at offset 64 (lsn already used by a "
		     "record in another lane), 1 valid records before it") != NULL);
	CHECK_EQ(records(e.w), 3);
	CHECK_EQ(paste_store_nheld(e.st), 3);     /* the cut records' buffers are free */
	struct seen s = { .st = e.st };
	paste_wal_foreach(e.w, collect, &s);
	CHECK_EQ(s.n, 3);
	CHECK(s.lsn[0] == lsn[0] && s.lsn[1] == lsn[1] && s.lsn[2] == lsn[2]);
	CHECK_EQ(s.lane[2], 0);
	CHECK_EQ(paste_wal_check(e.w, NULL), 1);
	CHECK(put(&e, 1, 1, NULL) > lsn[4]);     /* lane 1 goes on where it stopped */
	CHECK(env_reopen(&e));
	CHECK_EQ(records(e.w), 4);
	finish(&e);
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

/* Take buffer `want` from the free list (the store hands out buffers in
 * its own order: the others go back). */
static void grab(struct env *e, uint32_t want)
{
	uint32_t *got = malloc(sizeof(*got) * geom.nbufs), n = 0;
	while (got && n < geom.nbufs && paste_store_alloc(e->st, &got[n], 1) == 1 && got[n] != want)
		n++;
	CHECK(got && n < geom.nbufs && got[n] == want);
	for (uint32_t i = 0; got && i < n; i++)
		paste_store_unref(e->st, got[i], false);
	free(got);
}

/* A crash tore record R (lane 0 @64, LSN r: its data never became
 * durable, so it was never acknowledged). The next run re-issues LSN r,
 * and a client retrying its POST puts the very same bytes into R's old
 * buffer, logged in lane 1 and acknowledged, followed by LSN r + 1.
 * Leaves the store closed; *r and *br say which LSN and buffer. */
static bool revenant(struct env *e, const char *name, uint64_t *r, uint32_t *br)
{
	if (!start(e, name))
		return false;
	put(e, 0, 1, NULL);
	*r = put(e, 0, 1, br);
	env_close(e);
	flip(buf_off(*br, 5));
	if (!env_open(e))
		return false;
	CHECK(strstr(e->err.msg, "lane 0: torn record at offset 64 (data crc mismatch)") != NULL);
	CHECK_EQ(records(e->w), 1);
	grab(e, *br);
	fill(e->st, *br, *br);                 /* the same bytes land there again */
	struct paste_extent ext = { *br, 0, 100 };
	uint64_t lsn = 0;
	CHECK_EQ(paste_wal_append(e->w, 1, e->p, &ext, 1, &lsn), 0);
	CHECK_EQ(lsn, *r);                     /* the LSN is handed out again */
	CHECK_EQ(paste_persist_fence(e->p), 0);
	paste_store_unref(e->st, *br, false);
	CHECK_EQ(put(e, 1, 1, NULL), *r + 1);
	env_close(e);
	return true;
}

/* The writable open sealed R's stop (zeroed its magic), so R cannot come
 * back and push the acknowledged LSN r (and r + 1 behind it) out of lane 1. */
static void test_torn_tail_stays_dead(void)
{
	struct env e;
	uint64_t r;
	uint32_t br;
	if (!revenant(&e, "deadtail", &r, &br) || !env_open(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);                 /* a clean end now */
	CHECK_EQ(records(e.w), 3);
	struct seen s = { .st = e.st };
	paste_wal_foreach(e.w, collect, &s);
	CHECK(s.n == 3 && s.lsn[1] == r && s.lane[1] == 1 && s.lsn[2] == r + 1);
	CHECK_EQ(paste_store_refcount(e.st, br), 1);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	finish(&e);
}

/* A store where R's stop was not sealed (an older writer): R revives, and
 * LSN r is in two lanes. The copy with the older epoch (R, run 1) goes,
 * not the later lane's (run 2, acknowledged). */
static void test_dedup_keeps_newer_epoch(void)
{
	struct env e;
	uint64_t r;
	uint32_t br, magic = 0x4c415750u;
	if (!revenant(&e, "newer", &r, &br))
		return;
	poke(lane_off(0, 64), &magic, 4);
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 0: corrupt record at offset 64 (lsn already used by a "
		     "record in another lane), 1 valid records before it") != NULL);
	CHECK_EQ(records(e.w), 3);
	struct seen s = { .st = e.st };
	paste_wal_foreach(e.w, collect, &s);
	CHECK(s.n == 3 && s.lsn[1] == r && s.lane[1] == 1 && s.lsn[2] == r + 1);
	CHECK_EQ(paste_store_refcount(e.st, br), 1);   /* lane 1's reference only */
	CHECK_EQ(paste_wal_check(e.w, NULL), 1);
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
	test_torn_tail();
	test_middle_damage();
	test_check_rereads_data();
	test_epoch_blocks_old_records();
	test_lost_checkpoint();
	test_truncate_persists_first();
	test_read_only();
	test_limits();
	test_lsn_at_limit();
	test_duplicate_lsn_across_lanes();
	test_visibility_across_lanes();
	test_torn_tail_stays_dead();
	test_dedup_keeps_newer_epoch();
	test_truncate_failed_store();
	test_truncate_fence_fails();
	rmdir(dir);
	return check_done();
}
