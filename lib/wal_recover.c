/* wal_recover.c - the read side of the log: recovery at open (scan each
 * lane from its checkpoint, stop at the first record that fails, then
 * drop LSNs repeated across lanes, then tell a torn tail from damage by
 * what lies past the stop), the LSN-ordered walk, the checker, and
 * salvage (a damaged lane laid out again without its damage). The format,
 * the acceptance rule and the durable marks are described at the top of
 * wal.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wal_internal.h"

static const char *const stop_why[] = {
	"valid", "no record header", "stale record from an earlier pass", "bad record size",
	"header crc mismatch", "data crc mismatch", "impossible type or lsn",
	"epoch newer than the checkpoint", "extents outside the buffer area",
	"record overruns the log head", "lsn already used by a record in another lane",
};

/* Copy the record at off and check what needs no context: magic, size,
 * header crc, type. */
static enum stop rec_load(const struct wal_lane *l, uint64_t off, struct rec_copy *rc)
{
	memcpy(&rc->h, l->base + off, REC_HDR);
	if (rc->h.magic != WAL_MAGIC)
		return STOP_END;
	if (rc->h.nexts > PASTE_WAL_MAX_EXTENTS || rc->h.size != rec_size(rc->h.type, rc->h.nexts) ||
	    rc->h.size > l->size - off)
		return STOP_SIZE;
	extents_copy(rc->ext, l->base + off + REC_HDR, rc->h.nexts);
	if (rc->h.type & REC_MARKED)   /* the mark follows the extents, as in the store */
		memcpy((uint8_t *)rc + REC_HDR + 12u * rc->h.nexts,
		       l->base + off + REC_HDR + 12u * rc->h.nexts, 4);
	if (rc->h.hdr_crc != rec_hdr_crc(&rc->h))
		return STOP_HDR_CRC;
	/* LSNs this high are refused at open, so one here is damage; it would
	 * also wrap the next record's minimum LSN to 0. */
	if ((rc->h.type == REC_WRAP ? rc->h.nexts || rc->h.len || rc->h.data_crc
				    : (rc->h.type & ~REC_MARKED) != REC_DATA) ||
	    rc->h.lsn > UINT64_MAX - (1ull << 40))
		return STOP_TYPE;
	return STOP_NONE;
}

/* The rest of the acceptance rule, given the lane's state where off is. */
static enum stop rec_accept(const struct paste_wal *w, const struct wal_lane *l,
			    uint64_t off, uint64_t used, uint64_t min_lsn,
			    uint32_t min_epoch, struct rec_copy *rc)
{
	enum stop why = rec_load(l, off, rc);
	if (why)
		return why;
	if (rc->h.lsn < min_lsn || rc->h.epoch < min_epoch)
		return STOP_STALE;
	if (rc->h.epoch > l->ckpt_epoch)
		return STOP_FUTURE;
	uint64_t total;
	if (!extents_ok(w, rc->ext, rc->h.nexts, &total) || total != rc->h.len)
		return STOP_EXTENTS;
	uint64_t advance = rc->h.type == REC_WRAP ? l->size - off : rc->h.size;
	if (used + advance >= l->size)
		return STOP_FULL;
	if (rc->h.data_crc != data_crc(w, rc->ext, rc->h.nexts))
		return STOP_DATA_CRC;
	return STOP_NONE;
}

/* Where a scan of a lane stands: the next offset, the bytes of the lane
 * accepted so far, and what the next record's LSN and epoch must reach. */
struct scan {
	uint64_t off, used, min_lsn;
	uint32_t min_epoch;
};

/* Accept records from s->off on by the acceptance rule, calling keep for
 * each DATA record (its offset and its copy), and return why the chain
 * stopped; s is then where it stopped. Recovery and salvage share it. */
static enum stop chain(const struct paste_wal *w, const struct wal_lane *l, struct scan *s,
		       void (*keep)(void *arg, uint64_t off, const struct rec_copy *rc), void *arg)
{
	struct rec_copy rc;
	for (;;) {
		enum stop why = rec_accept(w, l, s->off, s->used, s->min_lsn, s->min_epoch, &rc);
		if (why)
			return why;
		if (rc.h.type == REC_WRAP) {
			s->used += l->size - s->off;
			s->off = 0;
		} else {
			keep(arg, s->off, &rc);
			s->used += rc.h.size;
			s->off = (s->off + rc.h.size) % l->size;
		}
		s->min_lsn = rc.h.lsn + 1;
		s->min_epoch = rc.h.epoch;
	}
}

/* The valid records past a stop at s->off: whole records (both CRCs,
 * extents, ending before the head) that could follow what was kept (LSN
 * and epoch at least s's minimum, epoch no newer than the checkpoint's),
 * one look per 64 bytes of the lane's free part. Collects their count,
 * LSN range and nearest offset, and the newest LSN that the checkpoint or
 * any of their durable marks claims was durable. */
static void after_scan(const struct paste_wal *w, const struct wal_lane *l, const struct scan *s,
		       struct wal_after *a)
{
	struct rec_copy rc;
	*a = (struct wal_after){ .claim = l->ckpt_durable };
	for (uint64_t skip = WAL_ALIGN; s->used + skip < l->size; skip += WAL_ALIGN) {
		uint64_t pos = (s->off + skip) % l->size, total;
		if (rec_load(l, pos, &rc) != STOP_NONE || rc.h.type == REC_WRAP ||
		    rc.h.lsn < s->min_lsn || rc.h.epoch < s->min_epoch || rc.h.epoch > l->ckpt_epoch ||
		    s->used + skip + rc.h.size >= l->size)
			continue;
		if (!extents_ok(w, rc.ext, rc.h.nexts, &total) || total != rc.h.len ||
		    rc.h.data_crc != data_crc(w, rc.ext, rc.h.nexts))
			continue;
		if (!a->n++) {
			a->first_off = pos;
			a->first_lsn = a->last_lsn = rc.h.lsn;
		}
		if (rc.h.lsn < a->first_lsn)
			a->first_lsn = rc.h.lsn;
		if (rc.h.lsn > a->last_lsn)
			a->last_lsn = rc.h.lsn;
		uint64_t m = rec_mark(&rc.h);
		if (m > a->claim)
			a->claim = m;
		if (!(rc.h.type & REC_MARKED))
			a->unmarked++;
	}
}

/* Is a stop whose next record would have had an LSN of at least min_lsn
 * damage? Yes when something says a record at or past it was durable (a
 * durable mark or the checkpoint: a torn tail was never durable, and
 * neither was anything of its lane written after it), or when a whole
 * record without marks lies past it (written before marks existed, it
 * cannot tell: damage is the answer that loses nothing). */
static bool after_is_damage(const struct wal_after *a, uint64_t min_lsn)
{
	return (a->claim && a->claim >= min_lsn) || a->unmarked;
}

/* The scan state at lane l's stop, from what it kept. */
static struct scan lane_stop_scan(const struct wal_lane *l)
{
	struct scan s = { l->stop_off, (l->stop_off + l->size - l->head) % l->size,
			  l->head_lsn, l->head_epoch };
	if (l->end > l->first) {
		const struct wal_rec *r = lane_rec(l, ring_at(l, l->end - 1)->off);
		s.min_lsn = r->lsn + 1;
		s.min_epoch = r->epoch;
	}
	return s;
}

/* After recovery (and the dedup): is lane l's stop damage, with what
 * lies past it? */
void wal_lane_damage(struct paste_wal *w, struct wal_lane *l)
{
	struct scan s = lane_stop_scan(l);
	after_scan(w, l, &s, &l->after);
	l->good_lsn = s.min_lsn ? s.min_lsn - 1 : 0;
	l->damaged = l->ckpt_lost || after_is_damage(&l->after, s.min_lsn);
}

/* What says the stop of a damaged lane is damage, for its messages. */
static const char *damage_evidence(const struct wal_lane *l)
{
	if (l->after.claim > l->good_lsn && l->after.claim == l->ckpt_durable)
		return "the log's checkpoint says a record past it was durable";
	if (l->after.claim > l->good_lsn)
		return "written after it was durable";
	return "written without durable marks";
}

/* One sentence about how recovery ended in lane i, or nothing for a clean end. */
void wal_note_stop(const struct wal_lane *l, uint32_t i, struct paste_error *err)
{
	unsigned long long off = l->stop_off, n = l->recovered;
	const char *why = stop_why[l->stop];
	if (l->ckpt_lost)
		paste_error_append(err, "lane %u: both checkpoint slots are invalid but offset 0 holds a "
		     "record: the lane's records were not recovered", i);
	else if (l->damaged)
		paste_error_append(err, "lane %u: damaged record at offset %llu (%s) after lsn %llu: "
		     "%llu valid records follow (lsn %llu..%llu), %s", i, off, why,
		     (unsigned long long)l->good_lsn, (unsigned long long)l->after.n,
		     (unsigned long long)l->after.first_lsn, (unsigned long long)l->after.last_lsn,
		     damage_evidence(l));
	else if (l->stop >= STOP_TYPE)
		paste_error_append(err, "lane %u: corrupt record at offset %llu (%s), %llu valid records "
		     "before it", i, off, why, n);
	else if (l->stop >= STOP_SIZE)
		paste_error_append(err, "lane %u: torn record at offset %llu (%s), %llu valid records "
		     "before it%s", i, off, why, n,
		     l->after.n ? " (the rest of its batch never became durable)" : "");
}

/* A writable open of a damaged log is refused: -EBADMSG and a sentence
 * naming the store, the first damaged lane, the offset and the LSNs at
 * stake. 0 when no lane is damaged. */
int wal_refuse(const struct paste_wal *w, struct paste_error *err)
{
	uint32_t bad = 0, first = 0;
	for (uint32_t i = 0; i < w->nlanes; i++)
		if (w->lanes[i].damaged && !bad++)
			first = i;
	if (!bad)
		return 0;
	const struct wal_lane *l = &w->lanes[first];
	const char *path = paste_store_path(w->st);
	char more[48] = "";
	if (bad > 1)
		snprintf(more, sizeof(more), " (and %u more lanes)", bad - 1);
	if (l->ckpt_lost)
		return paste_error_set(err, -EBADMSG, "%s: log lane %u: both checkpoint slots are "
				       "damaged and the lane holds records%s: refused, nothing written "
				       "(paste-store salvage keeps what can be kept)", path, first, more);
	return paste_error_set(err, -EBADMSG, "%s: log lane %u: damaged record at offset %llu (%s) "
			       "after lsn %llu; %llu valid records follow it (lsn %llu..%llu), %s%s: "
			       "refused, nothing written (paste-store salvage keeps them)", path, first,
			       (unsigned long long)l->stop_off, stop_why[l->stop],
			       (unsigned long long)l->good_lsn, (unsigned long long)l->after.n,
			       (unsigned long long)l->after.first_lsn,
			       (unsigned long long)l->after.last_lsn, damage_evidence(l), more);
}

void wal_ckpt_load(struct wal_lane *l)
{
	struct wal_ckpt c[2];
	l->ckpt_slot = -1;
	for (int s = 0; s < 2; s++) {
		memcpy(&c[s], l->slot[s], sizeof(c[s]));
		bool ok = c[s].magic == CKPT_MAGIC &&
			  c[s].crc == paste_crc32c(0, (const uint8_t *)&c[s] + 8, sizeof(c[s]) - 8) &&
			  c[s].head_off < l->size && c[s].head_off % WAL_ALIGN == 0;
		if (ok && (l->ckpt_slot < 0 || c[s].seq > c[l->ckpt_slot].seq))
			l->ckpt_slot = s;
	}
	if (l->ckpt_slot < 0)
		return;   /* fresh lane: everything stays 0 */
	const struct wal_ckpt *n = &c[l->ckpt_slot];
	l->ckpt_seq = n->seq;
	l->head = l->tail = n->head_off;
	l->head_lsn = n->head_lsn;
	l->ckpt_epoch = n->epoch;
	l->head_epoch = n->head_epoch;
	l->ckpt_durable = n->durable;
}

struct index_ctx {
	struct paste_wal *w;
	struct wal_lane *l;
};

/* Recovery's keep: index the record and hold its buffers. */
static void index_rec(void *arg, uint64_t off, const struct rec_copy *rc)
{
	struct index_ctx *x = arg;
	*ring_at(x->l, x->l->end++) = (struct wal_slot){ rc->h.lsn, off, 0, NULL };
	wal_refs_take(x->w, rc->ext, rc->h.nexts);
	x->l->bytes += rc->h.len;
	x->l->recovered++;
}

/* Scan lane l from its checkpoint, index the live records and hold their
 * buffers. Returns the highest LSN accepted (0 if none). */
uint64_t wal_lane_recover(struct paste_wal *w, struct wal_lane *l)
{
	struct scan s = { l->head, 0, l->head_lsn, l->head_epoch };
	struct index_ctx x = { w, l };
	l->stop = chain(w, l, &s, index_rec, &x);
	l->tail = l->stop_off = s.off;
	l->ckpt_lost = l->ckpt_slot < 0 && l->stop == STOP_FUTURE && s.off == 0;
	return s.min_lsn > l->head_lsn ? s.min_lsn - 1 : 0;
}

/* Merging the lanes in LSN order: the lane whose next record (ring
 * position cur[i], moved up past truncated records) has the lowest LSN,
 * ties to the lower lane, or UINT32_MAX when all are done. Each lane is
 * locked only while it is looked at. */
static uint32_t lowest_next(struct paste_wal *w, uint64_t *cur, uint64_t *lsn)
{
	uint32_t best = UINT32_MAX;
	*lsn = UINT64_MAX;
	for (uint32_t i = 0; i < w->nlanes; i++) {
		struct wal_lane *l = &w->lanes[i];
		lane_lock(w, l);
		if (cur[i] < l->first)
			cur[i] = l->first;
		if (cur[i] < l->end && ring_at(l, cur[i])->lsn < *lsn) {
			best = i;
			*lsn = ring_at(l, cur[i])->lsn;
		}
		lane_unlock(w, l);
	}
	return best;
}

/* End lane l at ring position cut, as at a corrupt record. The store is
 * not started: references simply go back to 0. */
static void lane_cut(struct paste_wal *w, struct wal_lane *l, uint64_t cut)
{
	for (uint64_t pos = cut; pos < l->end; pos++) {
		wal_refs_drop(w, l, pos, true);
		l->recovered--;
	}
	l->tail = l->stop_off = ring_at(l, cut)->off;
	l->end = cut;
	l->stop = STOP_DUP_LSN;
}

static uint32_t slot_epoch(const struct wal_lane *l, uint64_t pos)
{
	return lane_rec(l, ring_at(l, pos)->off)->epoch;
}

/* LSNs come from one counter, so no two lanes can hold the same one; a
 * repeat is damage that happens to pass the checksums (the fuzzer forges
 * such stores), or a record that came back to life in a store whose torn
 * tail was not sealed (see "Making the stop permanent" in wal.c). Walk all
 * lanes in LSN order, as paste_wal_foreach does, and end one of the two
 * lanes at its copy, as at any corrupt record, so lookups by LSN stay
 * unambiguous. Which one: the copy with the older epoch goes. An LSN is
 * handed out again only by a later run (LSNs restart above the highest
 * recovered one), so the newer copy is the one that run wrote and may have
 * acknowledged; the older one is the revenant. On a tie the later lane
 * (higher index) goes. */
void wal_lanes_dedup(struct paste_wal *w)
{
	uint64_t cur[PASTE_MAX_LANES] = { 0 }, prev = 0, prev_pos = 0, best_lsn;
	uint32_t prev_lane = 0;
	bool any = false;
	for (;;) {
		uint32_t best = lowest_next(w, cur, &best_lsn);
		if (best == UINT32_MAX)
			return;
		struct wal_lane *l = &w->lanes[best];
		if (any && best_lsn == prev) {
			if (slot_epoch(l, cur[best]) <= slot_epoch(&w->lanes[prev_lane], prev_pos)) {
				lane_cut(w, l, cur[best]);
				continue;
			}
			lane_cut(w, &w->lanes[prev_lane], prev_pos);
		}
		prev = best_lsn;
		prev_lane = best;
		prev_pos = cur[best]++;
		any = true;
	}
}

/* Merge the lanes' rings by LSN. Each step peeks at every lane under its
 * lock (cheap for tools, which are the users); the callback runs unlocked. */
int paste_wal_foreach(struct paste_wal *w, paste_wal_visit_fn cb, void *arg)
{
	if (!w || !cb)
		return -EINVAL;
	uint64_t cur[PASTE_MAX_LANES] = { 0 }, best_lsn;
	for (;;) {
		uint32_t best = lowest_next(w, cur, &best_lsn);
		if (best == UINT32_MAX)
			return 0;
		struct wal_lane *l = &w->lanes[best];
		lane_lock(w, l);
		bool live = cur[best] >= l->first && cur[best] < l->end;
		const struct wal_rec *r = live ? lane_rec(l, ring_at(l, cur[best])->off) : NULL;
		cur[best]++;
		lane_unlock(w, l);
		if (!r)
			continue;   /* truncated meanwhile */
		int rc = cb(arg, best_lsn, best, rec_ext(r), r->nexts, r->len, r->data_crc);
		if (rc)
			return rc;
	}
}

struct check_state {
	struct paste_wal *w;
	struct paste_error *err;
	int damaged;
};

/* Re-read a live record's data: the bytes may have changed since recovery
 * or since the append (a buffer reused while still logged). */
static int check_record(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
			uint32_t n, uint32_t len, uint32_t crc)
{
	struct check_state *cs = arg;
	struct paste_extent copy[PASTE_WAL_MAX_EXTENTS];
	uint64_t total;
	const char *why = NULL;
	n = n < PASTE_WAL_MAX_EXTENTS ? n : PASTE_WAL_MAX_EXTENTS;
	extents_copy(copy, ext, n);
	if (!extents_ok(cs->w, copy, n, &total) || total != len)
		why = "extents outside the buffer area";
	else if (data_crc(cs->w, copy, n) != crc)
		why = "data crc mismatch (the buffer changed after it was logged)";
	if (why) {
		cs->damaged++;
		paste_error_append(cs->err, "lane %u: record lsn %llu: %s", lane, (unsigned long long)lsn, why);
	}
	return 0;
}

int paste_wal_check(struct paste_wal *w, struct paste_error *err)
{
	paste_error_set(err, 0, "%s", "");
	if (!w)
		return paste_error_set(err, -EINVAL, "paste_wal_check: no log given");
	struct check_state cs = { w, err, 0 };
	for (uint32_t i = 0; i < w->nlanes; i++) {
		if (w->lanes[i].damaged || w->lanes[i].stop >= STOP_TYPE) {
			cs.damaged++;
			wal_note_stop(&w->lanes[i], i, err);
		}
	}
	paste_wal_foreach(w, check_record, &cs);
	return cs.damaged;
}

/* ---- salvage ------------------------------------------------------------- */

struct keep {
	uint64_t *off;
	size_t n, cap;
	bool oom;
};

/* Salvage's keep: remember where the record lies. */
static void keep_off(void *arg, uint64_t off, const struct rec_copy *rc)
{
	struct keep *k = arg;
	(void)rc;
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 256;
		uint64_t *v = realloc(k->off, cap * sizeof(*v));
		if (!v) {
			k->oom = true;
			return;
		}
		k->off = v;
		k->cap = cap;
	}
	k->off[k->n++] = off;
}

/* Tell what lies in [from, to) of the lane, which salvage skips: the LSNs
 * of the records whose header still holds (their data does not), up to a
 * few, and the LSNs between which the rest lay. */
static void say_gap(const struct wal_lane *l, uint32_t i, uint64_t from, uint64_t to, enum stop why,
		    uint64_t before, uint64_t after, paste_salvage_fn say, void *arg)
{
	char line[400], named[160] = "";
	size_t k = 0, shown = 0;
	struct rec_copy rc;
	for (uint64_t off = from; off != to; off = (off + WAL_ALIGN) % l->size) {
		if (rec_load(l, off, &rc) != STOP_NONE || rc.h.type == REC_WRAP ||
		    rc.h.lsn <= before || rc.h.lsn >= after)
			continue;
		if (shown++ < 6 && k < sizeof(named))
			k += (size_t)snprintf(named + k, sizeof(named) - k, "%s%llu", k ? ", " : "",
					      (unsigned long long)rc.h.lsn);
	}
	if (shown > 6 && k < sizeof(named))
		snprintf(named + k, sizeof(named) - k, " and %zu more", shown - 6);
	snprintf(line, sizeof(line), "log lane %u: bytes %llu..%llu skipped (%s): the records with "
		 "LSNs between %llu and %llu are lost%s%s%s", i, (unsigned long long)from,
		 (unsigned long long)to, stop_why[why], (unsigned long long)before,
		 (unsigned long long)after, shown ? " (those whose header survived: lsn " : "", named,
		 shown ? ")" : "");
	say(arg, line);
}

/* Lay out lane l again from its start with the records at k's offsets (in
 * LSN order), the rest zero, and write its checkpoint: head 0, claiming
 * every kept record durable (it will be, at the caller's fence). Their
 * durable marks are remade the same way: each claims the one before. */
static int lane_rewrite(struct paste_wal *w, struct wal_lane *l, const struct keep *k,
			uint64_t next_lsn, struct paste_persist *p, uint64_t *first_lsn,
			uint64_t *last_lsn)
{
	uint8_t *img = calloc(1, l->size);
	if (!img)
		return -ENOMEM;
	uint64_t at = 0, prev = 0, first = next_lsn;
	uint32_t first_epoch = w->epoch;
	struct rec_copy rc;
	for (size_t x = 0; x < k->n; x++) {
		const struct wal_rec *r = lane_rec(l, k->off[x]);
		memcpy(&rc, r, rec_head_bytes(r->type, r->nexts));
		if (rc.h.type & REC_MARKED) {
			uint32_t m = prev && rc.h.lsn - prev <= UINT32_MAX ? (uint32_t)(rc.h.lsn - prev) : 0;
			memcpy((uint8_t *)&rc + REC_HDR + 12u * rc.h.nexts, &m, 4);
			rc.h.hdr_crc = rec_hdr_crc(&rc.h);
		}
		if (!x) {
			first = rc.h.lsn;
			first_epoch = rc.h.epoch;
		}
		memcpy(img + at, &rc, rec_head_bytes(rc.h.type, rc.h.nexts));
		at += rc.h.size;
		prev = rc.h.lsn;
	}
	memcpy(l->base, img, l->size);
	free(img);
	paste_persist_flush(p, l->base, l->size);
	wal_ckpt_write(w, l, p, 0, first, first_epoch, prev);
	*first_lsn = k->n ? first : 0;
	*last_lsn = prev;
	return 0;
}

/* Salvage one damaged lane: keep the records before the stop and every
 * chain of valid records past it that the rule for damage says was
 * durable, skipping what lies between; then rewrite the lane. */
static int lane_salvage(struct paste_wal *w, struct wal_lane *l, uint32_t i, uint64_t next_lsn,
			struct paste_persist *p, paste_salvage_fn say, void *arg)
{
	struct keep k = { 0 };
	char line[400];
	for (uint64_t pos = l->first; pos < l->end; pos++)
		keep_off(&k, ring_at(l, pos)->off, NULL);
	struct scan s = lane_stop_scan(l);
	enum stop why = l->stop;
	uint64_t before_n = k.n;
	if (l->ckpt_lost) {
		/* No checkpoint: the lane as it stands from offset 0, with
		 * epochs up to the newest any lane has. */
		l->ckpt_epoch = w->epoch;
		s = (struct scan){ 0, 0, 0, 0 };
		why = chain(w, l, &s, keep_off, &k);
		before_n = k.n;
		say(arg, "log lane: both checkpoint slots were damaged: the lane is read from its "
		    "start (records that had wrapped to its end, if any, are not kept)");
	}
	for (;;) {
		struct wal_after a;
		after_scan(w, l, &s, &a);
		if (!after_is_damage(&a, s.min_lsn))
			break;   /* the rest is a torn tail: the next open cuts it */
		if (!a.n) {
			snprintf(line, sizeof(line), "log lane %u: the record at offset %llu (%s) is lost, "
				 "and any after it up to lsn %llu, which the log's checkpoint says were "
				 "durable: nothing valid follows it", i, (unsigned long long)s.off,
				 stop_why[why], (unsigned long long)a.claim);
			say(arg, line);
			break;
		}
		say_gap(l, i, s.off, a.first_off, why, s.min_lsn - 1, a.first_lsn, say, arg);
		s.used += (a.first_off + l->size - s.off) % l->size;
		s.off = a.first_off;
		why = chain(w, l, &s, keep_off, &k);
	}
	uint64_t first = 0, last = 0;
	int rc = k.oom ? -ENOMEM : lane_rewrite(w, l, &k, next_lsn, p, &first, &last);
	if (rc == 0) {
		snprintf(line, sizeof(line), "log lane %u: kept %zu records (lsn %llu..%llu): %llu before "
			 "the damage, %llu past it", i, k.n, (unsigned long long)first,
			 (unsigned long long)last, (unsigned long long)before_n,
			 (unsigned long long)(k.n - before_n));
		say(arg, line);
	}
	free(k.off);
	return rc;
}

int paste_wal_salvage(struct paste_store *st, struct paste_persist *p, paste_salvage_fn say,
		      void *arg, struct paste_error *err)
{
	if (!st || !p || !say)
		return paste_error_set(err, -EINVAL, "paste_wal_salvage: no store, persist object or "
				       "report given");
	struct paste_wal *w;
	int rc = paste_wal_recover(&w, st, NULL, err);   /* as a tool: nothing refused */
	if (rc < 0)
		return rc;
	/* Salvage takes no buffer: the references recovery took go back at
	 * once (the store is not started), while the records still lie where
	 * recovery found them. */
	for (uint32_t i = 0; i < w->nlanes; i++)
		for (uint64_t pos = w->lanes[i].first; pos < w->lanes[i].end; pos++)
			wal_refs_drop(w, &w->lanes[i], pos, true);
	int rebuilt = 0;
	uint64_t next = atomic_load(&w->next_lsn);
	for (uint32_t i = 0; i < w->nlanes && rc == 0; i++) {
		struct wal_lane *l = &w->lanes[i];
		if (!l->damaged)
			continue;
		char line[400] = "";
		struct paste_error note = { 0 };
		wal_note_stop(l, i, &note);
		snprintf(line, sizeof(line), "log %s", note.msg);
		say(arg, line);
		rc = lane_salvage(w, l, i, next, p, say, arg);
		rebuilt++;
	}
	if (rc == 0 && rebuilt && (rc = paste_persist_fence(p)) < 0)
		paste_error_set(err, rc, "%s: cannot make the salvaged log durable: %s",
				paste_store_path(st), strerror(-rc));
	else if (rc < 0)
		paste_error_set(err, rc, "%s: salvaging the log: %s", paste_store_path(st), strerror(-rc));
	paste_wal_close(w);
	return rc < 0 ? rc : rebuilt;
}
