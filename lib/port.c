/*
 * port.c - the paste port's event loop and everything in it that does not
 * depend on the engine: configuration, the connection table and its slot
 * lifecycle (port_internal.h), the event batch, the durability gate and
 * what a failed store does to it, and the pass itself, paste_port_poll.
 *
 * The pass reads top to bottom like Redis's aeProcessEvents: release,
 * recycle, barrier, arm, flush, wait, gather. Each step is a few lines
 * here plus, where the engine matters, one hook of its struct port_ops
 * (lib/port_uring.c, lib/port_epoll.c). A hook does its engine's part and
 * returns; no hook calls back into the pass, so the order below is the
 * order of the pass, whichever engine runs it. The split costs at most
 * three indirect calls per pass more than one engine-wide poll hook would,
 * noise next to the one io_uring_enter the pass makes.
 * Output queues and the send API are in lib/port_out.c.
 *
 * Nothing here allocates per request: the event array is sized once, at
 * open.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port_internal.h"

struct paste_event *port_push_event(struct paste_port *pt, uint16_t type, uint32_t conn)
{
	if (pt->nevs >= pt->cap_evs) {
		/* The engines keep room (port_internal.h); losing an event
		 * would break the slot lifecycle, so this is a bug, not ENOMEM. */
		fprintf(stderr, "paste: port event array overflow (%u events): bug\n", pt->nevs);
		abort();
	}
	struct paste_event *ev = &pt->evs[pt->nevs++];
	*ev = (struct paste_event){ .type = type, .listener = pt->conns[conn].listener,
				    .conn = conn, .buf = PASTE_NO_BUF };
	return ev;
}

int paste_port_conn_addr(const struct paste_port *pt, uint32_t conn, struct sockaddr_storage *peer,
			 uint32_t *plen, struct sockaddr_storage *local, uint32_t *llen, int *fd)
{
	if (conn >= pt->cfg.max_conns || pt->conns[conn].state != CONN_OPEN)
		return -ENOTCONN;
	const struct conn *c = &pt->conns[conn];
	if (plen) {
		*plen = pt->peers ? pt->peers[conn].len : 0;
		if (*plen && peer)
			*peer = pt->peers[conn].a;
	}
	if (llen) {
		socklen_t sl = sizeof(*local);
		*llen = 0;
		if (pt->cfg.engine != PASTE_ENGINE_URING && local &&
		    getsockname(c->fd, (struct sockaddr *)local, &sl) == 0) {
			*llen = sl;
		} else if (local) {
			*local = pt->listen_addr[c->listener];
			*llen = pt->listen_addr_len[c->listener];
		}
	}
	if (fd)
		*fd = c->fd;
	return 0;
}

void port_conn_reset(struct paste_port *pt, uint32_t slot, int fd)
{
	struct conn *c = &pt->conns[slot];
	port_output_reset(c);
	c->state = CONN_OPEN;
	c->recv_armed = c->send_inflight = c->close_wanted = c->release_ready = false;
	c->drop_wanted = false;
	c->read_paused = false;
	c->gen++;
	c->fd = fd;
	c->need_epoch = 0;
	c->queued = 0;
	if (pt->peers)
		pt->peers[slot].len = 0;
	if (pt->cfg.conn_data_size)
		memset(pt->conn_data + (size_t)slot * pt->cfg.conn_data_size, 0,
		       pt->cfg.conn_data_size);
}

void port_conn_end(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	if (c->state != CONN_OPEN)
		return;
	c->state = CONN_ENDED;
	if (c->read_paused) {      /* nothing more is read anyway */
		c->read_paused = false;
		pt->st.paused--;
	}
	port_push_event(pt, PASTE_EV_CLOSED, slot);
	/* Unsent output goes now (its pins with it); what a uring send still
	 * reads stays until that send completes (the release waits for it). */
	port_output_discard_pending(pt, c);
	pt->st.queued -= c->queued;         /* none of it will be sent */
	c->queued = 0;
	pt->ended[pt->nended++] = slot;
}

uint32_t port_slot_take(struct paste_port *pt)
{
	return pt->nfree ? pt->free_slots[--pt->nfree] : UINT32_MAX;
}

void port_slot_free(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	port_output_discard(pt, c);
	port_output_trim(c);
	c->state = CONN_FREE;
	pt->free_slots[pt->nfree++] = slot;
	pt->st.conns--;
	pt->st.closes++;
}

void port_flush_dirty(struct paste_port *pt)
{
	uint32_t keep = 0;
	for (uint32_t i = 0; i < pt->ndirty; i++) {
		uint32_t slot = pt->dirty[i];
		struct conn *c = &pt->conns[slot];
		if (c->state != CONN_OPEN || c->drop_wanted) {
			c->on_dirty = false;
			port_conn_end(pt, slot);         /* (no-op unless open) */
			continue;
		}
		if (c->pending.nsegs && !port_gate_open(pt, c)) {
			pt->dirty[keep++] = slot;  /* waits for the group commit */
			continue;
		}
		c->on_dirty = false;
		if (c->pending.nsegs)
			pt->ops->kick(pt, slot);
		if (c->close_wanted && port_output_idle(c))
			port_conn_end(pt, slot);
	}
	pt->ndirty = keep;
}

void port_fail_gated(struct paste_port *pt)
{
	/* Every connection with gated output is on the dirty list (send and
	 * the uring send completion list it), so the list is all we scan. */
	for (uint32_t i = 0; i < pt->ndirty; i++) {
		struct conn *c = &pt->conns[pt->dirty[i]];
		if (c->state == CONN_OPEN && c->pending.nsegs && !port_gate_open(pt, c))
			port_conn_end(pt, pt->dirty[i]);
	}
}

void *paste_port_conn_data(struct paste_port *pt, uint32_t slot)
{
	if (slot >= pt->cfg.max_conns || !pt->cfg.conn_data_size)
		return NULL;
	return pt->conn_data + (size_t)slot * pt->cfg.conn_data_size;
}

uint64_t paste_port_conn_queued(const struct paste_port *pt, uint32_t conn)
{
	if (conn >= pt->cfg.max_conns || pt->conns[conn].state != CONN_OPEN)
		return 0;
	return pt->conns[conn].queued;
}

bool paste_port_conn_sending(const struct paste_port *pt, uint32_t conn)
{
	if (conn >= pt->cfg.max_conns || pt->conns[conn].state != CONN_OPEN)
		return false;
	return !port_output_idle(&pt->conns[conn]);
}

int paste_port_hold(struct paste_port *pt, const struct paste_event *ev)
{
	if (ev->type != PASTE_EV_DATA || ev->buf == PASTE_NO_BUF)
		return -EINVAL;
	return pt->ops->hold(pt, ev);
}

static int listen_one(struct paste_port *pt, uint32_t i, uint16_t port, struct paste_error *err)
{
	const char *host = pt->cfg.host ? pt->cfg.host : "127.0.0.1";
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		sl = sizeof(*a4);
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		sl = sizeof(*a6);
	} else {
		return paste_error_set(err, -EINVAL, "listen address '%s' is not an IPv4 or IPv6 literal", host);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return paste_error_set(err, -errno, "socket: %s", strerror(errno));
	int one = 1;
	/* SO_REUSEPORT: one listener per thread, the kernel spreads accepts
	 * (no thundering herd, unlike the original's shared socket). */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	/* Accepted sockets inherit TCP_NODELAY: replies are whole messages,
	 * and Nagle would hold back a pipelined batch's second send. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* TCP_DEFER_ACCEPT: the handshake's last ACK does not complete the
	 * connection, its first data does. Accept then finds the request
	 * already there: the first receive needs no poll arming and no empty
	 * try (~12 % less server CPU per short connection: docs/results.md,
	 * "TCP_DEFER_ACCEPT").
	 * Cost: a client that connects and waits for the server to speak is
	 * accepted only after the timeout. */
	int defer = (int)pt->cfg.defer_accept_s;
	if (defer && setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer)) < 0) {
		int e = errno;
		close(fd);
		return paste_error_set(err, -e, "TCP_DEFER_ACCEPT: %s", strerror(e));
	}
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, PASTE_LISTEN_BACKLOG) < 0) {
		int e = errno;
		close(fd);
		return paste_error_set(err, -e, "cannot listen on %s port %u: %s", host,
				       port, strerror(e));
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		pt->local_port[i] = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
		pt->listen_addr[i] = ss;
		pt->listen_addr_len[i] = sl;
	}
	pt->listen_fd[i] = fd;
	return 0;
}

int port_listen(struct paste_port *pt, struct paste_error *err)
{
	if (!pt->cfg.nports) {
		pt->nlisten = 1;
		return listen_one(pt, 0, pt->cfg.port, err);
	}
	pt->nlisten = pt->cfg.nports;
	for (uint32_t i = 0; i < pt->nlisten; i++) {
		int r = listen_one(pt, i, pt->cfg.ports[i], err);
		if (r)
			return r;
	}
	return 0;
}

int paste_port_open(struct paste_port **out, const struct paste_port_config *cfg,
		    struct paste_error *err)
{
	if (!cfg->store)
		return paste_error_set(err, -EINVAL, "paste_port_open: a packet store is required");
	struct paste_port *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return paste_error_set(err, -ENOMEM, "out of memory");
	pt->cfg = *cfg;
	if (!pt->cfg.ring_bufs)
		pt->cfg.ring_bufs = 4096;
	if (!pt->cfg.max_conns)
		pt->cfg.max_conns = 4096;
	if (!pt->cfg.want_div)
		pt->cfg.want_div = PORT_WANT_DIV;    /* 0 is the default: never a divisor */
	if (!pt->cfg.max_output)
		pt->cfg.max_output = PASTE_PORT_MAX_OUTPUT;
	if (pt->cfg.max_conns > PORT_MAX_CONNS) {
		free(pt);
		return paste_error_set(err, -EINVAL, "%u connection slots: at most %u",
				       cfg->max_conns, PORT_MAX_CONNS);
	}
	if (pt->cfg.nports > PASTE_PORT_MAX_LISTEN) {
		free(pt);
		return paste_error_set(err, -EINVAL, "%u listeners: at most %u", cfg->nports,
				       PASTE_PORT_MAX_LISTEN);
	}
	if (pt->cfg.defer_accept_s > PORT_MAX_DEFER_S) {
		free(pt);
		return paste_error_set(err, -EINVAL, "defer_accept_s %u: at most %u",
				       cfg->defer_accept_s, PORT_MAX_DEFER_S);
	}
	if ((unsigned)pt->cfg.engine > PASTE_ENGINE_EPOLL_BATCH) {
		free(pt);
		return paste_error_set(err, -EINVAL, "engine %u: uring, epoll or epoll-batch",
				       (unsigned)cfg->engine);
	}
	if (pt->cfg.commit_hold_us < -1 || pt->cfg.commit_hold_us > 1000000) {
		free(pt);
		return paste_error_set(err, -EINVAL, "commit_hold_us %d: -1 (never) .. 1000000",
				       (int)cfg->commit_hold_us);
	}
	pt->store = cfg->store;
	pt->persist = cfg->persist;
	pt->dur = cfg->persist ? paste_persist_mode(cfg->persist) : PASTE_DUR_NONE;
	for (uint32_t i = 0; i < PASTE_PORT_MAX_LISTEN; i++)
		pt->listen_fd[i] = -1;
	pt->epoch = 1;
	pt->ops = cfg->engine == PASTE_ENGINE_URING ? &paste_port_uring_ops : &paste_port_epoll_ops;
	pt->conns = calloc(pt->cfg.max_conns, sizeof(*pt->conns));
	pt->free_slots = malloc(pt->cfg.max_conns * sizeof(*pt->free_slots));
	for (uint32_t i = pt->cfg.max_conns; pt->free_slots && i-- > 0;)   /* slot 0 on top */
		pt->free_slots[pt->nfree++] = i;
	pt->dirty = calloc(pt->cfg.max_conns, sizeof(*pt->dirty));
	pt->ended = calloc(pt->cfg.max_conns, sizeof(*pt->ended));
	pt->cap_evs = PORT_EVENTS_CAP(pt->cfg.max_conns);
	pt->evs = calloc(pt->cap_evs, sizeof(*pt->evs));
	if (pt->cfg.conn_data_size)
		pt->conn_data = calloc(pt->cfg.max_conns, pt->cfg.conn_data_size);
	if (pt->cfg.peer_addrs)
		pt->peers = calloc(pt->cfg.max_conns, sizeof(*pt->peers));
	int r;
	if (!pt->conns || !pt->free_slots || !pt->dirty || !pt->ended || !pt->evs ||
	    (pt->cfg.conn_data_size && !pt->conn_data) || (pt->cfg.peer_addrs && !pt->peers))
		r = paste_error_set(err, -ENOMEM, "out of memory for %u connections", pt->cfg.max_conns);
	else if ((r = port_listen(pt, err)) == 0)
		r = pt->ops->open(pt, err);
	if (r < 0) {
		paste_port_close(pt);
		return r;
	}
	*out = pt;
	return 0;
}

void paste_port_close(struct paste_port *pt)
{
	if (!pt)
		return;
	/* The engine closes every socket it still has, whatever its state;
	 * then every slot is released here (stats: accepts == closes). */
	if (pt->engine)
		pt->ops->close(pt);
	for (uint32_t i = 0; i < pt->nlisten; i++)
		if (pt->listen_fd[i] >= 0)
			close(pt->listen_fd[i]);
	for (uint32_t i = 0; pt->conns && i < pt->cfg.max_conns; i++) {
		struct conn *c = &pt->conns[i];
		if (c->state != CONN_FREE)
			port_slot_free(pt, i);
		port_output_free(c);
	}
	free(pt->conns);
	free(pt->free_slots);
	free(pt->conn_data);
	free(pt->peers);
	free(pt->dirty);
	free(pt->ended);
	free(pt->evs);
	free(pt);
}

/* ------------------------------------------------------------------ */
/* The pass                                                            */
/* ------------------------------------------------------------------ */

/* Step 3: the persistence barrier for everything the app flushed while it
 * handled the last batch, so the replies it queued may leave: one fence
 * (pmem, emulated), or one group commit (fsync) started on the engine and
 * not waited for: the loop keeps receiving while the disk works, and the
 * replies wait behind the gate until port_commit_done. Cost: a fence per
 * pass that has something pending, or an fdatasync per pass while the
 * disk keeps up (batches that arrive during one join the next).
 *
 * The failed store: once it is failed (here, in another thread, or found
 * removed by the watch) durable_epoch never moves again and output waiting
 * behind the gate is dropped with its connection; output the gate already
 * let through (a reply a successful barrier covered, an ungated 503)
 * still leaves. */
/* Two clock reads per barrier paid (~40 ns next to a fence's ~0.1-10 us
 * or an fdatasync's ~100 us+): what a monitoring system graphs. */
uint64_t port_barrier_done(struct paste_port *pt, uint64_t start_ns)
{
	uint64_t ns = paste_clock_ns() - start_ns;
	uint64_t us = (ns + 999) / 1000;
	uint32_t b = 0;
	while (b + 1 < PASTE_PORT_LAT_BUCKETS && us > (1ull << b))
		b++;
	pt->st.barrier_hist[b]++;
	pt->st.barrier_ns += ns;
	return ns;
}

/* Group commit sizing (fsync mode). Clients that send a request, wait
 * for its reply and send the next (redis-benchmark, a database client)
 * otherwise split into two groups that alternate: while one group's
 * commit is on the disk the other's requests arrive, and they start the
 * next commit as soon as the first ends, before the first group's next
 * requests are back. Each commit then serves half the clients, and the
 * disk's fixed cost per fdatasync (a cache flush, ~0.2-1 ms) is paid
 * twice as often. So after a commit ends, the next waits until 3/4 as
 * many events as the ended commit covered have come in, for at most half
 * that commit's duration (at most 500 us), or commit_hold_us when set:
 * one client, or clients that went idle, cost no wait or a bounded one.
 * (docs/design.md, "Group commit sizing (fsync mode)"; docs/results.md,
 * "Group commit sizing".) */
static bool commit_hold(struct paste_port *pt)
{
	if (!pt->hold_until_ns)
		return false;
	uint64_t arrived = pt->st.events - pt->events_at_done;
	if (arrived * 4 < pt->commit_events * 3 && paste_clock_ns() < pt->hold_until_ns) {
		pt->wake_at_ns = pt->hold_until_ns;
		return true;
	}
	pt->hold_until_ns = 0;
	return false;
}

static void barrier(struct paste_port *pt)
{
	uint64_t done = pt->epoch;   /* everything queued so far */
	if (paste_store_failed(pt->store, NULL)) {
		port_fail_gated(pt);
		return;
	}
	/* An engine that fences before each write (epoll) pays nothing here. */
	switch (pt->ops->fence_per_write ? PASTE_DUR_NONE : pt->dur) {
	case PASTE_DUR_EMULATED:
	case PASTE_DUR_PMEM:
		if (paste_persist_pending(pt->persist)) {
			pt->st.fences++;
			uint64_t t0 = paste_clock_ns();
			if (paste_persist_fence(pt->persist) < 0) {
				port_fail_gated(pt);
				return;
			}
			port_barrier_done(pt, t0);
		}
		break;
	case PASTE_DUR_FSYNC:
		if (pt->commit_inflight)
			return;          /* this batch joins the next group commit */
		if (paste_persist_pending(pt->persist) && commit_hold(pt))
			return;          /* the clients the last commit answered are coming */
		int fd = paste_persist_begin_commit(pt->persist, &pt->commit_ticket);
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
		pt->commit_start_ns = paste_clock_ns();
		pt->commit_events = pt->st.events - pt->events_at_start;
		pt->events_at_start = pt->st.events;
		pt->ops->commit(pt, fd);
		pt->commit_inflight = true;
		pt->commit_epoch = done;
		return;
	default:
		break;
	}
	pt->durable_epoch = done;
}

/* A failed commit (or one that completed after the store failed anyway)
 * leaves durable_epoch where it was: its replies stay behind the gate, and
 * the next pass's barrier ends their connections (port_fail_gated). That
 * is one pass later, so a completion still adds at most one event. */
void port_commit_done(struct paste_port *pt, int res)
{
	pt->commit_inflight = false;
	if (paste_persist_end_commit(pt->persist, pt->commit_ticket, res) < 0)
		return;
	pt->st.commits++;
	uint64_t took = port_barrier_done(pt, pt->commit_start_ns);
	pt->durable_epoch = pt->commit_epoch;
	if (pt->cfg.commit_hold_us >= 0) {
		uint64_t hold = took / 2;
		if (hold > PORT_COMMIT_HOLD_US * 1000u)
			hold = PORT_COMMIT_HOLD_US * 1000u;
		if (pt->cfg.commit_hold_us > 0)
			hold = (uint64_t)pt->cfg.commit_hold_us * 1000u;
		pt->events_at_done = pt->st.events;
		pt->hold_until_ns = pt->commit_start_ns + took + hold;
	}
}

/* Step 6's share of the open connections: with wait_nr = 1 the kernel
 * wakes the loop for every packet, and a fast server then serves ~4
 * requests per pass; waiting for a quarter of the connections (at most 64;
 * the engine adds what it knows is coming, and bounds the wait) makes it
 * ~30 (docs/results.md, "Batch waiting"). Read once per pass. */
static uint32_t batch_want(const struct paste_port *pt)
{
	uint32_t want = pt->st.conns / pt->cfg.want_div;
	return want > PORT_MAX_WANT ? PORT_MAX_WANT : want;
}

int paste_port_poll(struct paste_port *pt, struct paste_event **evs, int timeout_ms)
{
	const struct port_ops *ops = pt->ops;
	pt->nevs = 0;
	/* 1. Release. The app has now seen every CLOSED of the last batch
	 * (each batch is returned whole, below): only from here may those
	 * slots be reused. */
	uint32_t n = pt->nended;
	pt->nended = 0;
	for (uint32_t i = 0; i < n; i++)
		ops->release(pt, pt->ended[i]);
	/* A removed, replaced or truncated store file fails the store within
	 * about a second; costs a clock read per pass. */
	paste_store_watch(pt->store, 1000);
	/* 2. Recycle: the last batch's buffers go back where the kernel picks
	 * them (held ones are replaced), before anything can ask for more. */
	ops->recycle(pt);
	/* 3. Barrier: what the app flushed for the last batch becomes durable
	 * (or its group commit starts), so its gated replies may leave. It can
	 * end connections (a failed store), so it runs before arming them. */
	barrier(pt);
	/* 4. Arm: receives that ended while their connection lives, accepts. */
	if (ops->arm)
		ops->arm(pt);
	/* 5. Flush: every connection whose gate is open starts its output;
	 * those behind a group commit stay listed for a later pass. */
	port_flush_dirty(pt);
	/* 6, 7. Wait and gather: the engine submits everything queued above
	 * and waits in one call (uring: one io_uring_enter), then turns what
	 * came into events. Only the epoll engine may ask to wait again. */
	uint32_t want = batch_want(pt);
	int r;
	/* epoll asks to wait again when a wait brought only its own work
	 * (EPOLLOUT on a slow reader); timeout_ms still bounds the whole
	 * call, or the app's timers (and its stats) would stop while a slow
	 * reader drains. */
	uint64_t deadline = timeout_ms > 0 ? paste_clock_ns() + (uint64_t)timeout_ms * 1000000u : 0;
	for (;;) {
		r = ops->wait(pt, timeout_ms, want);
		if (!ops->gather(pt, r) || timeout_ms == 0)
			break;
		if (timeout_ms > 0) {
			uint64_t now = paste_clock_ns();
			if (now >= deadline)
				break;
			timeout_ms = (int)((deadline - now + 999999) / 1000000);
		}
	}
	pt->wake_at_ns = 0;
	/* Replies queued from here on belong to the batch we hand out now;
	 * the barrier at the next call covers them. */
	pt->epoch++;
	*evs = pt->evs;
	/* Events gathered before an error are returned anyway: a CLOSED the
	 * app never saw would keep its slot from being released right. */
	if (r < 0 && pt->nevs == 0)
		return r;
	if (pt->nevs) {
		pt->st.polls++;
		pt->st.events += pt->nevs;
	}
	return (int)pt->nevs;
}

void paste_port_stats(const struct paste_port *pt, struct paste_port_stats *out)
{
	*out = pt->st;
}

enum paste_engine paste_port_engine(const struct paste_port *pt)
{
	return pt->cfg.engine;
}

const char *paste_engine_name(enum paste_engine e)
{
	switch (e) {
	case PASTE_ENGINE_URING: return "uring";
	case PASTE_ENGINE_EPOLL: return "epoll";
	case PASTE_ENGINE_EPOLL_BATCH: return "epoll-batch";
	}
	return "?";
}

uint16_t paste_port_local_port(const struct paste_port *pt)
{
	return pt->local_port[0];
}

uint16_t paste_port_listener_port(const struct paste_port *pt, uint32_t i)
{
	return i < pt->nlisten ? pt->local_port[i] : 0;
}
