/* kv_fixture.h - what the key-value core's unit tests share: a kv
 * (services/kv.h) over a store on /dev/shm, opened in the order pkvs
 * opens it (store, persist, kv_open, paste_store_start, kv_start), closed
 * and reopened as after a stop (a barrier first: what was applied is
 * durable), and small helpers to write and read keys as bytes.
 * Header-only: each test program includes it once. */
#ifndef PASTE_KV_FIXTURE_H
#define PASTE_KV_FIXTURE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kv.h"

struct kenv {
	struct paste_store *st;
	struct paste_persist *p;
	struct kv *kv;
	struct paste_store_config scfg;
	struct kv_config kcfg;
	struct paste_error err;
	char path[128];
	int start_r;                 /* kv_start's result at the last open */
};

static char kv_dir[64];

static inline void kv_make_dir(const char *what)
{
	snprintf(kv_dir, sizeof(kv_dir), "/dev/shm/paste-test-%s-XXXXXX", what);
	if (!mkdtemp(kv_dir)) {
		perror("mkdtemp");
		exit(1);
	}
}

/* Open the store (created when absent) and the kv on it; false when an
 * open failed (the message printed). kv_start's result is kept in
 * e->start_r: a test of a refused start reads it. */
static inline bool kenv_open_raw(struct kenv *e)
{
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	e->st = NULL;
	e->p = NULL;
	e->kv = NULL;
	memset(&e->err, 0, sizeof(e->err));
	if (paste_store_open(&e->st, e->path, &e->scfg, PASTE_STORE_CREATE, &e->err) < 0 ||
	    paste_persist_open(&e->p, e->st, &pc, &e->err) < 0 ||
	    kv_open(&e->kv, e->st, e->p, &e->kcfg, &e->err) < 0) {
		fprintf(stderr, "kenv_open: %s\n", e->err.msg);
		return false;
	}
	paste_store_start(e->st);
	e->start_r = kv_start(e->kv, &e->err);
	if (e->start_r)
		fprintf(stderr, "  (kv_start: %d: %s)\n", e->start_r, e->err.msg);
	return true;
}

static inline bool kenv_open(struct kenv *e)
{
	bool ok = kenv_open_raw(e) && e->start_r == 0;
	CHECK(ok);
	return ok;
}

/* The port's barrier: every record applied so far is durable, and the
 * references it replaced go. */
static inline void kenv_settle(struct kenv *e)
{
	paste_persist_fence(e->p);
	paste_btree_maintain(e->kv->tree);
}

static inline void kenv_close(struct kenv *e)
{
	if (e->kv) {
		kenv_settle(e);
		kv_close(e->kv);
	}
	paste_persist_close(e->p);
	paste_store_close(e->st);
	e->kv = NULL;
}

static inline bool kenv_reopen(struct kenv *e)
{
	kenv_close(e);
	return kenv_open(e);
}

/* A fresh store of size bytes (buffers of bs bytes) named `name`. */
static inline bool kenv_start(struct kenv *e, const char *name, uint64_t size, uint32_t bs)
{
	memset(e, 0, sizeof(*e));
	e->scfg = (struct paste_store_config){ .size = size, .buf_size = bs, .log_lanes = 2 };
	snprintf(e->path, sizeof(e->path), "%s/%s.store", kv_dir, name);
	unlink(e->path);
	return kenv_open(e);
}

static inline void kenv_finish(struct kenv *e)
{
	kenv_close(e);
	unlink(e->path);
}

/* ---- keys and values as bytes ------------------------------------------- */

static inline void key_of(struct kenv *e, struct kv_key *k, uint32_t db, const char *s)
{
	kv_key_init(e->kv, k, db, s, strlen(s));
}

static inline int put_str(struct kenv *e, uint32_t db, const char *key, const char *val,
			  int64_t expire_ms)
{
	struct kv_key k;
	key_of(e, &k, db, key);
	return kv_put_bytes(e->kv, &k, KV_STRING, val, strlen(val), expire_ms, NULL);
}

/* The value of key (a string) into out (NUL-ended): its length, or -1
 * when absent, -2 when not a string. */
static inline long get_buf(struct kenv *e, uint32_t db, const void *key, size_t klen, char *out,
			   size_t cap)
{
	struct kv_key k;
	struct kv_obj o;
	kv_key_init(e->kv, &k, db, key, klen);
	if (kv_lookup(e->kv, &k, &o, true))
		return -1;
	if (o.type != KV_STRING)
		return -2;
	size_t got = kv_value_read(e->kv, &o, 0, out, cap - 1);
	out[got] = 0;
	return (long)o.len;
}

/* Is key's value exactly want? */
static inline bool has_str(struct kenv *e, uint32_t db, const char *key, const char *want)
{
	char buf[4096];
	long n = get_buf(e, db, key, strlen(key), buf, sizeof(buf));
	if (n != (long)strlen(want) || strcmp(buf, want) != 0) {
		fprintf(stderr, "  key '%s' (db %u): %ld '%s', want '%s'\n", key, db, n,
			n >= 0 ? buf : "", want);
		return false;
	}
	return true;
}

static inline bool absent(struct kenv *e, uint32_t db, const char *key)
{
	struct kv_key k;
	struct kv_obj o;
	key_of(e, &k, db, key);
	return kv_lookup(e->kv, &k, &o, false) == -ENOENT;
}

/* Tree entries whose key starts with byte b (and, when plen > 1, with
 * p[0..plen)). */
static inline uint64_t tree_count(struct kenv *e, const uint8_t *p, uint32_t plen)
{
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, e->kv->tree, p, plen);
	const uint8_t *t;
	uint32_t tlen;
	uint64_t n = 0;
	while (paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) == 1 && tlen >= plen &&
	       memcmp(t, p, plen) == 0)
		n++;
	return n;
}

static inline uint64_t count_byte(struct kenv *e, uint8_t b)
{
	return tree_count(e, &b, 1);
}

/* The counts kv keeps against a fresh walk of every database. */
static inline void check_counts(struct kenv *e)
{
	struct kv *kv = e->kv;
	for (uint32_t d = 0; d < kv->ndbs; d++) {
		uint64_t keys = kv_dbsize(kv, d), exp = kv_dbexpires(kv, d);
		kv->dbkeys[d] = kv->dbexpires[d] = UINT64_MAX;
		uint64_t wkeys = kv_dbsize(kv, d), wexp = kv_dbexpires(kv, d);
		if (keys != wkeys || exp != wexp)
			fprintf(stderr, "  db %u: counted %llu keys, %llu expiring; a walk finds %llu, %llu\n",
				d, (unsigned long long)keys, (unsigned long long)exp,
				(unsigned long long)wkeys, (unsigned long long)wexp);
		CHECK_EQ(keys, wkeys);
		CHECK_EQ(exp, wexp);
	}
}

/* A hash of n fields named "field-<i>" (5 digits) with value "v<i>":
 * its collection id. */
static inline uint64_t make_hash(struct kenv *e, uint32_t db, const char *key, uint32_t n)
{
	struct kv_obj h;
	struct kv_key k, mk;
	kv_coll_new(e->kv, &h, KV_HASH);
	char name[32], v[32];
	for (uint32_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "field-%05u", i);
		snprintf(v, sizeof(v), "v%u", i);
		kv_member_key(e->kv, &mk, h.coll.id, 'f', name, strlen(name));
		CHECK_EQ(kv_member_put_bytes(e->kv, &mk, v, strlen(v)), 0);
	}
	h.coll.count = n;
	key_of(e, &k, db, key);
	CHECK_EQ(kv_coll_save(e->kv, &k, &h), 0);
	return h.coll.id;
}

/* Run the sweeper until no grave is left. */
static inline void kenv_sweep(struct kenv *e)
{
	for (int i = 0; i < 100000 && e->kv->sweep_due; i++)
		kv_sweep_step(e->kv, 16);
	CHECK(!e->kv->sweep_due);
}

/* Free buffers once what was dropped is durable and out of the log. */
static inline uint32_t kenv_free(struct kenv *e)
{
	kenv_settle(e);
	paste_btree_checkpoint(e->kv->tree);
	kenv_settle(e);
	return paste_store_nfree(e->st);
}

/* Member entries of collection id (kind kind). */
static inline uint64_t members_of(struct kenv *e, uint64_t id, uint8_t kind)
{
	uint8_t p[10];
	return tree_count(e, p, kv_member_prefix(p, id, kind));
}

/* Deterministic bytes: byte i of stream s. */
static inline uint8_t pat(uint32_t s, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)s * 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	return (uint8_t)(x * 0x94D049BB133111EBull >> 56);
}

static inline void fill(uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(s, i);
}

#endif
