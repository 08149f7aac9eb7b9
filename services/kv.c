/*
 * kv.c - the key-value core under pkvs's front ends (kv.h).
 *
 * Where a value's bytes live:
 *  - values that landed in a packet buffer and are longer than KV_PACK_MAX
 *    stay there, zero copy: the buffer is held (paste_body_feed) and the
 *    tree names (buffer, offset, length);
 *  - values of at most KV_PACK_MAX bytes, and values that arrived in DRAM
 *    (a RESP command reassembled across reads, an INCR result), are
 *    copied densely to the store's append point (paste_append_copy): a
 *    64-byte value would otherwise pin a whole 2 KiB buffer. A copy of
 *    <= 512 bytes costs ~20-50 ns, less than holding a buffer and
 *    refilling the ring slot;
 *  - the tree's cleaner moves the values that outlive their neighbours
 *    (lib/btree_clean.c).
 * Every buffer a value names holds one reference for the tree (and one per
 * log record naming it); the append point holds one more on the buffer it
 * fills.
 *
 * A full store: a write that finds no room asks the tree for it
 * (paste_btree_make_room: a checkpoint, then the cleaner) and tries once
 * more; only then is it refused (-ENOSPC: Redis's OOM error, HTTP 507).
 * The body reserve stays free for the ports' rings and for deletes.
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
	kv->app = (struct paste_append)PASTE_APPEND_INIT;
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
	paste_append_close(kv->store, &kv->app);
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

/* A write found the store full: give back what a checkpoint and the
 * cleaner can (paste_btree_make_room) until the reserve and need bytes
 * more are free. True when they are. */
static bool make_room(struct kv *kv, uint64_t need)
{
	uint32_t bs = paste_store_geom(kv->store)->buf_size;
	uint64_t want = kv_reserve(kv) + need / bs + 2;
	kv->n.room_calls++;
	int64_t r = paste_btree_make_room(kv->tree, want > UINT32_MAX ? UINT32_MAX : (uint32_t)want,
					  KV_ROOM_STEPS);
	return r >= 0 && (uint64_t)r >= want;
}

void kv_admit(struct kv *kv, uint64_t len)
{
	uint32_t bs = paste_store_geom(kv->store)->buf_size;
	if ((uint64_t)paste_store_nfree(kv->store) < kv_reserve(kv) + len / bs + 2)
		make_room(kv, len);
}

static int set_extents(struct kv *kv, const void *key, uint32_t klen,
		       const struct paste_extent *ext, uint32_t n, bool *created)
{
	bool absent = created && !kv_exists(kv, key, klen);
	int r = paste_btree_set(kv->tree, key, klen, ext, n, NULL);
	if (r == -ENOSPC && make_room(kv, 0))
		r = paste_btree_set(kv->tree, key, klen, ext, n, NULL);
	if (r == 0) {
		kv->n.sets++;
		if (created)
			*created = absent;
	}
	return r;
}

/* Copy a value densely to the append point (the reserve kept free for
 * the rings and for deletes), then set it. */
static int set_copy(struct kv *kv, const void *key, uint32_t klen, const void *val, size_t len,
		    bool *created)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n = 0;
	int r = paste_append_copy(kv->store, &kv->app, val, len, kv_reserve(kv), ext,
				  PASTE_BTREE_MAX_EXTENTS, &n);
	if (r == -ENOSPC && make_room(kv, len))
		r = paste_append_copy(kv->store, &kv->app, val, len, kv_reserve(kv), ext,
				      PASTE_BTREE_MAX_EXTENTS, &n);
	if (r)
		return r == -E2BIG ? -EFBIG : r;
	r = set_extents(kv, key, klen, ext, n, created);
	for (uint32_t i = 0; i < n; i++)
		paste_store_unref(kv->store, ext[i].buf, false);   /* the tree took its own */
	return r;
}

int kv_set_bytes(struct kv *kv, const void *key, uint32_t klen, const void *val,
		 size_t len, bool *created)
{
	if (len > kv->max_value)
		return -EFBIG;
	if (!len)
		return set_extents(kv, key, klen, NULL, 0, created);
	return set_copy(kv, key, klen, val, len, created);
}

int kv_set_body(struct kv *kv, const void *key, uint32_t klen, struct paste_body *b,
		bool *created)
{
	int r;
	if (b->error) {
		/* Its bytes were dropped: the store was below its reserve.
		 * Make room for the next write; this one is refused. */
		make_room(kv, b->len);
		r = -ENOSPC;
	} else if (b->len <= KV_PACK_MAX && b->n == 1) {
		/* Small: packed, and the held packet buffer goes back at once
		 * (a 64-byte value must not pin a receive buffer). */
		r = set_copy(kv, key, klen, paste_store_buf(kv->store, b->ext[0].buf) + b->ext[0].off,
			     b->ext[0].len, created);
	} else {
		r = set_extents(kv, key, klen, b->ext, b->n, created);
	}
	paste_body_release(b, kv->store);
	return r;
}

int kv_del(struct kv *kv, const void *key, uint32_t klen)
{
	int r = paste_btree_del(kv->tree, key, klen, NULL);
	if (r == -ENOSPC && make_room(kv, 0))
		r = paste_btree_del(kv->tree, key, klen, NULL);
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
