/* wal_internal.h - what lib/wal.c (writer, lookups, truncation) and
 * lib/wal_recover.c (recovery, foreach, check) share: the on-store format
 * (described at the top of wal.c) and the in-DRAM lane index. Not API. */
#ifndef PASTE_WAL_INTERNAL_H
#define PASTE_WAL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "extent_internal.h"
#include "paste.h"

#define WAL_MAGIC   0x4c415750u   /* "PWAL" */
#define CKPT_MAGIC  0x504b4350u   /* "PCKP" */
#define WAL_ALIGN   64u
#define REC_DATA    1u
#define REC_WRAP    2u
/* Type flag of a DATA record that carries its lane's durable mark: a u32
 * right after the extents, inside the header CRC (see "Durable marks" at
 * the top of wal.c). Every record this build writes has it; a DATA record
 * without it claims nothing. */
#define REC_MARKED  0x100u
/* A lane must hold the largest record plus a WRAP with room to spare. */
#define LANE_MIN    2048u

struct wal_rec {
	uint32_t magic, hdr_crc;
	uint64_t lsn;
	uint32_t epoch;
	uint16_t type, nexts;
	uint32_t len, data_crc, size;
} __attribute__((packed));
#define REC_HDR sizeof(struct wal_rec)
_Static_assert(sizeof(struct wal_rec) == 36, "record header is 36 bytes");
_Static_assert(sizeof(struct paste_extent) == 12, "extent is 3 x u32 on the store");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store format is little-endian");

/* A record copied out of the mapping: validation never reads a field twice
 * from bytes another process (a running server, for the tools) may change. */
struct rec_copy {
	struct wal_rec h;
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t spare;   /* the mark of a record of 64 extents */
};
_Static_assert(offsetof(struct rec_copy, ext) == REC_HDR, "a copy has the store's layout");

struct wal_ckpt {
	uint32_t magic, crc;
	uint64_t seq, head_off, head_lsn;
	uint32_t epoch, head_epoch;
	uint64_t durable;   /* the lane's records up to this LSN were durable when the slot
			     * was written (0: no claim) */
	uint8_t zero[16];
};
_Static_assert(sizeof(struct wal_ckpt) == PASTE_CKPT_SLOT_SIZE, "checkpoint slot is 64 bytes");

/* Why recovery stopped at a position. END and STALE are the normal end of a
 * lane; SIZE, HDR_CRC and DATA_CRC are what a torn write looks like; the rest
 * cannot come from this writer and count as damage. */
enum stop { STOP_NONE, STOP_END, STOP_STALE, STOP_SIZE, STOP_HDR_CRC, STOP_DATA_CRC,
	    STOP_TYPE, STOP_FUTURE, STOP_EXTENTS, STOP_FULL, STOP_DUP_LSN };

/* The valid records found past a lane's stop (wal_lane_after): how many,
 * their LSN range and offsets, and the newest LSN of the lane that any
 * evidence (a record's durable mark, the checkpoint's claim) says was
 * durable. A claim beyond the last record kept means the stop is damage. */
struct wal_after {
	uint64_t n, first_lsn, last_lsn, first_off;
	uint64_t claim;           /* 0: nothing claimed */
	uint64_t unmarked;        /* valid records without a mark (the rule for them: damage) */
};

/* In-DRAM index entry: the ring of a lane is in LSN order. A record is
 * durable once epoch <= paste_persist_durable(p) (p: the persist object
 * that appended it, epoch: its open epoch then); recovered records have
 * p == NULL (durable). 32 bytes per 64 bytes of log, where 16 would do
 * without visibility: the price of checking durability per record, which
 * stays right even if a lane's appender changes its persist object. */
struct wal_slot {
	uint64_t lsn, off, epoch;
	struct paste_persist *p;
};
_Static_assert(sizeof(struct wal_slot) == 32, "ring entries stay a power of two");

struct wal_lane {
	pthread_mutex_t mu;       /* appends, lookups, truncation, info */
	uint8_t *base;
	uint64_t size;            /* usable bytes (multiple of 64) */
	uint8_t *slot[2];         /* checkpoint slots */
	uint64_t head, tail;      /* live region [head, tail), circular */
	struct wal_slot *ring;    /* capacity mask + 1 (power of two) */
	uint64_t mask;
	uint64_t first, end;      /* absolute ring positions: live = [first, end) */
	uint64_t vis;             /* [first, vis) known durable: visible to readers
				   * and truncation (the lane's durable LSN is that
				   * of position vis - 1); moved on by lane_settle */
	uint64_t bytes;           /* data bytes of live records */
	/* newest checkpoint */
	int ckpt_slot;            /* -1: neither slot valid */
	uint64_t ckpt_seq, head_lsn;
	uint32_t ckpt_epoch, head_epoch;
	uint64_t ckpt_durable;    /* the newest checkpoint's durable claim (0: none) */
	/* how recovery ended */
	enum stop stop;
	uint64_t stop_off, recovered;
	uint64_t good_lsn;        /* the last record kept (head LSN - 1 when none) */
	uint32_t good_epoch;      /* its epoch (the head epoch when none) */
	struct wal_after after;   /* valid records past the stop */
	bool damaged;             /* the stop is damage, not a torn tail (wal_lane_damage) */
	bool ckpt_lost;           /* no valid checkpoint, yet offset 0 holds a record */
} __attribute__((aligned(64)));

struct paste_wal {
	struct paste_store *st;
	const struct paste_store_geom *g;
	struct wal_lane *lanes;
	uint32_t nlanes, epoch;   /* epoch: this run's (read-only: the newest found) */
	struct paste_persist *p;  /* given to paste_wal_recover: paste_wal_begin writes through it */
	bool writable;            /* begun: appends and truncation allowed */
	_Atomic uint64_t next_lsn;
	pthread_mutex_t trunc_mu; /* one truncation at a time owns the checkpoints */
	bool one_thread;          /* the store's PASTE_STORE_ONE_THREAD: no lane lock */
};

/* Two locked instructions an append saved on a one-thread store. */
static inline void lane_lock(const struct paste_wal *w, struct wal_lane *l)
{
	if (!w->one_thread)
		pthread_mutex_lock(&l->mu);
}

static inline void lane_unlock(const struct paste_wal *w, struct wal_lane *l)
{
	if (!w->one_thread)
		pthread_mutex_unlock(&l->mu);
}

/* Bytes of a record's header, extents and mark: what the header CRC covers
 * (from byte 8) and what an append writes. */
static inline uint32_t rec_head_bytes(uint32_t type, uint32_t nexts)
{
	return (uint32_t)REC_HDR + 12u * nexts + (type & REC_MARKED ? 4u : 0u);
}

static inline uint32_t rec_size(uint32_t type, uint32_t nexts)
{
	return (rec_head_bytes(type, nexts) + WAL_ALIGN - 1) & ~(WAL_ALIGN - 1);
}

static inline uint32_t rec_hdr_crc(const struct wal_rec *r)
{
	return paste_crc32c(0, (const uint8_t *)r + 8, rec_head_bytes(r->type, r->nexts) - 8);
}

/* What the durable mark of a record (laid out as in the store: a copy or
 * the mapping) claims: the newest LSN of its lane that was durable when it
 * was appended, or 0 for no claim (no mark, or a mark of 0). */
static inline uint64_t rec_mark(const struct wal_rec *r)
{
	uint32_t m;
	if (!(r->type & REC_MARKED))
		return 0;
	memcpy(&m, (const uint8_t *)r + REC_HDR + 12u * r->nexts, 4);
	return m && m <= r->lsn ? r->lsn - m : 0;
}

static inline uint64_t lane_used(const struct wal_lane *l)
{
	return l->tail >= l->head ? l->tail - l->head : l->size - l->head + l->tail;
}

static inline struct wal_slot *ring_at(const struct wal_lane *l, uint64_t pos)
{
	return &l->ring[pos & l->mask];
}

static inline const struct wal_rec *lane_rec(const struct wal_lane *l, uint64_t off)
{
	return (const struct wal_rec *)(const void *)(l->base + off);
}

/* Extents of a record in the mapping (4-byte aligned: records are 64-aligned). */
static inline const struct paste_extent *rec_ext(const struct wal_rec *r)
{
	return (const struct paste_extent *)(const void *)((const uint8_t *)r + REC_HDR);
}

/* Extents inside the buffer area, none crossing a buffer's end, total <= 4 GiB. */
static inline bool extents_ok(const struct paste_wal *w, const struct paste_extent *ext,
			      uint32_t n, uint64_t *total)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (ext[i].buf >= w->g->nbufs || ext[i].off > w->g->buf_size ||
		    ext[i].len > w->g->buf_size - ext[i].off)
			return false;
		sum += ext[i].len;
	}
	*total = sum;
	return sum <= UINT32_MAX;
}

/* The CRC32C of the data of ext[from..n), continuing crc (that of
 * ext[0..from)). Only call on extents that passed extents_ok. */
static inline uint32_t data_crc_from(const struct paste_wal *w, const struct paste_extent *ext,
				     uint32_t from, uint32_t n, uint32_t crc)
{
	for (uint32_t i = from; i < n; i++)
		crc = paste_crc32c(crc, paste_store_buf(w->st, ext[i].buf) + ext[i].off, ext[i].len);
	return crc;
}

static inline uint32_t data_crc(const struct paste_wal *w, const struct paste_extent *ext, uint32_t n)
{
	return data_crc_from(w, ext, 0, n, 0);
}

/* paste_wal_append for a caller that already has the CRC32C of the data
 * of ext[0..known) (known_crc): only the rest is read (the tree's record,
 * whose value it has just checksummed). */
int wal_append_crc(struct paste_wal *w, uint32_t lane, struct paste_persist *p,
		   const struct paste_extent *ext, uint32_t n, uint32_t known, uint32_t known_crc,
		   uint64_t *lsn);

/* Write the lane's head, the run's epoch and the lane's durable claim into
 * the checkpoint slot not holding the newest one, and start its write-back
 * through p (the caller fences). */
void wal_ckpt_write(struct paste_wal *w, struct wal_lane *l, struct paste_persist *p,
		    uint64_t head, uint64_t head_lsn, uint32_t head_epoch, uint64_t durable);

/* A reference on each extent's buffer, or drop those of the live record at
 * ring position pos (and its bytes from the lane's count). */
void wal_refs_take(struct paste_wal *w, const struct paste_extent *ext, uint32_t n);
void wal_refs_drop(struct paste_wal *w, struct wal_lane *l, uint64_t pos, bool keep_if_free);

/* lib/wal_recover.c */
void wal_ckpt_load(struct wal_lane *l);
uint64_t wal_lane_recover(struct paste_wal *w, struct wal_lane *l);
void wal_lanes_dedup(struct paste_wal *w);
void wal_lane_damage(struct paste_wal *w, struct wal_lane *l);
void wal_note_stop(const struct wal_lane *l, uint32_t i, struct paste_error *err);
int wal_refuse(const struct paste_wal *w, struct paste_error *err);

#endif
