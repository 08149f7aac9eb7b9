/*
 * kv_db.c - databases (kv.h): the map from logical databases to the
 * tree's key prefixes, key counts, FLUSHDB, FLUSHALL, SWAPDB, and the
 * ordered walk over one database's keys (SCAN, KEYS, the HTTP listing).
 *
 * Logical database d's keys are [dbmap[d]][key]. The map is one tree
 * entry, [KV_PFX_SYS]"dbmap" (absent: the identity), so SWAPDB is one
 * record. FLUSHDB gives the database a prefix no one uses and writes a
 * grave [KV_PFX_GRAVE]['d'][old prefix] in the same group: O(1) however
 * many keys it held; kv_sweep.c deletes them later, and the prefix is
 * free again once its grave is gone. FLUSHALL outside a transaction
 * clears the whole tree (one record).
 */
#include <errno.h>
#include <string.h>

#include "kv.h"

static const uint8_t map_key[] = { KV_PFX_SYS, 'd', 'b', 'm', 'a', 'p' };
/* Present once a list element in chunks was written (kv_elem): from then
 * on a pop is one group, its record with its chunks' grave. */
static const uint8_t far_key[] = { KV_PFX_SYS, 'f', 'a', 'r', 'l', 'i', 's', 't', 's' };

int kv_db_far_lists(struct kv *kv)
{
	/* Written with each such element, in its group: one entry beside
	 * 126 KiB or more, and an aborted group cannot leave the flag in
	 * DRAM only. */
	int r = kv_sys_put(kv, far_key, sizeof(far_key), "1", 1);
	if (r == 0)
		kv->far_lists = true;
	return r;
}

int kv_db_open(struct kv *kv)
{
	if (kv->ndbs > KV_MAX_DBS)
		return -EINVAL;
	for (uint32_t d = 0; d < KV_MAX_DBS; d++) {
		kv->dbmap[d] = (uint8_t)d;
		kv->dbkeys[d] = kv->dbexpires[d] = UINT64_MAX;
	}
	uint8_t m[KV_MAX_DBS];
	uint32_t len;
	kv->far_lists = kv_sys_get(kv, far_key, sizeof(far_key), m, sizeof(m), &len) != -ENOENT;
	int r = kv_sys_get(kv, map_key, sizeof(map_key), m, sizeof(m), &len);
	if (r == -ENOENT)
		return 0;
	if (r || len != sizeof(m))
		return -EBADMSG;
	for (uint32_t d = 0; d < KV_MAX_DBS; d++)
		if (m[d] >= KV_PHYS_DBS)
			return -EBADMSG;
	memcpy(kv->dbmap, m, sizeof(m));
	return 0;
}

void kv_db_started(struct kv *kv)
{
	/* Graves left by a run that stopped before sweeping them. */
	struct paste_btree_cursor c;
	uint8_t g = KV_PFX_GRAVE;
	paste_btree_cursor_init(&c, kv->tree, &g, 1);
	const uint8_t *t;
	uint32_t tlen;
	kv->sweep_due = paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) == 1 &&
			t[0] == KV_PFX_GRAVE;
}

int kv_db_save(struct kv *kv)
{
	return kv_sys_put(kv, map_key, sizeof(map_key), kv->dbmap, sizeof(kv->dbmap));
}

static void touched_db(struct kv *kv, uint32_t db, enum kv_touch what)
{
	if (!kv->ntouch)
		return;
	struct kv_key k = { .db = db };
	kv_touch_call(kv, &k, what);
}

bool kv_prefix_used(struct kv *kv, uint8_t p)
{
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, &p, 1);
	const uint8_t *t;
	uint32_t tlen;
	return paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) == 1 && t[0] == p;
}

static bool grave_of(struct kv *kv, uint8_t p)
{
	uint8_t g[16];
	uint32_t glen = kv_grave_key(g, KV_GRAVE_DB, p);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	return paste_btree_get(kv->tree, g, glen, ext, &n, &len) == 0;
}

/* A prefix that no database maps and no grave waits on (-ENOSPC when
 * every one is taken: FLUSHDBs faster than the sweeper). */
static int free_prefix(struct kv *kv)
{
	bool mapped[KV_PHYS_DBS] = { false };
	for (uint32_t d = 0; d < KV_MAX_DBS; d++)
		mapped[kv->dbmap[d]] = true;
	for (uint32_t p = 0; p < KV_PHYS_DBS; p++)
		if (!mapped[p] && !grave_of(kv, (uint8_t)p) && !kv_prefix_used(kv, (uint8_t)p))
			return (int)p;
	return -ENOSPC;
}

static void count_db(struct kv *kv, uint32_t db)
{
	uint8_t p = kv->dbmap[db];
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, &p, 1);
	const uint8_t *t;
	uint32_t tlen;
	uint64_t keys = 0, exp = 0;
	while (paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) == 1 && t[0] == p) {
		keys++;
		exp += paste_btree_cursor_attr(&c)->has_word;
	}
	kv->dbkeys[db] = keys;
	kv->dbexpires[db] = exp;
}

uint64_t kv_dbsize(struct kv *kv, uint32_t db)
{
	if (kv->dbkeys[db] == UINT64_MAX)
		count_db(kv, db);
	return kv->dbkeys[db];
}

uint64_t kv_keys(struct kv *kv)
{
	uint64_t n = 0;
	for (uint32_t d = 0; d < kv->ndbs; d++)
		n += kv_dbsize(kv, d);
	return n;
}

uint64_t kv_dbexpires(struct kv *kv, uint32_t db)
{
	if (kv->dbexpires[db] == UINT64_MAX)
		count_db(kv, db);
	return kv->dbexpires[db];
}

/* Database db gets a fresh prefix; the old one's keys are buried. */
static int remap(struct kv *kv, uint32_t db)
{
	uint8_t old = kv->dbmap[db];
	if (!kv_prefix_used(kv, old))
		return 0;
	int p = free_prefix(kv);
	if (p == -ENOSPC && !kv->group_depth) {
		/* Sweep until a prefix is free: bounded by the graves waiting. */
		for (uint32_t i = 0; p == -ENOSPC && kv->sweep_due && i < (1u << 30); i++) {
			kv_sweep_step(kv, 64);
			p = free_prefix(kv);
		}
	}
	if (p < 0)
		return p;
	int r = kv_begin(kv);
	if (r)
		return r;
	uint8_t g[16];
	uint32_t glen = kv_grave_key(g, KV_GRAVE_DB, old);
	r = kv_tree_set(kv, g, glen);
	kv->dbmap[db] = (uint8_t)p;
	if (r == 0)
		r = kv_db_save(kv);
	if (r == 0)
		r = kv_commit(kv);
	if (r) {
		kv->dbmap[db] = old;
		kv_abort(kv);
		return r;
	}
	kv->sweep_due = true;
	return 0;
}

static int flushdb(struct kv *kv, uint32_t db)
{
	int r = remap(kv, db);
	if (r)
		return r;
	kv->dbkeys[db] = kv->dbexpires[db] = 0;
	touched_db(kv, db, KV_TOUCH_DELETED);
	return 0;
}

static int flushall(struct kv *kv)
{
	int r;
	if (!kv->group_depth && !kv->nwriting) {
		/* The whole tree in one record: the map goes back to the
		 * identity and graves go with what they named. */
		r = paste_btree_clear(kv->tree, NULL);
		if (r == -ENOSPC && kv_make_room(kv, 0))
			r = paste_btree_clear(kv->tree, NULL);
		if (r)
			return r;
		for (uint32_t d = 0; d < KV_MAX_DBS; d++) {
			kv->dbmap[d] = (uint8_t)d;
			kv->dbkeys[d] = kv->dbexpires[d] = 0;
		}
		kv->sweep_due = false;
		kv->far_lists = false;
		/* The layout entry went too: a tree with keys and without it
		 * would be taken for the first layout at the next start. */
		if ((r = kv_layout_mark(kv)) != 0)
			return r;
	} else {
		/* In a transaction (a clear cannot be undone), or while a
		 * string is being written in chunks (a clear would take them):
		 * database by database, each one's keys buried, in one group. */
		if ((r = kv_begin(kv)) != 0)
			return r;
		for (uint32_t d = 0; d < KV_MAX_DBS && r == 0; d++)
			if ((r = remap(kv, d)) == 0)
				kv->dbkeys[d] = kv->dbexpires[d] = 0;
		if (r == 0)
			r = kv_commit(kv);
		if (r) {
			kv_abort(kv);
			return r;
		}
	}
	touched_db(kv, KV_ALL_DBS, KV_TOUCH_DELETED);
	return 0;
}

int kv_swapdb(struct kv *kv, uint32_t a, uint32_t b)
{
	if (a == b)
		return 0;
	uint8_t pa = kv->dbmap[a], pb = kv->dbmap[b];
	kv->dbmap[a] = pb;
	kv->dbmap[b] = pa;
	int r = kv_db_save(kv);
	if (r) {
		kv->dbmap[a] = pa;
		kv->dbmap[b] = pb;
		return r;
	}
	uint64_t k = kv->dbkeys[a], e = kv->dbexpires[a];
	kv->dbkeys[a] = kv->dbkeys[b];
	kv->dbexpires[a] = kv->dbexpires[b];
	kv->dbkeys[b] = k;
	kv->dbexpires[b] = e;
	touched_db(kv, a, KV_TOUCH_WRITTEN);
	touched_db(kv, b, KV_TOUCH_WRITTEN);
	return 0;
}

/* ---- walking a database's keys ---------------------------------------- */

void kv_scan_init(struct kv *kv, struct kv_scan *s, uint32_t db, const void *from, size_t flen,
		  bool after)
{
	s->pfx = kv->dbmap[db];
	s->skip = after;
	s->afterlen = from && flen <= sizeof(s->after) ? (uint32_t)flen : 0;
	s->lastlen = 0;
	if (s->afterlen) {
		memcpy(s->after, from, flen);
		s->after[0] = s->pfx;   /* SWAPDB since: the same name in what db is now */
		paste_btree_cursor_init(&s->c, kv->tree, s->after, s->afterlen);
	} else {
		paste_btree_cursor_init(&s->c, kv->tree, &s->pfx, 1);
	}
}

int kv_scan_next(struct kv *kv, struct kv_scan *s, const uint8_t **key, size_t *klen,
		 uint8_t *longbuf, enum kv_type *type, int64_t *expire_ms)
{
	const uint8_t *t;
	uint32_t tlen, n, len;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	for (;;) {
		if (paste_btree_cursor_next(&s->c, &t, &tlen, ext, &n, &len) != 1 || t[0] != s->pfx)
			return 0;
		if (s->skip && s->afterlen && paste_btree_keycmp(t, tlen, s->after, s->afterlen) <= 0)
			continue;                 /* where the last call stopped */
		const struct paste_btree_attr *a = paste_btree_cursor_attr(&s->c);
		int64_t exp = a->has_word ? (int64_t)a->word : KV_NO_TTL;
		if (exp != KV_NO_TTL && exp <= kv->now_ms)
			continue;                 /* expired: absent for every reader */
		memcpy(s->last, t, tlen);
		s->lastlen = tlen;
		s->vlen = len;
		if (a->tag & KV_TAG_LONG) {
			uint32_t next, l;
			if (kv_long_span(kv, ext, n, &next, &l))
				return -EBADMSG;
			*klen = kv_long_read(kv, ext, next, l, longbuf);
			*key = longbuf;
			s->vlen -= 4 + l;
		} else {
			*key = t + 1;
			*klen = tlen - 1;
		}
		uint32_t raw = a->tag & KV_TAG_TYPE;
		if (raw == KV_TAG_BIG) {
			/* A string in chunks: its length is in its record. */
			uint8_t rec[16] = { 0 };
			paste_store_read(kv->store, ext, n, len - s->vlen, rec, sizeof(rec));
			uint64_t l = kv_be64(rec + 8);
			s->vlen = l < UINT32_MAX ? (uint32_t)l : UINT32_MAX;
			raw = KV_STRING;
		}
		if (type)
			*type = (enum kv_type)raw;
		if (expire_ms)
			*expire_ms = exp;
		return 1;
	}
}

/* Flushes are deletes: they may use the tree pages puts leave free. */
int kv_flushdb(struct kv *kv, uint32_t db)
{
	bool was = paste_btree_deleting(kv->tree, true);
	int r = flushdb(kv, db);
	paste_btree_deleting(kv->tree, was);
	return r;
}

int kv_flushall(struct kv *kv)
{
	bool was = paste_btree_deleting(kv->tree, true);
	int r = flushall(kv);
	paste_btree_deleting(kv->tree, was);
	return r;
}
