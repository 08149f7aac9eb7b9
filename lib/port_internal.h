/*
 * port_internal.h - what the port's engines share: the connection table,
 * per-connection output queues, the event batch, the durability gate and
 * the hooks an engine gives the pass. lib/port.c owns all of it and runs
 * the pass (paste_port_poll, the event loop); lib/port_uring.c and
 * lib/port_epoll.c are the two back ends: the ae.c idea, one loop
 * (aeProcessEvents) over pluggable I/O (ae_epoll.c, ae_select.c, ...).
 */
#ifndef PASTE_PORT_INTERNAL_H
#define PASTE_PORT_INTERNAL_H

#include <sys/socket.h>   /* struct msghdr */
#include <sys/uio.h>
#include "paste.h"

/* One queued piece of output: bytes in the connection's copy buffer
 * (buf == PASTE_NO_BUF, off into that buffer) or a pinned store buffer. */
struct out_seg {
	uint32_t buf, off, len;
};

/* An output queue: copied bytes plus the segment list that orders them
 * against zero-copy store segments. Grows to the largest batch a
 * connection ever had, then never allocates again. */
struct outq {
	char *bytes;
	uint32_t nbytes, cap_bytes;
	struct out_seg *segs;
	uint32_t nsegs, cap_segs;
	uint32_t seg_done;     /* segments fully sent (partial sends) */
	uint32_t seg_off;      /* bytes of segs[seg_done] already sent */
};

/* Slot lifecycle. A slot (an index from the port's free list,
 * port_slot_take, whatever descriptor the connection has) is reused only
 * after the app has seen its CLOSED event, so the app sees ACCEPT,
 * DATA..., CLOSED per connection and never an ACCEPT (which zeroes the app
 * data) before the previous CLOSED:
 *
 *   FREE --accept--> OPEN --port_conn_end--> ENDED --next poll begins-->
 *   release (uring: once no send is in flight) --> FREE (epoll: close(2))
 *                                              --> RELEASING --close CQE--> FREE (uring)
 *
 * Cost: a slot stays occupied one pass longer than the connection. */
enum conn_state { CONN_FREE = 0, CONN_OPEN, CONN_ENDED, CONN_RELEASING };

struct conn {
	uint8_t state;
	bool recv_armed;       /* a multishot recv is live (uring) */
	bool send_inflight;    /* uring: a send SQE is outstanding; epoll: waiting for EPOLLOUT */
	bool close_wanted;     /* the app asked to close once output drained */
	bool drop_wanted;      /* ... or at once, its unsent output dropped */
	bool release_ready;    /* uring: CLOSED was seen; release at the send's completion */
	/* List membership belongs to the slot, not the connection: it survives
	 * a reuse, and each list checks the state when it runs, so a slot is
	 * never listed twice (the lists are max_conns long). */
	bool on_dirty;         /* listed in port->dirty */
	bool on_rearm;         /* listed in the uring rearm list (ENOBUFS) */
	/* Backpressure (port_out.c): set while `queued` is over max_output,
	 * cleared once it drains to half; the engine stops reading meanwhile
	 * (port_ops.read_pause). */
	bool read_paused;
	uint8_t listener;      /* which listener accepted it (events carry it) */
	uint32_t gen;          /* bumped per accept: stale CQEs are ignored */
	int fd;                /* epoll: the socket; uring: the direct descriptor */
	uint64_t need_epoch;   /* output may leave once durable_epoch >= this */
	uint64_t queued;       /* output bytes queued and not yet sent, gated or not */
	struct outq pending;   /* queued during the current batch */
	struct outq inflight;  /* handed to the kernel, not yet complete */
	struct msghdr msg;     /* sendmsg state kept stable until completion */
	struct iovec *iov;
	uint32_t cap_iov;
};

struct port_ops;

/* listen(2) backlog; also bounds how many connections one multishot
 * accept can take at once (see port_uring.c). */
#define PASTE_LISTEN_BACKLOG 4096u

struct paste_port {
	const struct port_ops *ops;
	struct paste_port_config cfg;
	struct paste_store *store;
	struct paste_persist *persist;
	enum paste_durability dur;

	struct conn *conns;
	uint8_t *conn_data;            /* cfg.conn_data_size bytes per slot */
	uint32_t *free_slots;          /* a stack of FREE slots (port_slot_take) */
	uint32_t nfree;

	struct paste_event *evs;       /* the batch returned by poll */
	uint32_t nevs, cap_evs;        /* cap_evs: fixed at open, see port_events_room */

	uint32_t *ended;               /* slots whose CLOSED is in the current batch */
	uint32_t nended;

	uint32_t *dirty;               /* conns with pending output */
	uint32_t ndirty;

	uint64_t epoch;                /* batch number the app is working on */
	uint64_t durable_epoch;        /* every reply queued in batches <= this may leave */
	/* fsync mode: the group commit the pass's barrier started (one at a
	 * time; the persist object allows no more). */
	bool commit_inflight;
	uint64_t commit_epoch;         /* durable_epoch once it completes */
	uint64_t commit_ticket;        /* paste_persist_begin_commit's */
	uint64_t commit_start_ns;      /* for the barrier histogram */
	/* Sizing the next group commit (commit_hold): events gathered when
	 * the last commit began and ended, how many it covered, and how long
	 * the next one may wait for those connections to come back. */
	uint64_t events_at_start, events_at_done, commit_events;
	uint64_t hold_until_ns;
	uint64_t wake_at_ns;           /* > 0: the wait step returns by then (a held
				        * commit must start even if nothing arrives) */

	/* Listeners: cfg.ports (or cfg.port), one socket each. */
	uint32_t nlisten;
	int listen_fd[PASTE_PORT_MAX_LISTEN];
	uint16_t local_port[PASTE_PORT_MAX_LISTEN];
	/* cfg.peer_addrs: each slot's peer address (len 0: unknown), and
	 * each listener's bound address. */
	struct port_peer { struct sockaddr_storage a; uint32_t len; } *peers;
	struct sockaddr_storage listen_addr[PASTE_PORT_MAX_LISTEN];
	uint32_t listen_addr_len[PASTE_PORT_MAX_LISTEN];
	struct paste_port_stats st;
	void *engine;                  /* back-end state */
};

/* An engine: open/close, the hooks of the pass, and hold. paste_port_poll
 * (lib/port.c) calls the pass hooks in the order below: release once per
 * ended slot, kick once per connection whose output may leave, wait and
 * gather alternately until gather says the pass is done, the others once.
 * They do their engine's part and return; none calls back into the pass
 * (they use the shared helpers below: connection ends, output queues,
 * events, port_commit_done). */
struct port_ops {
	const char *name;
	int (*open)(struct paste_port *pt, struct paste_error *err);
	/* Close every socket the engine still has, whatever its state;
	 * paste_port_close frees the slots afterwards. */
	void (*close)(struct paste_port *pt);
	/* 1. The app has seen conn's CLOSED event: give the socket back (the
	 * slot becomes FREE now, or once the kernel is done with it). */
	void (*release)(struct paste_port *pt, uint32_t conn);
	/* 2. Give back the buffers of the previous batch (epoll: its stretches
	 * of the private read buffer). */
	void (*recycle)(struct paste_port *pt);
	/* 3. The barrier. fence_per_write: the engine fences before each write
	 * in kick (the socket API cannot overlap the barrier with anything),
	 * so the pass's barrier only opens the gate, or, on a failed store,
	 * ends gated connections. Otherwise the pass fences itself, and in
	 * fsync mode calls commit to start an fdatasync of fd without waiting
	 * for it; the engine reports its end with port_commit_done. */
	bool fence_per_write;
	void (*commit)(struct paste_port *pt, int fd);
	/* 4. Queue what the next wait must include besides replies: receives
	 * to re-arm, accepts (NULL: nothing). */
	void (*arm)(struct paste_port *pt);
	/* 5. Output for conn became sendable (gate open); start it if idle.
	 * Called by port_flush_dirty, and by the engine when a send completes. */
	void (*kick)(struct paste_port *pt, uint32_t conn);
	/* 6. Submit what is queued and wait up to timeout_ms (-1: forever) for
	 * completions, but not at all while the batch already has events.
	 * want: how many connections the batch may wait for (the pass's share
	 * of the open ones, see PORT_WANT_DIV). Returns
	 * < 0 for an error the app should see (-EINTR: a signal), else >= 0
	 * (0: nothing to gather). */
	int (*wait)(struct paste_port *pt, int timeout_ms, uint32_t want);
	/* 7. Turn what the wait brought (r: its result) into events, as many
	 * as port_events_room allows; the rest waits for the next pass.
	 * Returns true to wait again in this pass (epoll: every ready
	 * descriptor was stale and the batch is still empty). */
	bool (*gather)(struct paste_port *pt, int r);
	int (*hold)(struct paste_port *pt, const struct paste_event *ev);
	/* Backpressure: conn's read_paused changed (port_out.c: its queued
	 * output passed max_output, or drained to half of it). Stop reading
	 * it, or start again. Called when the change happens, from the app's
	 * send or from the engine's own send completion; the engine applies
	 * it to what it submits next (uring: a cancel of the receive, or a
	 * re-arm at the next arm step; epoll: the descriptor's event mask). */
	void (*read_pause)(struct paste_port *pt, uint32_t conn);
};

extern const struct port_ops paste_port_uring_ops;
extern const struct port_ops paste_port_epoll_ops;

/* Shared helpers (lib/port.c; output queues: lib/port_out.c). */
/* The event array is allocated once, at open (PORT_EVENTS_CAP), so pushing
 * never fails: before the engines gather events every slot can add at most
 * one CLOSED (fewer than max_conns events); while gathering they check
 * port_events_room before each step that can add events. */
#define PORT_EVENTS_CAP(m) ((m) + ((m) < 4096u ? (m) : 4096u) + 64u)
#define PORT_MAX_CONNS (1u << 20)   /* the kernel's limit on direct descriptors */
#define PORT_MAX_DEFER_S 3600u      /* TCP_DEFER_ACCEPT: more is a typo */
/* Batch waiting: a pass may wait for open connections / want_div of them
 * (paste_port_config.want_div, 0 = PORT_WANT_DIV), at most PORT_MAX_WANT,
 * besides what the engine knows is coming (see port_uring.c). */
#define PORT_WANT_DIV 4u
#define PORT_MAX_WANT 64u
/* Longest a group commit waits for the last one's clients (commit_hold). */
#define PORT_COMMIT_HOLD_US 500
struct paste_event *port_push_event(struct paste_port *pt, uint16_t type, uint32_t conn);
static inline uint32_t port_events_room(const struct paste_port *pt)
{
	return pt->cap_evs - pt->nevs;
}
/* The connection is over (peer EOF/reset, send error, the app's close
 * after its output drained, a durable reply the failed store can never
 * acknowledge): its CLOSED event goes into this batch, nothing more is
 * delivered or sent, and the slot waits for the next poll to be released.
 * No-op unless OPEN. */
void port_conn_end(struct paste_port *pt, uint32_t slot);
/* A FREE slot for a new connection (the last freed first), or
 * UINT32_MAX when all max_conns are in use: over the limit. */
uint32_t port_slot_take(struct paste_port *pt);
/* Released: the slot may be accepted into again. */
void port_slot_free(struct paste_port *pt, uint32_t slot);
void port_conn_reset(struct paste_port *pt, uint32_t slot, int fd);
/* Output queues (lib/port_out.c). */
void port_output_reset(struct conn *c);      /* empty both queues (a new connection) */
void port_output_free(struct conn *c);       /* their memory (port close) */
void port_output_trim(struct conn *c);       /* an ended connection's: keep a little */
bool port_output_idle(const struct conn *c);
/* Move pending output to inflight and describe it as an iovec array
 * starting at the unsent part. Returns the number of iovecs: 0 when there
 * is nothing to send, or when there is no memory for a single iovec (the
 * connection has then ended: port_conn_end). With memory for fewer than
 * wanted, it describes what fits and the rest goes as after a partial send. */
uint32_t port_output_start(struct paste_port *pt, struct conn *c);
uint32_t port_output_iov(struct paste_port *pt, struct conn *c);
/* Account n bytes sent from inflight; true when inflight is now empty. */
bool port_output_advance(struct paste_port *pt, struct conn *c, size_t n);
/* Drop all queued output (peer gone); unpins store buffers. */
void port_output_discard(struct paste_port *pt, struct conn *c);
void port_output_discard_pending(struct paste_port *pt, struct conn *c);
/* Durability gate: true if conn's output may leave now. */
static inline bool port_gate_open(const struct paste_port *pt, const struct conn *c)
{
	return c->need_epoch <= pt->durable_epoch;
}
/* Run through the dirty list: kick every conn whose gate is open, keep the
 * others listed. Step 5 of the pass, after the barrier. */
void port_flush_dirty(struct paste_port *pt);
/* The group commit the barrier started completed with res (0 or -errno):
 * the gate opens on what it covered, unless it failed or the store failed
 * meanwhile (then its replies stay gated and the next barrier drops them). */
void port_commit_done(struct paste_port *pt, int res);
/* The store is failed: output waiting behind the gate can never be
 * acknowledged. End every connection that has some (its CLOSED event
 * tells the app; the client sees the connection close, no reply). */
void port_fail_gated(struct paste_port *pt);
/* List conn for the next flush (port_out.c). */
void port_mark_dirty(struct paste_port *pt, uint32_t slot);
int port_listen(struct paste_port *pt, struct paste_error *err);
/* The barrier histogram: one barrier paid since start_ns (paste_clock_ns). */
uint64_t port_barrier_done(struct paste_port *pt, uint64_t start_ns);   /* returns the ns it took */

#endif
