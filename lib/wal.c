/*
 * wal.c - the write-ahead log: records in the store's log lanes that name the
 * packet buffers holding the data, so a request body is made durable where
 * it landed (zero copy).
 *
 * On-store format (little-endian; x86-64 native order, no byte swapping)
 * ----------------------------------------------------------------------
 * Lanes. The store has log_lanes lanes (paste_store_lane) and two 64-byte
 * checkpoint slots per lane (paste_store_ckpt). One thread appends to a lane.
 * LSNs come from one atomic counter shared by all lanes, so within a lane they
 * strictly increase but are not consecutive. A lane's usable size is its
 * length rounded down to 64 bytes.
 *
 * Record. Starts on a 64-byte boundary of its lane, padded to a multiple of
 * 64 bytes (padding bytes are not written and mean nothing):
 *    0 magic    u32  0x4c415750 ("PWAL")
 *    4 hdr_crc  u32  CRC32C of bytes [8, H), H = 36 + 12 * nexts (+ 4 if marked)
 *    8 lsn      u64
 *   16 epoch    u32  epoch of the run that wrote it
 *   20 type     u16  1 = DATA, 2 = WRAP; flag 0x100 on DATA: marked
 *   22 nexts    u16  extents that follow (0..64; 0 for WRAP)
 *   24 len      u32  data bytes = sum of the extents' lengths (0 for WRAP)
 *   28 data_crc u32  CRC32C of the data bytes, in extent order
 *   32 size     u32  padded record size = roundup(H, 64)
 *   36 extents  nexts x {buf u32, off u32, len u32} (struct paste_extent)
 *    H-4 mark   u32  marked records: the durable mark (below)
 * A WRAP record (size 64) is written where the next record does not fit
 * before the end of the lane: the lane continues at offset 0. A record that
 * ends exactly at the end of the lane needs no WRAP. A WRAP takes an LSN.
 * This writer marks every DATA record; an unmarked one is read as well.
 *
 * Checkpoint slot (64 bytes):
 *    0 magic u32 0x504b4350 ("PCKP"),  4 crc u32 (CRC32C of bytes [8, 64)),
 *    8 seq u64 (higher wins),  16 head_off u64,  24 head_lsn u64,
 *   32 epoch u32 (run that wrote the slot),  36 head_epoch u32,
 *   40 durable u64 (the lane's records up to this LSN were durable when the
 *   slot was written; 0: no claim),  48 zero.
 * A new checkpoint goes to the slot not holding the newest one, so a torn
 * slot write leaves the previous checkpoint. Both slots invalid (a fresh,
 * zeroed store) means an empty lane at offset 0.
 *
 * Recovery scans each lane from head_off and accepts a record only if: magic
 * and hdr_crc are right, size matches nexts, the extents lie inside buffers
 * and add up to len, data_crc matches the buffers, lsn >= head_lsn and >
 * the previous record's lsn, head_epoch <= epoch, previous record's epoch <=
 * epoch <= the checkpoint's epoch, and the record ends before reaching the
 * head again. It stops at the first record that fails. No magic or an old
 * LSN/epoch there is the normal end; a bad size or CRC is a torn record.
 * After all lanes, an LSN found in two lanes (impossible from one counter)
 * ends one lane there, as damage (wal_lanes_dedup in wal_recover.c): the
 * lane whose copy has the older epoch, or on a tie the later lane.
 * In DRAM each lane keeps a ring of (lsn, offset, persist epoch, persist
 * object) in LSN order under a mutex.
 *
 * Torn tail or damage. A crash interrupts the lane's last batch, whose
 * barrier never completed: any of its lines may have reached the medium
 * (PM persists any subset of the lines flushed before a fence, a disk any
 * subset of a commit's blocks), so whole records of that batch may lie past
 * the torn one. None was acknowledged, and cutting them is right. A record
 * that fails in the middle of what was durable (a bit flip, a stray write)
 * is damage: the records past it were acknowledged. What tells them apart
 * is durability: a torn record was never durable, nor was anything of its
 * lane appended after it. So past a stop, recovery looks (one look per 64
 * bytes of the free part of the lane, wal_lane_damage) for whole records
 * that could follow what it kept (LSN and epoch no lower, epoch no newer
 * than the checkpoint's: an older record of a crashed run behind a shorter
 * new one is not a successor, see Epochs), and the stop is damage when any
 * of them says, by its durable mark, that a record past the last one kept
 * was durable, or the lane's checkpoint says so, or it carries no mark at
 * all (written without marks, it cannot tell: calling it damage loses
 * nothing). Both checkpoint slots of a lane invalid while offset 0 holds a
 * record is damage too (one write tears only one slot). A writable open
 * refuses a damaged log (-EBADMSG) before writing anything; a read-only
 * one and paste_wal_check report it; paste_wal_salvage keeps what it can.
 * A damaged record with nothing durable past it (in the last batch, before
 * any later open) cannot be told from a torn one, and is cut as one.
 *
 * Durable marks. A marked record carries, as a u32 back from its own LSN,
 * the newest LSN of its lane that was durable (its appender's fence or
 * commit completed) when it was appended; 0 claims nothing (none yet, or
 * more than 2^32 LSNs back). Every writable open's checkpoint claims the
 * lane's last recovered record durable (it was read back from the store),
 * and every truncation's the lane's durable frontier. Cost: 4 bytes in a
 * record's padding (64 more bytes for the 1 in 16 extent counts whose
 * header fills its 64-byte lines), and the frontier's settle at append,
 * an atomic load per record that became durable since (readers do it
 * anyway).
 *
 * Making the stop permanent. A record recovery stopped at is not live, and
 * the buffers it names are free, so they get reused. Were the stop a torn
 * record (data CRC failed) and the same bytes landed in its buffers again
 * (a client retrying the POST it never got an ack for), it would be valid
 * at the next recovery, with an LSN that has been handed out again
 * meanwhile: a revived record that was never acknowledged, and through
 * the duplicate, the loss of one that was. So a writable open zeroes the
 * magic of the record its lane stopped at (a torn record, or a corrupt one
 * with nothing durable past it: anything but the clean END/STALE ends,
 * which cannot come back) and flushes it before the fence that persists
 * the epoch, i.e. before paste_store_start can hand out a buffer. The
 * zeroed bytes lie in the free part of the lane (a stop is never where a
 * live record starts), so this never touches a live record. Cost: 4 bytes
 * and a cache line per torn lane per open; the next open then sees a
 * clean end there, so the tear is reported once (by the open that sealed
 * it), not at every open. Damage is never sealed: its open is refused.
 *
 * Visibility. A record is visible to lookups, reads and truncation only
 * once it is durable: the persist object p that appended it has published
 * the epoch it was flushed in (paste_persist_durable(p) >= that epoch).
 * Until then no client can have an ack for it, so from any client's view
 * it does not exist yet; a GET or DELETE served by another thread must not
 * see it. Recovered records are durable. In a lane, LSNs and epochs rise
 * together, so each lane keeps a frontier vis (its durable LSN): records
 * at ring positions below it are durable, and lane_settle moves it on with
 * one atomic load per record that became durable since.
 *
 * Epochs. paste_wal_open (writable) sets epoch = max checkpoint epoch + 1
 * and persists it in every lane's checkpoint before any append
 * (paste_wal_begin; paste_wal_recover alone writes nothing). So after a
 * crash left a torn record T with an older valid record R (same run) behind
 * it, new records written over T carry a higher epoch than R, and R can
 * never be taken as their successor even when its LSN is higher than theirs
 * (LSNs restart above the highest *recovered* LSN). head_epoch does the same
 * for a lane emptied by truncation: its head then points at old bytes, and
 * only records of the truncating run (or later) may start there.
 *
 * Space and truncation. The live region runs from head to tail (circular);
 * an append that would make the tail reach the head fails with -ENOSPC.
 * Truncation writes and fences the new checkpoints FIRST and only then drops
 * the buffer references, so after a crash no live record points at a buffer
 * that was reused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"
#include "wal_internal.h"

/* The checkpoint fields of a lane that wal_ckpt_write changes before its fence:
 * saved before, put back if the fence fails, so the lane never claims a
 * slot that may not be durable. Otherwise its next checkpoint would go to
 * the other slot, overwriting the newest one known durable. (A truncation
 * moves the head only after its fence; a failed open discards the lanes.) */
struct ckpt_state {
	int slot;
	uint64_t seq, head_lsn, durable;
	uint32_t epoch, head_epoch;
};

static struct ckpt_state ckpt_save(const struct wal_lane *l)
{
	return (struct ckpt_state){ l->ckpt_slot, l->ckpt_seq, l->head_lsn, l->ckpt_durable,
				    l->ckpt_epoch, l->head_epoch };
}

static void ckpt_restore(struct wal_lane *l, const struct ckpt_state *c)
{
	l->ckpt_slot = c->slot;
	l->ckpt_seq = c->seq;
	l->head_lsn = c->head_lsn;
	l->ckpt_durable = c->durable;
	l->ckpt_epoch = c->epoch;
	l->head_epoch = c->head_epoch;
}

/* wal_internal.h says what it writes; the caller fences. */
void wal_ckpt_write(struct paste_wal *w, struct wal_lane *l, struct paste_persist *p,
		    uint64_t head, uint64_t head_lsn, uint32_t head_epoch, uint64_t durable)
{
	struct wal_ckpt c = {
		.magic = CKPT_MAGIC, .seq = l->ckpt_seq + 1, .head_off = head,
		.head_lsn = head_lsn, .epoch = w->epoch, .head_epoch = head_epoch,
		.durable = durable,
	};
	c.crc = paste_crc32c(0, (const uint8_t *)&c + 8, sizeof(c) - 8);
	int s = l->ckpt_slot == 0 ? 1 : 0;
	memcpy(l->slot[s], &c, sizeof(c));
	paste_persist_flush(p, l->slot[s], sizeof(c));
	l->ckpt_slot = s;
	l->ckpt_seq = c.seq;
	l->ckpt_epoch = w->epoch;
	l->head_lsn = head_lsn;
	l->head_epoch = head_epoch;
	l->ckpt_durable = durable;
}

void wal_refs_take(struct paste_wal *w, const struct paste_extent *ext, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		paste_store_ref(w->st, ext[i].buf);
}

/* Drop the references of the live record at ring position pos. */
void wal_refs_drop(struct paste_wal *w, struct wal_lane *l, uint64_t pos, bool keep_if_free)
{
	const struct wal_rec *r = lane_rec(l, ring_at(l, pos)->off);
	for (uint32_t e = 0; e < r->nexts; e++)
		paste_store_unref(w->st, rec_ext(r)[e].buf, keep_if_free);
	l->bytes -= r->len;
}

static int lane_init(struct paste_wal *w, uint32_t i, struct paste_error *err)
{
	struct wal_lane *l = &w->lanes[i];
	uint64_t len = 0;
	l->base = paste_store_lane(w->st, i, &len);
	l->size = len & ~(uint64_t)(WAL_ALIGN - 1);
	l->slot[0] = paste_store_ckpt(w->st, i, 0);
	l->slot[1] = paste_store_ckpt(w->st, i, 1);
	if (!l->base || !l->slot[0] || !l->slot[1] || (uintptr_t)l->base % WAL_ALIGN ||
	    (uintptr_t)l->slot[0] % 8 || (uintptr_t)l->slot[1] % 8)
		return paste_error_set(err, -EINVAL, "%s: log lane %u or its checkpoint slots are "
				       "missing or not 64-byte aligned", paste_store_path(w->st), i);
	if (l->size < LANE_MIN)
		return paste_error_set(err, -EINVAL, "%s: log lane %u holds %llu bytes, the log "
				       "needs at least %u per lane (give the store a larger log_size)",
				       paste_store_path(w->st), i, (unsigned long long)len, LANE_MIN);
	uint64_t cap = 1;
	while (cap < l->size / WAL_ALIGN)
		cap <<= 1;
	/* calloc of a large ring is fresh zero pages: DRAM is only spent on the
	 * part of the ring that records actually reach. */
	l->ring = calloc(cap, sizeof(*l->ring));
	if (!l->ring)
		return paste_error_set(err, -ENOMEM, "out of memory for the log index of lane %u "
				       "(%llu entries)", i, (unsigned long long)cap);
	l->mask = cap - 1;
	return 0;
}

/* Undo the references recovery took (open failed after recovery). The store
 * is not started yet, so counts simply return to 0. */
static void refs_drop_all(struct paste_wal *w)
{
	for (uint32_t i = 0; i < w->nlanes; i++)
		for (uint64_t pos = w->lanes[i].first; pos < w->lanes[i].end; pos++)
			wal_refs_drop(w, &w->lanes[i], pos, true);
}

/* Zero the magic of the record lane l stopped at, when that stop is a torn
 * or damaged record: see "Making the stop permanent" at the top. A stop is
 * in the lane's free part (recovery never lets the live region reach the
 * head), except in an empty lane where it is the head itself; the check
 * keeps even a broken invariant from zeroing a live record. */
static void tail_seal(struct wal_lane *l, struct paste_persist *p)
{
	if (l->stop < STOP_SIZE || (l->first != l->end && l->stop_off == l->head))
		return;
	memset(l->base + l->stop_off, 0, 4);
	paste_persist_flush(p, l->base + l->stop_off, 4);
}

/* Persist the new epoch in every lane before any append can carry it. A lane
 * that recovered nothing gets its head moved to where recovery stopped, with
 * this run's epoch and next LSN, so nothing written before now can start it.
 * Each lane's checkpoint also claims its last recovered record durable (it
 * was read back from the store), so later damage before it is told from a
 * torn tail. The same fence makes the sealed stops durable. */
static int epoch_persist(struct paste_wal *w, struct paste_persist *p, struct paste_error *err)
{
	struct ckpt_state prev[PASTE_MAX_LANES];
	uint64_t next = atomic_load(&w->next_lsn);
	for (uint32_t i = 0; i < w->nlanes; i++) {
		struct wal_lane *l = &w->lanes[i];
		bool empty = l->first == l->end;
		prev[i] = ckpt_save(l);
		tail_seal(l, p);
		if (empty)
			l->head = l->tail;
		wal_ckpt_write(w, l, p, l->head, empty ? next : l->head_lsn,
			   empty ? w->epoch : l->head_epoch, empty ? 0 : ring_at(l, l->end - 1)->lsn);
	}
	int rc = paste_persist_fence(p);
	if (rc < 0) {
		for (uint32_t i = 0; i < w->nlanes; i++)
			ckpt_restore(&w->lanes[i], &prev[i]);
		return paste_error_set(err, rc, "%s: cannot persist the log checkpoints (%s)",
				       paste_store_path(w->st), strerror(-rc));
	}
	return 0;
}

int paste_wal_recover(struct paste_wal **out, struct paste_store *st,
		      struct paste_persist *p, struct paste_error *err)
{
	paste_error_set(err, 0, "%s", "");
	if (!out || !st)
		return paste_error_set(err, -EINVAL, "paste_wal_open: no store given");
	*out = NULL;
	const struct paste_store_geom *g = paste_store_geom(st);
	if (g->log_lanes == 0 || g->log_lanes > PASTE_MAX_LANES)
		return paste_error_set(err, -EINVAL, "%s: %u log lanes (1..%u supported)",
				       paste_store_path(st), g->log_lanes, PASTE_MAX_LANES);
	int fd = paste_store_fd(st);
	if (p && fd >= 0 && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return paste_error_set(err, -EROFS, "%s: the store is open read-only; open the log "
				       "without a persist object to inspect it", paste_store_path(st));
	struct paste_wal *w = calloc(1, sizeof(*w));
	size_t lanes_bytes = (sizeof(struct wal_lane) * g->log_lanes + 63) & ~(size_t)63;
	if (w)
		w->lanes = aligned_alloc(64, lanes_bytes);
	if (!w || !w->lanes) {
		free(w);
		return paste_error_set(err, -ENOMEM, "out of memory for the log");
	}
	memset(w->lanes, 0, lanes_bytes);
	w->st = st;
	w->g = g;
	w->p = p;
	w->one_thread = store_one_thread(st);
	pthread_mutex_init(&w->trunc_mu, NULL);
	int rc = 0;
	for (uint32_t i = 0; i < g->log_lanes && rc == 0; i++) {
		pthread_mutex_init(&w->lanes[i].mu, NULL);
		w->nlanes = i + 1;
		rc = lane_init(w, i, err);
	}
	if (rc < 0) {
		paste_wal_close(w);
		return rc;
	}
	uint64_t next = 1;
	for (uint32_t i = 0; i < w->nlanes; i++) {
		struct wal_lane *l = &w->lanes[i];
		wal_ckpt_load(l);
		uint64_t max_lsn = wal_lane_recover(w, l);
		if (max_lsn >= next)
			next = max_lsn + 1;   /* wraps to 0 only for LSN 2^64-1 */
		if (l->head_lsn > next)
			next = l->head_lsn;
		if (l->ckpt_epoch > w->epoch)
			w->epoch = l->ckpt_epoch;
	}
	wal_lanes_dedup(w);
	for (uint32_t i = 0; i < w->nlanes; i++) {
		w->lanes[i].vis = w->lanes[i].end;   /* recovered: durable */
		wal_lane_damage(w, &w->lanes[i]);
	}
	atomic_store(&w->next_lsn, next);
	if (p) {
		/* Damage is refused before anything is written: the records
		 * past it were acknowledged, and cutting them here would make
		 * their loss permanent (paste-store salvage decides, on a copy). */
		rc = wal_refuse(w, err);
		if (rc == 0 && (w->epoch == UINT32_MAX || next > UINT64_MAX - (1ull << 40)))
			rc = paste_error_set(err, -EOVERFLOW, "%s: the log's epoch or LSN is at its "
					     "limit; the store cannot take new records",
					     paste_store_path(st));
		if (rc < 0) {
			refs_drop_all(w);
			paste_wal_close(w);
			return rc;
		}
		w->epoch++;   /* this run's, persisted by paste_wal_begin */
	}
	for (uint32_t i = 0; i < w->nlanes; i++)
		wal_note_stop(&w->lanes[i], i, err);
	*out = w;
	return 0;
}

int paste_wal_begin(struct paste_wal *w, struct paste_error *err)
{
	if (!w)
		return paste_error_set(err, -EINVAL, "paste_wal_begin: no log given");
	if (w->writable)
		return 0;
	if (!w->p)
		return paste_error_set(err, -EROFS, "%s: the log was opened read-only",
				       paste_store_path(w->st));
	int rc = epoch_persist(w, w->p, err);
	if (rc == 0)
		w->writable = true;
	return rc;
}

int paste_wal_open(struct paste_wal **out, struct paste_store *st,
		   struct paste_persist *p, struct paste_error *err)
{
	int rc = paste_wal_recover(out, st, p, err);
	if (rc < 0 || !p)
		return rc;
	if ((rc = paste_wal_begin(*out, err)) < 0) {   /* err keeps the notes unless it fails */
		refs_drop_all(*out);
		paste_wal_close(*out);
		*out = NULL;
	}
	return rc;
}

void paste_wal_close(struct paste_wal *w)
{
	if (!w)
		return;
	for (uint32_t i = 0; i < w->nlanes; i++) {
		free(w->lanes[i].ring);
		pthread_mutex_destroy(&w->lanes[i].mu);
	}
	free(w->lanes);
	pthread_mutex_destroy(&w->trunc_mu);
	free(w);
}

/* Write a record header (and extents) at the lane's tail and start its
 * write-back. The caller holds the lane lock and checked the space. */
/* Move the lane's durable frontier over the records that became durable
 * and return it. Stops at the first record that is not: with one persist
 * object per lane the rest are younger. Caller holds the lane lock. */
static uint64_t lane_settle(struct wal_lane *l)
{
	while (l->vis < l->end) {
		const struct wal_slot *s = ring_at(l, l->vis);
		if (s->p && s->epoch > paste_persist_durable(s->p))
			break;
		l->vis++;
	}
	return l->vis;
}

static void rec_put(struct paste_wal *w, struct wal_lane *l, struct paste_persist *p,
		    struct rec_copy *rc)
{
	rc->h.magic = WAL_MAGIC;
	if (w->one_thread) {
		rc->h.lsn = atomic_load_explicit(&w->next_lsn, memory_order_relaxed);
		atomic_store_explicit(&w->next_lsn, rc->h.lsn + 1, memory_order_relaxed);
	} else {
		rc->h.lsn = atomic_fetch_add(&w->next_lsn, 1);
	}
	rc->h.epoch = w->epoch;
	rc->h.size = rec_size(rc->h.type, rc->h.nexts);
	if (rc->h.type & REC_MARKED) {
		/* The durable mark: how far back the lane's newest durable
		 * record is (0: none, or too far for 32 bits: no claim). */
		uint64_t vis = lane_settle(l), d = vis > l->first ? ring_at(l, vis - 1)->lsn : 0;
		uint32_t m = d && rc->h.lsn - d <= UINT32_MAX ? (uint32_t)(rc->h.lsn - d) : 0;
		memcpy((uint8_t *)rc + REC_HDR + 12u * rc->h.nexts, &m, 4);
	}
	rc->h.hdr_crc = rec_hdr_crc(&rc->h);
	uint8_t *at = l->base + l->tail;
	uint32_t bytes = rec_head_bytes(rc->h.type, rc->h.nexts);
	memcpy(at, rc, bytes);
	paste_persist_flush(p, at, bytes);
	l->tail = (l->tail + rc->h.size) % l->size;
}

int paste_wal_append(struct paste_wal *w, uint32_t lane, struct paste_persist *p,
		     const struct paste_extent *ext, uint32_t n, uint64_t *lsn)
{
	return wal_append_crc(w, lane, p, ext, n, 0, 0, lsn);
}

int wal_append_crc(struct paste_wal *w, uint32_t lane, struct paste_persist *p,
		   const struct paste_extent *ext, uint32_t n, uint32_t known, uint32_t known_crc,
		   uint64_t *lsn)
{
	if (!w)
		return -EINVAL;
	if (!w->writable)
		return -EROFS;
	if (n > PASTE_WAL_MAX_EXTENTS)
		return -E2BIG;
	uint64_t total;
	if (!p || lane >= w->nlanes || (n && !ext) || !extents_ok(w, ext, n, &total))
		return -EINVAL;
	/* Not zero-initialised: only the header and n extents are written
	 * out, and clearing all 64 extents would cost ~1 % of a WAL server's
	 * CPU. */
	struct rec_copy rc;
	rc.h = (struct wal_rec){ .type = REC_DATA | REC_MARKED, .nexts = (uint16_t)n,
				 .len = (uint32_t)total };
	extents_copy(rc.ext, ext, n);
	rc.h.data_crc = data_crc_from(w, rc.ext, known < n ? known : n, n, known_crc);
	uint32_t size = rec_size(rc.h.type, n);

	struct wal_lane *l = &w->lanes[lane];
	lane_lock(w, l);
	bool wrap = l->tail + size > l->size;
	uint64_t need = size + (wrap ? l->size - l->tail : 0);
	if (lane_used(l) + need >= l->size) {
		lane_unlock(w, l);
		return -ENOSPC;
	}
	if (wrap) {
		struct rec_copy wr = { .h = { .type = REC_WRAP } };
		rec_put(w, l, p, &wr);
		l->tail = 0;
	}
	for (uint32_t i = 0; i < n; i++)
		paste_persist_flush(p, paste_store_buf(w->st, ext[i].buf) + ext[i].off, ext[i].len);
	uint64_t off = l->tail;
	rec_put(w, l, p, &rc);
	wal_refs_take(w, rc.ext, n);
	/* Flushed in p's open epoch: durable once p publishes it. */
	*ring_at(l, l->end++) = (struct wal_slot){ rc.h.lsn, off, paste_persist_epoch(p), p };
	l->bytes += total;
	lane_unlock(w, l);
	if (lsn)
		*lsn = rc.h.lsn;
	return 0;
}

/* Ring position of the visible (durable) record lsn in lane l, or -1.
 * Caller holds the lane lock. */
static int64_t lane_find(struct wal_lane *l, uint64_t lsn)
{
	uint64_t vis = lane_settle(l);
	if (l->first == vis || lsn < ring_at(l, l->first)->lsn || lsn > ring_at(l, vis - 1)->lsn)
		return -1;
	uint64_t lo = l->first, hi = vis;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (ring_at(l, mid)->lsn < lsn)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < vis && ring_at(l, lo)->lsn == lsn ? (int64_t)lo : -1;
}

/* The visible record with this LSN, returned with its lane locked (*lp;
 * the caller unlocks), or NULL with no lock held. */
static const struct wal_rec *rec_locked(struct paste_wal *w, uint64_t lsn, struct wal_lane **lp)
{
	for (uint32_t i = 0; i < w->nlanes; i++) {
		struct wal_lane *l = &w->lanes[i];
		lane_lock(w, l);
		int64_t pos = lane_find(l, lsn);
		if (pos >= 0) {
			*lp = l;
			return lane_rec(l, ring_at(l, (uint64_t)pos)->off);
		}
		lane_unlock(w, l);
	}
	return NULL;
}

int paste_wal_lookup(struct paste_wal *w, uint64_t lsn,
		     const struct paste_extent **ext, uint32_t *n, uint32_t *len)
{
	if (!w)
		return -EINVAL;
	struct wal_lane *l;
	const struct wal_rec *r = rec_locked(w, lsn, &l);
	if (!r)
		return -ENOENT;
	if (ext)
		*ext = rec_ext(r);   /* stays put until truncated */
	if (n)
		*n = r->nexts;
	if (len)
		*len = r->len;
	lane_unlock(w, l);
	return 0;
}

int paste_wal_read(struct paste_wal *w, uint64_t lsn, struct paste_extent *ext,
		   uint32_t *n, uint32_t *len)
{
	if (!w || !ext || !n)
		return -EINVAL;
	struct wal_lane *l;
	const struct wal_rec *r = rec_locked(w, lsn, &l);
	if (!r)
		return -ENOENT;
	/* Under the lane lock, so a truncation in another thread releases
	 * these buffers only after our references. */
	*n = r->nexts;
	memcpy(ext, rec_ext(r), sizeof(*ext) * r->nexts);
	wal_refs_take(w, ext, r->nexts);
	if (len)
		*len = r->len;
	lane_unlock(w, l);
	return 0;
}

/* Lane state decided by phase 1 of a truncation, applied in phase 3:
 * records to drop from the front, the new head offset, and the checkpoint
 * state to go back to if the fence fails. */
struct trunc_plan {
	uint64_t drop, head;
	struct ckpt_state prev;
};

/* Phase 1 for one lane: how many records go and where the head moves. Only
 * durable records go: the lane stops at its first record that is not (its
 * appender has not acknowledged it, so no client can have asked for it to
 * go). The dropped records stay indexed (and their log bytes untouched by
 * appends) until the checkpoint is durable. */
static void trunc_plan(struct paste_wal *w, struct wal_lane *l, uint64_t upto,
		       struct paste_persist *p, struct trunc_plan *tp)
{
	lane_lock(w, l);
	uint64_t vis = lane_settle(l), pos = l->first;
	while (pos < vis && ring_at(l, pos)->lsn <= upto)
		pos++;
	tp->drop = pos - l->first;
	tp->head = l->head;
	uint64_t head_lsn = 0;
	uint32_t head_epoch = w->epoch;
	if (tp->drop && pos < l->end) {
		tp->head = ring_at(l, pos)->off;
		head_lsn = ring_at(l, pos)->lsn;
		head_epoch = lane_rec(l, tp->head)->epoch;
	} else if (tp->drop) {
		tp->head = l->tail;
		head_lsn = ring_at(l, pos - 1)->lsn + 1;
	}
	uint64_t durable = vis > pos ? ring_at(l, vis - 1)->lsn : 0;   /* what stays and is durable */
	lane_unlock(w, l);
	tp->prev = ckpt_save(l);
	if (tp->drop)
		wal_ckpt_write(w, l, p, tp->head, head_lsn, head_epoch, durable);
}

/* Phase 3: the checkpoint is durable; release the buffers and the space. */
static void trunc_apply(struct paste_wal *w, struct wal_lane *l, const struct trunc_plan *tp)
{
	if (!tp->drop)
		return;
	lane_lock(w, l);
	for (uint64_t k = 0; k < tp->drop; k++)
		wal_refs_drop(w, l, l->first++, false);
	l->head = tp->head;
	lane_unlock(w, l);
}

int64_t paste_wal_truncate(struct paste_wal *w, uint64_t upto, struct paste_persist *p)
{
	if (!w)
		return -EINVAL;
	if (!w->writable)
		return -EROFS;
	if (!p)
		return -EINVAL;
	/* A failed store acknowledges nothing again: writing checkpoints that
	 * no fence can make durable would only muddle what a restart finds. */
	int failed = paste_store_failed(w->st, NULL);
	if (failed)
		return failed;
	struct trunc_plan plan[PASTE_MAX_LANES];
	int64_t dropped = 0;
	pthread_mutex_lock(&w->trunc_mu);
	for (uint32_t i = 0; i < w->nlanes; i++) {
		trunc_plan(w, &w->lanes[i], upto, p, &plan[i]);
		dropped += (int64_t)plan[i].drop;
	}
	if (dropped) {
		int rc = paste_persist_fence(p);
		if (rc < 0) {
			/* Not known durable: keep every buffer held, and let no
			 * lane claim the slot just written: the other one holds
			 * the newest checkpoint known durable. The records stay
			 * live in DRAM. */
			for (uint32_t i = 0; i < w->nlanes; i++)
				ckpt_restore(&w->lanes[i], &plan[i].prev);
			pthread_mutex_unlock(&w->trunc_mu);
			return rc;
		}
		for (uint32_t i = 0; i < w->nlanes; i++)
			trunc_apply(w, &w->lanes[i], &plan[i]);
	}
	pthread_mutex_unlock(&w->trunc_mu);
	return dropped;
}

void paste_wal_info(const struct paste_wal *w, struct paste_wal_info *out)
{
	memset(out, 0, sizeof(*out));
	if (!w)
		return;
	out->epoch = w->epoch;
	for (uint32_t i = 0; i < w->nlanes; i++) {
		struct wal_lane *l = &w->lanes[i];
		lane_lock(w, l);
		uint64_t vis = lane_settle(l), pending_bytes = 0;
		if (l->first < vis) {
			uint64_t lo = ring_at(l, l->first)->lsn, hi = ring_at(l, vis - 1)->lsn;
			if (!out->first_lsn || lo < out->first_lsn)
				out->first_lsn = lo;
			if (hi > out->last_lsn)
				out->last_lsn = hi;
		}
		for (uint64_t pos = vis; pos < l->end; pos++)
			pending_bytes += lane_rec(l, ring_at(l, pos)->off)->len;
		out->records += vis - l->first;
		out->pending += l->end - vis;
		out->bytes += l->bytes - pending_bytes;
		out->log_used += lane_used(l);
		out->log_size += l->size;
		lane_unlock(w, l);
	}
}
