/* wal_fixture.h - what the log's unit tests (test_wal.c, test_wal_recover.c)
 * share: a small store on /dev/shm (4 lanes of 4 KiB, 512-byte buffers),
 * EMULATED persistence without latency, helpers to append, to poke bytes
 * into the file behind the store's back, and to collect records in LSN
 * order. Header-only: each test program includes it once. */
#ifndef PASTE_WAL_FIXTURE_H
#define PASTE_WAL_FIXTURE_H

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

/* Added to every open: 0, or PASTE_STORE_ONE_THREAD (no lane lock). */
static int env_flags;

struct env {
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_error err;   /* of paste_wal_open: the recovery note */
};

/* Open (creating if needed) store, persist and log, then start the store. */
static inline bool env_open(struct env *e)
{
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	memset(e, 0, sizeof(*e));
	if (paste_store_open(&e->st, path, &cfg, PASTE_STORE_CREATE | env_flags, &e->err) < 0 ||
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

static inline void env_close(struct env *e)
{
	paste_wal_close(e->w);
	paste_persist_close(e->p);
	paste_store_close(e->st);
}

static inline bool env_reopen(struct env *e)
{
	env_close(e);
	return env_open(e);
}

static inline void fresh(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s.store", dir, name);
	unlink(path);
}

/* A new store named name, open and started. */
static inline bool start(struct env *e, const char *name)
{
	fresh(name);
	return env_open(e);
}

static inline void finish(struct env *e)
{
	env_close(e);
	unlink(path);
}

static inline struct paste_wal_info info_of(const struct paste_wal *w)
{
	struct paste_wal_info info;
	paste_wal_info(w, &info);
	return info;
}

static inline uint64_t records(const struct paste_wal *w)
{
	return info_of(w).records;
}

static inline void fill(struct paste_store *st, uint32_t buf, uint32_t seed)
{
	uint8_t *b = paste_store_buf(st, buf);
	for (uint32_t i = 0; i < BUF_SIZE; i++)
		b[i] = (uint8_t)(seed * 131u + i * 7u);
}

/* A record of n extents, each in a fresh buffer the log then owns alone,
 * made durable (fenced), as a server does before it acknowledges it; or,
 * with fence false, left in the open batch (as a crash finds a batch whose
 * barrier never completed). */
static inline int put_in(struct env *e, uint32_t lane, uint32_t n, uint32_t *bufs, uint64_t *lsn,
			 bool fence)
{
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t b[PASTE_WAL_MAX_EXTENTS];
	CHECK_EQ(paste_store_alloc(e->st, b, n), n);
	for (uint32_t i = 0; i < n; i++) {
		fill(e->st, b[i], b[i]);
		ext[i] = (struct paste_extent){ b[i], 3 * i, 100 + i };
	}
	int rc = paste_wal_append(e->w, lane, e->p, ext, n, lsn);
	if (rc == 0 && fence)
		CHECK_EQ(paste_persist_fence(e->p), 0);
	for (uint32_t i = 0; i < n; i++) {
		paste_store_unref(e->st, b[i], false);
		if (bufs)
			bufs[i] = b[i];
	}
	return rc;
}

static inline int try_put(struct env *e, uint32_t lane, uint32_t n, uint32_t *bufs, uint64_t *lsn)
{
	return put_in(e, lane, n, bufs, lsn, true);
}

static inline uint64_t put(struct env *e, uint32_t lane, uint32_t n, uint32_t *bufs)
{
	uint64_t lsn = 0;
	CHECK_EQ(try_put(e, lane, n, bufs, &lsn), 0);
	return lsn;
}

/* put, without the fence: the record joins the open batch. */
static inline uint64_t put_open_batch(struct env *e, uint32_t lane, uint32_t n, uint32_t *bufs)
{
	uint64_t lsn = 0;
	CHECK_EQ(put_in(e, lane, n, bufs, &lsn, false), 0);
	return lsn;
}

/* Write bytes into the (closed) store file, as a crash or a bit flip would. */
static inline void poke(uint64_t off, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY);
	CHECK_EQ(pwrite(fd, p, n, (off_t)off), (ssize_t)n);
	close(fd);
}

static inline void flip(uint64_t off)
{
	uint8_t b;
	int fd = open(path, O_RDWR);
	CHECK_EQ(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x10;
	CHECK_EQ(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

static inline uint64_t lane_off(uint32_t lane, uint64_t off)
{
	return geom.log_offset + lane * geom.lane_size + off;
}

/* Rewrite the LSN of the one-extent record at lane offset off and reseal its
 * header CRC: damage that passes the checksums, as no crash can make. */
static inline void forge_lsn(uint32_t lane, uint64_t off, uint64_t lsn)
{
	uint8_t rec[52];   /* 36-byte header + 12-byte extent + the durable mark */
	int fd = open(path, O_RDWR);
	CHECK_EQ(pread(fd, rec, sizeof(rec), (off_t)lane_off(lane, off)), (ssize_t)sizeof(rec));
	memcpy(rec + 8, &lsn, 8);
	uint16_t type;
	memcpy(&type, rec + 20, 2);
	uint32_t crc = paste_crc32c(0, rec + 8, rec_head_bytes(type, 1) - 8);
	memcpy(rec + 4, &crc, 4);
	CHECK_EQ(pwrite(fd, rec, sizeof(rec), (off_t)lane_off(lane, off)), (ssize_t)sizeof(rec));
	close(fd);
}

/* The whole store file (free it), to compare before and after an open. */
static inline uint8_t *slurp(size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat s;
	if (fd < 0 || fstat(fd, &s) < 0)
		return NULL;
	uint8_t *b = malloc((size_t)s.st_size);
	*len = b ? (size_t)pread(fd, b, (size_t)s.st_size, 0) : 0;
	close(fd);
	return b;
}

/* The store file holds what `before` (n bytes, from slurp) held; frees it. */
static inline bool unchanged(uint8_t *before, size_t n)
{
	size_t n1 = 0;
	uint8_t *after = slurp(&n1);
	bool same = before && after && n == n1 && memcmp(before, after, n) == 0;
	free(before);
	free(after);
	return same;
}

/* A writable open of the store at path is refused with code, its message
 * holding want, and the file is left byte for byte as it was. */
static inline void expect_refused(int code, const char *want)
{
	size_t n0 = 0;
	uint8_t *before = slurp(&n0);
	struct paste_store *st = NULL;
	struct paste_persist *p = NULL;
	struct paste_wal *w = NULL;
	struct paste_error err = { 0 };
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	CHECK_EQ(paste_store_open(&st, path, &cfg, 0, &err), 0);
	CHECK_EQ(paste_persist_open(&p, st, &pc, &err), 0);
	CHECK_EQ(paste_wal_open(&w, st, p, &err), code);
	CHECK(w == NULL);
	if (!strstr(err.msg, want))
		fprintf(stderr, "expect_refused: want \"%s\" in: %s\n", want, err.msg);
	CHECK(strstr(err.msg, want) != NULL);
	CHECK(strstr(err.msg, path) != NULL);
	paste_persist_close(p);
	paste_store_close(st);
	CHECK(unchanged(before, n0));
}

static inline uint64_t buf_off(uint32_t buf, uint32_t off)
{
	return geom.buf_offset + (uint64_t)buf * geom.buf_size + off;
}

struct seen {
	struct paste_store *st;
	uint64_t lsn[256];
	uint32_t lane[256];
	uint32_t n, bad_crc;
};

static inline int collect(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
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

#endif
