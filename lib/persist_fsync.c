/* persist_fsync.c - fsync mode's I/O: how flushed bytes reach the disk.
 *
 * Two ways, picked per store when the first persist object opens:
 *
 * DIRECT (the default on a file system that takes O_DIRECT): the store is
 *   mapped privately (store_map_private), so the page cache never holds the
 *   live bytes and the kernel never writes a page back on its own. Each
 *   flush records its range rounded out to the file system's block (4 KiB
 *   on ext4: direct_block); a commit sorts and merges the ranges, writes
 *   each run with O_DIRECT from the mapping (its last block from a copy:
 *   queue_sync), then one fdatasync (IOSQE_IO_DRAIN: after every write
 *   ended) flushes the disk's cache. What it saves: through the page cache
 *   every commit pays write-protect faults (the next write lands in a page
 *   the last sync cleaned), rmap walks and a TLB flush per written page; a
 *   commit of 32 dirty pages costs ~80 us of CPU written directly against
 *   300-370 us (bench/commit-io; docs/results.md, "fsync mode: direct
 *   writes").
 * MAPPED (a file system without O_DIRECT, a store larger than half the
 *   available memory, several writers over buffers smaller than a block,
 *   another persist object of the store already mapped, or
 *   PASTE_FSYNC_IO=mapped): the shared mapping stays, and a commit is one
 *   fdatasync of the file.
 *
 * Either way the I/O runs in a small io_uring of this persist object's own
 * (one per thread; without io_uring, refused by sysctl or seccomp, only
 * MAPPED, and a fence calls fdatasync itself), so a synchronous fence (the epoll engine, truncation,
 * tree checkpoints) and the uring port's asynchronous commit share one
 * path: begin queues the writes, the fdatasync and, hard-linked after it,
 * an 8-byte write to an eventfd, which the port reads in its own ring; end
 * reaps the results. Cost: one io_uring_enter per commit for the submit.
 *
 * Why only flushed blocks, never a gap between two ranges: two threads'
 * persist objects may write neighbouring blocks (log lanes and tree pages
 * of 4 KiB, buffers of 512 bytes and up, each owned by one thread at a
 * time; where a block holds two buffers, only one persist object may
 * write directly: choose_way). A write captures the mapping when the device reads it, and two
 * in-flight writes of one block may land in either order; a block only its
 * owner writes, one commit at a time, cannot go back in time. The WAL's
 * checkpoint slots, 64 bytes per lane, share blocks across lanes: they are
 * written only under the WAL's truncation lock and fenced before it is
 * released (lib/wal.c), so one write of them is in flight at a time.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <liburing.h>
#include "paste.h"
#include "persist_internal.h"
#include "store_internal.h"

#define RING_ENTRIES 256u
#define TAG_FLIGHT 1u      /* user_data of an asynchronous commit's ops */
#define TAG_SYNC 2u        /* ... of a synchronous sync's */
#define MAX_WRITE (1u << 30) /* one write's bytes: its CQE's user_data holds them */

/* The block direct writes go in, or 0 when this file takes none: what
 * direct I/O must be aligned to (offset, length, memory), raised to the
 * file system's block. ext4 takes 512-byte-aligned direct writes but
 * treats any not aligned to its 4 KiB block as "unaligned": never issued
 * inline (a worker thread each) and waiting for every other direct I/O of
 * the file (with 512-byte blocks a pkvs SET costs more than through the
 * page cache: docs/results.md, "fsync mode: direct writes"). */
static uint32_t direct_block(int fd)
{
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN | STATX_BASIC_STATS, &sx) < 0 ||
	    !(sx.stx_mask & STATX_DIOALIGN) || sx.stx_dio_offset_align == 0)
		return 0;
	uint32_t b = sx.stx_dio_offset_align;
	if (sx.stx_dio_mem_align > b)
		b = sx.stx_dio_mem_align;
	if (sx.stx_blksize > b && sx.stx_blksize <= 4096)
		b = sx.stx_blksize;
	return b;
}

/* The private copy is anonymous memory the kernel cannot evict (the page
 * cache of a shared mapping it can), so a store must fit comfortably:
 * at most half of MemAvailable (which counts the store's own cached
 * pages, freed as the copy replaces them). PASTE_MEMAVAILABLE_KB stands
 * in for /proc/meminfo in tests. */
static bool fits_in_memory(uint64_t size)
{
	unsigned long long kb = 0;
	const char *fake = getenv("PASTE_MEMAVAILABLE_KB");
	if (fake && *fake) {
		kb = strtoull(fake, NULL, 10);
	} else {
		FILE *f = fopen("/proc/meminfo", "re");
		char line[128];
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
				break;
		if (f)
			fclose(f);
		if (kb == 0)
			return true;            /* unknown: do not guess against it */
	}
	return size / 1024 <= kb / 2;
}

/* Direct writes or the page cache, for one more fsync persist object of
 * st; counts it in the store. Under choose_lock: the counts are read, then
 * changed. */
static pthread_mutex_t choose_lock = PTHREAD_MUTEX_INITIALIZER;

/* Count io in its store as writing directly or through the page cache
 * (fsio_close takes it out again, by io->dfd). */
static int count_in(struct fsync_io *io, bool direct)
{
	store_fsync_users(io->st, direct, 1);
	io->counted = true;
	return 0;
}

static int page_cache_way(struct fsync_io *io)
{
	return count_in(io, false);
}

static int choose_way(struct fsync_io *io, struct paste_store *st, int fd, uint32_t writers,
		      bool want_mapped, bool want_direct, struct paste_error *err)
{
	/* A block bigger than the smallest thing one thread owns (a buffer)
	 * would let two threads write one block: see the top. Then only one
	 * persist object may write directly. Once the store is mapped
	 * privately, the page cache holds none of its writes: every fsync
	 * persist object must write directly. The one descriptor writes and
	 * syncs (O_DIRECT set on it). */
	uint32_t block = direct_block(fd);
	bool priv = store_is_private(st);
	bool shared_blocks = block > paste_store_geom(st)->buf_size;
	bool can = block && block <= 4096 && !(block & (block - 1)) &&
		   (priv || fits_in_memory(paste_store_geom(st)->file_size));
	const char *no = NULL;
	if (priv && shared_blocks && (store_fsync_users(st, true, 0) > 0 || writers > 1))
		no = "another persist object writes it directly in blocks larger than its buffers: "
		     "one thread only (open every one with writers > 1, or PASTE_FSYNC_IO=mapped)";
	else if (priv && (!can || want_mapped))
		no = "it is mapped privately for direct writes, and this one cannot make them";
	else if (!priv && (!can || (shared_blocks && writers > 1) || want_mapped ||
			   store_fsync_users(st, false, 0) > 0)) {
		/* (The last: one already syncs the shared mapping; a private
		 * one now would leave it syncing nothing.) */
		if (!want_direct)
			return page_cache_way(io);
		no = "PASTE_FSYNC_IO=direct, but the file takes no direct writes in blocks of 4 KiB "
		     "or less (no larger than a buffer, with several writers), or the store is "
		     "larger than half the available memory, or another persist object syncs it "
		     "through the page cache";
	}
	if (!no && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT) < 0) {
		if (!priv && !want_direct)
			return page_cache_way(io);
		no = "O_DIRECT refused";
	}
	if (no)
		return paste_error_set(err, -EBUSY, "%s: no fsync persist object here: %s",
				       paste_store_path(st), no);
	int r = store_map_private(st, err);
	if (r < 0)
		return r;
	io->dfd = fd;
	io->block = block;
	return count_in(io, true);
}

int fsio_open(struct fsync_io *io, struct paste_store *st, int fd, uint32_t writers,
	      struct paste_error *err)
{
	const char *path = paste_store_path(st);
	const char *want = getenv("PASTE_FSYNC_IO");
	memset(io, 0, sizeof(*io));
	io->fd = fd;
	io->dfd = -1;
	io->efd = -1;
	io->st = st;
	bool want_mapped = want && strcmp(want, "mapped") == 0;
	bool want_direct = want && strcmp(want, "direct") == 0;
	if (want && *want && !want_mapped && !want_direct)
		return paste_error_set(err, -EINVAL, "PASTE_FSYNC_IO=%s: 'direct' or 'mapped'", want);
	io->efd = eventfd(0, EFD_CLOEXEC);
	if (io->efd < 0)
		return paste_error_set(err, -errno, "%s: eventfd: %s", path, strerror(errno));
	int r = io_uring_queue_init(RING_ENTRIES, &io->ring, 0);
	io->ring_ok = r == 0;
	pthread_mutex_lock(&choose_lock);
	if (io->ring_ok)
		r = choose_way(io, st, fd, writers, want_mapped, want_direct, err);
	else if (store_is_private(st) || want_direct)
		r = paste_error_set(err, -EBUSY, "%s: no io_uring (%s) for fsync mode's direct writes",
				    path, strerror(-r));
	else        /* the epoll engine's case: fdatasync of the page cache itself */
		r = page_cache_way(io);
	pthread_mutex_unlock(&choose_lock);
	if (r < 0)
		fsio_close(io);
	return r;
}

void fsio_close(struct fsync_io *io)
{
	if (io->ring_ok)
		io_uring_queue_exit(&io->ring);
	io->ring_ok = false;
	if (io->counted)
		store_fsync_users(io->st, io->dfd >= 0, -1);
	io->counted = false;
	if (io->efd >= 0)
		close(io->efd);
	io->dfd = io->efd = -1;
	free(io->pend.v);
	free(io->flight.v);
	free(io->bounce);
	free(io->iov);
	io->bounce = NULL;
	io->iov = NULL;
}

bool fsio_direct(const struct fsync_io *io)
{
	return io->dfd >= 0;
}

/* Rounded out to blocks; merged into the last range when they touch (a
 * batch's flushes mostly run forward: log records, then buffers allocated
 * next-fit). Out of memory, the store fails: a range not written would be
 * acknowledged without being durable. */
void fsio_add(struct fsync_io *io, uint64_t lo, uint64_t hi)
{
	if (io->dfd < 0)
		return;
	struct fsio_ranges *l = &io->pend;
	lo &= ~(uint64_t)(io->block - 1);
	hi = (hi + io->block - 1) & ~(uint64_t)(io->block - 1);
	for (; hi - lo > MAX_WRITE; lo += MAX_WRITE)
		fsio_add(io, lo, lo + MAX_WRITE);
	if (l->n && lo >= l->v[l->n - 1].lo && lo <= l->v[l->n - 1].hi && hi - l->v[l->n - 1].lo <= MAX_WRITE) {
		if (hi > l->v[l->n - 1].hi)
			l->v[l->n - 1].hi = hi;
		return;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		void *v = realloc(l->v, cap * sizeof(*l->v));
		if (!v) {
			paste_store_fail(io->st, -ENOMEM, "out of memory for the ranges to write");
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].lo = lo;
	l->v[l->n++].hi = hi;
}

static struct io_uring_sqe *get_sqe(struct fsync_io *io)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
	if (!sqe) {                 /* full: hand the kernel what is queued */
		io_uring_submit(&io->ring);
		sqe = io_uring_get_sqe(&io->ring);
	}
	return sqe;
}

static int cmp_lo(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* A batch flushes a log record, then its value's buffers, then the next
 * record in the same log block: in flush order the ranges do not touch, and
 * the log block would be written once per record. Sorted, overlapping and
 * touching ranges merge: one write per run (n log n over a batch's ~100). */
static void sort_merge(struct fsio_ranges *l)
{
	if (l->n < 2)
		return;
	qsort(l->v, l->n, sizeof(*l->v), cmp_lo);
	size_t k = 0;
	for (size_t i = 1; i < l->n; i++) {
		if (l->v[i].hi <= l->v[k].hi)
			continue;                       /* inside the run */
		if (l->v[i].lo <= l->v[k].hi && l->v[i].hi - l->v[k].lo <= MAX_WRITE) {
			l->v[k].hi = l->v[i].hi;
		} else {
			/* Never two writes of one block in a commit: they
			 * could land in either order. */
			if (l->v[i].lo < l->v[k].hi)
				l->v[i].lo = l->v[k].hi;
			l->v[++k] = l->v[i];
		}
	}
	l->n = k + 1;
}

/* Room for a snapshot of each run's last block (see queue_sync), and an
 * iovec pair per run; both live until the commit ended. */
static int bounce_room(struct fsync_io *io, size_t runs)
{
	if (runs <= io->bounce_runs)
		return 0;
	size_t n = runs < 16 ? 16 : runs * 2;
	void *b = NULL;
	if (posix_memalign(&b, 4096, n * io->block))
		return -ENOMEM;
	struct iovec *v = realloc(io->iov, n * 2 * sizeof(*v));
	if (!v) {
		free(b);
		return -ENOMEM;
	}
	free(io->bounce);
	io->bounce = b;
	io->iov = v;
	io->bounce_runs = n;
	return 0;
}

/* Queue the writes of l, then the fdatasync after all of them; returns how
 * many ops were queued (each posts one CQE tagged `tag`), or a negative
 * errno before queueing any.
 *
 * snapshot (the asynchronous commit): each run's last block is written
 * from a copy taken now, the rest from the mapping. The thread goes on
 * appending while the writes are in flight, and the next records land in
 * that last block of the log: written from the mapping, a record could
 * reach the disk in this commit while its data waits for the next, and a
 * kill -9 in between would leave a record without its data followed by
 * valid (data-less) records, which recovery takes for damage in the middle
 * of the log. Copied, a record is written with the data it was flushed
 * with. Cost: a block's memcpy per run (~5 runs of 4 KiB per commit). A
 * synchronous sync needs none: nothing is appended while it waits. */
static int queue_sync(struct fsync_io *io, struct fsio_ranges *l, uint64_t tag,
		      unsigned fsync_flags, bool snapshot)
{
	sort_merge(l);
	if (snapshot && bounce_room(io, l->n) < 0)
		return -ENOMEM;
	uint8_t *base = paste_store_base(io->st);
	uint32_t ops = 0;
	for (size_t i = 0; i < l->n; i++, ops++) {
		struct io_uring_sqe *sqe = get_sqe(io);
		uint64_t lo = l->v[i].lo, hi = l->v[i].hi;
		if (snapshot) {
			uint8_t *copy = io->bounce + i * io->block;
			memcpy(copy, base + hi - io->block, io->block);
			struct iovec *v = &io->iov[2 * i];
			v[0] = (struct iovec){ base + lo, hi - io->block - lo };
			v[1] = (struct iovec){ copy, io->block };
			if (v[0].iov_len)
				io_uring_prep_writev(sqe, io->dfd, v, 2, lo);
			else
				io_uring_prep_writev(sqe, io->dfd, v + 1, 1, lo);
			persist_shim_written(io, tag == TAG_FLIGHT, lo, v[0].iov_base, v[0].iov_len);
			persist_shim_written(io, tag == TAG_FLIGHT, hi - io->block, copy, io->block);
		} else {
			io_uring_prep_write(sqe, io->dfd, base + lo, (unsigned)(hi - lo), lo);
			persist_shim_written(io, tag == TAG_FLIGHT, lo, base + lo, hi - lo);
		}
		io_uring_sqe_set_data64(sqe, tag << 32 | (uint32_t)(hi - lo));
	}
	/* A link ends with its submission: the fdatasync and the eventfd
	 * write hard-linked after it must go in one. */
	if (io_uring_sq_space_left(&io->ring) < 2)
		io_uring_submit(&io->ring);
	struct io_uring_sqe *sqe = get_sqe(io);
	io_uring_prep_fsync(sqe, io->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(sqe, tag << 32);
	sqe->flags |= IOSQE_IO_DRAIN | fsync_flags;
	return ops + 1;
}

/* One CQE's verdict: a write must be whole (a short O_DIRECT write is an
 * error the disk gave no errno for; the eventfd's, 8 bytes), an fdatasync
 * 0. The low 32 bits of user_data are the bytes a write wants. */
static int cqe_result(const struct io_uring_cqe *cqe)
{
	uint32_t want = (uint32_t)cqe->user_data;
	if (cqe->res < 0)
		return cqe->res;
	return want && (uint32_t)cqe->res != want ? -EIO : 0;
}

/* Wait for the CQEs still owed; the first error wins. */
static void reap(struct fsync_io *io)
{
	while (io->owed_flight || io->owed_sync) {
		struct io_uring_cqe *cqe;
		int r = io_uring_wait_cqe(&io->ring, &cqe);
		if (r == -EINTR)
			continue;
		if (r < 0) {            /* the ring itself broke: nothing is known durable */
			if (io->owed_flight && !io->flight_res)
				io->flight_res = r;
			if (io->owed_sync && !io->sync_res)
				io->sync_res = r;
			io->owed_flight = io->owed_sync = 0;
			return;
		}
		bool flight = (cqe->user_data >> 32) == TAG_FLIGHT;
		int res = cqe_result(cqe);
		int *into = flight ? &io->flight_res : &io->sync_res;
		if (res < 0 && !*into)
			*into = res;
		if (flight)
			io->owed_flight--;
		else
			io->owed_sync--;
		io_uring_cqe_seen(&io->ring, cqe);
	}
}

bool fsio_can_begin(const struct fsync_io *io)
{
	return io->ring_ok;
}

int fsio_begin(struct fsync_io *io)
{
	if (!io->ring_ok)
		return -EOPNOTSUPP;     /* only the uring port begins commits */
	struct fsio_ranges t = io->flight;
	io->flight = io->pend;
	io->pend = t;
	io->pend.n = 0;
	io->flight_res = 0;
	io->flight_reaped = false;
	int q = queue_sync(io, &io->flight, TAG_FLIGHT, IOSQE_IO_HARDLINK, io->dfd >= 0);
	if (q < 0)
		return q;
	io->owed_flight = (uint32_t)q;
	/* Hard-linked: runs whatever the fdatasync returned, so the port always
	 * hears of the end. A write of the flight like the others: 8 bytes. */
	struct io_uring_sqe *sqe = get_sqe(io);
	io->efd_val = 1;
	io_uring_prep_write(sqe, io->efd, &io->efd_val, 8, 0);
	io_uring_sqe_set_data64(sqe, (uint64_t)TAG_FLIGHT << 32 | sizeof(io->efd_val));
	io->owed_flight++;
	int r = io_uring_submit(&io->ring);
	if (r < 0) {
		/* Nothing of it may run: end must not wait for CQEs that never
		 * come, and the port's read of the eventfd must end. */
		io->owed_flight = 0;
		io->flight_res = r;
		io->flight_reaped = true;
		uint64_t one = 1;
		if (write(io->efd, &one, 8) != 8)
			return r;
	}
	return io->efd;
}

int fsio_end(struct fsync_io *io)
{
	if (!io->flight_reaped)
		reap(io);
	io->flight_reaped = true;
	io->flight.n = 0;
	return io->flight_res;
}

int fsio_sync(struct fsync_io *io, bool flight_open)
{
	if (!io->ring_ok)
		return fdatasync(io->fd) < 0 ? -errno : 0;
	if (flight_open && !io->flight_reaped) {
		/* Writes still in flight may land after ours: let them end. */
		reap(io);
		io->flight_reaped = true;
	}
	io->sync_res = 0;
	int q = queue_sync(io, &io->pend, TAG_SYNC, 0, false);
	if (q < 0)
		return q;
	io->owed_sync = (uint32_t)q;
	int r = io_uring_submit(&io->ring);
	if (r < 0) {
		io->owed_sync = 0;
		return r;
	}
	reap(io);
	io->pend.n = 0;
	if (flight_open && io->flight_res)
		return io->flight_res;
	return io->sync_res;
}
