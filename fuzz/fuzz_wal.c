/* fuzz_wal.c - libFuzzer target for WAL recovery over a damaged store.
 *
 * Once per process a small store (2 lanes of 4 KiB, 64 buffers of 512 B) is
 * built in /dev/shm with the real writer: enough appends and truncations to
 * wrap both lanes several times, so the baseline holds WRAP records, both
 * checkpoint slots, stale records of earlier passes and shared buffers.
 * Each input then damages a copy of that baseline (or of a zeroed store):
 *
 *   byte 0, bit 0  0: raw - the rest of the input overwrites the store from
 *                     a 64-byte aligned position named by bytes 1-2;
 *                  1: patches - 4-byte (u16 position, value, op) edits, op
 *                     bit 0 set = xor, else store
 *           bit 1  start from a zeroed log instead of the baseline
 *           bit 2  also open the damaged store writable and append/truncate
 *           bit 3  reseal: recompute the checksums of every record header,
 *                  checkpoint slot and (where the extents allow) record data,
 *                  so the damage reaches the checks behind the CRCs (bad
 *                  types, extents, sizes, LSNs, epochs). This mirrors the
 *                  format described at the top of lib/wal.c.
 *           bit 4  no revival: open the damaged store writable (as a restart
 *                  would), then put the baseline's bytes back into every
 *                  buffer (the free ones get reused, and a client retrying
 *                  an unacknowledged POST writes the same bytes again) and
 *                  open it read-only: it must not hold a record the
 *                  writable open did not recover (lib/wal.c, "Making the
 *                  stop permanent").
 *
 * Positions address the interesting bytes only, laid end to end: the
 * checkpoint slots, the lanes, then the buffers. Then the log is opened
 * read-only and walked (info, check, foreach, lookup of every record): it
 * must never crash, every extent it reports must lie inside a buffer, and
 * the walk must agree with info and lookup. A failed invariant aborts.
 * libFuzzer's comparison tracing finds the magic numbers and CRCs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "paste.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static struct paste_store_geom geom;
static uint8_t *file;        /* our own writable mapping of the whole store */
static uint8_t *baseline;    /* the file as the writer left it */
static uint64_t ckpt_bytes, log_bytes, buf_bytes, region;

__attribute__((noreturn)) static void fail(const char *why)
{
	fprintf(stderr, "fuzz_wal: %s\n", why);
	abort();
}

static void remove_store(void)
{
	unlink(path);
}

/* Position in the concatenated region -> byte of the file. */
static uint8_t *at(uint64_t pos)
{
	pos %= region;
	if (pos < ckpt_bytes)
		return file + geom.ckpt_offset + pos;
	pos -= ckpt_bytes;
	if (pos < log_bytes)
		return file + geom.log_offset + pos;
	return file + geom.buf_offset + (pos - log_bytes);
}

/* Appends until both lanes have wrapped a few times, truncating the oldest
 * records only when a lane or the buffers run out. A lane stops right after
 * a WRAP record (seen as a skipped LSN: a WRAP takes one), so its live
 * records span one. */
/* Format constants of lib/wal.c, for resealing only. */
#define WAL_MAGIC  0x4c415750u
#define CKPT_MAGIC 0x504b4350u
#define REC_HDR    36u
#define REC_MARKED 0x100u   /* type flag: a durable mark follows the extents */

static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static void reseal(void)
{
	for (uint32_t s = 0; s < geom.log_lanes * 2; s++) {
		uint8_t *c = file + geom.ckpt_offset + s * PASTE_CKPT_SLOT_SIZE;
		if (get32(c) == CKPT_MAGIC)
			put32(c + 4, paste_crc32c(0, c + 8, PASTE_CKPT_SLOT_SIZE - 8));
	}
	for (uint64_t off = 0; off < log_bytes; off += 64) {
		uint8_t *r = file + geom.log_offset + off;
		uint32_t n = get16(r + 22), room = (uint32_t)(geom.lane_size - off % geom.lane_size);
		uint32_t head = REC_HDR + 12 * n + (get16(r + 20) & REC_MARKED ? 4 : 0);
		if (get32(r) != WAL_MAGIC || n > PASTE_WAL_MAX_EXTENTS || head > room)
			continue;
		uint32_t crc = 0;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t b = get32(r + REC_HDR + 12 * i), o = get32(r + REC_HDR + 12 * i + 4),
				 len = get32(r + REC_HDR + 12 * i + 8);
			if (b >= geom.nbufs || o > geom.buf_size || len > geom.buf_size - o)
				break;
			crc = paste_crc32c(crc, file + geom.buf_offset + (uint64_t)b * geom.buf_size + o, len);
		}
		put32(r + 28, crc);
		put32(r + 4, paste_crc32c(0, r + 8, head - 8));
	}
}

static void write_baseline(struct paste_store *st, struct paste_persist *p, struct paste_wal *w)
{
	bool done[2] = { false, false };
	uint64_t lsn, last = 0, floor = 0;
	for (uint32_t i = 0; !(done[0] && done[1]); i++) {
		uint32_t lane = i % 2, n = 1 + (i * 2654435761u >> 16) % 6, b[6];   /* sizes mix irregularly */
		struct paste_extent ext[6];
		int rc = -ENOBUFS;
		if (done[lane])
			continue;
		if (i > 5000)
			fail("baseline: the lanes do not wrap");
		uint32_t got = paste_store_alloc(st, b, n);
		if (got == n) {
			for (uint32_t x = 0; x < n; x++) {
				memset(paste_store_buf(st, b[x]), (int)(i + x), geom.buf_size);
				/* extent x > 0 shares buffer x - 1 with the one before */
				ext[x] = (struct paste_extent){ x ? b[x - 1] : b[x], 8 * x, 16 + i % 200 };
			}
			rc = paste_wal_append(w, lane, p, ext, n, &lsn);
		}
		for (uint32_t x = 0; x < got; x++)
			paste_store_unref(st, b[x], false);
		if (rc == -ENOSPC || rc == -ENOBUFS)
			paste_wal_truncate(w, floor += 4, p);
		else if (rc != 0)
			fail("baseline: append failed");
		if (rc == 0) {
			done[lane] = i > 300 && lsn == last + 2;
			last = lsn;
		}
	}
	paste_persist_fence(p);
}

static void setup(void)
{
	struct paste_store_config cfg = { .size = 48 * 1024, .buf_size = 512, .log_lanes = 2,
					  .log_size = 8192 };
	struct paste_persist_config pc = { .mode = PASTE_DUR_NONE };
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_error err = { 0 };
	snprintf(path, sizeof(path), "/dev/shm/paste-fuzz-wal-%d.store", (int)getpid());
	unlink(path);
	if (paste_store_open(&st, path, &cfg, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err) < 0 ||
	    paste_persist_open(&p, st, &pc, &err) < 0 || paste_wal_open(&w, st, p, &err) < 0) {
		fprintf(stderr, "fuzz_wal: setup: %s\n", err.msg);
		abort();
	}
	atexit(remove_store);
	geom = *paste_store_geom(st);
	paste_store_start(st);
	write_baseline(st, p, w);
	paste_wal_close(w);
	paste_persist_close(p);
	paste_store_close(st);

	int fd = open(path, O_RDWR);
	file = mmap(NULL, geom.file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	baseline = malloc(geom.file_size);
	if (file == MAP_FAILED || !baseline)
		fail("setup: cannot map the store");
	memcpy(baseline, file, geom.file_size);
	ckpt_bytes = (uint64_t)geom.log_lanes * 2 * PASTE_CKPT_SLOT_SIZE;
	log_bytes = (uint64_t)geom.log_lanes * geom.lane_size;
	buf_bytes = (uint64_t)geom.nbufs * geom.buf_size;
	region = ckpt_bytes + log_bytes + buf_bytes;
}

struct walk {
	struct paste_wal *w;
	uint64_t last_lsn, records;
};

static int visit(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
		 uint32_t n, uint32_t len, uint32_t data_crc)
{
	struct walk *wk = arg;
	uint64_t total = 0;
	(void)data_crc;
	if (lane >= geom.log_lanes || n > PASTE_WAL_MAX_EXTENTS)
		fail("foreach: lane or extent count out of range");
	if (wk->records && lsn <= wk->last_lsn)
		fail("foreach: LSNs not increasing");
	for (uint32_t i = 0; i < n; i++) {
		if (ext[i].buf >= geom.nbufs || ext[i].off > geom.buf_size ||
		    ext[i].len > geom.buf_size - ext[i].off)
			fail("foreach: extent outside the buffer area");
		total += ext[i].len;
	}
	if (total != len)
		fail("foreach: extents do not add up to len");
	const struct paste_extent *e2;
	uint32_t n2, len2;
	if (paste_wal_lookup(wk->w, lsn, &e2, &n2, &len2) != 0 || e2 != ext || n2 != n || len2 != len)
		fail("lookup disagrees with foreach");
	wk->last_lsn = lsn;
	wk->records++;
	return 0;
}

static void inspect(void)
{
	struct paste_store *st;
	struct paste_wal *w;
	struct paste_error err = { 0 };
	if (paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err) < 0)
		fail(err.msg);
	if (paste_wal_open(&w, st, NULL, &err) == 0) {
		struct paste_wal_info in;
		struct walk wk = { .w = w };
		paste_wal_info(w, &in);
		if (in.log_used >= in.log_size || in.records * 64 > in.log_used)
			fail("info: log use out of range");
		if (paste_wal_check(w, &err) < 0)
			fail("check failed on an open log");
		paste_wal_foreach(w, visit, &wk);
		if (wk.records != in.records)
			fail("foreach and info disagree on the record count");
		if (paste_store_nheld(st) > geom.nbufs)
			fail("more buffers held than exist");
		paste_wal_close(w);
	}
	paste_store_close(st);
}

/* Recovery with a persist object, then one append and a truncation: the
 * writable paths must cope with whatever the damage left. */
static void write_through(void)
{
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_error err = { 0 };
	struct paste_persist_config pc = { .mode = PASTE_DUR_NONE };
	if (paste_store_open(&st, path, NULL, 0, &err) < 0 || paste_persist_open(&p, st, &pc, &err) < 0)
		fail(err.msg);
	if (paste_wal_open(&w, st, p, &err) == 0) {
		uint32_t b;
		uint64_t lsn;
		paste_store_start(st);
		if (paste_store_alloc(st, &b, 1) == 1) {
			struct paste_extent ext = { b, 0, 100 };
			if (paste_wal_append(w, 1, p, &ext, 1, &lsn) == 0 &&
			    paste_wal_lookup(w, lsn, NULL, NULL, NULL) != 0)
				fail("appended record not found");
			paste_store_unref(st, b, false);
		}
		paste_wal_truncate(w, UINT64_MAX, p);
		struct paste_wal_info in;
		paste_wal_info(w, &in);
		if (in.records != 0 || in.log_used != 0)
			fail("truncate to the end left records");
		paste_wal_close(w);
	}
	paste_persist_close(p);
	paste_store_close(st);
}

/* The records a log holds, as (lsn, lane): 2 lanes of 4 KiB hold at most
 * 128 records of 64 bytes. */
struct set {
	uint64_t lsn[128];
	uint32_t lane[128], n;
};

static int add(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
	       uint32_t n, uint32_t len, uint32_t data_crc)
{
	struct set *s = arg;
	(void)ext; (void)n; (void)len; (void)data_crc;
	if (s->n == 128)
		fail("more records than the lanes hold");
	s->lsn[s->n] = lsn;
	s->lane[s->n++] = lane;
	return 0;
}

static void no_revival(void)
{
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_error err = { 0 };
	struct paste_persist_config pc = { .mode = PASTE_DUR_NONE };
	struct set live = { .n = 0 }, later = { .n = 0 };
	if (paste_store_open(&st, path, NULL, 0, &err) < 0 || paste_persist_open(&p, st, &pc, &err) < 0)
		fail(err.msg);
	int rc = paste_wal_open(&w, st, p, &err);
	if (rc == 0) {
		paste_wal_foreach(w, add, &live);
		paste_wal_close(w);
	}
	paste_persist_close(p);
	paste_store_close(st);
	if (rc < 0)
		return;
	memcpy(file + geom.buf_offset, baseline + geom.buf_offset, buf_bytes);
	if (paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err) < 0)
		fail(err.msg);
	if (paste_wal_open(&w, st, NULL, &err) == 0) {
		paste_wal_foreach(w, add, &later);
		paste_wal_close(w);
	}
	paste_store_close(st);
	for (uint32_t i = 0; i < later.n; i++) {
		bool known = false;
		for (uint32_t k = 0; k < live.n && !known; k++)
			known = live.lsn[k] == later.lsn[i] && live.lane[k] == later.lane[i];
		if (!known)
			fail("no revival: a record the writable open did not recover came back");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!file)
		setup();
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	memcpy(file, baseline, geom.file_size);
	if (mode & 2)
		memset(file + geom.ckpt_offset, 0, geom.buf_offset - geom.ckpt_offset);
	if (!(mode & 1)) {
		if (size < 3)
			return 0;
		uint64_t pos = (uint64_t)(data[1] | data[2] << 8) * 64;
		for (size_t i = 3; i < size; i++)
			*at(pos + i - 3) = data[i];
	} else {
		for (size_t i = 1; i + 4 <= size; i += 4) {
			uint8_t *b = at((uint64_t)(data[i] | data[i + 1] << 8));
			*b = data[i + 3] & 1 ? *b ^ data[i + 2] : data[i + 2];
		}
	}
	if (mode & 8)
		reseal();
	inspect();
	if (mode & 4)
		write_through();
	if (mode & 16)
		no_revival();
	return 0;
}
