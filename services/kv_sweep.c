/*
 * kv_sweep.c - the sweeper (kv.h): deletes what dropped collections and
 * flushed databases left, in bounded steps.
 *
 * DEL of a hash of a million fields, or FLUSHDB of a million keys, writes
 * O(1) records (the key's delete or the new database map, and a grave);
 * the entries they orphaned are deleted here, PASTE_BTREE_RANGE_MAX at a
 * time with one range-delete record each, a few per event-loop pass. The
 * graves:
 *
 *   [KV_PFX_GRAVE]['c'][id]      members [KV_PFX_MEMBER][id]...; a member's
 *                                value in chunks gets a 'c' grave first
 *   [KV_PFX_GRAVE]['d'][prefix]  keys [prefix]...; a collection among
 *                                them gets a 'c' grave of its own first
 *
 * (and the chunks of strings too long for one entry: kv_big.c). A grave
 * goes once its range is empty. Every step is idempotent (a range delete
 * deletes what is still there), so a crash anywhere leaves graves that the
 * next run finishes. The grave of a string being written stays until its
 * write ends.
 */
#include <errno.h>
#include <string.h>

#include "kv.h"

/* The keys of [lo, hi) up to the range limit: *cut the exclusive end of
 * the first PASTE_BTREE_RANGE_MAX of them (the range's own end when it
 * holds no more). Collections among them (a flushed database's) get
 * graves when `colls`; otherwise (a collection's members) the chunks of
 * values too long for one entry do (kv_elem). 0, or a negative errno. */
static int bound(struct kv *kv, const uint8_t *lo, uint32_t lolen, const uint8_t *hi,
		 uint32_t hilen, bool colls, uint8_t *cut, uint32_t *cutlen)
{
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, lo, lolen);
	const uint8_t *t;
	uint32_t tlen, n, len, seen = 0;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint64_t ids[PASTE_BTREE_RANGE_MAX];
	uint32_t nids = 0;
	memcpy(cut, hi, hilen);
	*cutlen = hilen;
	while (paste_btree_cursor_next(&c, &t, &tlen, ext, &n, &len) == 1 &&
	       paste_btree_keycmp(t, tlen, hi, hilen) < 0) {
		if (seen == PASTE_BTREE_RANGE_MAX) {
			memcpy(cut, t, tlen);
			*cutlen = tlen;
			break;
		}
		seen++;
		const struct paste_btree_attr *a = paste_btree_cursor_attr(&c);
		if (!colls) {
			/* A member whose value is in chunks: they go too. */
			uint64_t big = 0;
			uint32_t at;
			if (kv_elem_kind(t, tlen) && (a->tag & KV_TAG_TYPE) == KV_TAG_BIG &&
			    kv_elem_entry(kv, a->tag, ext, n, &at, &len, &big) == 0)
				ids[nids++] = big;   /* (unreadable: deleted with the range) */
		} else if (kv_is_coll((enum kv_type)(a->tag & KV_TAG_TYPE))) {
			uint8_t rec[8] = { 0 };
			uint32_t next = 0, l = 0;
			if ((a->tag & KV_TAG_LONG) && kv_long_span(kv, ext, n, &next, &l))
				continue;             /* unreadable: deleted with the range */
			paste_store_read(kv->store, ext, n, next ? 4 + l : 0, rec, sizeof(rec));
			ids[nids++] = kv_be64(rec);
		}
	}
	for (uint32_t i = 0; i < nids; i++) {
		uint8_t g[16];
		uint32_t glen = kv_grave_key(g, KV_GRAVE_COLL, ids[i]);
		int r = kv_tree_set(kv, g, glen);
		if (r)
			return r;
	}
	return 0;
}

/* One range delete of the first grave's range; the grave goes once its
 * range is empty. 1: did something, 0: no graves, or a negative errno. */
static int step(struct kv *kv)
{
	uint8_t first = KV_PFX_GRAVE;
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, &first, 1);
	const uint8_t *t;
	uint32_t tlen;
	/* The first grave but those of strings still being written (their
	 * chunks are theirs until the write ends). */
	do {
		if (paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) != 1 || t[0] != KV_PFX_GRAVE)
			return 0;
	} while (tlen == 10 && t[1] == KV_GRAVE_COLL && kv_writing(kv, kv_be64(t + 2)));
	uint8_t g[16];
	uint32_t glen = tlen < sizeof(g) ? tlen : (uint32_t)sizeof(g);
	memcpy(g, t, glen);
	uint8_t lo[16], hi[16], cut[PASTE_BTREE_MAX_KEY];
	uint32_t lolen, hilen, cutlen;
	uint64_t id = glen == 10 ? kv_be64(g + 2) : 0;
	bool colls;
	if (glen == 10 && g[1] == KV_GRAVE_COLL && id < UINT64_MAX) {
		lolen = kv_member_prefix(lo, id, 0) - 1;     /* [FF][id] */
		hilen = kv_member_prefix(hi, id + 1, 0) - 1;
		colls = false;
	} else if (glen == 10 && g[1] == KV_GRAVE_DB && id < KV_PHYS_DBS) {
		lo[0] = (uint8_t)id;
		hi[0] = (uint8_t)(id + 1);
		lolen = hilen = 1;
		colls = true;
	} else {
		/* Not a grave this layer writes: drop it (said in the count). */
		int r = kv_tree_del(kv, g, glen);
		return r < 0 && r != -ENOENT ? r : 1;
	}
	int r = bound(kv, lo, lolen, hi, hilen, colls, cut, &cutlen);
	if (r)
		return r;
	uint64_t deleted = 0;
	r = paste_btree_delrange(kv->tree, lo, lolen, cut, cutlen, &deleted, NULL);
	if (r == -ENOSPC && kv_make_room(kv, 0))
		r = paste_btree_delrange(kv->tree, lo, lolen, cut, cutlen, &deleted, NULL);
	if (r)
		return r;
	kv->n.swept += deleted;
	if (cutlen == hilen && memcmp(cut, hi, hilen) == 0) {
		/* The whole range went: so does its grave. */
		r = kv_tree_del(kv, g, glen);
		if (r < 0 && r != -ENOENT)
			return r;
		kv->n.lazyfreed += g[1] == KV_GRAVE_COLL;
	}
	return 1;
}

uint64_t kv_sweep_pending(struct kv *kv)
{
	uint8_t first = KV_PFX_GRAVE;
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, &first, 1);
	const uint8_t *t;
	uint32_t tlen;
	uint64_t n = 0;
	while (paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) == 1 && t[0] == KV_PFX_GRAVE)
		n++;
	return n;
}

bool kv_sweep_step(struct kv *kv, uint32_t budget)
{
	for (uint32_t i = 0; i < budget; i++) {
		int r = step(kv);
		if (r <= 0) {
			if (r == 0)
				kv->sweep_due = false;
			return false;
		}
	}
	return true;
}
