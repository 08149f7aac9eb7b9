/*
 * btree.c - a persistent B+tree in the store's node area, with values that
 * stay in the packet buffers they arrived in (zero copy), made durable by
 * the write-ahead log and persisted by copy-on-write checkpoints.
 *
 * On-store format (little-endian; x86-64 native order)
 * ----------------------------------------------------
 * The node area (paste_store_nodes) is an array of 4096-byte pages. Pages 0
 * and 1 each hold one meta slot (struct bt_meta, 128 bytes at the start of
 * the page; one slot per page, so no write of one can tear the other):
 *    0 magic u32 "PBTM",  4 crc u32 (CRC32C of bytes [8, 128)),
 *    8 seq u64 (higher wins),  16 gen u64 (checkpoint generation),
 *   24 ckpt_lsn u64 (every tree record <= it is in this tree),  32 nkeys u64,
 *   40 root u32 (0: empty),  44 height u32,  48 hwm u32 (pages [2, hwm)
 *   may be in use),  52 npages u32 (in the tree),  56 node_pages u32,
 *   60 page_size u32 (4096),  64 uuid 2 x u64 (the store's),  80 zero.
 * Pages 2.. are nodes (btree_page.c): a 32-byte header (crc u32 over bytes
 * [4, 4096), magic u16 "BT", type u8 leaf 1 / inner 2, level u8 (0 =
 * leaf), gen u64, pageno u32, nkeys u16, top u16, child0 u32, frag u16,
 * zero u16), u16 slots, entries packed at the end:
 *    leaf:  klen u16, nexts u8 (0..63), flags u8 (tag in bits 0-3, bit 4: a
 *           word follows), vlen u32, crc u32 (CRC32C of the value's bytes),
 *           [word u64], nexts x {buf, off, len} u32, key;
 *    inner: klen u16, 0 u16, child u32, key.
 * Keys are 1..512 bytes, ordered by memcmp (a prefix first). Inner keys are
 * separators: the shortest byte strings between the last key on the left
 * and the first on the right.
 *
 * The log record of a change (an ordinary WAL record, paste_wal_append):
 * extents 0..nval-1 are the value, and the last extent is a header the
 * tree copies densely (8-byte aligned) into a store buffer it holds, the
 * "header buffer":
 *    0 magic u32 "PBT3",  4 op u8 (1 SET, 2 DEL, 3 CLEAR, 4 DELRANGE,
 *    5 COMMIT),  5 nval u8 (value extents),  6 klen u16,  8 vlen u32 (a
 *    range's end: its length),  12 flags u8 (as a leaf entry's; bit 5: a
 *    group's member, bit 6: the group's first; btree_group.c),  13 zero
 *    u8,  14 zero u16,  16 vcrc u32 (CRC32C of the value),  20 [word
 *    u64],  then the key (and a range's end).
 * The log's CRC covers value and header in that order, so it continues
 * the value's CRC, which the tree computes once (wal_append_crc).
 *
 * Copy-on-write by generation
 * ---------------------------
 * The tree is written in generation gen = the last checkpoint's + 1. A page
 * of an older generation belongs to the checkpointed tree and is never
 * written: the first change to it in this generation copies it to a free
 * page (gen = this one) and re-points its parent, which is itself copied
 * first (path copy to the root, top-down before the change). Pages of this
 * generation are changed in place. A page replaced (or merged away) in this
 * generation is free at once if it was written in this generation, else
 * "pending": the checkpointed tree still has it, so it becomes free only
 * once the next checkpoint is durable. The free set is DRAM only; recovery
 * rebuilds it as every page the checkpointed tree does not reach.
 *
 * Splits, merges and rebalancing go by bytes (keys and values vary): a node
 * over BT_CAP splits where the two halves are most even; a non-root node
 * under a quarter of a page takes its sibling in (merge) if the two fit in
 * one page, else the two are redistributed evenly and the separator between
 * them replaced (which may grow or shrink the parent: it is fixed in turn).
 * See fix().
 *
 * Crash consistency (docs/design.md, "The B+tree", says why this is enough)
 *  - The log is the commit point: a change is acknowledged only after the
 *    barrier that made its record durable; recovery replays every tree
 *    record after the checkpoint LSN in LSN order.
 *  - A checkpoint flushes this generation's pages and fences BEFORE it
 *    writes the other meta slot, and fences that before it truncates the
 *    log: a durable meta never names a page that was not durable, and the
 *    log keeps every record the durable meta does not cover.
 *  - A checkpointed page is never written; pending pages are reused only
 *    after the next meta is durable: whichever meta recovery picks, its
 *    pages are intact.
 *  - The references of a value replaced by a change are dropped only once
 *    that change's record is durable. A buffer a checkpointed tree names
 *    may then be reused while that checkpoint is still the newest, but only
 *    because a durable record after it replaces the value: recovery applies
 *    it before anything reads the value, so the recovered tree names no
 *    freed or reused buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include "btree_internal.h"

/* ---- pages -------------------------------------------------------------- */

uint32_t bt_pages_spare(const struct paste_btree *t)
{
	return t->nfree + (t->npages - t->hwm);
}

/* Pages one change may need: a path copy, a sibling per level, a split per
 * level and a new root. */
uint32_t bt_pages_needed(const struct paste_btree *t)
{
	return 3u * (t->height + 1u) + 2u;
}

uint32_t bt_page_alloc(struct paste_btree *t)
{
	uint32_t no;
	/* A fresh page while the free queue is short: a replaced page then
	 * waits through several checkpoints, and the hints to it stay good. */
	if (t->nfree && (t->nfree > BT_FREE_KEEP * t->used || t->hwm >= t->npages)) {
		no = t->free_q[t->free_head];
		t->free_head = t->free_head + 1 == t->npages ? 0 : t->free_head + 1;
		t->nfree--;
	} else if (t->hwm < t->npages) {
		no = t->hwm++;
	} else {
		abort();   /* callers reserved bt_pages_needed() */
	}
	t->moved[no] = 0;                /* a new life: hints to the old one stop here */
	t->shape++;
	uint8_t listed = t->ps[no] & PS_LISTED;
	t->ps[no] = PS_USED | PS_LISTED;
	if (!listed)
		t->dirty[t->ndirty++] = no;
	t->used++;
	return no;
}

void bt_page_free(struct paste_btree *t, uint32_t no)
{
	uint8_t listed = t->ps[no] & PS_LISTED;
	t->shape++;
	t->used--;
	t->moved[no] = 0;                /* cow() sets it when a copy replaces the page */
	if (bt_h(bt_pg(t, no))->gen >= t->gen) {
		t->ps[no] = PS_FREE | listed;
		bt_free_push(t, no);
	} else {
		t->ps[no] = PS_PENDING | listed;
		t->pending[t->npending++] = no;
	}
}

/* A writable version of page no: itself if written in this generation,
 * else a copy (the original becomes pending). */
static uint32_t cow(struct paste_btree *t, uint32_t no)
{
	uint8_t *pg = bt_pg(t, no);
	if (bt_h(pg)->gen >= t->gen)
		return no;
	uint32_t q = bt_page_alloc(t);
	uint8_t *qp = bt_pg(t, q);
	memcpy(qp, pg, BT_PAGE);
	bt_h(qp)->gen = t->gen;
	bt_h(qp)->pageno = q;
	bt_page_free(t, no);
	t->moved[no] = q;
	return q;
}

void bt_memo_keep(struct paste_btree *t, const uint32_t *page, const uint16_t *idx, uint32_t depth,
		  const uint8_t *key, uint32_t klen, bool found)
{
	if (t->applying || klen > BT_MEMO_KEY)
		return;
	t->dmemo.on = true;
	t->dmemo.found = found;
	t->dmemo.klen = klen;
	t->dmemo.path.depth = depth;
	memcpy(t->dmemo.path.page, page, sizeof(page[0]) * depth);
	memcpy(t->dmemo.path.idx, idx, sizeof(idx[0]) * depth);
	memcpy(t->dmemo.key, key, klen);
}

/* Finger f's leaf is key's leaf: no page moved since, and key lies
 * between the separators that bound it (a descent would take the same
 * children: child i holds separator i-1 <= key < separator i). */
static bool finger_holds(struct paste_btree *t, const struct bt_finger *f, const uint8_t *key,
			 uint32_t klen)
{
	if (!f->on || f->shape != t->shape)
		return false;
	if (f->has_lo) {
		const uint8_t *e = bt_entry(bt_pg(t, f->lo_pg), f->lo_i);
		if (bt_keycmp(e + BT_IFIX, ld16(e), key, klen) > 0)
			return false;
	}
	if (f->has_hi) {
		const uint8_t *e = bt_entry(bt_pg(t, f->hi_pg), f->hi_i);
		if (bt_keycmp(e + BT_IFIX, ld16(e), key, klen) <= 0)
			return false;
	}
	return true;
}

static void path_copy(struct bt_path *to, const struct bt_path *from)
{
	to->depth = from->depth;
	memcpy(to->page, from->page, sizeof(to->page[0]) * from->depth);
	memcpy(to->idx, from->idx, sizeof(to->idx[0]) * from->depth);
}

/* Descend to the leaf for key; true when the key is there. */
bool bt_descend(struct paste_btree *t, const uint8_t *key, uint32_t klen, struct bt_path *path)
{
	if (t->dmemo.on && t->dmemo.klen == klen &&
	    memcmp(t->dmemo.key, key, klen) == 0) {
		t->dmemo.on = !t->applying;
		path_copy(path, &t->dmemo.path);
		return t->dmemo.found;
	}
	bool found;
	t->descents++;
	for (uint32_t j = 0; j < 2; j++) {
		struct bt_finger *f = &t->finger[t->finger_old ^ 1 ^ j];   /* the newer first */
		if (!finger_holds(t, f, key, klen))
			continue;
		uint32_t d = f->path.depth - 1;
		path_copy(path, &f->path);
		path->idx[d] = (uint16_t)bt_search_near(bt_pg(t, path->page[d]), f->path.idx[d], key,
							klen, &found);
		f->path.idx[d] = path->idx[d];   /* where the next search near it starts */
		t->finger_old = (uint8_t)(f == &t->finger[0]);
		t->leaf_descents++;
		bt_memo_keep(t, path->page, path->idx, path->depth, key, klen, found);
		return found;
	}
	struct bt_finger *f = &t->finger[t->finger_old];
	uint32_t no = t->root;
	f->has_lo = f->has_hi = false;
	for (uint32_t d = 0;; d++) {
		uint8_t *pg = bt_pg(t, no);
		uint32_t i = bt_search(pg, key, klen, &found);
		path->page[d] = no;
		path->idx[d] = (uint16_t)i;
		if (bt_h(pg)->type == BT_LEAF) {
			path->depth = d + 1;
			break;
		}
		if (i > 0) {
			f->has_lo = true;
			f->lo_pg = no;
			f->lo_i = (uint16_t)(i - 1);
		}
		if (i < bt_h(pg)->nkeys) {
			f->has_hi = true;
			f->hi_pg = no;
			f->hi_i = (uint16_t)i;
		}
		no = bt_child(pg, i);
	}
	f->on = true;
	f->shape = t->shape;
	path_copy(&f->path, path);
	t->finger_old ^= 1;
	bt_memo_keep(t, path->page, path->idx, path->depth, key, klen, found);
	return found;
}

/* Copy every page of the path that belongs to the checkpointed tree,
 * top-down, re-pointing each parent (already writable) at its copy. */
static void path_writable(struct paste_btree *t, struct bt_path *path)
{
	for (uint32_t d = 0; d < path->depth; d++) {
		uint32_t q = cow(t, path->page[d]);
		if (q == path->page[d])
			continue;
		path->page[d] = q;
		if (d == 0)
			t->root = q;
		else
			bt_set_child(bt_pg(t, path->page[d - 1]), path->idx[d - 1], q);
	}
}

/* ---- splits, merges, rebalancing ----------------------------------------- */

static uint32_t wide_child(struct bt_wide *w, uint32_t i)
{
	return i == 0 ? w->child0 : ld32(bt_wentry(w, i - 1) + 4);
}

static void wide_set_child(struct bt_wide *w, uint32_t i, uint32_t child)
{
	if (i == 0)
		w->child0 = child;
	else
		st32(bt_wentry(w, i - 1) + 4, child);
}

/* Write w as two pages lp (left) and rp (right); the key that separates
 * them goes to sep (*slen bytes). */
static void split_store(struct paste_btree *t, const struct bt_wide *w, uint32_t lp, uint32_t rp,
			uint8_t *sep, uint32_t *slen)
{
	struct bt_wide *x = (struct bt_wide *)w;   /* bt_wentry takes a non-const node */
	uint32_t i = bt_wide_split(w);
	if (w->type == BT_LEAF) {
		const uint8_t *a = bt_wentry(x, i - 1), *b = bt_wentry(x, i);
		*slen = bt_separator(sep, bt_ekey(BT_LEAF, a), ld16(a), bt_ekey(BT_LEAF, b), ld16(b));
		bt_wide_store(w, 0, i, 0, bt_pg(t, lp), lp, t->gen);
		bt_wide_store(w, i, w->n, 0, bt_pg(t, rp), rp, t->gen);
	} else {
		const uint8_t *m = bt_wentry(x, i);
		*slen = ld16(m);
		memcpy(sep, m + BT_IFIX, *slen);
		bt_wide_store(w, 0, i, w->child0, bt_pg(t, lp), lp, t->gen);
		bt_wide_store(w, i + 1, w->n, ld32(m + 4), bt_pg(t, rp), rp, t->gen);
	}
}

/* The node at depth d of the path (its page writable) has the new
 * content W, which may be too big, too small, or empty at the root. Make
 * it a valid node, and its parent after it, bottom-up, until a level needs
 * no change of its parent's entries. */
static void fix(struct paste_btree *t, struct bt_path *path, uint32_t d, struct bt_wide *W)
{
	struct bt_wide *S = t->wide[1], *C = t->wide[2], *PW = t->wide[3];
	uint8_t sep[PASTE_BTREE_MAX_KEY];
	uint32_t slen;
	t->shape++;                       /* inner pages change below */
	for (;;) {
		uint32_t P = path->page[d];
		bool over = W->bytes > BT_CAP;
		bool under = !over && d > 0 && W->bytes < BT_UNDERFLOW;
		if (!over && !under) {
			if (d == 0 && W->n == 0) {
				/* An empty root leaf: the tree is empty. An inner
				 * root with one child: the child is the root. */
				t->root = W->type == BT_LEAF ? 0 : W->child0;
				t->height--;
				bt_page_free(t, P);
			} else {
				bt_wide_store(W, 0, W->n, W->child0, bt_pg(t, P), P, t->gen);
			}
			return;
		}
		if (d == 0) {
			/* The root overflows: split it, and a new root above. */
			uint32_t q = bt_page_alloc(t), r = bt_page_alloc(t);
			split_store(t, W, P, q, sep, &slen);
			uint8_t *rp = bt_pg(t, r);
			bt_page_init(rp, r, BT_INNER, (uint8_t)(W->level + 1), t->gen);
			bt_h(rp)->child0 = P;
			bt_page_insert(rp, 0, t->entry, bt_inner_entry(t->entry, sep, slen, q));
			t->root = r;
			t->height++;
			return;
		}
		uint32_t ci = path->idx[d - 1];
		bt_wide_load(PW, bt_pg(t, path->page[d - 1]));
		if (over) {
			uint32_t q = bt_page_alloc(t);
			split_store(t, W, P, q, sep, &slen);
			bt_wide_insert(PW, ci, t->entry, bt_inner_entry(t->entry, sep, slen, q));
		} else {
			/* Too small: take in the left sibling (or the right one
			 * for the leftmost child). j: the separator between. */
			bool left = ci > 0;
			uint32_t j = left ? ci - 1 : 0;
			uint32_t sno = wide_child(PW, left ? ci - 1 : ci + 1);
			bt_wide_load(S, bt_pg(t, sno));
			struct bt_wide *L = left ? S : W, *R = left ? W : S;
			C->type = L->type;
			C->level = L->level;
			C->child0 = L->child0;
			C->n = C->bytes = C->used = 0;
			bt_wide_append(C, L, 0, L->n);
			if (C->type == BT_INNER) {
				const uint8_t *pe = bt_wentry(PW, j);
				bt_wide_insert(C, C->n, t->entry,
					       bt_inner_entry(t->entry, pe + BT_IFIX, ld16(pe), R->child0));
			}
			bt_wide_append(C, R, 0, R->n);
			if (C->bytes <= BT_CAP) {
				/* Merge into P; the sibling's page goes. */
				bt_wide_store(C, 0, C->n, C->child0, bt_pg(t, P), P, t->gen);
				bt_page_free(t, sno);
				bt_wide_remove(PW, j);
				if (left)
					wide_set_child(PW, ci - 1, P);
			} else {
				/* Redistribute: both pages rewritten (the sibling
				 * into a page of this generation), a new separator. */
				uint32_t s2 = sno;
				if (bt_h(bt_pg(t, sno))->gen < t->gen) {
					s2 = bt_page_alloc(t);
					bt_page_free(t, sno);
				}
				uint32_t lp = left ? s2 : P, rp = left ? P : s2;
				split_store(t, C, lp, rp, sep, &slen);
				bt_wide_remove(PW, j);
				bt_wide_insert(PW, j, t->entry, bt_inner_entry(t->entry, sep, slen, rp));
				if (left)
					wide_set_child(PW, ci - 1, lp);
			}
		}
		/* The parent's new content is PW: fix it next. */
		struct bt_wide *tmp = W;
		W = PW;
		PW = tmp;
		d--;
	}
}

/* ---- applying a change ---------------------------------------------------- */

/* A hint is followed only to a page that is in use (every page in use is
 * in the tree: a page leaves it through bt_page_free), a leaf, written in
 * this generation (no copy-on-write due, so no parent to re-point), with
 * key at the hinted index. A key is in the tree once, so that entry is
 * the key's. A stale hint fails one of the tests and costs a descent.
 *
 * A hint to a leaf since copied on write is followed to the copy
 * (t->moved, kept while the replaced page waits in the free queue): a copy
 * keeps every entry at its index. Without it a key not written for two
 * checkpoints would descend (40 % of a pipelined SET load's overwrites
 * with 100 000 keys: docs/results.md, "Overwrites by hint"). Each copy
 * is tested as any hint is; BT_HINT_HOPS bounds the walk. */
uint8_t *bt_hint_entry(struct paste_btree *t, struct bt_hint *hint, const uint8_t *key,
		       uint32_t klen)
{
	uint32_t no = hint->leaf;
	for (uint32_t hop = 0;; hop++) {
		if (no < BT_FIRST_PAGE || no >= t->hwm)
			return NULL;
		if ((t->ps[no] & PS_STATE) == PS_USED)
			break;
		if (hop == BT_HINT_HOPS)
			return NULL;
		no = t->moved[no];           /* replaced (pending or free): its copy */
	}
	uint8_t *pg = bt_pg(t, no);
	const struct bt_hdr *h = bt_h(pg);
	if (h->type != BT_LEAF || h->gen < t->gen || hint->idx >= h->nkeys)
		return NULL;
	uint8_t *e = bt_entry(pg, hint->idx);
	if (ld16(e) != klen || memcmp(bt_ekey(BT_LEAF, e), key, klen) != 0)
		return NULL;
	hint->leaf = no;
	return e;
}

/* The value references of leaf entry e go once its change is durable. */
static void release_entry(struct paste_btree *t, const uint8_t *e)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	extents_copy(ext, bt_lext(e), e[2]);
	bt_release_later(t, ext, e[2]);
}

/* Put t->entry at i of writable leaf no, replacing the entry there if
 * replace, when the page stays within its bounds (the root: any fill).
 * No split or merge, so no path is needed. */
static bool put_in_place(struct paste_btree *t, uint32_t no, uint32_t i, uint32_t size,
			 bool replace)
{
	uint8_t *pg = bt_pg(t, no);
	uint32_t old = replace ? 2u + bt_esize(BT_LEAF, bt_entry(pg, i)) : 0;
	uint32_t after = bt_used(pg) - old + 2u + size;
	if (after > BT_CAP || (no != t->root && after < BT_UNDERFLOW))
		return false;
	bt_group_old(t, t->entry, replace ? bt_entry(pg, i) : NULL);
	if (replace) {
		release_entry(t, bt_entry(pg, i));
		bt_page_replace(pg, i, t->entry, size);
	} else {
		bt_page_insert(pg, i, t->entry, size);
	}
	return true;
}

/* *hint: in, where the key was last put (from the point index); out,
 * where it is now, or leaf 0 after a split or merge moved it. An
 * overwrite whose hint holds skips the descent, whose cold leaf probes
 * cost ~10 % of the server's CPU in a pipelined SET (docs/results.md,
 * "Overwrites by hint"). */
static void apply_set(struct paste_btree *t, const uint8_t *key, uint32_t klen,
		      const struct paste_extent *val, uint32_t n, uint32_t vlen,
		      const struct paste_btree_attr *a, struct bt_hint *hint)
{
	uint32_t size = bt_leaf_entry(t->entry, key, klen, val, n, vlen, a);
	bt_value_ref(t, val, n);
	if (bt_hint_entry(t, hint, key, klen) && put_in_place(t, hint->leaf, hint->idx, size, true)) {
		t->hinted_sets++;
		return;
	}
	*hint = (struct bt_hint){ 0, 0 };
	if (!t->root) {
		bt_group_old(t, t->entry, NULL);
		uint32_t r = bt_page_alloc(t);
		bt_page_init(bt_pg(t, r), r, BT_LEAF, 0, t->gen);
		bt_page_insert(bt_pg(t, r), 0, t->entry, size);
		t->root = r;
		t->height = 1;
		t->nkeys = 1;
		*hint = (struct bt_hint){ r, 0 };
		return;
	}
	struct bt_path path;
	bool found = bt_descend(t, key, klen, &path);
	path_writable(t, &path);
	uint32_t d = path.depth - 1, i = path.idx[d];
	uint8_t *pg = bt_pg(t, path.page[d]);
	if (!found)
		t->nkeys++;
	if (put_in_place(t, path.page[d], i, size, found)) {
		*hint = (struct bt_hint){ path.page[d], (uint16_t)i };
		return;
	}
	bt_group_old(t, t->entry, found ? bt_entry(pg, i) : NULL);
	if (found)
		release_entry(t, bt_entry(pg, i));
	struct bt_wide *W = t->wide[0];
	bt_wide_load(W, pg);
	if (found)
		bt_wide_remove(W, i);
	bt_wide_insert(W, i, t->entry, size);
	fix(t, &path, d, W);
}

/* Remove entry i of writable leaf no when the leaf stays within its
 * bounds (the root: while it keeps a key). No merge, so no path is needed. */
static bool remove_in_place(struct paste_btree *t, uint32_t no, uint32_t i)
{
	uint8_t *pg = bt_pg(t, no);
	uint8_t *e = bt_entry(pg, i);
	uint32_t after = bt_used(pg) - 2u - bt_esize(BT_LEAF, e);
	if (no == t->root ? bt_h(pg)->nkeys < 2 : after < BT_UNDERFLOW)
		return false;
	bt_group_old(t, e, e);
	release_entry(t, e);
	bt_page_remove(pg, i);
	return true;
}

/* hint: as apply_set's. A delete whose hint holds and whose leaf keeps
 * enough skips the descent. */
static bool apply_del(struct paste_btree *t, const uint8_t *key, uint32_t klen,
		      struct bt_hint hint)
{
	if (bt_hint_entry(t, &hint, key, klen) && remove_in_place(t, hint.leaf, hint.idx)) {
		t->nkeys--;
		t->hinted_dels++;
		return true;
	}
	struct bt_path path;
	if (!t->root || !bt_descend(t, key, klen, &path))
		return false;
	path_writable(t, &path);
	uint32_t d = path.depth - 1, i = path.idx[d];
	t->nkeys--;
	if (remove_in_place(t, path.page[d], i))
		return true;
	uint8_t *pg = bt_pg(t, path.page[d]);
	bt_group_old(t, bt_entry(pg, i), bt_entry(pg, i));
	release_entry(t, bt_entry(pg, i));
	struct bt_wide *W = t->wide[0];
	bt_wide_load(W, pg);
	bt_wide_remove(W, i);
	fix(t, &path, d, W);
	return true;
}

/* Every value reference to release (now or once durable), every page
 * freed. Depth-first with an explicit stack. */
static void apply_clear(struct paste_btree *t)
{
	uint32_t stack[BT_MAXH], next[BT_MAXH];
	int top = -1;
	if (t->root) {
		stack[++top] = t->root;
		next[top] = 0;
	}
	while (top >= 0) {
		uint8_t *pg = bt_pg(t, stack[top]);
		const struct bt_hdr *h = bt_h(pg);
		if (h->type == BT_INNER && next[top] <= h->nkeys) {
			uint32_t c = bt_child(pg, next[top]++);
			stack[++top] = c;
			next[top] = 0;
			continue;
		}
		if (h->type == BT_LEAF) {
			for (uint32_t i = 0; i < h->nkeys; i++)
				release_entry(t, bt_entry(pg, i));
		}
		bt_page_free(t, stack[top--]);
	}
	t->root = 0;
	t->height = 0;
	t->nkeys = 0;
}

/* Apply a change that is logged (or being replayed). Cannot fail: the
 * caller checked the key, the extents and bt_pages_needed(). */
int bt_leaf_foreach(struct paste_btree *t, int (*fn)(void *arg, const uint8_t *e), void *arg)
{
	for (uint32_t no = BT_FIRST_PAGE; no < t->hwm; no++) {
		uint8_t *pg = bt_pg(t, no);
		if ((t->ps[no] & PS_STATE) != PS_USED || bt_h(pg)->type != BT_LEAF)
			continue;
		for (uint32_t i = 0; i < bt_h(pg)->nkeys; i++) {
			int r = fn(arg, bt_entry(pg, i));
			if (r)
				return r;
		}
	}
	return 0;
}

/* Every key in [lo, hi) (hilen 0: no end), one delete at a time, each as
 * DEL applies it; returns the count. The first key at or after lo is
 * found by a descent each time: the tree changes under each delete. */
static int apply_delrange(struct paste_btree *t, const uint8_t *lo, uint32_t lolen,
			  const uint8_t *hi, uint32_t hilen)
{
	uint8_t key[PASTE_BTREE_MAX_KEY];
	int count = 0;
	while (t->root) {
		struct bt_path path;
		bt_descend(t, lo, lolen, &path);
		uint32_t d = path.depth - 1;
		uint8_t *pg = bt_pg(t, path.page[d]);
		if (path.idx[d] >= bt_h(pg)->nkeys) {
			/* lo is past this leaf's keys: the next key is the first
			 * of the next leaf, found by a descent to its separator. */
			uint32_t sd = d;
			while (sd-- > 0 && path.idx[sd] >= bt_h(bt_pg(t, path.page[sd]))->nkeys)
				;
			if (sd == UINT32_MAX)
				break;
			const uint8_t *sep = bt_entry(bt_pg(t, path.page[sd]), path.idx[sd]);
			uint32_t slen = ld16(sep);
			memcpy(key, sep + BT_IFIX, slen);
			bt_descend(t, key, slen, &path);
			d = path.depth - 1;
			pg = bt_pg(t, path.page[d]);
			if (path.idx[d] >= bt_h(pg)->nkeys)
				break;
		}
		const uint8_t *e = bt_entry(pg, path.idx[d]);
		uint32_t klen = ld16(e);
		if (hilen && bt_keycmp(bt_ekey(BT_LEAF, e), klen, hi, hilen) >= 0)
			break;
		memcpy(key, bt_ekey(BT_LEAF, e), klen);
		struct bt_point_pos at = bt_point_find(&t->point, key, klen);
		apply_del(t, key, klen, bt_point_hint(at));
		bt_point_del(&t->point, at);
		count++;
	}
	return count;
}

int bt_apply(struct paste_btree *t, const struct paste_btree_record *r, uint64_t lsn)
{
	uint8_t key[PASTE_BTREE_MAX_KEY];
	if (r->klen)
		memcpy(key, r->key, r->klen);   /* r->key may point into the store */
	int rc = 0;
	t->applying = true;
	if (r->op != PASTE_BTREE_SET && r->op != PASTE_BTREE_DEL)
		t->dmemo.on = false;     /* a range's descents follow its changes */
	switch (r->op) {
	case PASTE_BTREE_SET:
	{
		/* apply_set does not change the index: at stays valid. */
		struct bt_point_pos at = bt_point_find(&t->point, key, r->klen);
		struct bt_hint hint = bt_point_hint(at);
		apply_set(t, key, r->klen, r->val, r->n, r->vlen, &r->attr, &hint);
		bt_point_put(&t->point, at, key, r->klen, r->val, r->n, &r->attr, hint);
		break;
	}
	case PASTE_BTREE_DEL:
	{
		struct bt_point_pos at = bt_point_find(&t->point, key, r->klen);
		rc = apply_del(t, key, r->klen, bt_point_hint(at)) ? 0 : -ENOENT;
		bt_point_del(&t->point, at);
		break;
	}
	case PASTE_BTREE_CLEAR:
		apply_clear(t);
		bt_point_clear(&t->point);
		break;
	case PASTE_BTREE_DELRANGE:
		rc = apply_delrange(t, key, r->klen, r->hi, r->hilen);
		break;
	case PASTE_BTREE_COMMIT:
		break;           /* the end of a group: the replay applied its records */
	}
	if (lsn > t->last_lsn)
		t->last_lsn = lsn;
	t->mods++;
	t->dmemo.on = false;
	t->applying = false;
	return rc;
}

