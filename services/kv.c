/*
 * kv.c - the key-value store shared by pkvs's front ends (kv.h).
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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv.h"
#include "metrics.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int kv_acquire(struct kv_handle *h, struct server *s, struct paste_error *err)
{
	if (h->kv) {
		h->refs++;
		return 0;
	}
	if (s->cfg.threads != 1)
		return paste_error_set(err, -EINVAL, "the key-value store runs in one thread "
				       "(--threads 1): its tree has one owner; shard with twemproxy "
				       "to use more cores");
	struct kv *kv = calloc(1, sizeof(*kv));
	if (!kv)
		return paste_error_set(err, -ENOMEM, "out of memory");
	kv->store = s->store;
	kv->pack_buf = PASTE_NO_BUF;
	err->msg[0] = 0;
	int r = paste_wal_open(&kv->wal, s->store, s->workers[0].persist, err);
	if (r) {
		free(kv);
		return r;
	}
	if (err->msg[0])
		fprintf(stderr, "%s: log recovery: %s\n", s->cfg.name, err->msg);
	struct paste_btree_config tc = h->cfg.tree;
	tc.lane = 0;
	err->msg[0] = 0;
	r = paste_btree_open(&kv->tree, s->store, kv->wal, s->workers[0].persist, &tc, err);
	if (r) {
		paste_wal_close(kv->wal);
		free(kv);
		return r;
	}
	if (err->msg[0])
		fprintf(stderr, "%s: tree recovery: %s\n", s->cfg.name, err->msg);
	uint32_t bs = paste_store_geom(s->store)->buf_size;
	/* At most PASTE_BTREE_MAX_EXTENTS buffers per value: a body never
	 * takes more than max_held's worth (paste_body(3)). */
	kv->bc = (struct paste_body_config){ .copy = h->cfg.copy,
					     .max_held = (uint64_t)PASTE_BTREE_MAX_EXTENTS * bs };
	uint64_t cap = paste_body_max(&kv->bc, s->store);
	kv->max_value = h->cfg.max_value && h->cfg.max_value < cap ? h->cfg.max_value : cap;
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	kv->recovery_ns = bi.recovery_ns;
	kv->started_ms = mono_ms();
	h->kv = kv;
	h->refs = 1;
	return 0;
}

void kv_release(struct kv_handle *h)
{
	if (!h->kv || --h->refs)
		return;
	struct kv *kv = h->kv;
	if (kv->pack_buf != PASTE_NO_BUF) {
		paste_store_unref(kv->store, kv->pack_buf, false);
		kv->pack_buf = PASTE_NO_BUF;
	}
	paste_btree_close(kv->tree);
	paste_wal_close(kv->wal);
	free(kv);
	h->kv = NULL;
}

void kv_banner(struct server *s, struct kv_handle *h)
{
	if (h->banner_done)
		return;
	h->banner_done = true;
	struct kv *kv = h->kv;
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	fprintf(stderr, "%s: tree: %" PRIu64 " keys, height %u, %u of %u pages; recovered in "
		"%.1f ms (%" PRIu64 " log records replayed after checkpoint LSN %" PRIu64 ")\n",
		s->cfg.name, bi.keys, bi.height, bi.pages_used, bi.pages_total,
		(double)bi.recovery_ns / 1e6, bi.replayed, bi.ckpt_lsn);
	fprintf(stderr, "%s: values up to %" PRIu64 " bytes (%u-byte buffers; --buf-size for more)\n",
		s->cfg.name, kv->max_value, paste_store_geom(s->store)->buf_size);
}

void kv_pass(struct kv *kv, struct worker *w)
{
	(void)w;
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
	bool absent = false;
	if (created) {
		struct paste_extent tmp[PASTE_BTREE_MAX_EXTENTS];
		uint32_t tn, tl;
		absent = paste_btree_get(kv->tree, key, klen, tmp, &tn, &tl) == -ENOENT;
	}
	int r = paste_btree_set(kv->tree, key, klen, ext, n, NULL);
	if (r == 0) {
		srv_bump(&kv->n.sets);
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
		srv_bump(&kv->n.dels);
		return 1;
	}
	return r;
}

int kv_get(struct kv *kv, const void *key, uint32_t klen, struct paste_extent *ext,
	   uint32_t *n, uint32_t *len)
{
	srv_bump(&kv->n.gets);
	int r = paste_btree_get(kv->tree, key, klen, ext, n, len);
	srv_bump(r == 0 ? &kv->n.hits : &kv->n.misses);
	return r;
}

/* Bytes [from, from + cap) of a value's extents into out; returns how many. */
static size_t copy_extents(struct paste_store *st, const struct paste_extent *ext, uint32_t n,
			   uint64_t from, void *out, size_t cap)
{
	size_t got = 0;
	for (uint32_t i = 0; i < n && got < cap; i++) {
		if (from >= ext[i].len) {
			from -= ext[i].len;
			continue;
		}
		size_t k = ext[i].len - from;
		if (k > cap - got)
			k = cap - got;
		memcpy((uint8_t *)out + got, paste_store_buf(st, ext[i].buf) + ext[i].off + from, k);
		got += k;
		from = 0;
	}
	return got;
}

size_t kv_copy_value(const struct kv *kv, const struct paste_extent *ext, uint32_t n,
		     uint64_t from, void *out, size_t cap)
{
	return copy_extents(kv->store, ext, n, from, out, cap);
}

int kv_send_value(struct worker *w, uint32_t conn, const struct paste_extent *ext,
		  uint32_t n, uint64_t from, uint64_t len)
{
	if (len <= KV_PACK_MAX) {
		/* Small values are copied into the reply, as they were into
		 * the store: a copy of <= 512 bytes is cheaper than pinning
		 * the buffer (two atomics) and giving the send an iovec of
		 * its own, which pipelined GETs of 64-byte values paid. */
		uint8_t tmp[KV_PACK_MAX];
		size_t got = copy_extents(w->srv->store, ext, n, from, tmp, (size_t)len);
		int r = paste_port_send(w->port, conn, tmp, got, PASTE_SEND_DURABLE);
		return r == -EIO ? r : 0;
	}
	for (uint32_t i = 0; i < n && len; i++) {
		if (from >= ext[i].len) {
			from -= ext[i].len;
			continue;
		}
		uint64_t k = ext[i].len - from;
		if (k > len)
			k = len;
		int r = paste_port_send_store(w->port, conn, ext[i].buf, ext[i].off + (uint32_t)from,
					      (uint32_t)k, PASTE_SEND_DURABLE);
		if (r == -EIO)
			return r;
		len -= k;
		from = 0;
	}
	return 0;
}

size_t kv_stats_json(struct kv *kv, char *out, size_t at, size_t cap)
{
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	char tmp[1024];
	int n = snprintf(tmp, sizeof(tmp),
		"\"keys\":%" PRIu64 ",\"tree_height\":%u,\"tree_pages\":%u,\"tree_pages_total\":%u,"
		"\"checkpoints\":%" PRIu64 ",\"ckpt_lsn\":%" PRIu64 ",\"replayed\":%" PRIu64 ","
		"\"recovery_ms\":%.3f,\"kv_sets\":%" PRIu64 ",\"kv_gets\":%" PRIu64 ","
		"\"kv_hits\":%" PRIu64 ",\"kv_misses\":%" PRIu64 ",\"kv_dels\":%" PRIu64 ","
		"\"max_value\":%" PRIu64 ",\"point_index_keys\":%" PRIu64 ","
		"\"point_index_bytes\":%" PRIu64 ",\"hinted_sets\":%" PRIu64 ",\"hinted_dels\":%" PRIu64 ",",
		bi.keys, bi.height, bi.pages_used, bi.pages_total, bi.checkpoints, bi.ckpt_lsn,
		bi.replayed, (double)bi.recovery_ns / 1e6,
		atomic_load(&kv->n.sets), atomic_load(&kv->n.gets), atomic_load(&kv->n.hits),
		atomic_load(&kv->n.misses), atomic_load(&kv->n.dels), kv->max_value,
		bi.point_keys, bi.point_bytes, bi.hinted_sets, bi.hinted_dels);
	(void)n;
	return http_put_str(out, at, cap, tmp);
}

int kv_svc_open(struct server *s, const void *cfg, void **state, struct paste_error *err)
{
	struct kv_handle *h = (struct kv_handle *)cfg;   /* shared and counted: mutable by design */
	int r = kv_acquire(h, s, err);
	if (r == 0)
		*state = h;
	return r;
}

void kv_svc_close(struct server *s, void *state)
{
	(void)s;
	if (state)
		kv_release(state);
}

void kv_svc_banner(struct server *s, void *state)
{
	kv_banner(s, state);
}

void kv_svc_pass(struct worker *w, void *state)
{
	kv_pass(((struct kv_handle *)state)->kv, w);
}

size_t kv_metrics(struct server *s, void *state, char *out, size_t at, size_t cap)
{
	(void)s;
	struct kv *kv = ((struct kv_handle *)state)->kv;
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	at = metrics_one(out, at, cap, "paste_tree_keys", "gauge", "Keys in the B+tree.", bi.keys);
	at = metrics_one(out, at, cap, "paste_tree_pages", "gauge", "Node pages the tree uses.",
			 bi.pages_used);
	at = metrics_one(out, at, cap, "paste_tree_pages_total", "gauge",
			 "Node pages in the store's node area.", bi.pages_total);
	at = metrics_one(out, at, cap, "paste_tree_point_index_bytes", "gauge",
			 "DRAM of the point index (0: none).", bi.point_bytes);
	at = metrics_one(out, at, cap, "paste_tree_hinted_sets_total", "counter",
			 "Overwrites that reached their leaf entry by the point index's hint.",
			 bi.hinted_sets);
	at = metrics_one(out, at, cap, "paste_tree_hinted_dels_total", "counter",
			 "Deletes that reached their leaf entry by the point index's hint.",
			 bi.hinted_dels);
	at = metrics_one(out, at, cap, "paste_tree_checkpoints_total", "counter",
			 "Tree checkpoints since start.", bi.checkpoints);
	at = metrics_one(out, at, cap, "paste_tree_records_since_checkpoint", "gauge",
			 "Log records the next recovery would replay.", bi.records_since);
	at = metrics_one(out, at, cap, "paste_kv_sets_total", "counter", "SETs and PUTs applied.",
			 atomic_load(&kv->n.sets));
	at = metrics_one(out, at, cap, "paste_kv_dels_total", "counter", "Keys deleted.",
			 atomic_load(&kv->n.dels));
	at = metrics_one(out, at, cap, "paste_kv_hits_total", "counter", "Lookups that found the key.",
			 atomic_load(&kv->n.hits));
	return metrics_one(out, at, cap, "paste_kv_misses_total", "counter",
			   "Lookups that did not find the key.", atomic_load(&kv->n.misses));
}
