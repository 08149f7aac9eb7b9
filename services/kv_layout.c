/*
 * kv_layout.c - which layout of keys a store's tree holds, and the
 * conversion of a tree of the first one (kv.h, kv_layout_open).
 *
 * Layout 1 (pkvs before databases and types): every tree key was a
 * client's key as it is, every value a string, every entry tag 0 without
 * a word. Layout
 * 2 (kv_key.c): [database prefix][key], types, members, the expiry index;
 * the entry [KV_PFX_SYS]"layout" says so, written when a store's tree is
 * first opened empty (and after a clear). pkvs's own entries carry the tag
 * KV_TAG_SYS, so a layout-1 key that happens to be named like one (any
 * bytes were a key) is told apart from it. A tree with keys and without a
 * tagged "layout" is of layout 1 (a store of an earlier pkvs, or one
 * `paste-store upgrade` converted from version 2), and is converted here,
 * in place, at open:
 *
 *  1. Database 0 gets a prefix P that no layout-1 key starts with (0
 *     when it is free): then every key outside P's range is still a
 *     layout-1 key and every key inside it a converted one, whenever the
 *     conversion stops. [KV_PFX_SYS]"relayout" = P and the database map
 *     are written in one group, with the layout-1 keys named like those
 *     two converted first (their entries are about to be written over).
 *  2. In groups of up to relayout_batch keys: [P][key] is put with the
 *     key's value (the same extents: nothing is copied; a long key whose
 *     name and value do not fit one entry becomes a string in chunks,
 *     kv_big.c, whose chunk entries are tagged, so the walk tells them
 *     from layout-1 keys) and the layout-1 key deleted.
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
static const uint8_t map_key[] = { KV_PFX_SYS, 'd', 'b', 'm', 'a', 'p' };
static const uint8_t layout_now[] = { '2' };

/* Layout-1 key t becomes database 0's key [P][t] (dbmap[0] is P),
 * with the same value, and goes. */
static int convert_one(struct kv *kv, const uint8_t *t, uint32_t tlen)
{
	struct kv_obj o;
	struct kv_key k;
	kv_key_init(kv, &k, 0, t, tlen);
	int r = paste_btree_get(kv->tree, t, tlen, o.ext, &o.n, &o.len);
	if (r == 0)
		r = kv_put(kv, &k, KV_STRING, o.ext, o.n, KV_NO_TTL, NULL);
	if (r == 0)
		r = kv_tree_del(kv, t, tlen);
	return r;
}

/* One group of conversions: 1 when it converted some, 0 when none are
 * left, or a negative errno. */
static int convert_batch(struct kv *kv, uint8_t p, uint32_t max)
{
	struct {
		uint32_t tlen;
		uint8_t t[PASTE_BTREE_MAX_KEY];
	} *batch = malloc(sizeof(*batch) * max);
	if (!batch)
		return -ENOMEM;
	uint32_t nb = 0;
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, NULL, 0);
	const uint8_t *t;
	uint32_t tlen;
	/* Converted keys leave the walk's way: those before P are deleted,
	 * P's range is stepped over, pkvs's own entries are skipped. */
	while (nb < max && paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) == 1) {
		if (t[0] == p) {
			uint8_t after = (uint8_t)(p + 1);
			paste_btree_cursor_init(&c, kv->tree, &after, 1);
			continue;
		}
		const struct paste_btree_attr *a = paste_btree_cursor_attr(&c);
		if (a->tag || a->has_word)
			continue;            /* written by this layout: its own, or a chunk */
		batch[nb].tlen = tlen;
		memcpy(batch[nb].t, t, tlen);
		nb++;
	}
	int r = nb ? kv_begin(kv) : 0;
	for (uint32_t i = 0; i < nb && r == 0; i++)
		r = convert_one(kv, batch[i].t, batch[i].tlen);
	if (nb && r == 0)
		r = kv_commit(kv);
	else if (nb)
		kv_abort(kv);
	free(batch);
	return r < 0 ? r : nb > 0;
}

/* Step 1: database 0 gets prefix p, in one group with "relayout". */
static int begin_relayout(struct kv *kv, uint8_t p)
{
	int r = kv_begin(kv);
	if (r)
		return r;
	kv->dbmap[0] = p;
	for (uint32_t d = 1; d < KV_MAX_DBS; d++)
		kv->dbmap[d] = (uint8_t)(d == p ? 0 : d);   /* p's own database takes 0 */
	/* Layout-1 keys where this group's entries go: converted first. */
	const uint8_t *own[] = { relayout_key, map_key };
	const uint32_t own_len[] = { sizeof(relayout_key), sizeof(map_key) };
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	for (int i = 0; i < 2 && r == 0; i++)
		if (paste_btree_get(kv->tree, own[i], own_len[i], ext, &n, &len) == 0)
			r = convert_one(kv, own[i], own_len[i]);
	if (r == 0)
		r = kv_sys_put(kv, relayout_key, sizeof(relayout_key), &p, 1);
	if (r == 0)
		r = kv_db_save(kv);
	if (r == 0)
		return kv_commit(kv);
	kv_abort(kv);
	return r;
}

int kv_layout_mark(struct kv *kv)
{
	return kv_sys_put(kv, layout_key, sizeof(layout_key), layout_now, sizeof(layout_now));
}

int kv_layout_open(struct kv *kv)
{
	uint8_t v[8];
	uint32_t len;
	if (kv_sys_get(kv, layout_key, sizeof(layout_key), v, sizeof(v), &len) == 0)
		return len == 1 && v[0] == layout_now[0] ? 0 : -EPROTO;
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	if (!bi.keys)        /* a new tree: one entry, no group needed */
		return kv_layout_mark(kv);
	uint8_t p;
	int r = kv_sys_get(kv, relayout_key, sizeof(relayout_key), &p, 1, &len);
	if (r == -ENOENT) {
		/* A prefix no layout-1 key starts with, for database 0. */
		uint32_t b = 0;
		while (b < KV_PHYS_DBS && kv_prefix_used(kv, (uint8_t)b))
			b++;
		if (b == KV_PHYS_DBS)
			return -EUCLEAN;
		p = (uint8_t)b;
		if ((r = begin_relayout(kv, p)) != 0)
			return r;
	} else if (r || len != 1 || p >= KV_PHYS_DBS || kv->dbmap[0] != p) {
		return -EBADMSG;
	}
	uint32_t batch = kv->relayout_batch ? kv->relayout_batch : KV_RELAYOUT_BATCH;
	uint32_t groups = 0;
	/* A checkpoint between groups keeps the log from filling (none can
	 * happen inside one). */
	while ((r = convert_batch(kv, p, batch)) > 0) {
		if (kv->relayout_stop && ++groups == kv->relayout_stop)
			return -EINTR;
		if ((r = paste_btree_maintain(kv->tree)) < 0)
			break;
	}
	if (r < 0)
		return r;
	if ((r = kv_begin(kv)) != 0)
		return r;
	r = kv_layout_mark(kv);
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
