/*
 * kv.c - the key-value core under pkvs's front ends (kv.h).
 *
 * Where a value's bytes live:
 *  - values that landed in a packet buffer and are longer than KV_PACK_MAX
 *    stay there, zero copy: the buffer is held (paste_body_feed) and the
 *    tree names (buffer, offset, length);
 *  - values of at most KV_PACK_MAX bytes are copied densely into a shared
 *    "pack" buffer: a 64-byte value would otherwise pin a whole 2 KiB
 *    buffer (32x the space; 1 M small keys would need 2 GiB of store). A
 *    copy of <= 512 bytes costs ~20-50 ns, less than holding a buffer and
 *    refilling the ring slot;
 *  - values that arrived in DRAM (a RESP command reassembled across reads,
 *    an INCR result) are copied into fresh store buffers.
 * Every buffer a value names holds one reference for the tree (and one per
 * log record naming it); the pack buffer holds one more for us until it
 * is full.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

int kv_open(struct kv **out, struct paste_store *st, struct paste_persist *p,
	    const struct kv_config *cfg, struct paste_error *err)
{
	struct kv *kv = calloc(1, sizeof(*kv));
	if (!kv)
		return paste_error_set(err, -ENOMEM, "out of memory");
	kv->store = st;
	kv->pack_buf = PASTE_NO_BUF;
	char notes[sizeof(err->msg)] = "";
	err->msg[0] = 0;
	/* The tree begins the log once it has passed its checks: a start
	 * refused for damage writes nothing. */
	int r = paste_wal_recover(&kv->wal, st, p, err);
	if (r) {
		free(kv);
		return r;
	}
	if (err->msg[0])
		snprintf(notes, sizeof(notes), "log recovery: %.200s", err->msg);
	err->msg[0] = 0;
	r = paste_btree_open(&kv->tree, st, kv->wal, p, &cfg->tree, err);
	if (r) {
		paste_wal_close(kv->wal);
		free(kv);
		return r;
	}
	if (err->msg[0]) {
		size_t k = strlen(notes);
		snprintf(notes + k, sizeof(notes) - k, "%stree recovery: %.200s", k ? "; " : "", err->msg);
	}
	memcpy(err->msg, notes, sizeof(notes));
	uint32_t bs = paste_store_geom(st)->buf_size;
	/* At most PASTE_BTREE_MAX_EXTENTS buffers per value: a body never
	 * takes more than max_held's worth (paste_body(3)). */
	kv->bc = (struct paste_body_config){ .copy = cfg->copy,
					     .max_held = (uint64_t)PASTE_BTREE_MAX_EXTENTS * bs };
	uint64_t cap = paste_body_max(&kv->bc, st);
	kv->max_value = cfg->max_value && cfg->max_value < cap ? cfg->max_value : cap;
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	kv->recovery_ns = bi.recovery_ns;
	*out = kv;
	return 0;
}

void kv_close(struct kv *kv)
{
	if (!kv)
		return;
	if (kv->pack_buf != PASTE_NO_BUF)
		paste_store_unref(kv->store, kv->pack_buf, false);
	paste_btree_close(kv->tree);
	paste_wal_close(kv->wal);
	free(kv);
}

void kv_pass(struct kv *kv)
{
	/* An error here is the store's failure: the store is failed already,
	 * every later reply says so and the server drains and exits. */
	paste_btree_maintain(kv->tree);
}

uint64_t kv_max_value(const struct kv *kv)
{
	return kv->max_value;
}

static int set_extents(struct kv *kv, const void *key, uint32_t klen,
		       const struct paste_extent *ext, uint32_t n, bool *created)
{
	bool absent = created && !kv_exists(kv, key, klen);
	int r = paste_btree_set(kv->tree, key, klen, ext, n, NULL);
	if (r == 0) {
		kv->n.sets++;
		if (created)
			*created = absent;
	}
	return r;
}

/* Copy a small value into the pack buffer; its extent in *e. */
static int pack_value(struct kv *kv, const void *val, uint32_t len, struct paste_extent *e)
{
	uint32_t bs = paste_store_geom(kv->store)->buf_size;
	if (kv->pack_buf == PASTE_NO_BUF || kv->pack_used + len > bs) {
		uint32_t idx;
		if (paste_store_alloc(kv->store, &idx, 1) != 1)
			return -ENOSPC;
		if (kv->pack_buf != PASTE_NO_BUF)
			paste_store_unref(kv->store, kv->pack_buf, false);
		kv->pack_buf = idx;
		kv->pack_used = 0;
	}
	memcpy(paste_store_buf(kv->store, kv->pack_buf) + kv->pack_used, val, len);
	*e = (struct paste_extent){ kv->pack_buf, kv->pack_used, len };
	kv->pack_used += (len + 7u) & ~7u;   /* 8-byte aligned values */
	if (kv->pack_used > bs)
		kv->pack_used = bs;
	return 0;
}

int kv_set_bytes(struct kv *kv, const void *key, uint32_t klen, const void *val,
		 size_t len, bool *created)
{
	if (len > kv->max_value)
		return -EFBIG;
	if (len <= KV_PACK_MAX) {
		struct paste_extent e;
		if (!len)
			return set_extents(kv, key, klen, NULL, 0, created);
		int r = pack_value(kv, val, (uint32_t)len, &e);
		return r ? r : set_extents(kv, key, klen, &e, 1, created);
	}
	/* Larger: a dense copy into fresh buffers, as a body is copied. */
	struct paste_body b;
	kv_body_idle(&b);
	if (paste_body_begin(&b, &kv->bc, kv->store, len))
		return -EFBIG;
	paste_body_copy(&b, &kv->bc, kv->store, val, len);   /* failed: b.error */
	return kv_set_body(kv, key, klen, &b, created);
}

int kv_set_body(struct kv *kv, const void *key, uint32_t klen, struct paste_body *b,
		bool *created)
{
	int r;
	if (b->error) {
		r = -ENOSPC;
	} else if (b->len <= KV_PACK_MAX && b->n == 1) {
		/* Small: packed, and the held packet buffer goes back at once. */
		struct paste_extent e;
		r = pack_value(kv, paste_store_buf(kv->store, b->ext[0].buf) + b->ext[0].off,
			       b->ext[0].len, &e);
		if (r == 0)
			r = set_extents(kv, key, klen, &e, 1, created);
	} else {
		r = set_extents(kv, key, klen, b->ext, b->n, created);
	}
	paste_body_release(b, kv->store);
	return r;
}

int kv_del(struct kv *kv, const void *key, uint32_t klen)
{
	int r = paste_btree_del(kv->tree, key, klen, NULL);
	if (r == -ENOENT)
		return 0;
	if (r == 0) {
		kv->n.dels++;
		return 1;
	}
	return r;
}

int kv_get(struct kv *kv, const void *key, uint32_t klen, struct paste_extent *ext,
	   uint32_t *n, uint32_t *len)
{
	kv->n.gets++;
	int r = paste_btree_get(kv->tree, key, klen, ext, n, len);
	if (r == 0)
		kv->n.hits++;
	else
		kv->n.misses++;
	return r;
}

bool kv_exists(struct kv *kv, const void *key, uint32_t klen)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	return klen && klen <= PASTE_BTREE_MAX_KEY &&
	       paste_btree_get(kv->tree, key, klen, ext, &n, &len) == 0;
}

size_t kv_copy_value(const struct kv *kv, const struct paste_extent *ext, uint32_t n,
		     uint64_t from, void *out, size_t cap)
{
	return paste_store_read(kv->store, ext, n, from, out, cap);
}
