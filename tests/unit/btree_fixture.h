/* btree_fixture.h - what the B+tree's unit tests share: a store on
 * /dev/shm with a node area, its log and tree (opened in the order a
 * server uses: store, persist, log, tree, start), a pool of value buffers
 * the test holds, keys of any length, and the reference-count audit
 * (every buffer's count = the test's + the tree's extents + the log's).
 * Header-only: each test program includes it once. */
#ifndef PASTE_BTREE_FIXTURE_H
#define PASTE_BTREE_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "paste.h"

static char dir[64];
static char path[160];

struct tenv {
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_btree *t;
	struct paste_error err;   /* of the opens */
	struct paste_store_config scfg;
	struct paste_btree_config tcfg;
	enum paste_durability mode;
	uint32_t *pool, npool;    /* value buffers the test holds one reference on */
};

static inline bool tenv_open(struct tenv *e)
{
	struct paste_persist_config pc = { .mode = e->mode };
	e->st = NULL;
	e->p = NULL;
	e->w = NULL;
	e->t = NULL;
	if (paste_store_open(&e->st, path, &e->scfg, PASTE_STORE_CREATE, &e->err) < 0 ||
	    paste_persist_open(&e->p, e->st, &pc, &e->err) < 0 ||
	    paste_wal_open(&e->w, e->st, e->p, &e->err) < 0 ||
	    paste_btree_open(&e->t, e->st, e->w, e->p, &e->tcfg, &e->err) < 0) {
		fprintf(stderr, "tenv_open: %s\n", e->err.msg);
		CHECK(0);
		return false;
	}
	paste_store_start(e->st);
	if (e->npool) {
		free(e->pool);
		e->pool = malloc(sizeof(uint32_t) * e->npool);
		CHECK_EQ(paste_store_alloc(e->st, e->pool, e->npool), e->npool);
		for (uint32_t i = 0; i < e->npool; i++) {
			uint8_t *b = paste_store_buf(e->st, e->pool[i]);
			for (uint32_t j = 0; j < paste_store_geom(e->st)->buf_size; j++)
				b[j] = (uint8_t)(i * 31u + j);
		}
	}
	return true;
}

/* Close without a checkpoint: what the log holds is replayed next time. */
static inline void tenv_close(struct tenv *e)
{
	paste_btree_close(e->t);
	paste_wal_close(e->w);
	paste_persist_close(e->p);
	paste_store_close(e->st);
	e->t = NULL;
}

static inline bool tenv_reopen(struct tenv *e)
{
	tenv_close(e);
	return tenv_open(e);
}

static inline bool tenv_start(struct tenv *e, const char *name)
{
	snprintf(path, sizeof(path), "%s/%s.store", dir, name);
	unlink(path);
	return tenv_open(e);
}

static inline void tenv_finish(struct tenv *e)
{
	tenv_close(e);
	free(e->pool);
	e->pool = NULL;
	unlink(path);
}

static inline void make_dir(const char *what)
{
	snprintf(dir, sizeof(dir), "/dev/shm/paste-test-%s-XXXXXX", what);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
}

/* xorshift64*: reproducible randomness. */
static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static inline int set_str(struct paste_btree *t, const char *k, const struct paste_extent *v, uint32_t n)
{
	return paste_btree_set(t, k, (uint32_t)strlen(k), v, n, NULL);
}

/* ---- the reference audit -------------------------------------------------- */

struct audit {
	uint32_t *want;       /* per buffer */
	uint32_t *hdr;        /* per buffer: named by a tree record header */
};

static inline int audit_log(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
			    uint32_t n, uint32_t len, uint32_t crc)
{
	struct audit *a = arg;
	(void)lsn; (void)lane; (void)len; (void)crc;
	for (uint32_t i = 0; i < n; i++) {
		a->want[ext[i].buf]++;
		if (i + 1 == n)            /* a tree record's header is its last extent */
			a->hdr[ext[i].buf] = 1;
	}
	return 0;
}

/* Every buffer's count must be the test's pool reference + the tree's value
 * extents + the log records' extents (+ the tree's own on its header
 * buffer). Needs no releases waiting. Returns the number of buffers that
 * disagree. */
static inline uint32_t audit_refs(struct tenv *e)
{
	const struct paste_store_geom *g = paste_store_geom(e->st);
	struct audit a = { calloc(g->nbufs, sizeof(uint32_t)), calloc(g->nbufs, sizeof(uint32_t)) };
	for (uint32_t i = 0; i < e->npool; i++)
		a.want[e->pool[i]]++;
	struct paste_btree_info in;
	paste_btree_info(e->t, &in);
	if (in.header_buf != PASTE_NO_BUF)
		a.want[in.header_buf]++;
	if (in.clean_buf != PASTE_NO_BUF)
		a.want[in.clean_buf]++;
	struct paste_btree_cursor c;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n;
	paste_btree_cursor_init(&c, e->t, NULL, 0);
	while (paste_btree_cursor_next(&c, NULL, NULL, ext, &n, NULL) == 1)
		for (uint32_t i = 0; i < n; i++)
			a.want[ext[i].buf]++;
	paste_wal_foreach(e->w, audit_log, &a);
	uint32_t bad = 0;
	for (uint32_t b = 0; b < g->nbufs; b++) {
		uint32_t have = paste_store_refcount(e->st, b);
		if (have != a.want[b] && bad++ < 5)
			fprintf(stderr, "  buffer %u: %u references, want %u%s\n", b, have, a.want[b],
				a.hdr[b] ? " (a header buffer)" : "");
	}
	free(a.want);
	free(a.hdr);
	return bad;
}

static inline int tree_check(struct paste_btree *t)
{
	struct paste_error err = { 0 };
	int r = paste_btree_check(t, &err);
	if (r != 0)
		fprintf(stderr, "  paste_btree_check: %d: %s\n", r, err.msg);
	return r;
}

#endif
