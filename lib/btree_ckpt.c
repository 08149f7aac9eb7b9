/* btree_ckpt.c - the tree's log records, the references that wait for a
 * change to be durable, and checkpoints (formats and the argument: the top
 * of lib/btree.c).
 *
 * A checkpoint, in order:
 *   1. CRC32C and flush every page written in this generation that is
 *      still in the tree; fence. The pages, and every log record appended
 *      so far (they were flushed through the same persist object), are
 *      durable.
 *   2. Write the meta slot that does not hold the newest meta (seq + 1,
 *      root, height, checkpoint LSN = the last record applied, generation,
 *      counts, CRC), flush it, fence. Until this fence completes the older
 *      meta is the one in force, and its pages are untouched (never
 *      written, pending ones not reused).
 *   3. Only now: pages replaced in this generation become free, and the
 *      next generation starts.
 *   4. Truncate the log to the checkpoint LSN (paste_wal_truncate persists
 *      its own lane checkpoints before it drops a reference).
 * A failed fence (the store failed) returns before the next step: step 2
 * never runs unless step 1's fence succeeded, so no meta can name a page
 * that was not durable, and the DRAM state (slot, generation, pending
 * pages) stays as it was.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include "btree_internal.h"
#include "wal_internal.h"

/* ---- records ---------------------------------------------------------- */

int paste_btree_record_parse(const struct paste_store *st, const struct paste_extent *ext,
			     uint32_t n, struct paste_btree_record *r)
{
	if (!st || !ext || !r || n == 0 || n > PASTE_WAL_MAX_EXTENTS)
		return -EINVAL;
	const struct paste_store_geom *g = paste_store_geom(st);
	uint64_t vlen = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (ext[i].buf >= g->nbufs || ext[i].off > g->buf_size || ext[i].len > g->buf_size - ext[i].off)
			return -EINVAL;
		if (i + 1 < n)
			vlen += ext[i].len;
	}
	struct paste_extent h = ext[n - 1];
	if (h.len < BT_REC_HDR)
		return -EINVAL;
	const uint8_t *b = paste_store_buf(st, h.buf) + h.off;
	uint8_t hdr[BT_REC_HDR + BT_WORD];
	memcpy(hdr, b, BT_REC_HDR);
	uint32_t magic = ld32(hdr), klen = ld16(hdr + 6), vl = ld32(hdr + 8);
	uint8_t op = hdr[4], nval = hdr[5], flags = hdr[12];
	uint32_t head = BT_REC_HDR + (flags & BT_EF_WORD ? BT_WORD : 0u);
	/* A range delete carries its end after its start, in the header. */
	uint32_t hilen = op == PASTE_BTREE_DELRANGE ? vl : 0;
	uint8_t grp = flags & (BT_EF_GROUP | BT_EF_FIRST);
	flags &= (uint8_t)~grp;
	if (magic != BT_REC_MAGIC || h.len != head + klen + hilen || nval != n - 1 ||
	    (op != PASTE_BTREE_DELRANGE && vl != vlen) || grp == BT_EF_FIRST ||
	    (flags & ~(BT_EF_TAG | BT_EF_WORD)) || hdr[13] || ld16(hdr + 14))
		return -EINVAL;
	if (op == PASTE_BTREE_SET) {
		if (klen == 0 || klen > PASTE_BTREE_MAX_KEY)
			return -EINVAL;
	} else if (op == PASTE_BTREE_DEL) {
		if (klen == 0 || klen > PASTE_BTREE_MAX_KEY || n != 1 || flags)
			return -EINVAL;
	} else if (op == PASTE_BTREE_CLEAR || op == PASTE_BTREE_COMMIT) {
		if (klen || n != 1 || flags || grp)
			return -EINVAL;
	} else if (op == PASTE_BTREE_DELRANGE) {
		if (klen > PASTE_BTREE_MAX_KEY || hilen > PASTE_BTREE_MAX_KEY || n != 1 || flags)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	struct paste_btree_attr a = { .tag = flags & BT_EF_TAG, .has_word = (flags & BT_EF_WORD) != 0,
				      .has_crc = true, .crc = ld32(hdr + 16) };
	if (a.has_word) {
		memcpy(hdr + BT_REC_HDR, b + BT_REC_HDR, BT_WORD);
		a.word = ld64(hdr + BT_REC_HDR);
	}
	*r = (struct paste_btree_record){ .op = (enum paste_btree_op)op, .key = b + head,
		.klen = klen, .val = ext, .n = n - 1, .vlen = hilen ? 0 : vl, .attr = a,
		.hi = hilen ? b + head + klen : NULL, .hilen = hilen, .group = grp != 0,
		.first = (grp & BT_EF_FIRST) != 0, .header = h };
	return 0;
}

/* Bytes a log record of n extents takes in its lane (lib/wal.c's format). */
static uint32_t wal_rec_bytes(uint32_t n)
{
	return (36u + 12u * n + 63u) & ~63u;
}

/* Log one change: the value's extents, then its header, copied densely
 * into the header buffer (a fresh one when the current one is full), in
 * one log record. The log's CRC continues the value's (a->crc), so the
 * value is read once. A full lane or a store out of buffers checkpoints
 * once and tries again. */
int bt_append(struct paste_btree *t, uint8_t op, const uint8_t *key, uint32_t klen,
	      const struct paste_extent *val, uint32_t n, uint32_t vlen,
	      const struct paste_btree_attr *a, uint64_t *lsn)
{
	return bt_append_range(t, op, key, klen, NULL, 0, val, n, vlen, a, lsn);
}

int bt_append_range(struct paste_btree *t, uint8_t op, const uint8_t *key, uint32_t klen,
		    const uint8_t *hi, uint32_t hilen, const struct paste_extent *val, uint32_t n,
		    uint32_t vlen, const struct paste_btree_attr *a, uint64_t *lsn)
{
	static const struct paste_btree_attr none = { .has_crc = true };
	if (!a)
		a = &none;
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t head = BT_REC_HDR + (a->has_word ? BT_WORD : 0u);
	uint32_t hsize = head + klen + hilen, bs = t->g->buf_size;
	if (hsize > bs)
		return -ENAMETOOLONG;   /* callers check; a header never spills into the next buffer */
	for (int attempt = 0;; attempt++) {
		if (t->hbuf == PASTE_NO_BUF || t->hoff + hsize > bs) {
			if (t->hbuf != PASTE_NO_BUF)
				paste_store_unref(t->st, t->hbuf, false);   /* its records hold it */
			t->hbuf = PASTE_NO_BUF;
			uint32_t b;
			if (paste_store_alloc(t->st, &b, 1) != 1) {
				int rc = attempt || t->grp ? -ENOSPC : paste_btree_checkpoint(t);
				if (rc < 0)
					return rc;
				continue;
			}
			t->hbuf = b;
			t->hoff = 0;
		}
		uint8_t *h = paste_store_buf(t->st, t->hbuf) + t->hoff;
		st32(h, BT_REC_MAGIC);
		h[4] = op;
		h[5] = (uint8_t)n;
		st16(h + 6, (uint16_t)klen);
		st32(h + 8, hilen ? hilen : vlen);
		h[12] = (uint8_t)((a->tag & BT_EF_TAG) | (a->has_word ? BT_EF_WORD : 0) |
				  (op == PASTE_BTREE_COMMIT ? 0 : bt_group_flags(t)));
		h[13] = 0;
		st16(h + 14, 0);
		st32(h + 16, a->crc);
		if (a->has_word)
			st64(h + BT_REC_HDR, a->word);
		if (klen)
			memcpy(h + head, key, klen);
		if (hilen)
			memcpy(h + head + klen, hi, hilen);
		if (n)
			memcpy(ext, val, sizeof(*val) * n);
		ext[n] = (struct paste_extent){ t->hbuf, t->hoff, hsize };
		int rc = wal_append_crc(t->w, t->cfg.lane, t->p, ext, n + 1, n, a->crc, lsn);
		if (rc == -ENOSPC && !attempt && !t->grp) {
			if ((rc = paste_btree_checkpoint(t)) < 0)
				return rc;
			continue;
		}
		if (rc < 0)
			return rc;
		t->hoff += (hsize + 7u) & ~7u;
		if (!t->recs_since++)
			t->first_rec_ns = paste_clock_ns();
		t->log_since += wal_rec_bytes(n + 1);
		return 0;
	}
}

/* ---- references released once durable ------------------------------------ */

int bt_release_reserve(struct paste_btree *t, size_t releases)
{
	if (t->rel_cap - (t->rel_tail - t->rel_head) >= releases)
		return 0;
	size_t cap = t->rel_cap ? t->rel_cap : 1024, n = t->rel_tail - t->rel_head;
	while (cap - n < releases)
		cap *= 2;
	struct bt_release *v = malloc(cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = t->rel[(t->rel_head + i) & (t->rel_cap - 1)];
	free(t->rel);
	t->rel = v;
	t->rel_cap = cap;
	t->rel_head = 0;
	t->rel_tail = n;
	return 0;
}

/* Drop the references of a value the current change replaced: at once
 * while replaying (replayed records are durable) or read-only, else once
 * this persist epoch (the record's) is durable. ensure_room made room. */
void bt_release_later(struct paste_btree *t, const struct paste_extent *ext, uint32_t n)
{
	if (t->replaying || !t->p) {
		for (uint32_t i = 0; i < n; i++)
			bt_value_unref(t, ext[i].buf, ext[i].len);
		return;
	}
	uint64_t e = paste_persist_epoch(t->p);
	for (uint32_t i = 0; i < n; i++) {
		if (t->rel_tail - t->rel_head >= t->rel_cap)
			abort();   /* ensure_room (or a group's abort) reserved the slots */
		t->rel[t->rel_tail++ & (t->rel_cap - 1)] =
			(struct bt_release){ e, ext[i].buf, ext[i].len };
		t->rel_bytes += ext[i].len;
	}
}

/* Epochs in the ring never go down: stop at the first not durable. */
void bt_release_due(struct paste_btree *t, bool all)
{
	uint64_t d = t->p ? paste_persist_durable(t->p) : UINT64_MAX;
	while (t->rel_head < t->rel_tail) {
		const struct bt_release *r = &t->rel[t->rel_head & (t->rel_cap - 1)];
		if (!all && r->epoch > d)
			break;
		bt_value_unref(t, r->buf, r->len);
		t->rel_bytes -= r->len;
		t->rel_head++;
	}
}

/* ---- meta slots and checkpoints --------------------------------------------- */

/* Slot s as a valid meta for this store, or -EBADMSG (or -ENODATA when the
 * slot is all zeros: never written). */
int bt_meta_read(const struct paste_btree *t, int slot, struct bt_meta *m)
{
	memcpy(m, bt_pg(t, (uint32_t)slot), sizeof(*m));
	static const struct bt_meta zero;
	if (memcmp(m, &zero, sizeof(*m)) == 0)
		return -ENODATA;
	if (m->magic != BT_META_MAGIC ||
	    m->crc != paste_crc32c(0, (const uint8_t *)m + 8, sizeof(*m) - 8))
		return -EBADMSG;
	bool empty = m->root == 0;
	if (m->page_size != BT_PAGE || m->node_pages != t->npages ||
	    m->uuid[0] != t->g->uuid[0] || m->uuid[1] != t->g->uuid[1] ||
	    m->hwm < BT_FIRST_PAGE || m->hwm > t->npages || m->gen == 0 || m->gen > UINT64_MAX / 2 ||
	    (empty ? m->height || m->nkeys || m->npages
		   : m->root < BT_FIRST_PAGE || m->root >= m->hwm || m->height == 0 ||
		     m->height > BT_MAXH || m->npages == 0 || m->npages > m->hwm))
		return -EBADMSG;
	return 0;
}

/* Page no's first len bytes on their way to the file: flushed where they
 * are, or (fsync mode) copied from the private working copy into the
 * store's mapping first, which the next fence writes back. */
static void bt_publish(struct paste_btree *t, uint32_t no, size_t len)
{
	uint8_t *pg = bt_pg(t, no);
	if (t->shared) {
		uint8_t *to = t->shared + (size_t)no * BT_PAGE;
		memcpy(to, pg, len);
		pg = to;
	}
	paste_persist_flush(t->p, pg, len);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* fsync mode, after a checkpoint committed: the private copies of the
 * pages this generation wrote (and the meta slot) equal the file now
 * (those still free hold nothing), so drop them: the next read maps the
 * file's page again and memory stays one generation's pages. One madvise
 * per run of adjacent pages. */
static void bt_drop_private(struct paste_btree *t, int slot)
{
	if (!t->shared)
		return;
	t->dirty[t->ndirty] = (uint32_t)slot;   /* room: meta pages are never listed */
	uint32_t n = t->ndirty + 1;
	qsort(t->dirty, n, sizeof(uint32_t), cmp_u32);
	for (uint32_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && t->dirty[j] == t->dirty[j - 1] + 1; j++)
			;
		madvise(bt_pg(t, t->dirty[i]), (size_t)(j - i) * BT_PAGE, MADV_DONTNEED);
	}
}

int paste_btree_checkpoint(struct paste_btree *t)
{
	if (!t)
		return -EINVAL;
	if (!t->p)
		return -EROFS;
	int rc = paste_store_failed(t->st, NULL);
	if (rc)
		return rc;
	if (t->grp)
		return -EBUSY;   /* a checkpoint would keep half a group */
	if (!t->ndirty && !t->npending && t->last_lsn <= t->ckpt_lsn)
		return 0;   /* nothing new since the last one */
	/* 1. This generation's pages, then a fence. */
	for (uint32_t i = 0; i < t->ndirty; i++) {
		uint32_t no = t->dirty[i];
		if ((t->ps[no] & PS_STATE) != PS_USED)
			continue;
		uint8_t *pg = bt_pg(t, no);
		bt_h(pg)->crc = paste_crc32c(0, pg + 4, BT_PAGE - 4);
		bt_publish(t, no, BT_PAGE);
	}
	if ((rc = paste_persist_fence(t->p)) < 0)
		return rc;
	/* 2. The other meta slot, then a fence. */
	int slot = t->meta_slot == 0 ? 1 : 0;
	struct bt_meta m = {
		.magic = BT_META_MAGIC, .seq = t->meta_seq + 1, .gen = t->gen,
		.ckpt_lsn = t->last_lsn, .nkeys = t->nkeys, .root = t->root, .height = t->height,
		.hwm = t->hwm, .npages = t->used, .node_pages = t->npages, .page_size = BT_PAGE,
		.uuid = { t->g->uuid[0], t->g->uuid[1] },
	};
	m.crc = paste_crc32c(0, (const uint8_t *)&m + 8, sizeof(m) - 8);
	uint8_t *at = bt_pg(t, (uint32_t)slot);
	memcpy(at, &m, sizeof(m));
	bt_publish(t, (uint32_t)slot, sizeof(m));
	if ((rc = paste_persist_fence(t->p)) < 0)
		return rc;
	/* 3. Committed: the replaced pages are free, a new generation. */
	t->meta_slot = slot;
	t->meta_seq = m.seq;
	t->ckpt_lsn = m.ckpt_lsn;
	for (uint32_t i = 0; i < t->npending; i++) {
		uint32_t no = t->pending[i];
		t->ps[no] = PS_FREE | (t->ps[no] & PS_LISTED);
		bt_free_push(t, no);
	}
	t->npending = 0;
	for (uint32_t i = 0; i < t->ndirty; i++)
		t->ps[t->dirty[i]] &= (uint8_t)~PS_LISTED;
	bt_drop_private(t, slot);
	t->ndirty = 0;
	t->gen++;
	t->recs_since = t->log_since = 0;
	t->ckpt_wanted = false;
	t->checkpoints++;
	/* 4. The log up to the checkpoint. */
	int64_t r = paste_wal_truncate(t->w, t->ckpt_lsn, t->p);
	return r < 0 ? (int)r : 0;
}

static bool checkpoint_due(struct paste_btree *t)
{
	if (t->recs_since >= t->cfg.ckpt_records || t->ckpt_wanted)
		return true;
	/* Free buffers short: the references of values replaced since the
	 * last checkpoint, and the log's, go back at a checkpoint. At most
	 * one a millisecond: a store full of live data gains nothing more. */
	if (bt_space_short(t)) {
		uint64_t now = paste_clock_ns();
		if (now - t->space_ckpt_ns >= 1000000u) {
			t->space_ckpt_ns = now;
			t->space_checkpoints++;
			return true;
		}
	}
	if (t->log_since * 100 >= t->g->lane_size * t->cfg.ckpt_log_pct)
		return true;
	if (t->npending && bt_pages_spare(t) < t->npages / 8)
		return true;
	return t->recs_since && paste_clock_ns() - t->first_rec_ns >= t->cfg.ckpt_ms * 1000000ull;
}

int paste_btree_maintain(struct paste_btree *t)
{
	if (!t)
		return -EINVAL;
	bt_release_due(t, false);
	if (!t->p)
		return 0;
	t->now_s = (uint32_t)(paste_clock_coarse_ms() / 1000u);
	if (t->grp)
		return 0;
	int rc = bt_clean_step(t, false);
	if (rc < 0)
		return rc;
	if (!checkpoint_due(t))
		return 0;
	rc = paste_btree_checkpoint(t);
	return rc < 0 ? rc : 1;
}

uint64_t paste_btree_last_lsn(const struct paste_btree *t)
{
	return t ? t->last_lsn : 0;
}

void paste_btree_info(const struct paste_btree *t, struct paste_btree_info *out)
{
	memset(out, 0, sizeof(*out));
	if (!t)
		return;
	out->keys = t->nkeys;
	out->height = t->height;
	out->pages_used = t->used;
	out->pages_total = t->npages - BT_FIRST_PAGE;
	out->pages_free = bt_pages_spare(t);
	out->pages_pending = t->npending;
	out->pages_dirty = 0;
	for (uint32_t i = 0; i < t->ndirty; i++)
		out->pages_dirty += (t->ps[t->dirty[i]] & PS_STATE) == PS_USED;
	out->ckpt_seq = t->meta_seq;
	out->ckpt_lsn = t->ckpt_lsn;
	out->ckpt_gen = t->gen - 1;
	out->last_lsn = t->last_lsn;
	out->checkpoints = t->checkpoints;
	out->records_since = t->recs_since;
	out->releases_waiting = t->rel_tail - t->rel_head;
	out->replayed = t->replayed;
	out->replay_skipped = t->skipped;
	out->replay_dropped = t->group_dropped;
	out->recovery_ns = t->recovery_ns;
	out->walk_ns = t->walk_ns;
	out->point_keys = t->point.on ? t->point.used : 0;
	out->point_bytes = t->point.on ? 64ull * (t->point.mask + 1ull) : 0;
	out->hinted_sets = t->hinted_sets;
	out->hinted_dels = t->hinted_dels;
	out->descents = t->descents;
	out->leaf_descents = t->leaf_descents;
	out->header_buf = t->hbuf;
	bt_clean_info(t, out);
}
