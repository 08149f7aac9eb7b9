/*
 * kv_layout.c - which layout of keys a store's tree holds, and the
 * conversion of a tree of the first one (kv.h, kv_layout_open).
 *
 * Layout 1 (pkvs before databases and types): every tree key was a
 * client's key as it is, every value a string. Layout 2 (kv_key.c):
 * [database prefix][key], types, members, the expiry index; the entry
 * [KV_PFX_SYS]"layout" says so, written when a store's tree is first
 * opened empty. A tree with keys and without it is of layout 1 (a store
 * of an earlier pkvs, or one `paste-store upgrade` converted from
 * version 2), and is converted here, in place, at open:
 *
 *  1. Database 0 gets a prefix P that no layout-1 key starts with (0
 *     when it is free): then every key outside P's range is still a
 *     layout-1 key and every key inside it a converted one, whenever the
 *     conversion stops. [KV_PFX_SYS]"relayout" = P and the database map
 *     are written in one group.
 *  2. In groups of up to KV_RELAYOUT_BATCH keys: [P][key] is put with
 *     the key's value (the same extents: nothing is copied) and the
 *     layout-1 key deleted.
 *  3. "layout" is written and "relayout" deleted, in one group.
 *
 * A crash anywhere leaves whole groups: the next open goes on from what
 * the tree holds. Cost: a walk of the tree and two records per key, once.
 * A tree whose keys begin with every byte 0..KV_PHYS_DBS-1 leaves no
 * prefix free and is refused (-EUCLEAN).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

#define KV_RELAYOUT_BATCH 256u

static const uint8_t layout_key[] = { KV_PFX_SYS, 'l', 'a', 'y', 'o', 'u', 't' };
static const uint8_t relayout_key[] = { KV_PFX_SYS, 'r', 'e', 'l', 'a', 'y', 'o', 'u', 't' };
static const uint8_t layout_now[] = { '2' };

static bool is_sys(const uint8_t *t, uint32_t tlen)
{
	return (tlen == sizeof(layout_key) && !memcmp(t, layout_key, tlen)) ||
	       (tlen == sizeof(relayout_key) && !memcmp(t, relayout_key, tlen)) ||
	       (tlen == 6 && !memcmp(t, "\xfd" "dbmap", 6));
}

static int read_small(struct kv *kv, const uint8_t *t, uint32_t tlen, uint8_t *out, uint32_t cap,
		      uint32_t *len)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n;
	int r = paste_btree_get(kv->tree, t, tlen, ext, &n, len);
	if (r)
		return r;
	if (*len > cap)
		return -EBADMSG;
	paste_store_read(kv->store, ext, n, 0, out, *len);
	return 0;
}

/* One group of conversions: 1 when it converted some, 0 when none are
 * left, or a negative errno. */
static int convert_batch(struct kv *kv, uint8_t p)
{
	struct {
		uint32_t tlen;
		uint8_t t[PASTE_BTREE_MAX_KEY];
	} *batch = malloc(sizeof(*batch) * KV_RELAYOUT_BATCH);
	if (!batch)
		return -ENOMEM;
	uint32_t nb = 0;
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, NULL, 0);
	const uint8_t *t;
	uint32_t tlen;
	while (nb < KV_RELAYOUT_BATCH && paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) == 1) {
		if (t[0] == p || is_sys(t, tlen))
			continue;
		batch[nb].tlen = tlen;
		memcpy(batch[nb].t, t, tlen);
		nb++;
	}
	int r = nb ? kv_begin(kv) : 0;
	for (uint32_t i = 0; i < nb && r == 0; i++) {
		struct kv_obj o;
		struct kv_key k;
		kv_key_init(kv, &k, 0, batch[i].t, batch[i].tlen);
		if ((r = paste_btree_get(kv->tree, batch[i].t, batch[i].tlen, o.ext, &o.n, &o.len)) == 0)
			r = kv_put(kv, &k, KV_STRING, o.ext, o.n, KV_NO_TTL, NULL);
		if (r == 0)
			r = kv_tree_del(kv, batch[i].t, batch[i].tlen);
	}
	if (nb && r == 0)
		r = kv_commit(kv);
	else if (nb)
		kv_abort(kv);
	free(batch);
	return r < 0 ? r : nb > 0;
}

int kv_layout_open(struct kv *kv)
{
	uint8_t v[8];
	uint32_t len;
	if (read_small(kv, layout_key, sizeof(layout_key), v, sizeof(v), &len) == 0)
		return len == 1 && v[0] == layout_now[0] ? 0 : -EPROTO;
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	int r;
	if (bi.keys) {
		uint8_t p;
		if (read_small(kv, relayout_key, sizeof(relayout_key), &p, 1, &len) != 0) {
			/* A prefix no layout-1 key starts with, for database 0. */
			uint32_t b = 0;
			while (b < KV_PHYS_DBS && kv_prefix_used(kv, (uint8_t)b))
				b++;
			if (b == KV_PHYS_DBS)
				return -EUCLEAN;
			p = (uint8_t)b;
			if ((r = kv_begin(kv)) != 0)
				return r;
			kv->dbmap[0] = p;
			for (uint32_t d = 1; d < KV_MAX_DBS; d++)
				kv->dbmap[d] = (uint8_t)(d == p ? 0 : d);   /* p's own database takes 0 */
			r = kv_tree_put_bytes(kv, relayout_key, sizeof(relayout_key), &p, 1);
			if (r == 0)
				r = kv_db_save(kv);
			if (r == 0)
				r = kv_commit(kv);
			else
				kv_abort(kv);
			if (r)
				return r;
		} else if (len != 1 || p >= KV_PHYS_DBS || kv->dbmap[0] != p) {
			return -EBADMSG;
		}
		/* A checkpoint between groups keeps the log from filling
		 * (none can happen inside one). */
		while ((r = convert_batch(kv, p)) > 0)
			if ((r = paste_btree_maintain(kv->tree)) < 0)
				break;
		if (r < 0)
			return r;
	}
	if (!bi.keys)        /* a new tree: one entry, no group needed */
		return kv_tree_put_bytes(kv, layout_key, sizeof(layout_key), layout_now, sizeof(layout_now));
	if ((r = kv_begin(kv)) != 0)
		return r;
	r = kv_tree_put_bytes(kv, layout_key, sizeof(layout_key), layout_now, sizeof(layout_now));
	if (r == 0)
		r = kv_tree_del(kv, relayout_key, sizeof(relayout_key));
	if (r == 0)
		r = kv_commit(kv);
	else
		kv_abort(kv);
	if (r == 0)
		r = paste_btree_checkpoint(kv->tree);    /* the conversion's records out of the log */
	return r;
}
