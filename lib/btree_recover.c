/* btree_recover.c - the tree at open (newest valid meta, a checked walk of
 * the checkpointed tree, buffer references, the free-page set, replay of
 * the log after the checkpoint) and paste_btree_check. Formats: the top of
 * lib/btree.c.
 *
 * Cost of recovery: one pass over the checkpointed tree's pages (CRC32C of
 * each and the page's own checks: slots, entries, key order, extents) plus
 * one paste_store_ref per value extent, ~2.3 us per page in all; then ~1 us
 * per replayed record. With a checkpoint at least every ckpt_records
 * records the replay is bounded by the interval, not by history. On
 * /dev/shm (tests/unit/test_btree_recover.c prints it) 1 M keys of 16 bytes
 * with one-extent values (16 481 pages, height 4) recover in ~36 ms from a
 * checkpoint alone and in ~57 ms with a tail of 20 000 records
 * (docs/results.md, "Recovery time").
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "btree_internal.h"

/* ---- the walk ---------------------------------------------------------- */

struct walk {
	struct paste_btree *t;
	uint8_t *seen;           /* per page: reached */
	uint32_t *bufrefs;       /* check: tree extents naming each buffer */
	uint64_t max_gen;        /* no page may be newer */
	uint64_t crc_below;      /* pages of a generation below this must match their CRC */
	uint64_t keys;
	uint32_t pages, maxno;
	int problems;
	bool values;             /* check: verify every value's CRC32C */
	uint64_t bad_values;
	struct paste_error *err;
};

struct frame {
	uint32_t no, next;
	const uint8_t *lo, *hi;   /* bounds: lo <= key < hi; NULL: none */
	uint32_t lolen, hilen;
};

/* Does the value of leaf entry e still have the bytes its CRC32C names?
 * A damaged value is reported with its key (printable bytes, at most 64)
 * and counted; the walk goes on. */
static void check_value(struct walk *wk, const uint8_t *e)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	extents_copy(ext, bt_lext(e), e[2]);
	uint32_t crc = 0;
	for (uint32_t x = 0; x < e[2]; x++)
		crc = paste_crc32c(crc, paste_store_buf(wk->t->st, ext[x].buf) + ext[x].off, ext[x].len);
	if (crc == ld32(e + 8))
		return;
	if (!wk->bad_values++) {
		char key[65];
		uint32_t klen = ld16(e), k = klen < 64 ? klen : 64;
		const uint8_t *kp = bt_ekey(BT_LEAF, e);
		for (uint32_t i = 0; i < k; i++)
			key[i] = kp[i] >= 0x20 && kp[i] < 0x7f ? (char)kp[i] : '?';
		key[k] = 0;
		paste_error_append(wk->err, "the value of key \"%s\"%s (%u bytes) fails its CRC32C: "
				   "damaged", key, klen > 64 ? "..." : "", ld32(e + 4));
	}
}

/* Check page no reached from a parent of generation pgen at the given
 * level within [lo, hi). True when it may be walked into. */
static bool visit(struct walk *wk, uint32_t no, uint32_t level, uint64_t pgen, bool root,
		  const struct frame *b)
{
	struct paste_btree *t = wk->t;
	const char *why = NULL;
	if (no < BT_FIRST_PAGE || no >= t->npages)
		why = "page number out of the node area";
	else if (wk->seen[no])
		why = "page reached twice";
	uint8_t *pg = why ? NULL : bt_pg(t, no);
	const struct bt_hdr *h = pg ? bt_h(pg) : NULL;
	if (!why) {
		wk->seen[no] = 1;
		if (h->gen < wk->crc_below && h->crc != paste_crc32c(0, pg + 4, BT_PAGE - 4))
			why = "page checksum mismatch";
	}
	if (!why)
		why = bt_page_check(pg, no, t->g);
	if (!why && (h->gen > pgen || h->gen > wk->max_gen))
		why = "page newer than its parent or the checkpoint";
	if (!why && h->level != level)
		why = "page at the wrong level";
	/* What every change keeps, so a tree without it was written by a bug
	 * or by something else: an empty tree has no root, and a node below
	 * the fill bound merges or borrows. */
	if (!why && h->nkeys == 0)
		why = root ? "an empty root (an empty tree has no root)" : "empty node";
	if (!why && !root && bt_used(pg) < BT_UNDERFLOW)
		why = "a node below the fill bound (it should have merged or borrowed)";
	if (!why && h->nkeys) {
		const uint8_t *first = bt_entry(pg, 0), *last = bt_entry(pg, h->nkeys - 1u);
		if ((b->lo && bt_keycmp(bt_ekey(h->type, first), ld16(first), b->lo, b->lolen) < 0) ||
		    (b->hi && bt_keycmp(bt_ekey(h->type, last), ld16(last), b->hi, b->hilen) >= 0))
			why = "keys outside the parent's separators";
	}
	if (why) {
		if (!wk->problems++)
			paste_error_append(wk->err, "page %u: %s", no, why);
		return false;
	}
	wk->pages++;
	if (no > wk->maxno)
		wk->maxno = no;
	if (h->type == BT_LEAF) {
		wk->keys += h->nkeys;
		for (uint32_t i = 0; wk->bufrefs && i < h->nkeys; i++) {
			const uint8_t *e = bt_entry(pg, i);
			for (uint32_t x = 0; x < e[2]; x++)
				wk->bufrefs[ld32(bt_lext(e) + BT_EXT * x)]++;
			if (wk->values)
				check_value(wk, e);
		}
	}
	return true;
}

/* Depth-first over the tree from root (height levels), every page checked
 * by visit(); a page that fails is not entered. */
static void walk(struct walk *wk, uint32_t root, uint32_t height)
{
	struct frame st[BT_MAXH];
	struct frame top = { .no = root };
	int sp = -1;
	if (!root || height == 0 || height > BT_MAXH)
		return;
	if (visit(wk, root, height - 1, wk->max_gen, true, &top))
		st[++sp] = top;
	while (sp >= 0) {
		struct frame *f = &st[sp];
		uint8_t *pg = bt_pg(wk->t, f->no);
		const struct bt_hdr *h = bt_h(pg);
		if (h->type == BT_LEAF || f->next > h->nkeys) {
			sp--;
			continue;
		}
		uint32_t i = f->next++;
		struct frame c = { .no = bt_child(pg, i), .lo = f->lo, .lolen = f->lolen,
				   .hi = f->hi, .hilen = f->hilen };
		if (i > 0) {
			const uint8_t *e = bt_entry(pg, i - 1);
			c.lo = e + BT_IFIX;
			c.lolen = ld16(e);
		}
		if (i < h->nkeys) {
			const uint8_t *e = bt_entry(pg, i);
			c.hi = e + BT_IFIX;
			c.hilen = ld16(e);
		}
		if (visit(wk, c.no, h->level - 1u, h->gen, false, &c))
			st[++sp] = c;
	}
}

/* ---- recovery ---------------------------------------------------------- */

static int replay_one(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
		      uint32_t n, uint32_t len, uint32_t crc)
{
	struct paste_btree *t = arg;
	struct paste_btree_record r;
	(void)lane;
	(void)len;
	(void)crc;
	if (lsn <= t->ckpt_lsn)
		return 0;   /* in the checkpoint already (its truncation did not happen) */
	if (paste_btree_record_parse(t->st, ext, n, &r) < 0) {
		t->skipped++;
		return 0;
	}
	if (bt_pages_spare(t) < bt_pages_needed(t))
		return -ENOSPC;
	bt_apply(t, &r, lsn);   /* a DEL of an absent key changes nothing */
	t->replayed++;
	return 0;
}

static int unref_value(void *arg, const uint8_t *e)
{
	struct paste_btree *t = arg;
	struct paste_extent ext;
	for (uint32_t x = 0; x < e[2]; x++) {
		memcpy(&ext, bt_lext(e) + BT_EXT * x, BT_EXT);
		paste_store_unref(t->st, ext.buf, true);
	}
	return 0;
}

int bt_recover(struct paste_btree *t, struct paste_error *err)
{
	const char *path = paste_store_path(t->st);
	uint64_t t0 = paste_clock_ns();
	struct bt_meta m[2];
	int mr[2], best = -1;
	for (int s = 0; s < 2; s++) {
		mr[s] = bt_meta_read(t, s, &m[s]);
		if (mr[s] == 0 && (best < 0 || m[s].seq > m[best].seq))
			best = s;
	}
	if (best < 0 && mr[0] == -EBADMSG && mr[1] == -EBADMSG)
		return paste_error_set(err, -EBADMSG, "%s: both B+tree meta slots are damaged (one "
				       "write can tear only one): the tree cannot be recovered", path);
	for (int s = 0; s < 2; s++)
		if (mr[s] == -EBADMSG)
			paste_error_append(err, "B+tree meta slot %d is torn or damaged: ignored (%s)", s,
			     best >= 0 ? "the other one is used" : "the tree starts empty and the log is replayed");
	t->meta_slot = best;
	t->hwm = BT_FIRST_PAGE;
	t->gen = 1;
	if (best >= 0) {
		const struct bt_meta *b = &m[best];
		t->meta_seq = b->seq;
		t->ckpt_lsn = t->last_lsn = b->ckpt_lsn;
		t->gen = b->gen + 1;
		t->root = b->root;
		t->height = b->height;
		t->nkeys = b->nkeys;
		t->hwm = b->hwm;
	}
	struct walk wk = { .t = t, .seen = t->ps, .max_gen = t->gen - 1, .crc_below = UINT64_MAX,
			   .err = err };
	walk(&wk, t->root, t->height);
	const char *why = NULL;
	if (wk.problems)
		why = "a page failed its checks";
	else if (wk.keys != t->nkeys || (t->root && wk.pages != m[best].npages))
		why = "the key or page count differs from the meta slot";
	else if (t->root && wk.maxno >= t->hwm)
		why = "a page lies above the meta slot's high-water mark";
	if (why) {
		char detail[sizeof(err->msg)] = "";
		if (err)
			memcpy(detail, err->msg, sizeof(detail));
		return paste_error_set(err, -EBADMSG, "%s: the B+tree is damaged (%s%s%.160s) in the "
				       "checkpoint of meta slot %d (lsn %llu): not opened", path, why,
				       detail[0] ? ": " : "", detail, best, (unsigned long long)t->ckpt_lsn);
	}
	/* One reference per value extent, then the free set: every page the
	 * checkpointed tree does not have (lowest first). */
	for (uint32_t no = BT_FIRST_PAGE; no < t->hwm; no++) {
		uint8_t *pg = bt_pg(t, no);
		if (!t->ps[no] || bt_h(pg)->type != BT_LEAF)
			continue;
		for (uint32_t i = 0; i < bt_h(pg)->nkeys; i++) {
			const uint8_t *e = bt_entry(pg, i);
			struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
			extents_copy(ext, bt_lext(e), e[2]);
			bt_value_ref(t, ext, e[2]);
		}
	}
	for (uint32_t no = t->hwm; no-- > BT_FIRST_PAGE;)
		if (!t->ps[no])
			t->free_stack[t->nfree++] = no;
	t->used = wk.pages;
	t->walk_ns = paste_clock_ns() - t0;
	t->replaying = true;
	int rc = paste_wal_foreach(t->w, replay_one, t);
	t->replaying = false;
	/* The replayed records (and the values they replaced) hold buffers
	 * until a checkpoint covers them: take one at the first maintain. */
	t->ckpt_wanted = t->replayed > 0;
	t->recovery_ns = paste_clock_ns() - t0;
	if (rc < 0) {
		/* Give back what the tree holds: nobody will release it. */
		bt_leaf_foreach(t, unref_value, t);
		return paste_error_set(err, rc, "%s: replaying the log into the B+tree: %s (the node "
				       "area is too small for the records after the checkpoint)",
				       path, strerror(-rc));
	}
	return 0;
}

/* ---- check ------------------------------------------------------------- */

int paste_btree_check(struct paste_btree *t, struct paste_error *err)
{
	paste_error_set(err, 0, "%s", "");
	if (!t)
		return paste_error_set(err, -EINVAL, "paste_btree_check: no tree given");
	uint32_t nbufs = t->g->nbufs;
	struct walk wk = { .t = t, .max_gen = t->gen, .crc_below = t->gen, .values = true,
			   .err = err };
	wk.seen = calloc(t->npages, 1);
	wk.bufrefs = calloc(nbufs, sizeof(uint32_t));
	if (!wk.seen || !wk.bufrefs) {
		free(wk.seen);
		free(wk.bufrefs);
		return paste_error_set(err, -ENOMEM, "paste_btree_check: out of memory");
	}
	walk(&wk, t->root, t->height);
	int problems = wk.problems + (wk.bad_values > 0);
	if (wk.bad_values > 1)
		paste_error_append(err, "%llu damaged values in all", (unsigned long long)wk.bad_values);
	if (!t->root && t->height)
		problems++, paste_error_append(err, "empty tree of height %u", t->height);
	if (wk.keys != t->nkeys && !wk.problems)
		problems++, paste_error_append(err, "%llu keys in the pages, %llu counted", (unsigned long long)wk.keys,
				 (unsigned long long)t->nkeys);
	if (wk.pages != t->used && !wk.problems)
		problems++, paste_error_append(err, "%u pages in the tree, %u counted", wk.pages, t->used);
	uint32_t bad_state = 0, first_bad = 0;
	for (uint32_t no = BT_FIRST_PAGE; no < t->npages; no++) {
		uint8_t s = t->ps[no] & PS_STATE;
		if ((wk.seen[no] != 0) != (s == PS_USED) || (no >= t->hwm && s != PS_FREE))
			if (!bad_state++)
				first_bad = no;
	}
	if (bad_state && !wk.problems)
		problems++, paste_error_append(err, "%u pages whose state disagrees with the tree (first: %u)",
				 bad_state, first_bad);
	uint32_t short_refs = 0, first_short = 0;
	for (uint32_t b = 0; b < nbufs; b++)
		if (wk.bufrefs[b] > paste_store_refcount(t->st, b) && !short_refs++)
			first_short = b;
	if (short_refs)
		problems++, paste_error_append(err, "%u buffers hold fewer references than the tree names them "
				 "(first: buffer %u, named %u times, %u references)", short_refs,
				 first_short, wk.bufrefs[first_short],
				 paste_store_refcount(t->st, first_short));
	const char *pw = wk.problems ? NULL : bt_point_check(t);
	if (pw)
		problems++, paste_error_append(err, "%s", pw);
	if (t->meta_slot >= 0) {
		struct bt_meta m;
		if (bt_meta_read(t, t->meta_slot, &m) != 0 || m.seq != t->meta_seq)
			problems++, paste_error_append(err, "meta slot %d does not hold the last checkpoint", t->meta_slot);
	}
	free(wk.seen);
	free(wk.bufrefs);
	return problems;
}
