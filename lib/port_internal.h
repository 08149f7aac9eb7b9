/*
 * port_internal.h - what the port's engines share: the connection table,
 * per-connection output queues, the event batch and the durability gate.
 * lib/port.c owns these; lib/port_uring.c and lib/port_epoll.c are the two
 * back ends (the ae.c idea: one loop, pluggable I/O).
 */
#ifndef PASTE_PORT_INTERNAL_H
#define PASTE_PORT_INTERNAL_H

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

enum conn_state { CONN_FREE = 0, CONN_OPEN, CONN_CLOSING, CONN_DEAD };

struct conn {
	uint8_t state;
	bool recv_armed;       /* a multishot recv is live (uring) */
	bool send_inflight;    /* a send/sendmsg SQE is outstanding (uring) */
	bool close_wanted;     /* the app asked to close once output drained */
	bool on_dirty;         /* listed in port->dirty */
	bool on_rearm;         /* listed in port->rearm (uring, ENOBUFS) */
	bool closed_reported;  /* CLOSED event already returned */
	bool close_submitted;  /* cancel+close SQEs are outstanding (uring) */
	uint32_t gen;          /* bumped per accept: stale CQEs are ignored */
	int fd;                /* epoll: the socket; uring: the direct descriptor slot */
	uint64_t need_epoch;   /* output may leave once durable_epoch >= this */
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

	struct paste_event *evs;       /* the batch returned by poll */
	uint32_t nevs, cap_evs;

	uint32_t *dirty;               /* conns with pending output */
	uint32_t ndirty;

	uint64_t epoch;                /* batch number the app is working on */
	uint64_t durable_epoch;        /* every reply queued in batches <= this may leave */

	int listen_fd;
	uint16_t local_port;
	struct paste_port_stats st;
	void *engine;                  /* back-end state */
};

struct port_ops {
	const char *name;
	int (*open)(struct paste_port *pt, struct paste_error *err);
	void (*close)(struct paste_port *pt);
	/* Gather one batch of events into pt->evs; submit what is queued. */
	int (*poll)(struct paste_port *pt, int timeout_ms);
	int (*hold)(struct paste_port *pt, const struct paste_event *ev);
	/* Output for conn became sendable (gate open); start it if idle. */
	void (*kick)(struct paste_port *pt, uint32_t conn);
	/* conn wants closing and has no output left. */
	void (*shut)(struct paste_port *pt, uint32_t conn);
};

extern const struct port_ops paste_port_uring_ops;
extern const struct port_ops paste_port_epoll_ops;

/* Shared helpers (lib/port.c). */
struct paste_event *port_push_event(struct paste_port *pt, uint16_t type, uint32_t conn);
/* The slot's CLOSED event, once: the last event the app sees for it. */
void port_report_closed(struct paste_port *pt, uint32_t slot);
void port_conn_reset(struct paste_port *pt, uint32_t slot, int fd);
bool port_output_idle(const struct conn *c);
/* Move pending output to inflight and describe it as an iovec array
 * starting at the unsent part. Returns the number of iovecs (0: nothing). */
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
 * others listed. Called by the engines after their barrier. */
void port_flush_dirty(struct paste_port *pt);
void port_mark_dirty(struct paste_port *pt, uint32_t slot);
int port_listen(struct paste_port *pt, struct paste_error *err);

#endif
