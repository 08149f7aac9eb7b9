/* btree_api.c - the B+tree's calls: set, del, clear (log, then apply),
 * get, cursors, open and close. The tree itself (pages, copy-on-write,
 * splits and merges) is lib/btree.c, whose top comment has the formats
 * and the crash-consistency argument. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "btree_internal.h"
#include "persist_internal.h"

/* ---- the API -------------------------------------------------------------- */

static int key_ok(const void *key, uint32_t klen)
{
	if (!key || klen == 0)
		return -EINVAL;
	return klen > PASTE_BTREE_MAX_KEY ? -ENAMETOOLONG : 0;
}

/* Pages a put leaves to deletes (paste_btree_config.delete_reserve_pct):
 * at least what a DEL's group (a delete and a grave's put, twice a
 * change's pages each) or a sweeper's range delete over a few leaves
 * needs before a checkpoint frees what it replaced. */
static uint32_t delete_reserve(const struct paste_btree *t)
{
	if (!t->cfg.delete_reserve_pct)
		return 0;
	uint32_t few = 8u * bt_pages_needed(t);
	uint32_t part = (uint32_t)((uint64_t)t->npages * t->cfg.delete_reserve_pct / 100u);
	return few > part ? few : part;
}

bool paste_btree_deleting(struct paste_btree *t, bool on)
{
	bool was = t->deleting;
	t->deleting = on;
	return was;
}

/* Room for one change: pages, and slots to queue the replaced value's
 * references. A checkpoint frees the pending pages. put: the change may
 * add a key (it leaves the delete reserve unless deleting). */
static int ensure_room(struct paste_btree *t, uint64_t releases, bool put)
{
	int f = paste_store_failed(t->st, NULL);
	if (f)
		return f;
	/* Inside a group, twice the pages a change needs: the other half is
	 * for putting it back if the group is aborted. */
	uint32_t need = bt_pages_needed(t) * (t->grp ? 2u : 1u);
	if (put && !t->deleting)
		need += delete_reserve(t);
	if (bt_pages_spare(t) < need) {
		if (t->grp)
			return -ENOSPC;   /* no checkpoint inside a group */
		int rc = paste_btree_checkpoint(t);
		if (rc < 0)
			return rc;
		if (bt_pages_spare(t) < need)
			return -ENOSPC;
	}
	return bt_release_reserve(t, releases);
}

int paste_btree_set(struct paste_btree *t, const void *key, uint32_t klen,
		    const struct paste_extent *val, uint32_t n, uint64_t *lsn)
{
	return paste_btree_put(t, key, klen, val, n, NULL, lsn);
}

/* CRC32C of a value's bytes, in extent order. */
static uint32_t value_crc(const struct paste_btree *t, const struct paste_extent *val, uint32_t n)
{
	uint32_t crc = 0;
	for (uint32_t i = 0; i < n; i++)
		crc = paste_crc32c(crc, paste_store_buf(t->st, val[i].buf) + val[i].off, val[i].len);
	return crc;
}

int paste_btree_put(struct paste_btree *t, const void *key, uint32_t klen,
		    const struct paste_extent *val, uint32_t n, const struct paste_btree_attr *attr,
		    uint64_t *lsn)
{
	int rc = key_ok(key, klen);
	if (!t || rc)
		return t ? rc : -EINVAL;
	if (n > PASTE_BTREE_MAX_EXTENTS)
		return -E2BIG;
	if (n && !val)
		return -EINVAL;
	uint64_t vlen = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (val[i].buf >= t->g->nbufs || val[i].off > t->g->buf_size ||
		    val[i].len > t->g->buf_size - val[i].off)
			return -EINVAL;
		vlen += val[i].len;
	}
	if (vlen > UINT32_MAX)
		return -EINVAL;
	struct paste_btree_attr a = { .has_crc = true };
	if (attr) {
		if (attr->tag > PASTE_BTREE_TAG_MAX)
			return -EINVAL;
		a.tag = attr->tag;
		a.has_word = attr->has_word;
		a.word = attr->has_word ? attr->word : 0;
	}
	if (BT_REC_HDR + BT_WORD + klen > t->g->buf_size)
		return -ENAMETOOLONG;   /* 512-byte buffers: keys up to 484 bytes */
	if (!t->p)
		return -EROFS;
	if ((rc = ensure_room(t, PASTE_BTREE_MAX_EXTENTS, true)) < 0)
		return rc;
	bt_point_warm_entry(t, key, klen);
	a.crc = value_crc(t, val, n);
	uint64_t l;
	if ((rc = bt_append(t, PASTE_BTREE_SET, key, klen, val, n, (uint32_t)vlen, &a, &l)) < 0)
		return rc;
	struct paste_btree_record r = { .op = PASTE_BTREE_SET, .key = key, .klen = klen,
					.val = val, .n = n, .vlen = (uint32_t)vlen, .attr = a };
	if (t->grp && (rc = bt_group_note(t, &r)) < 0)
		return rc;   /* logged, not applied: the group must be aborted */
	bt_apply(t, &r, l);
	bt_point_ahead_leaf(t);
	if (lsn)
		*lsn = l;
	return 0;
}

int paste_btree_del(struct paste_btree *t, const void *key, uint32_t klen, uint64_t *lsn)
{
	int rc = key_ok(key, klen);
	if (!t || rc)
		return t ? rc : -EINVAL;
	/* The point index knows, or the tree does (a long key, no index). */
	struct bt_path path;
	int pr = bt_point_get(&t->point, key, klen, NULL, NULL, NULL, NULL);
	bool present = pr == 0 || (pr > 0 && t->root && bt_descend(t, key, klen, &path));
	if (!present)
		return -ENOENT;
	if (!t->p)
		return -EROFS;
	if ((rc = ensure_room(t, PASTE_BTREE_MAX_EXTENTS, false)) < 0)
		return rc;
	uint64_t l;
	if ((rc = bt_append(t, PASTE_BTREE_DEL, key, klen, NULL, 0, 0, NULL, &l)) < 0)
		return rc;
	struct paste_btree_record r = { .op = PASTE_BTREE_DEL, .key = key, .klen = klen };
	if (t->grp && (rc = bt_group_note(t, &r)) < 0)
		return rc;
	bt_apply(t, &r, l);
	if (lsn)
		*lsn = l;
	return 0;
}

/* Value extents in the tree (what a clear queues for release). */
static int add_extents(void *arg, const uint8_t *e)
{
	*(uint64_t *)arg += e[2];
	return 0;
}

static uint64_t count_extents(struct paste_btree *t)
{
	uint64_t n = 0;
	bt_leaf_foreach(t, add_extents, &n);
	return n;
}

int paste_btree_clear(struct paste_btree *t, uint64_t *lsn)
{
	if (!t)
		return -EINVAL;
	if (!t->p)
		return -EROFS;
	if (t->grp)
		return -EBUSY;   /* a clear cannot be put back */
	int rc = ensure_room(t, count_extents(t), false);
	if (rc < 0)
		return rc;
	uint64_t l;
	if ((rc = bt_append(t, PASTE_BTREE_CLEAR, NULL, 0, NULL, 0, 0, NULL, &l)) < 0)
		return rc;
	struct paste_btree_record r = { .op = PASTE_BTREE_CLEAR };
	bt_apply(t, &r, l);
	if (lsn)
		*lsn = l;
	return 0;
}

int paste_btree_delrange(struct paste_btree *t, const void *lo, uint32_t lolen, const void *hi,
			 uint32_t hilen, uint64_t *deleted, uint64_t *lsn)
{
	if (!t || (lolen && !lo) || (hilen && !hi) || lolen > PASTE_BTREE_MAX_KEY ||
	    hilen > PASTE_BTREE_MAX_KEY)
		return -EINVAL;
	if (deleted)
		*deleted = 0;
	if (BT_REC_HDR + lolen + hilen > t->g->buf_size)
		return -ENAMETOOLONG;   /* the record's header and both bounds share a buffer */
	/* What the range holds: keys, value extents to release, leaves. */
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, t, lo, lolen);
	const uint8_t *key;
	uint32_t klen, n, keys = 0, leaves = 0, last_leaf = 0;
	uint64_t extents = 0;
	while (paste_btree_cursor_next(&c, &key, &klen, NULL, &n, NULL) == 1) {
		if (hilen && bt_keycmp(key, klen, hi, hilen) >= 0)
			break;
		if (++keys > PASTE_BTREE_RANGE_MAX)
			return -E2BIG;
		extents += n;
		uint32_t leaf = c.page[c.depth - 1];
		leaves += leaf != last_leaf;
		last_leaf = leaf;
	}
	if (!keys)
		return 0;
	if (!t->p)
		return -EROFS;
	int rc = ensure_room(t, extents, false);
	if (rc < 0)
		return rc;
	if (bt_pages_spare(t) < (leaves + 1u) * bt_pages_needed(t)) {
		if ((rc = paste_btree_checkpoint(t)) < 0)
			return rc;
		if (bt_pages_spare(t) < (leaves + 1u) * bt_pages_needed(t))
			return -ENOSPC;
	}
	uint64_t l;
	if ((rc = bt_append_range(t, PASTE_BTREE_DELRANGE, lo, lolen, hi, hilen, NULL, 0, 0, NULL,
				  &l)) < 0)
		return rc;
	struct paste_btree_record r = { .op = PASTE_BTREE_DELRANGE, .key = lo, .klen = lolen,
					.hi = hi, .hilen = hilen };
	if (t->grp && (rc = bt_group_note(t, &r)) < 0)
		return rc;
	rc = bt_apply(t, &r, l);
	if (deleted)
		*deleted = rc > 0 ? (uint64_t)rc : 0;
	if (lsn)
		*lsn = l;
	return 0;
}

static void value_out(uint8_t *e, struct paste_extent *ext, uint32_t *n, uint32_t *len,
		      struct paste_btree_attr *a)
{
	if (ext)
		extents_copy(ext, bt_lext(e), e[2]);
	if (n)
		*n = e[2];
	if (len)
		*len = ld32(e + 4);
	if (a)
		bt_lattr(e, a);
}

int paste_btree_lookup(struct paste_btree *t, const void *key, uint32_t klen,
		       struct paste_extent *ext, uint32_t *n, uint32_t *len,
		       struct paste_btree_attr *attr)
{
	int rc = key_ok(key, klen);
	if (!t || rc)
		return t ? rc : -EINVAL;
	if ((rc = bt_point_get(&t->point, key, klen, ext, n, len, attr)) <= 0)
		return rc;
	struct bt_path path;
	if (!t->root || !bt_descend(t, key, klen, &path))
		return -ENOENT;
	value_out(bt_entry(bt_pg(t, path.page[path.depth - 1]), path.idx[path.depth - 1]), ext, n, len,
		  attr);
	return 0;
}

int paste_btree_get(struct paste_btree *t, const void *key, uint32_t klen,
		    struct paste_extent *ext, uint32_t *n, uint32_t *len)
{
	return paste_btree_lookup(t, key, klen, ext, n, len, NULL);
}

int paste_btree_prefetch(struct paste_btree *t, const void *key, uint32_t klen)
{
	if (!t || !key)
		return -EINVAL;
	return bt_point_prefetch(&t->point, key, klen) != NULL;
}

uint64_t paste_btree_count(const struct paste_btree *t)
{
	return t ? t->nkeys : 0;
}

uint64_t paste_btree_live_now(const struct paste_btree *t)
{
	return t && t->live_total > t->rel_bytes ? t->live_total - t->rel_bytes : 0;
}

/* ---- cursors ---------------------------------------------------------------- */

/* Move c from the end of a leaf to the first entry of the next one, or
 * mark it done: up to the first ancestor with a child to the right, then
 * down its leftmost path. */
static void cursor_next_leaf(struct paste_btree_cursor *c)
{
	struct paste_btree *t = c->t;
	uint32_t d = c->depth - 1;
	for (;;) {
		if (d == 0) {
			c->done = true;
			return;
		}
		d--;
		if (c->idx[d] < bt_h(bt_pg(t, c->page[d]))->nkeys) {
			c->idx[d]++;
			break;
		}
	}
	for (; d + 1 < c->depth; d++) {
		c->page[d + 1] = bt_child(bt_pg(t, c->page[d]), c->idx[d]);
		c->idx[d + 1] = 0;
	}
	if (bt_h(bt_pg(t, c->page[d]))->nkeys == 0)
		c->done = true;   /* only an empty root leaf, which the tree never keeps */
}

static void cursor_seek(struct paste_btree_cursor *c)
{
	struct paste_btree *t = c->t;
	c->positioned = c->fresh = true;
	c->back = false;
	c->mods = t->mods;
	c->done = !t->root;
	if (c->done)
		return;
	struct bt_path path;
	bool found = bt_descend(t, c->key, c->klen, &path);
	c->depth = path.depth;
	memcpy(c->page, path.page, sizeof(path.page[0]) * path.depth);
	memcpy(c->idx, path.idx, sizeof(path.idx[0]) * path.depth);
	if (found && c->have_key)
		c->idx[c->depth - 1]++;
	if (c->idx[c->depth - 1] >= bt_h(bt_pg(t, c->page[c->depth - 1]))->nkeys)
		cursor_next_leaf(c);
}

void paste_btree_cursor_init(struct paste_btree_cursor *c, struct paste_btree *t,
			     const void *start, uint32_t slen)
{
	c->t = t;
	c->positioned = c->have_key = c->done = c->back = c->fresh = false;
	c->depth = 0;
	c->klen = start ? (slen < PASTE_BTREE_MAX_KEY ? slen : PASTE_BTREE_MAX_KEY) : 0;
	if (c->klen)
		memcpy(c->key, start, c->klen);
}

/* The entry the cursor stands at, copied out (the key into the cursor,
 * which keeps it to re-seek from); returns the leaf's depth index. The
 * first after a seek leaves its path for a change of that entry (a pop
 * deletes what it read): one copy per seek, not per step. */
static uint32_t cursor_take(struct paste_btree_cursor *c, const uint8_t **key, uint32_t *klen,
			    struct paste_extent *ext, uint32_t *n, uint32_t *len)
{
	uint32_t d = c->depth - 1;
	uint8_t *e = bt_entry(bt_pg(c->t, c->page[d]), c->idx[d]);
	c->klen = ld16(e);
	memcpy(c->key, bt_ekey(BT_LEAF, e), c->klen);
	c->have_key = true;
	if (c->fresh) {
		c->fresh = false;
		bt_memo_keep(c->t, c->page, c->idx, c->depth, c->key, c->klen, true);
	}
	value_out(e, ext, n, len, &c->attr);
	if (key)
		*key = c->key;
	if (klen)
		*klen = c->klen;
	return d;
}

int paste_btree_cursor_next(struct paste_btree_cursor *c, const uint8_t **key, uint32_t *klen,
			    struct paste_extent *ext, uint32_t *n, uint32_t *len)
{
	if (!c || !c->t)
		return -EINVAL;
	if (!c->positioned || c->mods != c->t->mods || c->back)
		cursor_seek(c);
	if (c->done)
		return 0;
	uint32_t d = cursor_take(c, key, klen, ext, n, len);
	if (++c->idx[d] >= bt_h(bt_pg(c->t, c->page[d]))->nkeys)
		cursor_next_leaf(c);
	return 1;
}

/* Backwards: the path names the entry cursor_prev returns next. From a
 * leaf's first entry to the previous leaf's last one, or done: up to the
 * first ancestor with a child to the left, then down its rightmost path. */
static void cursor_prev_leaf(struct paste_btree_cursor *c)
{
	struct paste_btree *t = c->t;
	uint32_t d = c->depth - 1;
	for (;;) {
		if (d == 0) {
			c->done = true;
			return;
		}
		d--;
		if (c->idx[d] > 0) {
			c->idx[d]--;
			break;
		}
	}
	for (; d + 1 < c->depth; d++) {
		c->page[d + 1] = bt_child(bt_pg(t, c->page[d]), c->idx[d]);
		const struct bt_hdr *h = bt_h(bt_pg(t, c->page[d + 1]));
		c->idx[d + 1] = (uint16_t)(h->type == BT_LEAF ? h->nkeys - 1u : h->nkeys);
	}
}

/* Before the last key returned, or before the start key, or at the last
 * key of the tree. */
static void cursor_seek_back(struct paste_btree_cursor *c)
{
	struct paste_btree *t = c->t;
	c->positioned = c->fresh = true;
	c->back = true;
	c->mods = t->mods;
	c->done = !t->root;
	if (c->done)
		return;
	if (c->klen) {
		struct bt_path path;
		bt_descend(t, c->key, c->klen, &path);
		c->depth = path.depth;
		memcpy(c->page, path.page, sizeof(path.page[0]) * path.depth);
		memcpy(c->idx, path.idx, sizeof(path.idx[0]) * path.depth);
		if (c->idx[c->depth - 1] == 0)
			cursor_prev_leaf(c);     /* every key of this leaf is >= it */
		else
			c->idx[c->depth - 1]--;
		return;
	}
	uint32_t no = t->root, d = 0;
	for (;; d++) {
		const struct bt_hdr *h = bt_h(bt_pg(t, no));
		c->page[d] = no;
		if (h->type == BT_LEAF) {
			c->idx[d] = (uint16_t)(h->nkeys - 1u);
			break;
		}
		c->idx[d] = h->nkeys;
		no = bt_child(bt_pg(t, no), h->nkeys);
	}
	c->depth = d + 1;
}

int paste_btree_cursor_prev(struct paste_btree_cursor *c, const uint8_t **key, uint32_t *klen,
			    struct paste_extent *ext, uint32_t *n, uint32_t *len)
{
	if (!c || !c->t)
		return -EINVAL;
	if (!c->positioned || c->mods != c->t->mods || !c->back)
		cursor_seek_back(c);
	if (c->done)
		return 0;
	uint32_t d = cursor_take(c, key, klen, ext, n, len);
	if (c->idx[d] == 0)
		cursor_prev_leaf(c);
	else
		c->idx[d]--;
	return 1;
}

int paste_btree_cursor_sample(struct paste_btree_cursor *c, const void *lo, uint32_t lolen,
			      const void *hi, uint32_t hilen, uint64_t seed)
{
	struct paste_btree *t = c ? c->t : NULL;
	if (!t)
		return -EINVAL;
	if (!t->root)
		return -ENOENT;
	struct bt_path L, H;
	bt_descend(t, lo, lolen, &L);
	bt_descend(t, hi, hilen, &H);
	bool on_lo = true, on_hi = true;     /* still on the range's edge paths */
	uint32_t no = t->root;
	for (uint32_t d = 0; d < L.depth; d++) {
		uint8_t *pg = bt_pg(t, no);
		uint32_t nk = bt_h(pg)->nkeys, a = on_lo ? L.idx[d] : 0, span;
		bool leaf = bt_h(pg)->type == BT_LEAF;
		/* leaf: keys [a, b) in range; inner: children [a, b] */
		uint32_t b = on_hi ? H.idx[d] : nk;
		if (leaf ? b <= a : b < a)
			return -ENOENT;
		span = leaf ? b - a : b - a + 1;
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t i = a + (uint32_t)(((seed >> 32) * (uint64_t)span) >> 32);
		c->page[d] = no;
		c->idx[d] = (uint16_t)i;
		if (leaf) {
			c->depth = d + 1;
			c->positioned = c->fresh = true;
			c->back = c->done = c->have_key = false;
			c->mods = t->mods;
			return 0;
		}
		on_lo = on_lo && i == a;
		on_hi = on_hi && i == b;
		no = bt_child(pg, i);
	}
	return -ENOENT;
}

uint64_t paste_btree_cursor_skip(struct paste_btree_cursor *c, uint64_t n, const void *end,
				 uint32_t elen)
{
	if (!c || !c->t)
		return 0;
	if (!c->positioned || c->mods != c->t->mods || c->back)
		cursor_seek(c);
	uint64_t passed = 0;
	const uint8_t *last = NULL;
	while (!c->done && passed < n) {
		uint32_t d = c->depth - 1, i = c->idx[d];
		uint8_t *pg = bt_pg(c->t, c->page[d]);
		uint32_t nk = bt_h(pg)->nkeys, take = nk - i;
		if (take > n - passed)
			take = (uint32_t)(n - passed);
		bool stop = false;
		const uint8_t *e = bt_entry(pg, i + take - 1);
		if (end && bt_keycmp(bt_ekey(BT_LEAF, e), ld16(e), end, elen) >= 0) {
			uint32_t lo = i, hi = i + take - 1;    /* the first key >= end is in [lo, hi] */
			while (lo < hi) {
				uint32_t mid = lo + (hi - lo) / 2;
				const uint8_t *m = bt_entry(pg, mid);
				if (bt_keycmp(bt_ekey(BT_LEAF, m), ld16(m), end, elen) >= 0)
					hi = mid;
				else
					lo = mid + 1;
			}
			take = lo - i;
			stop = true;
		}
		if (take)
			last = bt_entry(pg, i + take - 1);
		passed += take;
		c->idx[d] = (uint16_t)(i + take);
		if (stop)
			break;
		if (c->idx[d] >= nk) {
			cursor_next_leaf(c);
			/* The path changed: read it again. GCC 12's -O2 (its
			 * interprocedural mod/ref summary of cursor_next_leaf)
			 * kept the leaf's page and count from before the call
			 * and skipped whole leaves uncounted without this. */
			__asm__ volatile("" ::: "memory");
		}
	}
	if (last) {
		c->klen = ld16(last);
		memcpy(c->key, bt_ekey(BT_LEAF, last), c->klen);
		c->have_key = true;
	}
	return passed;
}

const struct paste_btree_attr *paste_btree_cursor_attr(const struct paste_btree_cursor *c)
{
	return &c->attr;
}

/* ---- open and close ---------------------------------------------------------- */

static void tree_free(struct paste_btree *t)
{
	if (t->private_len)
		munmap(t->nodes, t->private_len);
	for (int i = 0; i < 4; i++)
		free(t->wide[i]);
	free(t->ps);
	free(t->free_q);
	free(t->pending);
	free(t->moved);
	free(t->dirty);
	free(t->rel);
	bt_point_drop(&t->point);
	bt_clean_close(t);
	bt_group_drop(t);
	free(t);
}

int paste_btree_open(struct paste_btree **out, struct paste_store *st, struct paste_wal *w,
		     struct paste_persist *p, const struct paste_btree_config *cfg,
		     struct paste_error *err)
{
	struct paste_btree_config none = { 0 };
	paste_error_set(err, 0, "%s", "");
	if (!out || !st || !w)
		return paste_error_set(err, -EINVAL, "paste_btree_open: no store or log given");
	*out = NULL;
	if (!cfg)
		cfg = &none;
	const struct paste_store_geom *g = paste_store_geom(st);
	const char *path = paste_store_path(st);
	uint32_t npages = 0;
	uint8_t *nodes = paste_store_nodes(st, &npages);
	if (!nodes)
		return paste_error_set(err, -ENODEV, "%s: the store has no node area for a B+tree "
				       "(upgraded from layout version 1, or created without one): "
				       "create a new store with a node area to use the tree", path);
	if (cfg->lane >= g->log_lanes)
		return paste_error_set(err, -EINVAL, "%s: log lane %u for the tree, the store has %u",
				       path, cfg->lane, g->log_lanes);
	if (cfg->ckpt_log_pct > 90)
		return paste_error_set(err, -EINVAL, "%s: ckpt_log_pct %u is over 90", path, cfg->ckpt_log_pct);
	struct paste_btree *t = calloc(1, sizeof(*t));
	if (!t)
		return paste_error_set(err, -ENOMEM, "out of memory for the tree");
	t->st = st;
	t->w = w;
	t->p = p;
	t->g = g;
	t->cfg = *cfg;
	if (!t->cfg.ckpt_records)
		t->cfg.ckpt_records = 65536;
	if (!t->cfg.ckpt_ms)
		t->cfg.ckpt_ms = 1000;
	if (!t->cfg.ckpt_log_pct)
		t->cfg.ckpt_log_pct = 50;
	if (!t->cfg.clean_free_pct)
		t->cfg.clean_free_pct = 20;
	if (!t->cfg.clean_live_pct)
		t->cfg.clean_live_pct = 80;
	t->now_s = (uint32_t)(paste_clock_coarse_ms() / 1000u);
	t->npages = npages;
	t->hbuf = PASTE_NO_BUF;
	t->ps = calloc(npages, 1);
	t->free_q = malloc(sizeof(uint32_t) * npages);
	t->pending = malloc(sizeof(uint32_t) * npages);
	t->moved = calloc(npages, sizeof(uint32_t));
	t->dirty = malloc(sizeof(uint32_t) * npages);
	bool ok = t->ps && t->free_q && t->pending && t->moved && t->dirty &&
		  bt_clean_open(t) == 0;
	for (int i = 0; i < 4 && ok; i++)
		ok = (t->wide[i] = malloc(sizeof(struct bt_wide))) != NULL;
	if (!ok) {
		tree_free(t);
		return paste_error_set(err, -ENOMEM, "out of memory for the tree's page tables "
				       "(%u pages)", npages);
	}
	if (p && (paste_persist_mode(p) != PASTE_DUR_FSYNC || persist_writes_direct(p))) {
		/* PM, or fsync mode with direct writes: the file gets only
		 * what is flushed, so the tree works in the store mapping. */
		t->nodes = nodes;
	} else {
		/* Read-only: recovery's replay writes into a private copy of
		 * the node area; the file is never written.
		 * fsync mode through the page cache: the tree works in a
		 * private copy too, and a
		 * checkpoint copies its pages into the file (bt_publish).
		 * Otherwise every group commit's fdatasync would also write
		 * back each leaf changed since the last checkpoint: one
		 * scattered page per SET, where the log record and the value
		 * are all a commit needs. A checkpoint drops the private
		 * copies it published, so the copy costs memory only for the
		 * pages of one generation (page faults: a few us per page
		 * first written in a generation). */
		int flags = MAP_PRIVATE | (p ? 0 : MAP_POPULATE);
		void *m = mmap(NULL, g->node_size, PROT_READ | PROT_WRITE, flags,
			       paste_store_fd(st), (off_t)g->node_offset);
		if (m == MAP_FAILED) {
			int e = errno;
			tree_free(t);
			return paste_error_set(err, -e, "%s: cannot map the node area privately: %s",
					       path, strerror(e));
		}
		t->nodes = m;
		t->private_len = g->node_size;
		if (p) {
			t->shared = nodes;
			madvise(m, g->node_size, MADV_RANDOM);   /* no readahead: see lib/store.c */
		}
	}
	int rc = bt_recover(t, err);
	/* The tree passed its checks: a log recovered without writing
	 * (paste_wal_recover, so that a damaged tree refuses the start with
	 * nothing written) may now persist its epoch and seal its torn tail. */
	if (rc == 0 && p)
		rc = paste_wal_begin(w, err);
	if (rc == 0 && p) {
		/* Records the checkpoint covers but a crash kept from being
		 * truncated: drop them now (no buffer is handed out yet). */
		struct paste_wal_info wi;
		paste_wal_info(w, &wi);
		if (wi.records && wi.first_lsn <= t->ckpt_lsn) {
			int64_t r = paste_wal_truncate(w, t->ckpt_lsn, p);
			if (r < 0)
				rc = paste_error_set(err, (int)r, "%s: cannot truncate the log to the tree's "
						     "checkpoint: %s", path, strerror((int)-r));
		}
	}
	/* The point index, after the replay (which it would only have to
	 * follow): read-only opens (check, dump) do without. Out of memory
	 * for it is no error: lookups descend the tree. */
	if (rc == 0 && p && !cfg->no_point_index) {
		uint64_t t0 = paste_clock_ns();
		t->point.skip = cfg->point_skip;
		bt_point_build(t);
		t->recovery_ns += paste_clock_ns() - t0;
	}
	if (rc < 0) {
		tree_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void paste_btree_close(struct paste_btree *t)
{
	if (!t)
		return;
	bt_release_due(t, !t->p);
	if (t->hbuf != PASTE_NO_BUF)
		paste_store_unref(t->st, t->hbuf, false);
	tree_free(t);
}
