/*
 * port_out.c - the port's output side, shared by both engines: per
 * connection output queues (copied bytes and pinned store buffers, in
 * order, turned into iovecs for the engine's send), and the send API that
 * fills them (paste_port_send, paste_port_send_store, paste_port_close_conn,
 * paste_port_drop_conn).
 * When the queued output may leave is the pass's business (lib/port.c: the
 * durability gate and port_flush_dirty); how it leaves is the engine's
 * (its kick hook).
 *
 * Nothing here allocates per request: a queue grows to the largest batch
 * its connection ever had and is reused; one that grew past OUT_SHRINK is
 * freed once it has drained, and a slot keeps at most OUT_KEEP of each at
 * the connection's end, so the memory a burst took comes back (whether the
 * allocator gives it to the system is its business: docs/design.md,
 * "Memory per client").
 *
 * Backpressure: a connection whose queued output passes max_output is no
 * longer read until it drains to half of that (out_queued, and
 * port_output_advance); the engine stops and resumes its reading
 * (port_ops.read_pause).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "port_internal.h"

/* A queue's memory kept across bursts: up to OUT_SHRINK while its
 * connection lives (a pipelining client's batches reuse it: no allocation
 * per batch), up to OUT_KEEP once the connection is over (the slot's next
 * connection has its first small replies queued without one). A 1 MiB
 * burst then costs one allocation per burst, noise next to sending it;
 * 4 KiB per slot bounds what idle slots keep. */
#define OUT_SHRINK (1u << 20)
#define OUT_KEEP 4096u

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	/* Doubled in 64 bits: past 2^31 a 32-bit doubling would wrap to 0
	 * and loop forever. */
	uint64_t n = *cap ? *cap : 8;
	while (n < need)
		n *= 2;
	if (n > UINT32_MAX)
		n = need;
	void *q = realloc(*p, (size_t)n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = (uint32_t)n;
	return 0;
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

void port_output_reset(struct conn *c)
{
	outq_reset(&c->pending);
	outq_reset(&c->inflight);
}

/* Free what of an empty queue is over keep bytes. */
static void outq_trim(struct outq *q, size_t keep)
{
	if (q->cap_bytes > keep) {
		free(q->bytes);
		q->bytes = NULL;
		q->cap_bytes = 0;
	}
	if ((size_t)q->cap_segs * sizeof(*q->segs) > keep) {
		free(q->segs);
		q->segs = NULL;
		q->cap_segs = 0;
	}
}

void port_output_free(struct conn *c)
{
	free(c->pending.bytes); free(c->pending.segs);
	free(c->inflight.bytes); free(c->inflight.segs);
	free(c->iov);
}

void port_output_trim(struct conn *c)
{
	outq_trim(&c->pending, OUT_KEEP);
	outq_trim(&c->inflight, OUT_KEEP);
	if ((size_t)c->cap_iov * sizeof(*c->iov) > OUT_KEEP) {
		free(c->iov);
		c->iov = NULL;
		c->cap_iov = 0;
	}
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
	if (grow((void **)&c->iov, &c->cap_iov, n, sizeof(*c->iov))) {
		/* No memory for more iovecs: send as many as there are (the
		 * rest follows, as after a partial send); with none at all
		 * the output cannot leave, and the connection ends. */
		if (!c->cap_iov) {
			port_conn_end(pt, (uint32_t)(c - pt->conns));
			return 0;
		}
		n = c->cap_iov;
	}
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
	uint64_t sent = n < c->queued ? n : c->queued;
	c->queued -= sent;
	pt->st.queued -= sent;
	if (c->read_paused && c->queued <= pt->cfg.max_output / 2 && c->state == CONN_OPEN) {
		c->read_paused = false;      /* drained: read it again */
		pt->st.paused--;
		pt->ops->read_pause(pt, (uint32_t)(c - pt->conns));
	}
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
	outq_trim(q, OUT_SHRINK);        /* a burst's memory goes back */
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

void port_mark_dirty(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	if (!c->on_dirty) {
		c->on_dirty = true;
		pt->dirty[pt->ndirty++] = slot;
	}
}

/* Output that could not be queued (no memory, or over 4 GiB queued) is a
 * reply missing from the middle of the connection's stream, which no
 * client can resynchronise after: what was queued before it still
 * leaves, then the connection closes. Returns err. */
static int lose_stream(struct paste_port *pt, uint32_t slot, struct conn *c, int err)
{
	c->close_wanted = true;
	port_mark_dirty(pt, slot);
	return err;
}

/* n more bytes queued for slot: past max_output its reading pauses (the
 * engine cancels or masks it), until port_output_advance sees the queue
 * down to half. The halfway mark keeps a connection at the limit from
 * pausing and resuming at every reply. */
static void out_queued(struct paste_port *pt, uint32_t slot, struct conn *c, uint64_t n)
{
	c->queued += n;
	pt->st.queued += n;
	if (!c->read_paused && c->queued > pt->cfg.max_output) {
		c->read_paused = true;
		pt->st.paused++;
		pt->st.pauses++;
		pt->ops->read_pause(pt, slot);
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
		return lose_stream(pt, slot, c, -E2BIG);
	uint32_t need = q->nbytes + (uint32_t)n;
	if (grow((void **)&q->bytes, &q->cap_bytes, need, 1))
		return lose_stream(pt, slot, c, -ENOMEM);
	struct out_seg *last = q->nsegs ? &q->segs[q->nsegs - 1] : NULL;
	if (last && last->buf == PASTE_NO_BUF && last->off + last->len == q->nbytes) {
		last->len += (uint32_t)n;     /* contiguous copy: one iovec */
	} else {
		struct out_seg *s = push_seg(c);
		if (!s)
			return lose_stream(pt, slot, c, -ENOMEM);
		*s = (struct out_seg){ PASTE_NO_BUF, q->nbytes, (uint32_t)n };
	}
	memcpy(q->bytes + q->nbytes, p, n);
	q->nbytes = need;
	if (flags & PASTE_SEND_DURABLE)
		c->need_epoch = pt->epoch;
	port_mark_dirty(pt, slot);
	out_queued(pt, slot, c, n);
	return 0;
}

/* Is [off, off + len) of buf inside the store? */
static bool in_store(const struct paste_store_geom *g, uint32_t buf, uint32_t off, uint32_t len)
{
	return buf < g->nbufs && off <= g->buf_size && len <= g->buf_size - off;
}

int paste_port_send_store(struct paste_port *pt, uint32_t slot, uint32_t buf,
			  uint32_t off, uint32_t len, int flags)
{
	struct conn *c = live_conn(pt, slot);
	if (!c || c->close_wanted)
		return -ENOTCONN;
	if ((flags & PASTE_SEND_DURABLE) && paste_store_failed(pt->store, NULL))
		return -EIO;
	if (!in_store(paste_store_geom(pt->store), buf, off, len))
		return -EINVAL;
	if (len == 0)
		return 0;
	struct out_seg *s = push_seg(c);
	if (!s)
		return lose_stream(pt, slot, c, -ENOMEM);
	paste_store_ref(pt->store, buf);  /* pinned until the kernel is done */
	*s = (struct out_seg){ buf, off, len };
	if (flags & PASTE_SEND_DURABLE)
		c->need_epoch = pt->epoch;
	port_mark_dirty(pt, slot);
	out_queued(pt, slot, c, len);
	return 0;
}

int paste_port_send_extents(struct paste_port *pt, uint32_t slot, const struct paste_extent *ext,
			    uint32_t n, uint64_t from, uint64_t len, int flags)
{
	const struct paste_store_geom *g = paste_store_geom(pt->store);
	for (uint32_t i = 0; i < n; i++)   /* a copy reads them, a pin queues them: both checked */
		if (!in_store(g, ext[i].buf, ext[i].off, ext[i].len))
			return -EINVAL;
	if (len <= PASTE_SEND_COPY_MAX) {
		/* Copied: cheaper than a pin (two atomics) and an iovec of its own. */
		uint8_t tmp[PASTE_SEND_COPY_MAX];
		size_t got = paste_store_read(pt->store, ext, n, from, tmp, (size_t)len);
		return paste_port_send(pt, slot, tmp, got, flags);
	}
	for (uint32_t i = 0; i < n && len; i++) {
		if (from >= ext[i].len) {
			from -= ext[i].len;
			continue;
		}
		uint64_t k = ext[i].len - from;
		if (k > len)
			k = len;
		int r = paste_port_send_store(pt, slot, ext[i].buf, ext[i].off + (uint32_t)from,
					      (uint32_t)k, flags);
		if (r)
			return r;
		len -= k;
		from = 0;
	}
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

void paste_port_drop_conn(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = live_conn(pt, slot);
	if (!c)
		return;
	c->close_wanted = c->drop_wanted = true;
	/* What was not handed to the kernel goes now (its pins with it), and
	 * all of it leaves the queued count at once (a send in flight is
	 * cancelled at the release): dropping a client frees its memory. */
	port_output_discard_pending(pt, c);
	pt->st.queued -= c->queued;
	c->queued = 0;
	port_mark_dirty(pt, slot);
}
