/* wal_recover.c - the read side of the log: recovery at open (scan each
 * lane from its checkpoint, stop at the first record that fails, then
 * drop LSNs repeated across lanes), the LSN-ordered walk and the checker.
 * The format and the acceptance rule are described at the top of wal.c. */
#include <errno.h>
#include <stdio.h>
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
	if (rc->h.nexts > PASTE_WAL_MAX_EXTENTS || rc->h.size != rec_size(rc->h.nexts) ||
	    rc->h.size > l->size - off)
		return STOP_SIZE;
	extents_copy(rc->ext, l->base + off + REC_HDR, rc->h.nexts);
	if (rc->h.hdr_crc != rec_hdr_crc(&rc->h))
		return STOP_HDR_CRC;
	/* LSNs this high are refused at open, so one here is damage; it would
	 * also wrap the next record's minimum LSN to 0. */
	if ((rc->h.type == REC_WRAP ? rc->h.nexts || rc->h.len || rc->h.data_crc
				    : rc->h.type != REC_DATA) || rc->h.lsn > UINT64_MAX - (1ull << 40))
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

/* After a stop at off: is there a valid-looking record of this run further
 * on (before the head)? Then the stop is a hole in the middle, not a torn
 * tail. One 4-byte compare per 64 bytes of free log. */
static bool find_follower(const struct wal_lane *l, uint64_t off, uint64_t used,
			  uint64_t min_lsn, uint32_t min_epoch, uint64_t *lsn)
{
	struct rec_copy rc;
	for (uint64_t skip = WAL_ALIGN; used + skip < l->size; skip += WAL_ALIGN) {
		uint64_t pos = (off + skip) % l->size;
		if (rec_load(l, pos, &rc) == STOP_NONE && rc.h.lsn >= min_lsn &&
		    rc.h.epoch >= min_epoch && rc.h.epoch <= l->ckpt_epoch) {
			*lsn = rc.h.lsn;
			return true;
		}
	}
	return false;
}

/* One sentence about how recovery ended in lane i, or nothing for a clean end. */
void wal_note_stop(const struct wal_lane *l, uint32_t i, struct paste_error *err)
{
	unsigned long long off = l->stop_off, n = l->recovered;
	const char *why = stop_why[l->stop];
	if (l->ckpt_lost)
		paste_error_append(err, "lane %u: both checkpoint slots are invalid but offset 0 holds a "
		     "record: the lane's records were not recovered", i);
	else if (l->follower)
		paste_error_append(err, "lane %u: damaged record at offset %llu (%s) followed by a valid "
		     "record (lsn %llu): %llu valid records before it kept, the rest of the lane "
		     "is lost", i, off, why, (unsigned long long)l->follower_lsn, n);
	else if (l->stop >= STOP_TYPE)
		paste_error_append(err, "lane %u: corrupt record at offset %llu (%s), %llu valid records "
		     "before it", i, off, why, n);
	else if (l->stop >= STOP_SIZE)
		paste_error_append(err, "lane %u: torn record at offset %llu (%s), %llu valid records "
		     "before it", i, off, why, n);
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
}

/* Scan lane l from its checkpoint, index the live records and hold their
 * buffers. Returns the highest LSN accepted (0 if none). */
uint64_t wal_lane_recover(struct paste_wal *w, struct wal_lane *l)
{
	struct rec_copy rc;
	uint64_t off = l->head, used = 0, min_lsn = l->head_lsn, max_lsn = 0;
	uint32_t min_epoch = l->head_epoch;
	for (;;) {
		l->stop = rec_accept(w, l, off, used, min_lsn, min_epoch, &rc);
		if (l->stop)
			break;
		if (rc.h.type == REC_WRAP) {
			used += l->size - off;
			off = 0;
		} else {
			*ring_at(l, l->end++) = (struct wal_slot){ rc.h.lsn, off, 0, NULL };
			wal_refs_take(w, rc.ext, rc.h.nexts);
			l->bytes += rc.h.len;
			l->recovered++;
			used += rc.h.size;
			off = (off + rc.h.size) % l->size;
		}
		min_lsn = rc.h.lsn + 1;
		min_epoch = rc.h.epoch;
		max_lsn = rc.h.lsn;
	}
	l->tail = off;
	l->stop_off = off;
	l->ckpt_lost = l->ckpt_slot < 0 && l->stop == STOP_FUTURE && off == 0;
	l->follower = find_follower(l, off, used, min_lsn, min_epoch, &l->follower_lsn);
	return max_lsn;
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
		pthread_mutex_lock(&l->mu);
		if (cur[i] < l->first)
			cur[i] = l->first;
		if (cur[i] < l->end && ring_at(l, cur[i])->lsn < *lsn) {
			best = i;
			*lsn = ring_at(l, cur[i])->lsn;
		}
		pthread_mutex_unlock(&l->mu);
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
	l->follower = false;
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
		pthread_mutex_lock(&l->mu);
		bool live = cur[best] >= l->first && cur[best] < l->end;
		const struct wal_rec *r = live ? lane_rec(l, ring_at(l, cur[best])->off) : NULL;
		cur[best]++;
		pthread_mutex_unlock(&l->mu);
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
		if (w->lanes[i].follower || w->lanes[i].stop >= STOP_TYPE) {
			cs.damaged++;
			wal_note_stop(&w->lanes[i], i, err);
		}
	}
	paste_wal_foreach(w, check_record, &cs);
	return cs.damaged;
}
