/*
 * port.c - the engine-independent half of the paste port: configuration,
 * the connection table and its slot lifecycle (port_internal.h), output
 * queues (copied bytes and pinned store buffers, in order), the event batch
 * and the durability gate, including what a failed store does to it.
 *
 * Nothing here allocates per request: output queues grow to the largest
 * batch a connection ever had and are reused; the event array is sized
 * once, at open.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port_internal.h"

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t n = *cap ? *cap : 8;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, (size_t)n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

struct paste_event *port_push_event(struct paste_port *pt, uint16_t type, uint32_t conn)
{
	if (pt->nevs >= pt->cap_evs) {
		/* The engines keep room (port_internal.h); losing an event
		 * would break the slot lifecycle, so this is a bug, not ENOMEM. */
		fprintf(stderr, "paste: port event array overflow (%u events): bug\n", pt->nevs);
		abort();
	}
	struct paste_event *ev = &pt->evs[pt->nevs++];
	*ev = (struct paste_event){ .type = type, .conn = conn, .buf = PASTE_NO_BUF };
	return ev;
}

static void outq_reset(struct outq *q)
{
	q->nbytes = q->nsegs = q->seg_done = q->seg_off = 0;
}

static void outq_unpin(struct paste_port *pt, struct outq *q)
{
	for (uint32_t i = q->seg_done; i < q->nsegs; i++)
		if (q->segs[i].buf != PASTE_NO_BUF)
			paste_store_unref(pt->store, q->segs[i].buf, false);
	outq_reset(q);
}

void port_conn_reset(struct paste_port *pt, uint32_t slot, int fd)
{
	struct conn *c = &pt->conns[slot];
	outq_reset(&c->pending);
	outq_reset(&c->inflight);
	c->state = CONN_OPEN;
	c->recv_armed = c->send_inflight = c->close_wanted = c->release_ready = false;
	c->gen++;
	c->fd = fd;
	c->need_epoch = 0;
	if (pt->cfg.conn_data_size)
		memset(pt->conn_data + (size_t)slot * pt->cfg.conn_data_size, 0,
		       pt->cfg.conn_data_size);
}

bool port_output_idle(const struct conn *c)
{
	return !c->send_inflight && c->pending.nsegs == 0 &&
	       c->inflight.seg_done == c->inflight.nsegs;
}

uint32_t port_output_start(struct paste_port *pt, struct conn *c)
{
	if (c->inflight.seg_done < c->inflight.nsegs)
		return port_output_iov(pt, c);
	if (c->pending.nsegs == 0)
		return 0;
	struct outq t = c->inflight;
	c->inflight = c->pending;
	c->pending = t;
	outq_reset(&c->pending);
	return port_output_iov(pt, c);
}

uint32_t port_output_iov(struct paste_port *pt, struct conn *c)
{
	struct outq *q = &c->inflight;
	uint32_t n = q->nsegs - q->seg_done;
	if (n > IOV_MAX)
		n = IOV_MAX;
	if (grow((void **)&c->iov, &c->cap_iov, n, sizeof(*c->iov)))
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct out_seg *s = &q->segs[q->seg_done + i];
		uint8_t *base = s->buf == PASTE_NO_BUF ? (uint8_t *)q->bytes
						       : paste_store_buf(pt->store, s->buf);
		uint32_t skip = i == 0 ? q->seg_off : 0;
		c->iov[i].iov_base = base + s->off + skip;
		c->iov[i].iov_len = s->len - skip;
	}
	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.msg_iov = c->iov;
	c->msg.msg_iovlen = n;
	return n;
}

bool port_output_advance(struct paste_port *pt, struct conn *c, size_t n)
{
	struct outq *q = &c->inflight;
	pt->st.bytes_out += n;
	while (q->seg_done < q->nsegs) {
		struct out_seg *s = &q->segs[q->seg_done];
		size_t left = s->len - q->seg_off;
		if (n < left) {
			q->seg_off += n;
			return false;
		}
		n -= left;
		if (s->buf != PASTE_NO_BUF)
			paste_store_unref(pt->store, s->buf, false);
		q->seg_done++;
		q->seg_off = 0;
	}
	outq_reset(q);
	return true;
}

void port_output_discard_pending(struct paste_port *pt, struct conn *c)
{
	outq_unpin(pt, &c->pending);
}

void port_output_discard(struct paste_port *pt, struct conn *c)
{
	outq_unpin(pt, &c->pending);
	outq_unpin(pt, &c->inflight);
}

void port_conn_end(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	if (c->state != CONN_OPEN)
		return;
	c->state = CONN_ENDED;
	port_push_event(pt, PASTE_EV_CLOSED, slot);
	/* Unsent output goes now (its pins with it); what a uring send still
	 * reads stays until that send completes (the release waits for it). */
	port_output_discard_pending(pt, c);
	pt->ended[pt->nended++] = slot;
}

void port_slot_free(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	port_output_discard(pt, c);
	c->state = CONN_FREE;
	pt->st.conns--;
	pt->st.closes++;
}

void port_mark_dirty(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	if (!c->on_dirty) {
		c->on_dirty = true;
		pt->dirty[pt->ndirty++] = slot;
	}
}

void port_flush_dirty(struct paste_port *pt)
{
	uint32_t keep = 0;
	for (uint32_t i = 0; i < pt->ndirty; i++) {
		uint32_t slot = pt->dirty[i];
		struct conn *c = &pt->conns[slot];
		if (c->state != CONN_OPEN) {
			c->on_dirty = false;
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

static struct conn *live_conn(struct paste_port *pt, uint32_t slot)
{
	if (slot >= pt->cfg.max_conns)
		return NULL;
	struct conn *c = &pt->conns[slot];
	return c->state == CONN_OPEN ? c : NULL;
}

static struct out_seg *push_seg(struct conn *c)
{
	struct outq *q = &c->pending;
	if (grow((void **)&q->segs, &q->cap_segs, q->nsegs + 1, sizeof(*q->segs)))
		return NULL;
	return &q->segs[q->nsegs++];
}

int paste_port_send(struct paste_port *pt, uint32_t slot, const void *p, size_t n, int flags)
{
	struct conn *c = live_conn(pt, slot);
	if (!c || c->close_wanted)
		return -ENOTCONN;
	if ((flags & PASTE_SEND_DURABLE) && paste_store_failed(pt->store, NULL))
		return -EIO;       /* it could never be acknowledged */
	if (n == 0)
		return 0;
	struct outq *q = &c->pending;
	if (n > UINT32_MAX - q->nbytes)
		return -E2BIG;
	uint32_t need = q->nbytes + (uint32_t)n;
	if (grow((void **)&q->bytes, &q->cap_bytes, need, 1))
		return -ENOMEM;
	struct out_seg *last = q->nsegs ? &q->segs[q->nsegs - 1] : NULL;
	if (last && last->buf == PASTE_NO_BUF && last->off + last->len == q->nbytes) {
		last->len += (uint32_t)n;     /* contiguous copy: one iovec */
	} else {
		struct out_seg *s = push_seg(c);
		if (!s)
			return -ENOMEM;
		*s = (struct out_seg){ PASTE_NO_BUF, q->nbytes, (uint32_t)n };
	}
	memcpy(q->bytes + q->nbytes, p, n);
	q->nbytes = need;
	if (flags & PASTE_SEND_DURABLE)
		c->need_epoch = pt->epoch;
	port_mark_dirty(pt, slot);
	return 0;
}

int paste_port_send_store(struct paste_port *pt, uint32_t slot, uint32_t buf,
			  uint32_t off, uint32_t len, int flags)
{
	struct conn *c = live_conn(pt, slot);
	if (!c || c->close_wanted)
		return -ENOTCONN;
	if ((flags & PASTE_SEND_DURABLE) && paste_store_failed(pt->store, NULL))
		return -EIO;
	const struct paste_store_geom *g = paste_store_geom(pt->store);
	if (buf >= g->nbufs || off > g->buf_size || len > g->buf_size - off)
		return -EINVAL;
	if (len == 0)
		return 0;
	struct out_seg *s = push_seg(c);
	if (!s)
		return -ENOMEM;
	paste_store_ref(pt->store, buf);  /* pinned until the kernel is done */
	*s = (struct out_seg){ buf, off, len };
	if (flags & PASTE_SEND_DURABLE)
		c->need_epoch = pt->epoch;
	port_mark_dirty(pt, slot);
	return 0;
}

void paste_port_close_conn(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = live_conn(pt, slot);
	if (!c)
		return;
	c->close_wanted = true;
	port_mark_dirty(pt, slot);
}

void *paste_port_conn_data(struct paste_port *pt, uint32_t slot)
{
	if (slot >= pt->cfg.max_conns || !pt->cfg.conn_data_size)
		return NULL;
	return pt->conn_data + (size_t)slot * pt->cfg.conn_data_size;
}

int paste_port_hold(struct paste_port *pt, const struct paste_event *ev)
{
	if (ev->type != PASTE_EV_DATA || ev->buf == PASTE_NO_BUF)
		return -EINVAL;
	return pt->ops->hold(pt, ev);
}

int port_listen(struct paste_port *pt, struct paste_error *err)
{
	const char *host = pt->cfg.host ? pt->cfg.host : "127.0.0.1";
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(pt->cfg.port);
		sl = sizeof(*a4);
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(pt->cfg.port);
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
	 * try (measured, one request per connection, 50 / 400 clients: 13.4
	 * -> 10.9 / 13.9 -> 11.1 us of server CPU per connection).
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
				       pt->cfg.port, strerror(e));
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		pt->local_port = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
	pt->listen_fd = fd;
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
	if (pt->cfg.max_conns > PORT_MAX_CONNS) {
		free(pt);
		return paste_error_set(err, -EINVAL, "%u connection slots: at most %u",
				       cfg->max_conns, PORT_MAX_CONNS);
	}
	if (pt->cfg.defer_accept_s > PORT_MAX_DEFER_S) {
		free(pt);
		return paste_error_set(err, -EINVAL, "defer_accept_s %u: at most %u",
				       cfg->defer_accept_s, PORT_MAX_DEFER_S);
	}
	pt->store = cfg->store;
	pt->persist = cfg->persist;
	pt->dur = cfg->persist ? paste_persist_mode(cfg->persist) : PASTE_DUR_NONE;
	pt->listen_fd = -1;
	pt->epoch = 1;
	pt->ops = cfg->engine == PASTE_ENGINE_EPOLL ? &paste_port_epoll_ops : &paste_port_uring_ops;
	pt->conns = calloc(pt->cfg.max_conns, sizeof(*pt->conns));
	pt->dirty = calloc(pt->cfg.max_conns, sizeof(*pt->dirty));
	pt->ended = calloc(pt->cfg.max_conns, sizeof(*pt->ended));
	pt->cap_evs = PORT_EVENTS_CAP(pt->cfg.max_conns);
	pt->evs = calloc(pt->cap_evs, sizeof(*pt->evs));
	if (pt->cfg.conn_data_size)
		pt->conn_data = calloc(pt->cfg.max_conns, pt->cfg.conn_data_size);
	int r;
	if (!pt->conns || !pt->dirty || !pt->ended || !pt->evs ||
	    (pt->cfg.conn_data_size && !pt->conn_data))
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
	if (pt->listen_fd >= 0)
		close(pt->listen_fd);
	for (uint32_t i = 0; pt->conns && i < pt->cfg.max_conns; i++) {
		struct conn *c = &pt->conns[i];
		if (c->state != CONN_FREE)
			port_slot_free(pt, i);
		free(c->pending.bytes); free(c->pending.segs);
		free(c->inflight.bytes); free(c->inflight.segs);
		free(c->iov);
	}
	free(pt->conns);
	free(pt->conn_data);
	free(pt->dirty);
	free(pt->ended);
	free(pt->evs);
	free(pt);
}

int paste_port_poll(struct paste_port *pt, struct paste_event **evs, int timeout_ms)
{
	pt->nevs = 0;
	/* The app has now seen every CLOSED of the last batch (each batch is
	 * returned whole, below): only from here may those slots be reused. */
	uint32_t n = pt->nended;
	pt->nended = 0;
	for (uint32_t i = 0; i < n; i++)
		pt->ops->release(pt, pt->ended[i]);
	/* A removed, replaced or truncated store file fails the store within
	 * about a second; costs a clock read per pass. */
	paste_store_watch(pt->store, 1000);
	int r = pt->ops->poll(pt, timeout_ms);
	/* Replies queued from here on belong to the batch we hand out now;
	 * the engine's barrier at the next call covers them. */
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

uint16_t paste_port_local_port(const struct paste_port *pt)
{
	return pt->local_port;
}
