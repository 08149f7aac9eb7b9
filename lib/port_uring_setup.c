/*
 * port_uring_setup.c - the io_uring engine's set-up and tear-down: the
 * kernel feature probe, the ring (SINGLE_ISSUER|DEFER_TASKRUN, or a plain
 * ring on kernels before 6.1), the direct-descriptor table, the
 * provided-buffer ring filled with store buffers, and a close that waits
 * for a group commit in flight and gives every buffer back. Nothing here
 * runs per pass (lib/port_uring.c does).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "port_uring.h"

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
				       "use --engine epoll-batch", strerror(-r));
	struct io_uring_probe *pr = io_uring_get_probe_ring(&ring);
	static const struct { int op; const char *name; } need[] = {
		{ IORING_OP_ACCEPT, "ACCEPT" }, { IORING_OP_RECV, "RECV" },
		{ IORING_OP_SEND, "SEND" }, { IORING_OP_SENDMSG, "SENDMSG" },
		{ IORING_OP_CLOSE, "CLOSE" }, { IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL" },
		/* fsync mode: its commits' ring (lib/persist_fsync.c), and
		 * the read of their eventfd here */
		{ IORING_OP_FSYNC, "FSYNC" }, { IORING_OP_WRITE, "WRITE" },
		{ IORING_OP_WRITEV, "WRITEV" }, { IORING_OP_READ, "READ" },
	};
	r = 0;
	for (size_t i = 0; pr && i < sizeof(need) / sizeof(need[0]); i++)
		if (!io_uring_opcode_supported(pr, need[i].op))
			r = paste_error_set(err, -EOPNOTSUPP, "io_uring lacks opcode %s; use --engine epoll-batch",
					    need[i].name);
	if (pr)
		io_uring_free_probe(pr);
	if (!r && !(ring.features & IORING_FEAT_EXT_ARG))
		r = paste_error_set(err, -EOPNOTSUPP, "io_uring lacks EXT_ARG (Linux >= 5.11); use --engine epoll-batch");
	io_uring_queue_exit(&ring);
	return r;
}

int uring_open(struct paste_port *pt, struct paste_error *err)
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
	struct uring *u = calloc(1, sizeof(*u));
	if (!u)
		return paste_error_set(err, -ENOMEM, "out of memory");
	pt->engine = u;
	u->nbufs = nb;
	u->mask = (uint32_t)io_uring_buf_ring_mask(nb);
	u->bid_buf = malloc(nb * sizeof(*u->bid_buf));
	u->bid_off = calloc(nb, sizeof(*u->bid_off));
	u->delivered = calloc(nb, sizeof(*u->delivered));
	u->empty = calloc(nb, sizeof(*u->empty));
	u->rearm = calloc(pt->cfg.max_conns, sizeof(*u->rearm));
	if (!u->bid_buf || !u->bid_off || !u->delivered || !u->empty || !u->rearm)
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
	u->min_wait = (u->ring.features & IORING_FEAT_MIN_TIMEOUT) && deferred &&
		      !pt->cfg.no_min_wait;
	u->min_wait_us = pt->cfg.min_wait_us;
	/* A direct descriptor per slot, and one per accept that may be in
	 * flight besides (port_uring.c, "Accepting"). */
	u->table = pt->cfg.max_conns + TABLE_SPARE;
	r = io_uring_register_files_sparse(&u->ring, u->table);
	if (r < 0)
		return paste_error_set(err, r, "registering %u direct descriptors: %s (raise RLIMIT_NOFILE)",
				       u->table, strerror(-r));
	/* The ring structure lives in anonymous memory: the kernel refuses
	 * it inside a file mapping on ext4. */
	static int next_bgid;
	u->bgid = (uint16_t)__atomic_fetch_add(&next_bgid, 1, __ATOMIC_RELAXED);
	const char *what, *hint;
	/* Dense receives where the kernel has them (6.12); EINVAL before. */
	if (!pt->cfg.no_dense_recv) {
		u->br = uring_buf_ring_setup(&u->ring, nb, u->bgid, IOU_PBUF_RING_INC, &r, &what, &hint);
		u->inc = u->br != NULL;
	}
	if (!u->br)
		u->br = uring_buf_ring_setup(&u->ring, nb, u->bgid, 0, &r, &what, &hint);
	if (!u->br)
		return paste_error_set(err, r, "%s: %s%s", what, strerror(-r), hint);
	pt->st.dense_recv = u->inc;
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
 * this persist object wait forever. A commit is short; wait for it. */
static void finish_commit(struct paste_port *pt, struct uring *u)
{
	io_uring_submit(&u->ring);
	while (pt->commit_inflight) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&u->ring, &cqe) < 0)
			return;
		if ((int)(cqe->user_data >> 60) == OP_COMMIT)
			port_commit_done(pt, cqe->res);
		io_uring_cqe_seen(&u->ring, cqe);   /* buffers: ring slots, released below */
	}
}

void uring_close(struct paste_port *pt)
{
	struct uring *u = pt->engine;
	if (u->ring_ok) {
		finish_commit(pt, u);
		if (u->br)
			uring_buf_ring_free(&u->ring, u->br, u->nbufs, u->bgid);
		io_uring_queue_exit(&u->ring);   /* drops every pending op, closes every
						  * direct descriptor (refusals' too) */
	}
	/* Give the ring's buffers back: a filled ring slot owns exactly one
	 * reference (an app's hold is its own); empty slots are PASTE_NO_BUF. */
	for (uint32_t i = 0; u->bid_buf && i < u->nbufs; i++)
		if (u->bid_buf[i] != PASTE_NO_BUF)
			paste_store_unref(pt->store, u->bid_buf[i], false);
	for (uint32_t i = 0; i < u->ncache; i++)
		paste_store_unref(pt->store, u->cache[i], false);
	free(u->bid_buf);
	free(u->bid_off);
	free(u->delivered);
	free(u->empty);
	free(u->rearm);
	free(u);
	pt->engine = NULL;
}
