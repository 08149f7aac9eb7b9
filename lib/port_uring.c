/*
 * port_uring.c - the io_uring engine of the paste port: its hooks of the
 * pass (lib/port.c, paste_port_poll) and the completions they bring.
 *
 * Per port: one ring (SINGLE_ISSUER|DEFER_TASKRUN: completions are reaped
 * only when we enter, so no IPIs and no task-work interrupts), a listener
 * with a multishot accept into direct descriptors (no fd table, no
 * fget/fput per operation), and per connection one multishot recv that
 * picks buffers from a provided-buffer ring whose buffers are store
 * buffers. The kernel copies received bytes into the store once; the app
 * copies nothing.
 *
 * In a pass the hooks only queue SQEs: recycle refills the buffer ring,
 * commit queues the group commit's fsync, arm the receives and accepts,
 * kick the sends; then wait makes ONE io_uring_enter that submits all of
 * it and waits for the next completions, and gather turns them into
 * events. Each request therefore costs two CQEs (recv, send) and a share
 * of one syscall. Setting up and tearing down: lib/port_uring_setup.c.
 *
 * A connection has a slot of the port's (port_slot_take) and a direct
 * descriptor the kernel picks at accept (IORING_FILE_INDEX_ALLOC). Its
 * close_direct is the release of the slot and is only submitted once the
 * app has seen the connection's CLOSED event (the poll after it;
 * port_internal.h), and, because a send reads its bytes from the slot's
 * output queue, once no send is in flight; the slot is free again at the
 * close's completion.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "port_uring.h"

/* Batch waiting. With wait_nr = 1 the kernel wakes us for every packet,
 * and on a fast server every pass then serves ~4 requests; the wake-ups and
 * context switches are a tenth of the CPU. Instead uring_wait asks for the
 * send completions we expect plus the pass's share of the open connections
 * (want: 1/want_div of them, at most 64, lib/port.c), and tells the kernel
 * (min_wait, Linux 6.12) to settle for whatever arrived after min_wait_us
 * (MIN_WAIT_US). Latency cost: at most min_wait_us when traffic is light.
 * Both are paste_port_config fields (for tuning; phttpd --want-div,
 * --min-wait-us, --no-min-wait); 0 = the defaults. */
/* ... except under accept-heavy load (short connections: at least one new
 * connection per MW_ACCEPT_RATIO reads over the last MW_WINDOW passes) on
 * a TCP_DEFER_ACCEPT listener, where a pass waits for one completion,
 * without the min_wait timer.
 * There a connection's completions (accept, read, send, close) are spread
 * over passes anyway and connection set-up sets the clients' pace, so the
 * timer buys no batching, only its expiries on the server CPU (about 2 us
 * per connection: docs/results.md, "Batch waiting under accept-heavy load").
 * Keep-alive load (no accepts) keeps the timer and its batches. The window
 * is re-judged every MW_WINDOW passes: two counter increments per event,
 * no clock. Cost: a switch lags the load by up to 64 passes.
 * Only with defer accept: without it a connection's read waits for its
 * data after the accept, and without the timer the replies then leave one
 * wake-up at a time: the server saves CPU but the client spends more, and
 * as the client sets the pace, connections/s fall. */
#define MW_WINDOW 64u
#define MW_ACCEPT_RATIO 4u

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

/* Step 2: give back the buffers of the last batch: a buffer nobody held
 * goes back into its ring slot as is (count still 1, no shared-list
 * traffic); a held one is released by the port and a free buffer takes its
 * slot. No SQE: the ring's tail moves, the kernel sees it at the enter. */
static void uring_recycle(struct paste_port *pt)
{
	struct uring *u = pt->engine;
	uint32_t size = paste_store_geom(pt->store)->buf_size;
	int added = 0;
	for (uint32_t i = 0; i < u->ndelivered; i++) {
		uint16_t bid = u->delivered[i];
		uint32_t idx = u->bid_buf[bid];
		u->bid_off[bid] = 0;
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
		u->bid_off[bid] = 0;
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
		io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
	else
		io_uring_prep_recv(sqe, c->fd, NULL, 0, 0);  /* len 0: the whole buffer */
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
	sqe->buf_group = u->bgid;
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, c->gen, slot));
	c->recv_armed = true;
}

/* Accepting. A connection's slot is the port's (port_slot_take), its
 * direct descriptor the kernel's (IORING_FILE_INDEX_ALLOC picks one; the
 * connection keeps it in c->fd). The kernel drops a connection it accepted
 * but cannot install in a full table, so the accepts that may complete
 * before we see them must stay below the free entries: the table has
 * TABLE_SPARE entries past max_conns, one for every one-shot accept that
 * may be in flight besides the connections, so each listener keeps its
 * own accepts armed near the limit and none waits while another holds
 * the last free slots. A multishot accept takes everything queued at
 * once, at most the listen backlog, so it is used only while the free
 * slots exceed the backlog; closer to the limit a few one-shot accepts
 * per listener take over (an SQE per accept is noise next to the
 * requests).
 *
 * Over the limit. An accept that completes when every slot is taken is
 * refused (refuse_conn) if its listener has a refusal
 * (paste_port_config.refuse), as Redis does: accept, count, answer, close.
 * A listener without one must not take a connection it cannot serve: its
 * one-shot accepts each have a slot set aside (promised) and are armed
 * only while there is one; its connections wait in the backlog. */
static void arm_accepts_on(struct paste_port *pt, struct uring *u, uint32_t l, bool roomy)
{
	if (u->accept_ms[l]) {
		if (!roomy && !u->accept_ms_cancel[l]) {
			struct io_uring_sqe *sqe = sqe_get(pt, u);
			io_uring_prep_cancel64(sqe, ud(OP_ACCEPT_MS, 0, l), 0);
			io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
			u->accept_ms_cancel[l] = true;
		}
		return;
	}
	if (roomy && u->accepts_armed[l] == 0) {
		struct io_uring_sqe *sqe = sqe_get(pt, u);
		/* file_index = IORING_FILE_INDEX_ALLOC, right in every liburing
		 * we build with (the one-shot helper was not: below) */
		io_uring_prep_multishot_accept_direct(sqe, pt->listen_fd[l], NULL, NULL, 0);
		io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT_MS, 0, l));
		u->accept_ms[l] = true;
		u->accept_ms_cancel[l] = false;
		return;
	}
	bool refuses = pt->cfg.refuse[l] != NULL;
	while (!roomy && u->accepts_armed[l] < ACCEPTS_OUTSTANDING &&
	       pt->st.conns + u->refusing + u->accepts_total < u->table &&
	       (refuses || pt->st.conns + u->promised < pt->cfg.max_conns)) {
		struct io_uring_sqe *sqe = sqe_get(pt, u);
		uring_prep_accept_alloc(sqe, pt->listen_fd[l]);   /* port_uring_compat.h */
		io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, 0, l));
		u->accepts_armed[l]++;
		u->accepts_total++;
		u->promised += !refuses;
	}
}

/* Every listener's multishot accept may take a backlog's worth at once:
 * roomy only while the free slots hold all of them. */
static void arm_accepts(struct paste_port *pt, struct uring *u)
{
	uint32_t used = pt->st.conns + u->accepts_total;
	bool roomy = used + pt->nlisten * (PASTE_LISTEN_BACKLOG + ACCEPTS_OUTSTANDING) <=
		     pt->cfg.max_conns;
	for (uint32_t l = 0; l < pt->nlisten; l++)
		arm_accepts_on(pt, u, l, roomy);
}

/* A connection over the limit, in direct descriptor d: a chain that needs
 * nothing from the pass answers it. A non-blocking receive first (what
 * the client sent, dropped: closing a socket with unread bytes sends a
 * reset, which may destroy the answer before the client reads it), then
 * the refusal, then the close; hard links, so each runs whatever the one
 * before returned. Cost: three SQEs per refused connection. */
static void refuse_conn(struct paste_port *pt, struct uring *u, int d, uint32_t l)
{
	const char *msg = pt->cfg.refuse[l];
	if (io_uring_sq_space_left(&u->ring) < 3) {   /* one submission, or the links break */
		io_uring_submit(&u->ring);
		pt->st.syscalls++;
	}
	struct io_uring_sqe *sqe = sqe_get(pt, u);
	io_uring_prep_recv(sqe, d, u->refuse_sink, sizeof(u->refuse_sink), MSG_DONTWAIT);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
	io_uring_sqe_set_data64(sqe, 0);
	sqe = sqe_get(pt, u);
	io_uring_prep_send(sqe, d, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
	io_uring_sqe_set_data64(sqe, 0);
	sqe = sqe_get(pt, u);
	io_uring_prep_close_direct(sqe, (unsigned)d);
	io_uring_sqe_set_data64(sqe, ud(OP_REFUSED, 0, 0));
	u->refusing++;
	pt->st.refused++;
}

static void send_inflight(struct paste_port *pt, struct uring *u, uint32_t slot, uint32_t niov)
{
	struct conn *c = &pt->conns[slot];
	struct io_uring_sqe *sqe = sqe_get(pt, u);
	if (niov == 1)   /* the common case: one contiguous reply, no msghdr import */
		io_uring_prep_send(sqe, c->fd, c->iov[0].iov_base, c->iov[0].iov_len, MSG_NOSIGNAL);
	else
		io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
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

/* Step 1: the app has seen the CLOSED event: give the slot back. A send
 * still in flight reads this slot's output queue, so it is cancelled (the
 * peer is gone, or the app is done) and the release waits for its
 * completion (on_send calls this again).
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
	io_uring_prep_close_direct(sqe, (unsigned)c->fd);
	io_uring_sqe_set_data64(sqe, ud(OP_CLOSE, c->gen, slot));
}

/* cfg.peer_addrs: getsockopt(SOL_SOCKET, SO_PEERNAME) on the direct
 * descriptor (IORING_OP_URING_CMD, SOCKET_URING_OP_GETSOCKOPT: Linux 6.7),
 * hard-linked before the first receive so the address is in place before
 * any DATA event; on an older kernel it fails, the receive goes on and the
 * peer stays unknown. The kernel wants optlen no longer than the address
 * (sockaddr_in or sockaddr_in6, as the listener's family). The fields are
 * set by offset: liburing 2.3's sqe has no level/optname/optval names. */
#define URING_SOCKET_OP_GETSOCKOPT 2u
static void ask_peer(struct paste_port *pt, struct uring *u, uint32_t slot, uint32_t l)
{
	struct conn *c = &pt->conns[slot];
	struct io_uring_sqe *sqe = sqe_get(pt, u);
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = c->fd;
	sqe->flags = IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
	sqe->off = URING_SOCKET_OP_GETSOCKOPT;                          /* cmd_op */
	sqe->addr = (uint64_t)SOL_SOCKET | ((uint64_t)SO_PEERNAME << 32);  /* level, optname */
	sqe->file_index = pt->listen_addr[l].ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
								    : sizeof(struct sockaddr_in);  /* optlen */
	sqe->addr3 = (uint64_t)(uintptr_t)&pt->peers[slot].a;           /* optval */
	io_uring_sqe_set_data64(sqe, ud(OP_PEER, c->gen, slot));
}

static void on_peer(struct paste_port *pt, struct io_uring_cqe *cqe, uint32_t slot, uint32_t gen)
{
	if (cqe->res > 0 && same_gen(&pt->conns[slot], gen) && pt->peers)
		pt->peers[slot].len = (uint32_t)cqe->res;
}

static void on_accept(struct paste_port *pt, struct uring *u, struct io_uring_cqe *cqe,
		      bool multishot)
{
	uint32_t l = (uint32_t)cqe->user_data;   /* the listener (ud's slot field) */
	if (l >= PASTE_PORT_MAX_LISTEN)
		l = 0;
	bool refuses = pt->cfg.refuse[l] != NULL;
	if (!multishot) {
		u->accepts_armed[l]--;
		u->accepts_total--;
		u->promised -= !refuses;
	} else if (!(cqe->flags & IORING_CQE_F_MORE)) {
		u->accept_ms[l] = false;
	}
	if (cqe->res < 0) {
		/* ENOMEM, ENFILE (another user of the table), ...: keep serving
		 * the connections we have, retry accepting in 100 ms. */
		if (cqe->res != -ECANCELED) {
			u->accept_retry_ns = paste_clock_ns() + 100 * 1000000ull;
		}
		return;
	}
	int d = cqe->res;                          /* the direct descriptor */
	/* The slots promised to other accepts in flight are not this one's. */
	uint32_t slot = pt->nfree > u->promised ? port_slot_take(pt) : UINT32_MAX;
	if (slot == UINT32_MAX) {
		if (refuses) {
			refuse_conn(pt, u, d, l);
		} else {
			/* cannot happen: its slot was promised; never reuse a live one */
			struct io_uring_sqe *sqe = sqe_get(pt, u);
			io_uring_prep_close_direct(sqe, (unsigned)d);
			io_uring_sqe_set_data64(sqe, 0);
		}
		return;
	}
	port_conn_reset(pt, slot, d);
	pt->conns[slot].listener = (uint8_t)l;
	pt->st.accepts++;
	pt->st.conns++;
	if (pt->peers)
		ask_peer(pt, u, slot, l);
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
		/* Dense receives: the bytes follow the buffer's earlier ones, and
		 * the buffer goes back only once the kernel says it is done with
		 * it (no BUF_MORE). A completion without bytes consumed nothing:
		 * the buffer stays at the ring's head. */
		uint32_t off = 0;
		bool done = true;
		if (u->inc) {
			off = u->bid_off[bid];
			done = cqe->res > 0 && !(cqe->flags & IORING_CQE_F_BUF_MORE);
			if (cqe->res > 0)
				u->bid_off[bid] += (uint32_t)cqe->res;
		}
		if (done)
			u->delivered[u->ndelivered++] = bid;
		if (live && cqe->res > 0 && c->state == CONN_OPEN && !c->close_wanted) {
			struct paste_event *ev = port_push_event(pt, PASTE_EV_DATA, slot);
			uint32_t idx = u->bid_buf[bid];
			ev->buf = idx;
			ev->off = off;
			ev->len = (uint32_t)cqe->res;
			ev->data = paste_store_buf(pt->store, idx) + off;
			/* The kernel wrote these bytes during this pass's task
			 * work, and its TCP work for the other connections has
			 * pushed them out of L1/L2 since; the app reads them
			 * after the events before this one. Two prefetches
			 * cover a command's head or a request line; prefetching
			 * all of a 1 KiB SET's lines does no better. They save
			 * ~8 % of an unpipelined 1 KiB SET (docs/results.md,
			 * "Received bytes prefetched"). */
			__builtin_prefetch(ev->data);
			__builtin_prefetch((const char *)ev->data + 64);
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
		if (!c->on_rearm && !c->read_paused) {   /* paused: its resume re-arms */
			c->on_rearm = true;
			u->rearm[u->nrearm++] = slot;
		}
	}
}

/* Backpressure (port_out.c decides): a connection whose output is over
 * max_output has its receive cancelled; what the receive brought before
 * the cancel took hold still arrives as DATA (its buffers are recycled or
 * held as any other), and its ending CQE re-arms nothing while paused.
 * Resumed, it is re-armed at the next arm step, as after ENOBUFS.
 * Cost: an SQE each way, only when the limit is crossed. */
static void uring_read_pause(struct paste_port *pt, uint32_t slot)
{
	struct uring *u = pt->engine;
	struct conn *c = &pt->conns[slot];
	if (c->state != CONN_OPEN)
		return;
	if (c->read_paused) {
		if (c->recv_armed) {
			struct io_uring_sqe *sqe = sqe_get(pt, u);
			io_uring_prep_cancel64(sqe, ud(OP_RECV, c->gen, slot), 0);
			io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, c->gen, slot));
		}
	} else if (!c->recv_armed && !c->on_rearm) {
		c->on_rearm = true;
		u->rearm[u->nrearm++] = slot;
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
			send_inflight(pt, u, slot, n);   /* (0: no memory, the conn ended) */
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
	case OP_COMMIT: port_commit_done(pt, cqe->res); break;   /* the barrier's group commit */
	case OP_REFUSED: u->refusing--; break;   /* a refusal's close */
	case OP_PEER:   on_peer(pt, cqe, slot, gen); break;
	default: break;  /* cancel results, stray closes */
	}
}

static bool accept_may_retry(struct uring *u)
{
	if (!u->accept_retry_ns)
		return true;
	if (paste_clock_ns() >= u->accept_retry_ns) {
		u->accept_retry_ns = 0;
		return true;
	}
	return false;
}

/* Step 3, fsync mode: the group commit the pass's barrier started runs
 * in the persist object's own ring (its writes and fdatasync: see
 * lib/persist_fsync.c) and ends by writing the eventfd it returned; a read
 * of that, queued in the same enter as the replies the commit does not
 * cover, brings its end here: port_commit_done. */
static void uring_commit(struct paste_port *pt, int fd)
{
	struct uring *u = pt->engine;
	struct io_uring_sqe *sqe = sqe_get(pt, u);
	io_uring_prep_read(sqe, fd, &u->commit_word, sizeof(u->commit_word), 0);
	io_uring_sqe_set_data64(sqe, ud(OP_COMMIT, 0, 0));
}

/* Step 4: re-arm the receives that ended while their connection lives,
 * once the ring has buffers again (after the barrier: it may end
 * connections), and keep the accepts armed unless they back off. */
static void uring_arm(struct paste_port *pt)
{
	struct uring *u = pt->engine;
	if (u->nempty < u->nbufs) {      /* the ring has buffers: re-arm */
		for (uint32_t i = 0; i < u->nrearm; i++) {
			struct conn *c = &pt->conns[u->rearm[i]];
			c->on_rearm = false;
			/* The app has seen this batch: a connection it closes
			 * gets no receive (the next data would only be dropped). */
			if (c->state == CONN_OPEN && !c->recv_armed && !c->close_wanted &&
			    !c->read_paused)
				arm_recv(pt, u, u->rearm[i], true);
		}
		u->nrearm = 0;
	}
	u->backoff = !accept_may_retry(u);
	if (!u->backoff)
		arm_accepts(pt, u);
}

/* Step 6: submit everything the pass queued and wait, in one enter. */
static int uring_wait(struct paste_port *pt, int timeout_ms, uint32_t want)
{
	struct uring *u = pt->engine;
	/* A waiting timeout only when there is nothing to hand out already
	 * (CLOSED events from the barrier or from drained closes count, and
	 * completions a full event array left in the CQ); short ones while
	 * accept backs off or buffers are missing. */
	unsigned wait_nr = io_uring_cq_ready(&u->ring) || pt->nevs ? 0 : 1;
	if (pt->cfg.busy_poll)
		wait_nr = 0;
	struct __kernel_timespec ts, *tsp = NULL;
	if ((u->backoff || u->nempty || u->nrearm) && (timeout_ms < 0 || timeout_ms > 10))
		timeout_ms = 10;
	if (timeout_ms >= 0 && wait_nr) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
		tsp = &ts;
	}
	if (pt->wake_at_ns && wait_nr) {
		uint64_t now = paste_clock_ns();
		uint64_t left = pt->wake_at_ns > now ? pt->wake_at_ns - now : 0;
		if (!tsp || left < (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) {
			ts.tv_sec = (long long)(left / 1000000000u);
			ts.tv_nsec = (long long)(left % 1000000000u);
			tsp = &ts;
		}
	}
	struct io_uring_cqe *cqe;
	int r;
	if (wait_nr && u->min_wait && !u->accept_heavy)
		r = uring_submit_and_wait_min(&u->ring, wait_nr + u->sends_inflight + want, tsp,
					      u->min_wait_us);
	else
		r = wait_nr ? io_uring_submit_and_wait_timeout(&u->ring, &cqe, wait_nr, tsp, NULL)
			    : io_uring_submit_and_get_events(&u->ring);
	pt->st.syscalls++;
	/* The timeout, or nothing to reap: not errors. -EINTR (a signal) is
	 * one the app sees, when the batch is empty. */
	return r == -ETIME || r == -EAGAIN || r == -EBUSY ? 0 : r;
}

/* Step 7: hand every CQE available to handle_cqe, whatever the enter
 * returned. A CQE adds at most one event; when the array is full the rest
 * wait in the CQ for the next pass (which then does not block). Then the
 * accept-heavy window and the gauges. One enter per pass: never again. */
static bool uring_gather(struct paste_port *pt, int r)
{
	(void)r;
	struct uring *u = pt->engine;
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	io_uring_for_each_cqe(&u->ring, head, cqe) {
		if (!port_events_room(pt))
			break;
		handle_cqe(pt, u, cqe);
		n++;
	}
	io_uring_cq_advance(&u->ring, n);
	if (++u->win_passes == MW_WINDOW) {
		u->accept_heavy = pt->cfg.defer_accept_s && u->win_accepts &&
				  u->win_accepts * MW_ACCEPT_RATIO >= u->win_reads;
		u->win_passes = u->win_accepts = u->win_reads = 0;
	}
	pt->st.ring_free = u->nbufs - u->nempty - u->ndelivered;
	pt->st.cached = u->ncache;
	pt->st.accept_heavy = u->accept_heavy;
	return false;
}

static int uring_hold(struct paste_port *pt, const struct paste_event *ev)
{
	paste_store_ref(pt->store, ev->buf);
	return 0;
}

const struct port_ops paste_port_uring_ops = {
	.name = "uring",
	.open = uring_open,
	.close = uring_close,
	.release = uring_release,
	.recycle = uring_recycle,
	.commit = uring_commit,
	.arm = uring_arm,
	.kick = uring_kick,
	.wait = uring_wait,
	.gather = uring_gather,
	.hold = uring_hold,
	.read_pause = uring_read_pause,
};
