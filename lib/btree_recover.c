/* btree_recover.c - the tree at open (newest valid meta, a checked walk of
 * the checkpointed tree, buffer references, the free-page set, replay of
 * the log after the checkpoint), paste_btree_check, and paste_btree_salvage
 * (a damaged tree rebuilt from the leaves that pass their checks and the
 * log). Formats: the top of lib/btree.c.
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

struct frame {
	uint32_t no, next;
	const uint8_t *lo, *hi;   /* bounds: lo <= key < hi; NULL: none */
	uint32_t lolen, hilen;
};

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
	/* salvage: told of every page that fails (with its bounds) and of
	 * every entry of a leaf that passes */
	void (*lost)(void *arg, uint32_t no, const char *why, const struct frame *b);
	void (*leaf)(void *arg, const uint8_t *e);
	void *arg;
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
		if (wk->lost)
			wk->lost(wk->arg, no, why, b);
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
		for (uint32_t i = 0; wk->leaf && i < h->nkeys; i++)
			wk->leaf(wk->arg, bt_entry(pg, i));
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

/* A group's record kept aside until its COMMIT: the record (its key and
 * range end point into the store, which recovery does not change) and a
 * copy of its extents. */
struct held_rec {
	uint64_t lsn;
	struct paste_btree_record r;
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
};

struct replay {
	struct paste_btree *t;
	struct held_rec *g;           /* the open group's records */
	size_t n, cap;
	uint64_t dropped;             /* records of groups without a COMMIT */
};

static int apply_one(struct paste_btree *t, const struct paste_btree_record *r, uint64_t lsn)
{
	if (bt_pages_spare(t) < bt_pages_needed(t))
		return -ENOSPC;
	bt_apply(t, r, lsn);   /* a DEL of an absent key changes nothing */
	t->replayed++;
	return 0;
}

static int replay_one(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
		      uint32_t n, uint32_t len, uint32_t crc)
{
	struct replay *rp = arg;
	struct paste_btree *t = rp->t;
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
	if (r.op == PASTE_BTREE_COMMIT) {
		/* A whole group: apply it, in order. */
		for (size_t i = 0; i < rp->n; i++) {
			rp->g[i].r.val = rp->g[i].ext;   /* g may have moved (realloc) */
			int rc = apply_one(t, &rp->g[i].r, rp->g[i].lsn);
			if (rc < 0)
				return rc;
		}
		rp->n = 0;
		return apply_one(t, &r, lsn);
	}
	if (!r.group || r.first) {
		rp->dropped += rp->n;   /* a group cut short (a crash, an abort) */
		rp->n = 0;
	}
	if (!r.group)
		return apply_one(t, &r, lsn);
	if (rp->n == rp->cap) {
		size_t cap = rp->cap ? 2 * rp->cap : 64;
		struct held_rec *q = realloc(rp->g, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		rp->g = q;
		rp->cap = cap;
	}
	struct held_rec *h = &rp->g[rp->n++];
	h->lsn = lsn;
	memcpy(h->ext, ext, n * sizeof(*ext));
	h->r = r;
	h->r.val = h->ext;
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
		t->shape++;
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
			bt_free_push(t, no);
	t->used = wk.pages;
	t->walk_ns = paste_clock_ns() - t0;
	t->replaying = true;
	struct replay rp = { .t = t };
	int rc = paste_wal_foreach(t->w, replay_one, &rp);
	t->replaying = false;
	t->group_dropped = rp.dropped + rp.n;   /* the last group had no COMMIT */
	free(rp.g);
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

/* ---- salvage --------------------------------------------------------------- */

/* A key of the damaged tree's checkpoint, copied out of a leaf that passed
 * its checks: the key, the value's extents and its attributes. */
struct sv_key {
	uint32_t klen, n, vlen;
	bool superseded;            /* a log record past the checkpoint has the key (or a CLEAR) */
	bool damaged;               /* its value fails its CRC32C */
	struct paste_btree_attr a;
	struct paste_extent *ext;   /* n extents, then the key's bytes */
	uint8_t *key;
};

struct salvage {
	struct paste_btree *t;      /* the damaged tree, read where it lies */
	struct sv_key *k;
	size_t n, cap;
	uint64_t src_lsn;           /* the checkpoint's LSN (0: not known) */
	uint64_t lost_pages;
	bool oom, clear;
	struct paste_btree_record *grp;   /* the open group's records (sv_mark) */
	size_t ngrp, cgrp;
	paste_salvage_fn say;
	void *arg;
};

/* A key for a report: printable bytes as they are, others as \xNN, cut
 * at 48 bytes. */
static void key_text(char *out, size_t cap, const uint8_t *key, uint32_t klen)
{
	size_t o = 0;
	out[o++] = '"';
	for (uint32_t i = 0; i < klen && i < 48 && o + 6 < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, key[i] >= 0x20 && key[i] < 0x7f && key[i] != '"' &&
				      key[i] != '\\' ? "%c" : "\\x%02x", key[i]);
	snprintf(out + o, cap - o, "%s\"", klen > 48 ? "..." : "");
}

static void sv_lost(void *arg, uint32_t no, const char *why, const struct frame *b)
{
	struct salvage *sv = arg;
	char lo[220] = "the first key", hi[220] = "the end", line[600];
	if (b->lo)
		key_text(lo, sizeof(lo), b->lo, b->lolen);
	if (b->hi)
		key_text(hi, sizeof(hi), b->hi, b->hilen);
	snprintf(line, sizeof(line), "tree: page %u: %s: its keys, from %s up to %s (not included), "
		 "are lost but for those the log holds", no, why, lo, hi);
	sv->say(sv->arg, line);
	sv->lost_pages++;
}

static void sv_leaf(void *arg, const uint8_t *e)
{
	struct salvage *sv = arg;
	if (sv->oom)
		return;
	if (sv->n == sv->cap) {
		size_t cap = sv->cap ? 2 * sv->cap : 1024;
		struct sv_key *v = realloc(sv->k, cap * sizeof(*v));
		if (!v) {
			sv->oom = true;
			return;
		}
		sv->k = v;
		sv->cap = cap;
	}
	struct sv_key *k = &sv->k[sv->n];
	memset(k, 0, sizeof(*k));
	k->n = e[2];
	k->klen = ld16(e);
	k->vlen = ld32(e + 4);
	k->ext = malloc(sizeof(*k->ext) * k->n + k->klen);
	if (!k->ext) {
		sv->oom = true;
		return;
	}
	extents_copy(k->ext, bt_lext(e), k->n);
	k->key = (uint8_t *)(k->ext + k->n);
	memcpy(k->key, bt_ekey(BT_LEAF, e), k->klen);
	bt_lattr(e, &k->a);
	uint32_t crc = 0;
	for (uint32_t x = 0; x < k->n; x++)   /* inside the buffer area: bt_page_check */
		crc = paste_crc32c(crc, paste_store_buf(sv->t->st, k->ext[x].buf) + k->ext[x].off,
				   k->ext[x].len);
	k->damaged = crc != k->a.crc;
	sv->n++;
}

/* The collected key equal to key, or NULL (they are in key order). */
static struct sv_key *sv_find(struct salvage *sv, const uint8_t *key, uint32_t klen)
{
	size_t lo = 0, hi = sv->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = bt_keycmp(sv->k[mid].key, sv->k[mid].klen, key, klen);
		if (c == 0)
			return &sv->k[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Record r (applied by the replay) supersedes the checkpoint's version of
 * its key, of every key in its range, or (a CLEAR) of every key. */
static void sv_supersede(struct salvage *sv, const struct paste_btree_record *r)
{
	if (r->op == PASTE_BTREE_CLEAR)
		sv->clear = true;
	if (r->op == PASTE_BTREE_DELRANGE) {
		for (size_t i = 0; i < sv->n; i++)
			if (bt_keycmp(sv->k[i].key, sv->k[i].klen, r->key, r->klen) >= 0 &&
			    (!r->hilen || bt_keycmp(sv->k[i].key, sv->k[i].klen, r->hi, r->hilen) < 0))
				sv->k[i].superseded = true;
		return;
	}
	struct sv_key *k = r->op == PASTE_BTREE_CLEAR ? NULL : sv_find(sv, r->key, r->klen);
	if (k)
		k->superseded = true;
}

/* A live log record past the checkpoint supersedes the checkpoint's
 * version of its key (a CLEAR, of every key): the replay applies it. */
static int sv_mark(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
		   uint32_t n, uint32_t len, uint32_t crc)
{
	struct salvage *sv = arg;
	struct paste_btree_record r;
	(void)lane;
	(void)len;
	(void)crc;
	if (lsn <= sv->src_lsn || paste_btree_record_parse(sv->t->st, ext, n, &r) < 0)
		return 0;
	/* A group's records count only at their COMMIT, as the replay
	 * applies them (a group cut short is not applied). */
	if (r.op == PASTE_BTREE_COMMIT) {
		for (size_t i = 0; i < sv->ngrp; i++)
			sv_supersede(sv, &sv->grp[i]);
		sv->ngrp = 0;
		return 0;
	}
	if (!r.group || r.first)
		sv->ngrp = 0;
	if (!r.group) {
		sv_supersede(sv, &r);
		return 0;
	}
	if (sv->ngrp == sv->cgrp) {
		size_t cap = sv->cgrp ? 2 * sv->cgrp : 64;
		struct paste_btree_record *q = realloc(sv->grp, cap * sizeof(*q));
		if (!q) {
			sv->oom = true;
			return -ENOMEM;
		}
		sv->grp = q;
		sv->cgrp = cap;
	}
	sv->grp[sv->ngrp++] = r;   /* its key and range end point into the store */
	return 0;
}

struct sv_cand {
	uint64_t gen;
	uint32_t no, level;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct sv_cand *x = a, *y = b;
	if (x->gen != y->gen)
		return x->gen > y->gen ? -1 : 1;
	return (int)y->level - (int)x->level;
}

/* With both meta slots damaged: the root of the newest tree whose pages
 * pass their checks. Every page a checkpoint keeps has a CRC; the root of
 * a generation's tree is its page of the highest level. Tries the top
 * page of each generation, newest first (at most 8), and takes the first
 * whose walk is whole, else the newest. 0 when there is no page at all. */
static uint32_t sv_find_root(struct paste_btree *t, uint8_t *seen, uint32_t *height, uint64_t *gen)
{
	struct sv_cand *c = malloc(sizeof(*c) * t->npages);
	uint32_t nc = 0, root = 0;
	for (uint32_t no = BT_FIRST_PAGE; c && no < t->npages; no++) {
		uint8_t *pg = bt_pg(t, no);
		const struct bt_hdr *h = bt_h(pg);
		if (h->magic == BT_PAGE_MAGIC && h->crc == paste_crc32c(0, pg + 4, BT_PAGE - 4) &&
		    !bt_page_check(pg, no, t->g) && h->nkeys)
			c[nc++] = (struct sv_cand){ h->gen, no, h->level };
	}
	if (c)
		qsort(c, nc, sizeof(*c), cand_cmp);
	for (uint32_t i = 0, tried = 0; c && i < nc && tried < 8; i++) {
		if (i && c[i].gen == c[i - 1].gen)
			continue;   /* not the generation's top page */
		tried++;
		struct walk wk = { .t = t, .seen = seen, .max_gen = c[i].gen, .crc_below = UINT64_MAX };
		memset(seen, 0, t->npages);
		walk(&wk, c[i].no, c[i].level + 1u);
		if (!root || !wk.problems) {
			root = c[i].no;
			*height = c[i].level + 1u;
			*gen = c[i].gen;
		}
		if (!wk.problems)
			break;
	}
	free(c);
	return root;
}

/* Meta slot 0: an empty tree of generation gen, its checkpoint LSN 0 (the
 * whole log is replayed into it), slot 1 zero. The fresh tree's pages then
 * get generations above every page the damaged one left. */
static int sv_empty_meta(struct paste_btree *t, struct paste_persist *p, uint64_t seq, uint64_t gen)
{
	struct bt_meta m = { .magic = BT_META_MAGIC, .seq = seq, .gen = gen, .hwm = BT_FIRST_PAGE,
			     .node_pages = t->npages, .page_size = BT_PAGE,
			     .uuid = { t->g->uuid[0], t->g->uuid[1] } };
	m.crc = paste_crc32c(0, (const uint8_t *)&m + 8, sizeof(m) - 8);
	memcpy(bt_pg(t, 0), &m, sizeof(m));
	memset(bt_pg(t, 1), 0, sizeof(m));
	paste_persist_flush(p, bt_pg(t, 0), sizeof(m));
	paste_persist_flush(p, bt_pg(t, 1), sizeof(m));
	return paste_persist_fence(p);
}

static uint32_t value_crc_of(const struct paste_store *st, const struct paste_extent *ext, uint32_t n)
{
	uint32_t crc = 0;
	for (uint32_t x = 0; x < n; x++)
		crc = paste_crc32c(crc, paste_store_buf(st, ext[x].buf) + ext[x].off, ext[x].len);
	return crc;
}

/* A tree that opens: its values whose bytes fail their CRC32C are
 * deleted (a value that is not what was written is no value), said with
 * their keys. Returns how many, or a negative errno. */
static int64_t sv_drop_damaged(struct paste_btree *t, paste_salvage_fn say, void *arg)
{
	struct paste_btree_cursor c;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	const uint8_t *key;
	uint32_t klen, n;
	struct { uint8_t *key; uint32_t klen; } *bad = NULL;
	size_t nbad = 0, cap = 0;
	paste_btree_cursor_init(&c, t, NULL, 0);
	while (paste_btree_cursor_next(&c, &key, &klen, ext, &n, NULL) == 1) {
		const struct paste_btree_attr *a = paste_btree_cursor_attr(&c);
		if (!a->has_crc || value_crc_of(t->st, ext, n) == a->crc)
			continue;
		if (nbad == cap) {
			cap = cap ? 2 * cap : 64;
			void *v = realloc(bad, cap * sizeof(*bad));
			if (!v)
				break;
			bad = v;
		}
		bad[nbad].key = malloc(klen);
		if (!bad[nbad].key)
			break;
		memcpy(bad[nbad].key, key, klen);
		bad[nbad++].klen = klen;
	}
	int64_t rc = 0;
	for (size_t i = 0; i < nbad; i++) {
		char kt[220], line[300];
		key_text(kt, sizeof(kt), bad[i].key, bad[i].klen);
		int r = paste_btree_del(t, bad[i].key, bad[i].klen, NULL);
		snprintf(line, sizeof(line), "tree: key %s: its value fails its checksum: %s", kt,
			 r == 0 ? "deleted (lost)" : strerror(-r));
		say(arg, line);
		if (r < 0 && rc == 0)
			rc = r;
		free(bad[i].key);
	}
	free(bad);
	return rc < 0 ? rc : (int64_t)nbad;
}

/* Make what the salvaged tree did durable: the log records through a
 * fence, then a checkpoint (which truncates the log). */
static int sv_commit(struct paste_btree *t, struct paste_persist *p, struct paste_error *err)
{
	int rc = paste_persist_fence(p);
	if (rc == 0)
		rc = paste_btree_checkpoint(t);
	return rc < 0 ? paste_error_set(err, rc, "%s: making the salvaged tree durable: %s",
					paste_store_path(t->st), strerror(-rc)) : 0;
}

int paste_btree_salvage(struct paste_store *st, struct paste_wal *w, struct paste_persist *p,
			const struct paste_btree_config *cfg, paste_salvage_fn say, void *arg,
			struct paste_error *err)
{
	if (!st || !w || !p || !say)
		return paste_error_set(err, -EINVAL, "paste_btree_salvage: no store, log, persist "
				       "object or report given");
	const char *path = paste_store_path(st);
	struct paste_btree *tree = NULL;
	struct paste_error oerr = { 0 };
	char line[600];
	int rc = paste_btree_open(&tree, st, w, p, cfg, &oerr);
	if (rc == 0) {
		paste_store_start(st);
		int64_t bad = sv_drop_damaged(tree, say, arg);
		rc = bad < 0 ? paste_error_set(err, (int)bad, "%s: deleting damaged values: %s", path,
					       strerror((int)-bad))
			     : bad ? sv_commit(tree, p, err) : 0;
		paste_btree_close(tree);
		return rc < 0 ? rc : bad > 0;
	}
	if (rc != -EBADMSG) {
		if (err)
			*err = oerr;
		return rc;
	}
	snprintf(line, sizeof(line), "tree: %s", oerr.msg);
	say(arg, line);

	/* The damaged tree, read where it lies. */
	struct salvage sv = { .say = say, .arg = arg };
	struct paste_btree *t = calloc(1, sizeof(*t));
	uint8_t *seen = NULL;
	if (t) {
		t->st = st;
		t->g = paste_store_geom(st);
		t->nodes = paste_store_nodes(st, &t->npages);
		seen = calloc(t->npages, 1);
	}
	if (!t || !seen) {
		free(t);
		return paste_error_set(err, -ENOMEM, "%s: out of memory for salvage", path);
	}
	sv.t = t;
	struct bt_meta m[2];
	int best = -1;
	uint64_t seq = 0, top_gen = 0;
	for (int s = 0; s < 2; s++) {
		if (bt_meta_read(t, s, &m[s]) != 0)
			continue;
		seq = m[s].seq > seq ? m[s].seq : seq;
		if (best < 0 || m[s].seq > m[best].seq)
			best = s;
	}
	for (uint32_t no = BT_FIRST_PAGE; no < t->npages; no++) {
		const struct bt_hdr *h = bt_h(bt_pg(t, no));
		if (h->magic == BT_PAGE_MAGIC && h->gen > top_gen && h->gen < UINT64_MAX / 4)
			top_gen = h->gen;
	}
	uint32_t root = 0, height = 0;
	uint64_t gen = 0;
	if (best >= 0) {
		root = m[best].root;
		height = m[best].height;
		gen = m[best].gen;
		sv.src_lsn = m[best].ckpt_lsn;
	} else {
		root = sv_find_root(t, seen, &height, &gen);
		snprintf(line, sizeof(line), root ? "tree: no meta slot holds: the newest tree found is "
			 "generation %llu (root page %u); its checkpoint LSN is unknown, so every key the "
			 "log holds comes from the log" : "tree: no meta slot holds and no tree page "
			 "passes its checks: only the log's keys are kept", (unsigned long long)gen, root);
		say(arg, line);
	}
	struct walk wk = { .t = t, .seen = seen, .max_gen = gen, .crc_below = UINT64_MAX,
			   .lost = sv_lost, .leaf = sv_leaf, .arg = &sv };
	memset(seen, 0, t->npages);
	walk(&wk, root, height);
	free(seen);
	if (!sv.oom)
		paste_wal_foreach(w, sv_mark, &sv);
	/* Hold the kept values' buffers until the tree holds them again. */
	for (size_t i = 0; i < sv.n; i++)
		for (uint32_t x = 0; x < sv.k[i].n; x++)
			paste_store_ref(st, sv.k[i].ext[x].buf);
	rc = sv.oom ? paste_error_set(err, -ENOMEM, "%s: out of memory for the keys to salvage", path)
		    : sv_empty_meta(t, p, seq + 1, (gen > top_gen ? gen : top_gen) + 1);
	if (rc == 0)
		rc = paste_btree_open(&tree, st, w, p, cfg, err);   /* replays the whole log */
	if (rc == 0) {
		paste_store_start(st);
		uint64_t from_log = paste_btree_count(tree), kept = 0, replaced = 0, damaged = 0;
		for (size_t i = 0; i < sv.n && rc == 0; i++) {
			struct sv_key *k = &sv.k[i];
			if (k->superseded || sv.clear) {
				replaced++;
				continue;
			}
			if (k->damaged) {
				char kt[220];
				key_text(kt, sizeof(kt), k->key, k->klen);
				snprintf(line, sizeof(line), "tree: key %s: its value fails its checksum: lost", kt);
				say(arg, line);
				damaged++;
				continue;
			}
			rc = paste_btree_put(tree, k->key, k->klen, k->ext, k->n, &k->a, NULL);
			if (rc < 0)
				paste_error_set(err, rc, "%s: putting a salvaged key back: %s", path,
						strerror(-rc));
			kept++;
		}
		if (rc == 0)
			rc = sv_commit(tree, p, err);
		snprintf(line, sizeof(line), "tree: rebuilt with %llu keys: %llu from the checkpoint's "
			 "readable leaves, %llu from the log (%llu of the checkpoint's keys the log "
			 "holds newer); %llu pages lost, %llu damaged values", (unsigned long long)
			 paste_btree_count(tree), (unsigned long long)kept, (unsigned long long)from_log,
			 (unsigned long long)replaced, (unsigned long long)sv.lost_pages,
			 (unsigned long long)damaged);
		say(arg, line);
		paste_btree_close(tree);
	}
	for (size_t i = 0; i < sv.n; i++) {
		for (uint32_t x = 0; x < sv.k[i].n; x++)
			paste_store_unref(st, sv.k[i].ext[x].buf, false);
		free(sv.k[i].ext);
	}
	free(sv.k);
	free(sv.grp);
	free(t);
	return rc < 0 ? rc : 1;
}
