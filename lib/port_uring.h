/*
 * port_uring.h - the io_uring engine's state, shared by its two files:
 * lib/port_uring.c (its hooks of the pass and the completions) and
 * lib/port_uring_setup.c (probe, open, close).
 */
#ifndef PASTE_PORT_URING_H
#define PASTE_PORT_URING_H

#include <time.h>

#include "port_internal.h"
#include "port_uring_compat.h"

/* user_data layout: op (4 bits) | generation (28 bits) | slot (32 bits); a
 * completion whose generation differs from the slot's is stale (the
 * connection was closed and the slot reused) and only its buffer matters. */
enum { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_CANCEL, OP_CLOSE, OP_COMMIT, OP_ACCEPT_MS,
       OP_REFUSED, OP_PEER };

#define GEN_MASK 0x0fffffffu
#define ALLOC_BATCH 64u
/* Accepting (port_uring.c): one-shot accepts outstanding per listener
 * near the limit; direct descriptors beyond max_conns, so that every
 * accept in flight has one whether or not a slot awaits it (a connection
 * over the limit is refused from it); the bytes of a refused client's
 * first request read (and dropped) before the answer. */
#define ACCEPTS_OUTSTANDING 8u
#define TABLE_SPARE (PASTE_PORT_MAX_LISTEN * ACCEPTS_OUTSTANDING + 8u)
#define REFUSE_SINK 4096u

/* min_wait (see uring_wait): the default, and the most a config may ask. */
#define MIN_WAIT_US 50u
#define MAX_MIN_WAIT_US 1000000u   /* 1 s: more is a typo, not an experiment */

struct uring {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	uint16_t bgid;
	uint32_t nbufs, mask;
	uint32_t *bid_buf;         /* ring slot (bid) -> store buffer index */
	uint32_t *bid_off;         /* dense receives: bytes of the slot's buffer filled so far */
	bool inc;                  /* dense receives (IOU_PBUF_RING_INC) */
	uint16_t *delivered;       /* bids handed out in the current batch */
	uint32_t ndelivered;
	uint16_t *empty;           /* bids with no buffer (store was exhausted) */
	uint32_t nempty;
	uint32_t cache[ALLOC_BATCH]; /* free store buffers taken in one lock */
	uint32_t ncache;
	uint32_t *rearm;           /* conns whose multishot recv ended (ENOBUFS) */
	uint32_t nrearm;
	/* Per listener (the ud's slot field names it): */
	uint32_t accepts_armed[PASTE_PORT_MAX_LISTEN];   /* one-shot accepts outstanding */
	bool accept_ms[PASTE_PORT_MAX_LISTEN];           /* the multishot accept is live */
	bool accept_ms_cancel[PASTE_PORT_MAX_LISTEN];    /* ... and its cancel was submitted */
	uint32_t accepts_total;    /* one-shot accepts outstanding, all listeners */
	uint32_t promised;         /* ... of them on listeners without a refusal: each has a
				    * slot set aside (its connection cannot be refused) */
	uint32_t table;            /* direct descriptors: max_conns + TABLE_SPARE */
	uint64_t accept_retry_ns;  /* back-off after EMFILE/ENFILE (paste_clock_ns; 0: none) */
	bool backoff;              /* this pass: accepts wait for accept_retry */
	bool ring_ok;              /* u->ring was set up (close tears it down) */
	bool min_wait;             /* kernel has IORING_FEAT_MIN_TIMEOUT (6.12+) */
	uint32_t sends_inflight;   /* send SQEs whose CQE has not been reaped */
	uint64_t commit_word;      /* the group commit's eventfd is read into this */
	uint32_t min_wait_us;
	/* Accept-heavy load (see MW_WINDOW): passes, new connections and
	 * DATA events counted over the current window. */
	uint32_t win_passes, win_accepts, win_reads;
	bool accept_heavy;         /* the last window had >= 1 accept per 4 reads */
	/* Refusals over max_conns: how many hold a direct descriptor (from
	 * their accept to their close), and where their requests are read to
	 * (the bytes are dropped). */
	uint32_t refusing;
	char refuse_sink[REFUSE_SINK];
};

static inline uint64_t ud(int op, uint32_t gen, uint32_t slot)
{
	return (uint64_t)op << 60 | (uint64_t)(gen & GEN_MASK) << 32 | slot;
}

/* c->gen counts on past 28 bits (the lowest slots are reused the most:
 * 2^28 accepts is hours of short connections); compare what ud() kept. */
static inline bool same_gen(const struct conn *c, uint32_t gen)
{
	return (c->gen & GEN_MASK) == gen;
}

/* lib/port_uring_setup.c */
int uring_open(struct paste_port *pt, struct paste_error *err);
void uring_close(struct paste_port *pt);

#endif
