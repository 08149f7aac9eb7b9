/* persist_internal.h - what lib/persist.c asks of lib/persist_fsync.c (fsync
 * mode's I/O: direct writes of flushed blocks, or the page cache; see its
 * top). One per fsync-mode persist object, used by one thread. Not API. */
#ifndef PASTE_PERSIST_INTERNAL_H
#define PASTE_PERSIST_INTERNAL_H

#include <liburing.h>
#include <sys/uio.h>
#include "paste.h"

struct fsio_ranges {                  /* file offsets [lo, hi), block-aligned */
	struct { uint64_t lo, hi; } *v;
	size_t n, cap;
};

struct fsync_io {
	struct paste_store *st;
	struct io_uring ring;
	bool ring_ok;
	bool counted;             /* in the store's fsync_users */
	int fd;                   /* the persist object's descriptor: fdatasync */
	int dfd;                  /* fd once O_DIRECT is set on it, or -1: the page cache */
	int efd;                  /* eventfd a commit writes when it ends */
	uint32_t block;           /* direct writes' alignment */
	struct fsio_ranges pend, flight;
	uint32_t owed_flight, owed_sync;   /* CQEs not yet reaped */
	int flight_res, sync_res;          /* first error of each */
	bool flight_reaped;       /* a synchronous sync already waited for it */
	uint64_t efd_val;
	uint8_t *bounce;          /* the commit's last-block snapshots */
	struct iovec *iov;        /* two per run */
	size_t bounce_runs;       /* room in both, in runs */
};

/* Opens the eventfd and the ring; picks direct writes (sets O_DIRECT on fd
 * and maps the store privately) when the file takes them and `writers`
 * (paste_persist_config) cannot share a block. fd stays the caller's. */
int fsio_open(struct fsync_io *io, struct paste_store *st, int fd, uint32_t writers,
	      struct paste_error *err);
void fsio_close(struct fsync_io *io);
bool fsio_direct(const struct fsync_io *io);
/* A flushed byte range (file offsets). */
void fsio_add(struct fsync_io *io, uint64_t lo, uint64_t hi);
/* Can commits be begun (asynchronously)? Not without io_uring: then every
 * sync is a synchronous fdatasync (the epoll engine's fences). */
bool fsio_can_begin(const struct fsync_io *io);
/* Start writing and syncing what was added: returns the eventfd that
 * becomes readable when it ended (one commit at a time). */
int fsio_begin(struct fsync_io *io);
/* After the eventfd was read: 0 when the commit is durable, else why not. */
int fsio_end(struct fsync_io *io);
/* Synchronously: let a begun commit end (flight_open), then write and sync
 * what was added since. 0, or the first error (the begun commit's too). */
int fsio_sync(struct fsync_io *io, bool flight_open);

/* The crash-image shim (lib/persist.c, test builds): a commit writes
 * these bytes at file offset off (whole lines); flight: an asynchronous
 * commit's (fsio_begin), else a synchronous sync's. */
#ifdef PASTE_PERSIST_SHIM
void persist_shim_written(struct fsync_io *io, bool flight, uint64_t off, const uint8_t *bytes,
			  uint64_t len);
#else
static inline void persist_shim_written(struct fsync_io *io, bool flight, uint64_t off,
					const uint8_t *bytes, uint64_t len)
{
	(void)io; (void)flight; (void)off; (void)bytes; (void)len;
}
#endif

/* What lib/btree_api.c asks of lib/persist.c: does p write only what is
 * flushed (PM, or fsync mode with direct writes), so a page changed in
 * the store mapping stays out of the file until it is flushed? fsync mode
 * through the page cache writes back every dirty page. */
bool persist_writes_direct(const struct paste_persist *p);

#endif
