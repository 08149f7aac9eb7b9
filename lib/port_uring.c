/*
 * port_uring.c - the io_uring engine of the paste port.
 *
 * Per port: one ring (SINGLE_ISSUER|DEFER_TASKRUN: completions are reaped
 * only when we enter, so no IPIs and no task-work interrupts), a listener
 * with a multishot accept into direct descriptors (no fd table, no
 * fget/fput per operation), and per connection one multishot recv that
 * picks buffers from a provided-buffer ring whose buffers are store
 * buffers. The kernel copies received bytes into the store once; the app
 * copies nothing.
 *
 * One poll = recycle the last batch's buffers, pay the persistence barrier,
 * queue every sendable reply, then ONE io_uring_enter that submits all of
 * it and waits for the next completions. Each request therefore costs two
 * CQEs (recv, send) and a share of one syscall.
 *
 * user_data layout: op (4 bits) | generation (28 bits) | slot (32 bits); a
 * completion whose generation differs from the slot's is stale (the
 * connection was closed and the slot reused) and only its buffer matters.
 *
 * Slots are direct-descriptor slots the kernel picks at accept
 * (IORING_FILE_INDEX_ALLOC): the lowest free one, free as soon as our
 * close_direct ran. So the close is the release of the slot and is only
 * submitted once the app has seen the connection's CLOSED event (the poll
 * after it; port_internal.h), and, because a send reads its bytes from the
 * slot's output queue, once no send is in flight.
 */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "port_internal.h"

enum { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_CANCEL, OP_CLOSE, OP_FSYNC, OP_ACCEPT_MS };

#define GEN_MASK 0x0fffffffu
#define ALLOC_BATCH 64u

struct uring {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	size_t br_bytes;
	uint16_t bgid;
	uint32_t nbufs, mask;
	uint32_t *bid_buf;         /* ring slot (bid) -> store buffer index */
	uint16_t *delivered;       /* bids handed out in the current batch */
	uint32_t ndelivered;
	uint16_t *empty;           /* bids with no buffer (store was exhausted) */
	uint32_t nempty;
	uint32_t cache[ALLOC_BATCH]; /* free store buffers taken in one lock */
	uint32_t ncache;
	uint32_t *rearm;           /* conns whose multishot recv ended (ENOBUFS) */
	uint32_t nrearm;
	uint32_t accepts_armed;    /* one-shot accepts outstanding */
	bool accept_ms;            /* the multishot accept is live */
	bool accept_ms_cancel;     /* ... and its cancel was submitted */
	struct timespec accept_retry;  /* back-off after EMFILE/ENFILE */
	bool commit_inflight;
	uint64_t commit_epoch, commit_ticket;
	bool ring_ok;              /* u->ring was set up (close tears it down) */
	bool min_wait;             /* kernel has IORING_FEAT_MIN_TIMEOUT (6.12+) */
	uint32_t sends_inflight;   /* send SQEs whose CQE has not been reaped */
	uint32_t min_wait_us;
	/* Accept-heavy load (see MW_WINDOW): passes, new connections and
	 * DATA events counted over the current window. */
	uint32_t win_passes, win_accepts, win_reads;
	bool accept_heavy;         /* the last window had >= 1 accept per 4 reads */
};

/* Batch waiting. With wait_nr = 1 the kernel wakes us for every packet,
 * and on a fast server every pass then serves ~4 requests; the wake-ups and
 * context switches are a tenth of the CPU. Instead we ask for the send
 * completions we expect plus a share (1/want_div) of the open connections,
 * and tell the kernel (min_wait, Linux 6.12) to settle for whatever arrived
 * after min_wait_us. Latency cost: at most min_wait_us when traffic is
 * light. Both are paste_port_config fields (experiments); 0 = these. */
#define MIN_WAIT_US 50u
#define WANT_DIV 4u
#define MAX_MIN_WAIT_US 1000000u   /* 1 s: more is a typo, not an experiment */
/* ... except under accept-heavy load (short connections: at least one new
 * connection per MW_ACCEPT_RATIO reads over the last MW_WINDOW passes) on
 * a TCP_DEFER_ACCEPT listener, where a pass waits for one completion,
 * without the min_wait timer.
 * There a connection's completions (accept, read, send, close) are spread
 * over passes anyway and the clients' pace is set by connection set-up, so
 * the timer buys no batching worth its cost: measured (Linux 6.18 in a
 * Firecracker VM, 50 / 400 clients, pload --reconnect, defer accept on,
 * interleaved A/B) 10.2 / 10.3 us of server CPU per connection with the
 * timer, 8.3 / 8.3 without; the difference is the timer's expiries on the
 * server CPU (0.088 vs 0.005 timer interrupts per connection, VM exits
 * that perf sampling does not see but /proc/PID/stat does). Keep-alive
 * load (no accepts) keeps the timer and its batches: wrk RPC at 50 / 100 /
 * 400 connections, same requests per enter and CPU within the noise. The
 * window is re-judged every MW_WINDOW passes: two counter increments per
 * event, no clock. Cost: a switch lags the load by up to 64 passes.
 * Only with defer accept: without it a connection's read waits for its
 * data after the accept, and without the timer the replies then leave one
 * wake-up at a time; the server saved 3.2 us per connection (13.8 -> 10.5)
 * but the client spent 2.5 us more (18.8 -> 21.3), and as the client sets
 * the pace, connections/s fell 12%. With defer accept the client's cost
 * per connection did not change (17.7 us). */
#define MW_WINDOW 64u
#define MW_ACCEPT_RATIO 4u
#define IORING_FEAT_MIN_TIMEOUT_BIT (1u << 15)  /* not in liburing 2.3 */

struct getevents_arg {      /* io_uring_getevents_arg with 6.12's min_wait_usec */
	uint64_t sigmask;
	uint32_t sigmask_sz;
	uint32_t min_wait_usec;
	uint64_t ts;
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

static struct io_uring_sqe *sqe_get(struct paste_port *pt, struct uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	/* SQ full: a rare extra enter, counted. Submitting early is safe for
	 * the slot lifecycle: a close is only ever queued for a slot whose
	 * CLOSED the app has already seen (uring_release). */
	if (!sqe) {
		io_uring_submit(&u->ring);
		pt->st.syscalls++;
		sqe = io_uring_get_sqe(&u->ring);
	}
	return sqe;
}

static bool take_buffer(struct paste_port *pt, struct uring *u, uint32_t *idx)
{
	if (!u->ncache)
		u->ncache = paste_store_alloc(pt->store, u->cache, ALLOC_BATCH);
	if (!u->ncache)
		return false;
	*idx = u->cache[--u->ncache];
	return true;
}

/* Give back the buffers of the last batch: a buffer nobody held goes back
 * into its ring slot as is (count still 1, no shared-list traffic); a held
 * one is released by the port and a free buffer takes its slot. */
static void recycle(struct paste_port *pt, struct uring *u)
{
	uint32_t size = paste_store_geom(pt->store)->buf_size;
	int added = 0;
	for (uint32_t i = 0; i < u->ndelivered; i++) {
		uint16_t bid = u->delivered[i];
		uint32_t idx = u->bid_buf[bid];
		if (paste_store_refcount(pt->store, idx) > 1) {
			paste_store_unref(pt->store, idx, false);
			pt->st.held++;
			if (!take_buffer(pt, u, &idx)) {
				u->bid_buf[bid] = PASTE_NO_BUF;
				u->empty[u->nempty++] = bid;
				continue;
			}
			u->bid_buf[bid] = idx;
		}
		io_uring_buf_ring_add(u->br, paste_store_buf(pt->store, idx), size, bid,
				      u->mask, added++);
	}
	u->ndelivered = 0;
	while (u->nempty) {
		uint32_t idx;
		if (!take_buffer(pt, u, &idx))
			break;
		uint16_t bid = u->empty[--u->nempty];
		u->bid_buf[bid] = idx;
		io_uring_buf_ring_add(u->br, paste_store_buf(pt->store, idx), size, bid,
				      u->mask, added++);
	}
	if (added)
		io_uring_buf_ring_advance(u->br, added);
}

/* multishot: the connection's steady-state receive. Single-shot: the
 * first receive after accept. Most connections of a short-connection
 * workload carry one request: a multishot receive would, after the
 * request, stay armed (poll entry, an empty try at arming when no data is
 * there yet) and need a cancel before the close. The single-shot one is
 * done with its CQE; a connection the app keeps open gets its multishot at
 * the next pass (the rearm list), before its reply is submitted, so the
 * next request cannot arrive before it is armed. */
static void arm_recv(struct paste_port *pt, struct uring *u, uint32_t slot, bool multishot)
{
	struct conn *c = &pt->conns[slot];
	struct io_uring_sqe *sqe = sqe_get(pt, u);
	if (multishot)
		io_uring_prep_recv_multishot(sqe, (int)slot, NULL, 0, 0);
	else
		io_uring_prep_recv(sqe, (int)slot, NULL, 0, 0);  /* len 0: the whole buffer */
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
	sqe->buf_group = u->bgid;
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, c->gen, slot));
	c->recv_armed = true;
}

/* Accepting. The kernel drops a connection it accepted but cannot install
 * in a full direct-descriptor table, so the number of accepts that may
 * complete before we see them must stay below the free slots. A multishot
 * accept takes everything queued at once, at most the listen backlog, so
 * it is used only while the free slots exceed the backlog; closer to the
 * limit a few one-shot accepts, never more than the free slots, take over
 * (an SQE per accept is noise next to the requests). */
#define ACCEPTS_OUTSTANDING 8u

static void arm_accepts(struct paste_port *pt, struct uring *u)
{
	uint32_t used = pt->st.conns + u->accepts_armed;
	bool roomy = used + PASTE_LISTEN_BACKLOG + ACCEPTS_OUTSTANDING <= pt->cfg.max_conns;
	if (u->accept_ms) {
		if (!roomy && !u->accept_ms_cancel) {
			struct io_uring_sqe *sqe = sqe_get(pt, u);
			io_uring_prep_cancel64(sqe, ud(OP_ACCEPT_MS, 0, 0), 0);
			io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
			u->accept_ms_cancel = true;
		}
		return;
	}
	if (roomy && u->accepts_armed == 0) {
		struct io_uring_sqe *sqe = sqe_get(pt, u);
		io_uring_prep_multishot_accept(sqe, pt->listen_fd, NULL, NULL, 0);
		sqe->file_index = IORING_FILE_INDEX_ALLOC;
		io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT_MS, 0, 0));
		u->accept_ms = true;
		u->accept_ms_cancel = false;
		return;
	}
	while (!roomy && u->accepts_armed < ACCEPTS_OUTSTANDING &&
	       pt->st.conns + u->accepts_armed < pt->cfg.max_conns) {
		struct io_uring_sqe *sqe = sqe_get(pt, u);
		io_uring_prep_accept(sqe, pt->listen_fd, NULL, NULL, 0);
		/* liburing 2.3's prep_accept_direct adds 1 to ALLOC; the kernel
		 * wants the value itself to pick a free slot. */
		sqe->file_index = IORING_FILE_INDEX_ALLOC;
		io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, 0, 0));
		u->accepts_armed++;
	}
}

static void send_inflight(struct paste_port *pt, struct uring *u, uint32_t slot, uint32_t niov)
{
	struct conn *c = &pt->conns[slot];
	struct io_uring_sqe *sqe = sqe_get(pt, u);
	if (niov == 1)   /* the common case: one contiguous reply, no msghdr import */
		io_uring_prep_send(sqe, (int)slot, c->iov[0].iov_base, c->iov[0].iov_len, MSG_NOSIGNAL);
	else
		io_uring_prep_sendmsg(sqe, (int)slot, &c->msg, MSG_NOSIGNAL);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, ud(OP_SEND, c->gen, slot));
	c->send_inflight = true;
	u->sends_inflight++;
}

static void uring_kick(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	if (c->send_inflight)
		return;        /* the completion starts the next send */
	uint32_t n = port_output_start(pt, c);
	if (n)
		send_inflight(pt, pt->engine, slot, n);
}

/* The app has seen the CLOSED event: give the slot back. A send still in
 * flight reads this slot's output queue, so it is cancelled (the peer is
 * gone, or the app is done) and the release waits for its completion.
 * Otherwise cancel the multishot recv (if it still runs) and close the
 * direct descriptor, hard-linked so the close runs even when the cancel
 * finds nothing; the slot is FREE at the close's completion. */
static void uring_release(struct paste_port *pt, uint32_t slot)
{
	struct uring *u = pt->engine;
	struct conn *c = &pt->conns[slot];
	struct io_uring_sqe *sqe;
	if (c->state != CONN_ENDED)
		return;
	if (c->send_inflight) {
		if (!c->release_ready) {
			c->release_ready = true;
			sqe = sqe_get(pt, u);
			io_uring_prep_cancel64(sqe, ud(OP_SEND, c->gen, slot), 0);
			io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, c->gen, slot));
		}
		return;
	}
	port_output_discard(pt, c);
	c->state = CONN_RELEASING;
	if (c->recv_armed) {   /* an EOF or reset already ended it: no SQE */
		sqe = sqe_get(pt, u);
		io_uring_prep_cancel64(sqe, ud(OP_RECV, c->gen, slot), 0);
		sqe->flags |= IOSQE_IO_HARDLINK;
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, c->gen, slot));
	}
	sqe = sqe_get(pt, u);
	io_uring_prep_close_direct(sqe, slot);
	io_uring_sqe_set_data64(sqe, ud(OP_CLOSE, c->gen, slot));
}

static void on_accept(struct paste_port *pt, struct uring *u, struct io_uring_cqe *cqe,
		      bool multishot)
{
	if (!multishot)
		u->accepts_armed--;
	else if (!(cqe->flags & IORING_CQE_F_MORE))
		u->accept_ms = false;
	if (cqe->res < 0) {
		/* ENOMEM, ENFILE (another user of the table), ...: keep serving
		 * the connections we have, retry accepting in 100 ms. */
		if (cqe->res != -ECANCELED) {
			clock_gettime(CLOCK_MONOTONIC, &u->accept_retry);
			u->accept_retry.tv_nsec += 100 * 1000000L;
			if (u->accept_retry.tv_nsec >= 1000000000L) {
				u->accept_retry.tv_sec++;
				u->accept_retry.tv_nsec -= 1000000000L;
			}
		}
		return;
	}
	uint32_t slot = (uint32_t)cqe->res;
	/* The kernel hands out a slot only after our close of it ran, so a
	 * RELEASING slot here is released; its close CQE will be stale. */
	if (slot < pt->cfg.max_conns && pt->conns[slot].state == CONN_RELEASING)
		port_slot_free(pt, slot);
	if (slot >= pt->cfg.max_conns || pt->conns[slot].state != CONN_FREE) {
		/* cannot happen with a table of max_conns slots; never reuse a live slot */
		struct io_uring_sqe *sqe = sqe_get(pt, u);
		io_uring_prep_close_direct(sqe, slot);
		io_uring_sqe_set_data64(sqe, 0);
		return;
	}
	port_conn_reset(pt, slot, (int)slot);
	pt->st.accepts++;
	pt->st.conns++;
	arm_recv(pt, u, slot, false);
	u->win_accepts++;
	port_push_event(pt, PASTE_EV_ACCEPT, slot);
}

static void on_recv(struct paste_port *pt, struct uring *u, struct io_uring_cqe *cqe,
		    uint32_t slot, uint32_t gen)
{
	struct conn *c = &pt->conns[slot];
	bool live = same_gen(c, gen) && c->state != CONN_FREE;
	bool more = cqe->flags & IORING_CQE_F_MORE;
	if (live && !more)
		c->recv_armed = false;
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		/* Every CQE that carries a buffer must give it back or hand it
		 * out, even for a connection that is gone. */
		uint16_t bid = (uint16_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
		u->delivered[u->ndelivered++] = bid;
		if (live && cqe->res > 0 && c->state == CONN_OPEN && !c->close_wanted) {
			struct paste_event *ev = port_push_event(pt, PASTE_EV_DATA, slot);
			uint32_t idx = u->bid_buf[bid];
			ev->buf = idx;
			ev->off = 0;
			ev->len = (uint32_t)cqe->res;
			ev->data = paste_store_buf(pt->store, idx);
			pt->st.bytes_in += (uint64_t)cqe->res;
			u->win_reads++;
		}
	}
	if (!live)
		return;
	if (cqe->res == 0 || (cqe->res < 0 && cqe->res != -ENOBUFS && cqe->res != -ECANCELED)) {
		port_conn_end(pt, slot);    /* EOF or reset */
	} else if (!more && c->state == CONN_OPEN) {
		/* The receive ended while the connection lives: the first,
		 * single-shot one completed, the ring ran dry (ENOBUFS: the data
		 * waits in the socket) or the kernel stopped a multishot. Re-arm
		 * (multishot) after this batch's buffers are back, unless the app
		 * closes the connection meanwhile. */
		if (cqe->res == -ENOBUFS)
			pt->st.enobufs++;
		if (!c->on_rearm) {
			c->on_rearm = true;
			u->rearm[u->nrearm++] = slot;
		}
	}
}

static void on_send(struct paste_port *pt, struct uring *u, struct io_uring_cqe *cqe,
		    uint32_t slot, uint32_t gen)
{
	struct conn *c = &pt->conns[slot];
	u->sends_inflight--;
	if (!same_gen(c, gen) || (c->state != CONN_OPEN && c->state != CONN_ENDED))
		return;
	c->send_inflight = false;
	if (c->state == CONN_ENDED) {
		if (c->release_ready)
			uring_release(pt, slot);
		return;
	}
	if (cqe->res < 0) {
		port_conn_end(pt, slot);
		return;
	}
	if (!port_output_advance(pt, c, (size_t)cqe->res)) {
		uint32_t n = port_output_iov(pt, c);     /* partial send: the rest */
		if (n)
			send_inflight(pt, u, slot, n);
		else
			port_conn_end(pt, slot);            /* no memory for the iovecs */
		return;
	}
	if (c->pending.nsegs) {
		if (port_gate_open(pt, c))
			uring_kick(pt, slot);
		else
			port_mark_dirty(pt, slot);   /* waits for the group commit */
	}
	if (c->close_wanted && port_output_idle(c))
		port_conn_end(pt, slot);
}

static void on_close(struct paste_port *pt, uint32_t slot, uint32_t gen)
{
	struct conn *c = &pt->conns[slot];
	if (same_gen(c, gen) && c->state == CONN_RELEASING)
		port_slot_free(pt, slot);
}

/* A failed commit (or one that completed after the store failed anyway)
 * leaves durable_epoch where it was: its replies stay behind the gate, and
 * the next pass's barrier ends their connections (port_fail_gated). That
 * is one pass later, so a CQE still adds at most one event. */
static void on_fsync(struct paste_port *pt, struct uring *u, int res)
{
	u->commit_inflight = false;
	if (paste_persist_end_commit(pt->persist, u->commit_ticket, res) < 0)
		return;
	pt->st.commits++;
	pt->durable_epoch = u->commit_epoch;
}

static void handle_cqe(struct paste_port *pt, struct uring *u, struct io_uring_cqe *cqe)
{
	uint64_t d = cqe->user_data;
	uint32_t slot = (uint32_t)d, gen = (uint32_t)(d >> 32) & GEN_MASK;
	switch ((int)(d >> 60)) {
	case OP_ACCEPT: on_accept(pt, u, cqe, false); break;
	case OP_ACCEPT_MS: on_accept(pt, u, cqe, true); break;
	case OP_RECV:   on_recv(pt, u, cqe, slot, gen); break;
	case OP_SEND:   on_send(pt, u, cqe, slot, gen); break;
	case OP_CLOSE:  on_close(pt, slot, gen); break;
	case OP_FSYNC:  on_fsync(pt, u, cqe->res); break;
	default: break;  /* cancel results, stray closes */
	}
}

/* The persistence barrier for the batch the app just finished: one fence
 * (pmem/emulated) or one group commit (fsync, asynchronous: the loop keeps
 * receiving while the disk works; replies wait behind the gate). Once the
 * store is failed (here, in another thread, or found removed by the watch)
 * durable_epoch never moves again and gated replies are dropped with their
 * connections; ungated output (an error reply) still flows. */
static void barrier(struct paste_port *pt, struct uring *u)
{
	uint64_t done = pt->epoch;   /* everything queued so far */
	if (paste_store_failed(pt->store, NULL)) {
		port_fail_gated(pt);
		return;
	}
	switch (pt->dur) {
	case PASTE_DUR_EMULATED:
	case PASTE_DUR_PMEM:
		if (paste_persist_pending(pt->persist)) {
			pt->st.fences++;
			if (paste_persist_fence(pt->persist) < 0) {
				port_fail_gated(pt);
				return;
			}
		}
		break;
	case PASTE_DUR_FSYNC:
		if (u->commit_inflight)
			return;          /* this batch joins the next group commit */
		int fd = paste_persist_begin_commit(pt->persist, &u->commit_ticket);
		if (fd == -EBUSY)
			return;          /* a commit we did not start: wait for it */
		if (fd == -ENODATA) {
			/* Nothing pending. A commit begun elsewhere may still
			 * hold what was flushed: advance only once the persist
			 * object has published every closed epoch. */
			if (paste_persist_durable(pt->persist) + 1 < paste_persist_epoch(pt->persist))
				return;
			break;
		}
		if (fd < 0) {
			port_fail_gated(pt);
			return;
		}
		struct io_uring_sqe *sqe = sqe_get(pt, u);
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		io_uring_sqe_set_data64(sqe, ud(OP_FSYNC, 0, 0));
		u->commit_inflight = true;
		u->commit_epoch = done;
		return;
	default:
		break;
	}
	pt->durable_epoch = done;
}

/* Hand every CQE available to handle_cqe. A CQE adds at most one event;
 * when the array is full the rest wait in the CQ for the next pass (which
 * then does not block). */
static void gather(struct paste_port *pt, struct uring *u)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	io_uring_for_each_cqe(&u->ring, head, cqe) {
		if (!port_events_room(pt))
			break;
		handle_cqe(pt, u, cqe);
		n++;
	}
	io_uring_cq_advance(&u->ring, n);
}

/* What io_uring_submit_and_wait_timeout does, plus min_wait_usec, which
 * liburing 2.3 cannot pass: publish the SQ tail, then one enter. */
static int enter_batched(struct uring *u, unsigned wait_nr, struct __kernel_timespec *ts)
{
	struct io_uring_sq *sq = &u->ring.sq;
	unsigned tail = sq->sqe_tail;
	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		io_uring_smp_store_release(sq->ktail, tail);
	}
	unsigned to_submit = tail - IO_URING_READ_ONCE(*sq->khead);
	struct getevents_arg arg = {
		.min_wait_usec = u->min_wait_us,
		.ts = (uint64_t)(uintptr_t)ts,
	};
	int r = io_uring_enter2((unsigned)u->ring.ring_fd, to_submit, wait_nr,
				IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
				(sigset_t *)&arg, sizeof(arg));
	return r;     /* liburing's wrappers return -errno */
}

static bool accept_may_retry(struct uring *u)
{
	if (!u->accept_retry.tv_sec)
		return true;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec > u->accept_retry.tv_sec ||
	    (now.tv_sec == u->accept_retry.tv_sec && now.tv_nsec >= u->accept_retry.tv_nsec)) {
		u->accept_retry.tv_sec = 0;
		return true;
	}
	return false;
}

static int uring_poll(struct paste_port *pt, int timeout_ms)
{
	struct uring *u = pt->engine;
	recycle(pt, u);
	barrier(pt, u);
	if (u->nempty < u->nbufs) {      /* the ring has buffers: re-arm */
		for (uint32_t i = 0; i < u->nrearm; i++) {
			struct conn *c = &pt->conns[u->rearm[i]];
			c->on_rearm = false;
			/* The app has seen this batch: a connection it closes
			 * gets no receive (the next data would only be dropped). */
			if (c->state == CONN_OPEN && !c->recv_armed && !c->close_wanted)
				arm_recv(pt, u, u->rearm[i], true);
		}
		u->nrearm = 0;
	}
	bool backoff = !accept_may_retry(u);
	if (!backoff)
		arm_accepts(pt, u);
	port_flush_dirty(pt);

	/* A waiting timeout only when there is nothing to hand out already
	 * (CLOSED events from the barrier or from drained closes count);
	 * short ones while accept backs off or buffers are missing. */
	unsigned wait_nr = io_uring_cq_ready(&u->ring) || pt->nevs ? 0 : 1;
	if (pt->cfg.busy_poll)
		wait_nr = 0;
	struct __kernel_timespec ts, *tsp = NULL;
	if ((backoff || u->nempty || u->nrearm) && (timeout_ms < 0 || timeout_ms > 10))
		timeout_ms = 10;
	if (timeout_ms >= 0 && wait_nr) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
		tsp = &ts;
	}
	struct io_uring_cqe *cqe;
	int r;
	if (wait_nr && u->min_wait && !u->accept_heavy) {
		uint32_t want = pt->st.conns / pt->cfg.want_div;
		if (want > 64)
			want = 64;
		r = enter_batched(u, wait_nr + u->sends_inflight + want, tsp);
	} else {
		r = wait_nr ? io_uring_submit_and_wait_timeout(&u->ring, &cqe, wait_nr, tsp, NULL)
			    : io_uring_submit_and_get_events(&u->ring);
	}
	pt->st.syscalls++;
	gather(pt, u);
	if (++u->win_passes == MW_WINDOW) {
		u->accept_heavy = pt->cfg.defer_accept_s && u->win_accepts &&
				  u->win_accepts * MW_ACCEPT_RATIO >= u->win_reads;
		u->win_passes = u->win_accepts = u->win_reads = 0;
	}
	pt->st.ring_free = u->nbufs - u->nempty - u->ndelivered;
	pt->st.cached = u->ncache;
	pt->st.accept_heavy = u->accept_heavy;
	if (r == -EINTR && pt->nevs == 0)
		return -EINTR;
	if (r < 0 && r != -ETIME && r != -EINTR && r != -EAGAIN && r != -EBUSY)
		return r;     /* paste_port_poll still returns events gathered */
	return 0;
}

static int uring_hold(struct paste_port *pt, const struct paste_event *ev)
{
	paste_store_ref(pt->store, ev->buf);
	return 0;
}

static int ring_init(struct io_uring *ring, uint32_t entries, uint32_t cq, bool *deferred)
{
	struct io_uring_params p = { 0 };
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	p.cq_entries = cq;
	int r = io_uring_queue_init_params(entries, ring, &p);
	*deferred = r == 0;
	if (r == -EINVAL) {
		/* Kernels before 6.1 lack DEFER_TASKRUN: documented fallback,
		 * same semantics, completions delivered by task work. */
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = cq;
		r = io_uring_queue_init_params(entries, ring, &p);
	}
	return r;
}

int paste_uring_probe(struct paste_error *err)
{
	struct io_uring ring;
	bool deferred;
	int r = ring_init(&ring, 8, 16, &deferred);
	if (r < 0)
		return paste_error_set(err, r, "io_uring is not available (%s): the uring engine "
				       "needs Linux >= 6.1 with io_uring enabled (sysctl kernel.io_uring_disabled=0); "
				       "use --engine epoll", strerror(-r));
	struct io_uring_probe *pr = io_uring_get_probe_ring(&ring);
	static const struct { int op; const char *name; } need[] = {
		{ IORING_OP_ACCEPT, "ACCEPT" }, { IORING_OP_RECV, "RECV" },
		{ IORING_OP_SEND, "SEND" }, { IORING_OP_SENDMSG, "SENDMSG" },
		{ IORING_OP_CLOSE, "CLOSE" }, { IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL" },
		{ IORING_OP_FSYNC, "FSYNC" },
	};
	r = 0;
	for (size_t i = 0; pr && i < sizeof(need) / sizeof(need[0]); i++)
		if (!io_uring_opcode_supported(pr, need[i].op))
			r = paste_error_set(err, -EOPNOTSUPP, "io_uring lacks opcode %s; use --engine epoll",
					    need[i].name);
	if (pr)
		io_uring_free_probe(pr);
	if (!r && !(ring.features & IORING_FEAT_EXT_ARG))
		r = paste_error_set(err, -EOPNOTSUPP, "io_uring lacks EXT_ARG (Linux >= 5.11); use --engine epoll");
	io_uring_queue_exit(&ring);
	return r;
}

static int uring_open(struct paste_port *pt, struct paste_error *err)
{
	int r = paste_uring_probe(err);
	if (r < 0)
		return r;
	uint32_t nb = pt->cfg.ring_bufs;
	if (nb > 32768 || (nb & (nb - 1)))
		return paste_error_set(err, -EINVAL, "ring buffers must be a power of two <= 32768 (got %u)", nb);
	if (pt->cfg.min_wait_us > MAX_MIN_WAIT_US)
		return paste_error_set(err, -EINVAL, "min_wait_us %u is over 1 s", pt->cfg.min_wait_us);
	if (!pt->cfg.min_wait_us)
		pt->cfg.min_wait_us = MIN_WAIT_US;
	if (!pt->cfg.want_div)
		pt->cfg.want_div = WANT_DIV;
	struct uring *u = calloc(1, sizeof(*u));
	if (!u)
		return paste_error_set(err, -ENOMEM, "out of memory");
	pt->engine = u;
	u->nbufs = nb;
	u->mask = (uint32_t)io_uring_buf_ring_mask(nb);
	u->bid_buf = malloc(nb * sizeof(*u->bid_buf));
	u->delivered = calloc(nb, sizeof(*u->delivered));
	u->empty = calloc(nb, sizeof(*u->empty));
	u->rearm = calloc(pt->cfg.max_conns, sizeof(*u->rearm));
	if (!u->bid_buf || !u->delivered || !u->empty || !u->rearm)
		return paste_error_set(err, -ENOMEM, "out of memory");
	/* Every ring slot empty until a buffer is in it: a failure below
	 * then makes uring_close release exactly the buffers taken. */
	for (uint32_t i = 0; i < nb; i++)
		u->bid_buf[i] = PASTE_NO_BUF;
	bool deferred;
	uint32_t cq = pt->cfg.max_conns * 4 > 65536 ? 65536 : pt->cfg.max_conns * 4;
	if (cq < 4096)
		cq = 4096;
	r = ring_init(&u->ring, 4096, cq, &deferred);
	if (r < 0)
		return paste_error_set(err, r, "io_uring_queue_init: %s", strerror(-r));
	u->ring_ok = true;
	/* Without min_wait (kernels before 6.12) we wait for one event: same
	 * semantics, smaller batches. */
	u->min_wait = (u->ring.features & IORING_FEAT_MIN_TIMEOUT_BIT) && deferred &&
		      !pt->cfg.no_min_wait;
	u->min_wait_us = pt->cfg.min_wait_us;
	r = io_uring_register_files_sparse(&u->ring, pt->cfg.max_conns);
	if (r < 0)
		return paste_error_set(err, r, "registering %u direct descriptors: %s (raise RLIMIT_NOFILE)",
				       pt->cfg.max_conns, strerror(-r));
	/* The ring structure lives in anonymous memory: the kernel refuses
	 * it inside a file mapping on ext4 (platform-facts). */
	u->br_bytes = (size_t)nb * sizeof(struct io_uring_buf);
	u->br = mmap(NULL, u->br_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (u->br == MAP_FAILED) {
		u->br = NULL;
		return paste_error_set(err, -errno, "mmap of the buffer ring: %s", strerror(errno));
	}
	static int next_bgid;
	u->bgid = (uint16_t)__atomic_fetch_add(&next_bgid, 1, __ATOMIC_RELAXED);
	struct io_uring_buf_reg reg = { .ring_addr = (uintptr_t)u->br, .ring_entries = nb, .bgid = u->bgid };
	io_uring_buf_ring_init(u->br);
	r = io_uring_register_buf_ring(&u->ring, &reg, 0);
	if (r < 0)
		return paste_error_set(err, r, "registering the provided-buffer ring: %s (Linux >= 5.19)",
				       strerror(-r));
	uint32_t size = paste_store_geom(pt->store)->buf_size;
	uint32_t got = 0;
	while (got < nb) {
		uint32_t n = paste_store_alloc(pt->store, u->bid_buf + got, nb - got);
		if (!n)
			break;
		got += n;
	}
	for (uint32_t i = got; i < nb; i++)
		u->bid_buf[i] = PASTE_NO_BUF;
	if (got < nb)
		return paste_error_set(err, -ENOSPC, "the store has %u free buffers, the ring needs %u: "
				       "use a larger --store-size or fewer --ring-bufs", got, nb);
	for (uint32_t i = 0; i < nb; i++)
		io_uring_buf_ring_add(u->br, paste_store_buf(pt->store, u->bid_buf[i]), size,
				      (uint16_t)i, u->mask, (int)i);
	io_uring_buf_ring_advance(u->br, (int)nb);
	pt->st.ring_free = nb;
	return 0;
}

/* The persist object allows one commit in flight and only its end lets
 * the next begin: a commit left running would make every later barrier on
 * this persist object wait forever. An fdatasync is short; wait for it. */
static void finish_commit(struct paste_port *pt, struct uring *u)
{
	io_uring_submit(&u->ring);
	while (u->commit_inflight) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&u->ring, &cqe) < 0)
			return;
		if ((int)(cqe->user_data >> 60) == OP_FSYNC)
			on_fsync(pt, u, cqe->res);
		io_uring_cqe_seen(&u->ring, cqe);   /* buffers: ring slots, released below */
	}
}

static void uring_close(struct paste_port *pt)
{
	struct uring *u = pt->engine;
	if (u->ring_ok) {
		finish_commit(pt, u);
		io_uring_queue_exit(&u->ring);   /* drops every pending op, closes every slot */
	}
	/* Give the ring's buffers back: a filled ring slot owns exactly one
	 * reference (an app's hold is its own); empty slots are PASTE_NO_BUF. */
	for (uint32_t i = 0; u->bid_buf && i < u->nbufs; i++)
		if (u->bid_buf[i] != PASTE_NO_BUF)
			paste_store_unref(pt->store, u->bid_buf[i], false);
	for (uint32_t i = 0; i < u->ncache; i++)
		paste_store_unref(pt->store, u->cache[i], false);
	if (u->br)
		munmap(u->br, u->br_bytes);
	free(u->bid_buf);
	free(u->delivered);
	free(u->empty);
	free(u->rearm);
	free(u);
	pt->engine = NULL;
}

const struct port_ops paste_port_uring_ops = {
	.name = "uring",
	.open = uring_open,
	.close = uring_close,
	.poll = uring_poll,
	.hold = uring_hold,
	.kick = uring_kick,
	.release = uring_release,
};
