/* store.c - the packet store: a file of named packet buffers, at run time:
 * open (create or validate, lock, map), the buffer and area addresses,
 * reference counts and the free list, the failed state and the watch on
 * the file. The on-disk layout (superblock, geometry, format, validation,
 * the version-1 upgrade) is in store_format.c.
 *
 * Buffer ownership lives in DRAM only: a reference count per buffer and a
 * free list. After a restart the WAL re-takes references for the buffers
 * its live records point at before paste_store_start builds the free list,
 * so a buffer holding durable data is never handed out again (the original
 * PASTE reused held buffers when its spare pool wrapped).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>
#include "paste.h"
#include "store_internal.h"

#define ON_FREE_LIST      0x80000000u   /* refcount flag: buffer sits on the free list */

struct paste_store {
	uint8_t *base;
	int fd;
	char *path;
	struct paste_store_geom geom;
	unsigned buf_shift;        /* log2(buf_size): index math without a divide */
	uint32_t *refs;            /* per buffer; __atomic, several threads */
	uint32_t nheld;            /* buffers with count > 0; __atomic */
	/* PASTE_STORE_ONE_THREAD: counts change by plain adds and the free
	 * map takes no lock. A locked add drains the store buffer; a
	 * pipelined SET makes about eleven reference changes. */
	bool one_thread;
	enum paste_durability medium;   /* what backs the file (paste_store_medium) */
	/* Free buffers: a bitmap (1 = free) handed out next-fit from a cursor
	 * that sweeps the file. Consecutive allocations are then adjacent in
	 * the file, so the buffers one batch received into (and the values it
	 * stores) are a few long runs, which is what a group commit's
	 * fdatasync writes on a disk: a LIFO free list would hand out freed
	 * buffers scattered across the file, one random 4 KiB write each
	 * (docs/results.md, "Next-fit free list"). Costs a
	 * word scan per 64 buffers passed over: ~nothing while the store is
	 * mostly free, at worst a pass over nbufs/64 words when it is full. */
	pthread_mutex_t lock;      /* guards free_bits, cursor, nfree (writes), started */
	uint64_t *free_bits;
	uint32_t cursor;           /* word of free_bits where the next search starts */
	uint32_t nfree;            /* read without the lock via __atomic_load */
	bool started;
	bool map_sync;             /* mapped MAP_SYNC (DAX) */
	bool map_private;          /* remapped for direct writes (store_map_private) */
	int fsync_users[2];        /* __atomic: fsync persist objects, [1] writing directly */
	bool in_use;               /* read-only open could not take the shared lock */
	bool created;              /* this open created the file */
	int lock_fd;               /* created: the descriptor holding the lock, else -1 */
	/* The failed state: `failed` (a negative errno, __atomic) is published
	 * after `fail_why`, so a reader that sees it sees the sentence. */
	int failed;
	pthread_mutex_t fail_lock;
	char fail_why[256];
	dev_t dev;
	ino_t ino;
	uint64_t watch_next_ns;    /* __atomic: next time paste_store_watch stats */
};

/* MAP_POPULATE prefaults every page now (~1 us per KiB on first touch
 * otherwise, on the hot path). On DAX, MAP_SYNC makes the file's metadata
 * durable with the data so cache-line flushes alone persist a write; the
 * store is preallocated and fsynced at creation, so the fallback without it
 * still persists data. */
static uint8_t *store_map(int fd, const char *path, uint64_t size, bool rdonly, bool dax,
			  bool *map_sync)
{
	int prot = PROT_READ | (rdonly ? 0 : PROT_WRITE);
	void *m;
	*map_sync = false;
	if (!rdonly && dax) {
		m = mmap(NULL, size, prot, MAP_SHARED_VALIDATE | MAP_SYNC | MAP_POPULATE, fd, 0);
		*map_sync = m != MAP_FAILED;
		if (m != MAP_FAILED)
			return m;
		fprintf(stderr, "paste: %s: MAP_SYNC refused (%s); using plain MAP_SHARED\n",
			path, strerror(errno));
	}
	m = mmap(NULL, size, prot, MAP_SHARED | MAP_POPULATE, fd, 0);
	return m == MAP_FAILED ? NULL : m;
}

/* Restarting after an I/O error. A failed writeback leaves the page cache
 * holding pages that never reached the disk, marked clean: a recovery that
 * read them would accept records the disk does not have, append after
 * them, and a later eviction would make the log change under it. So on a
 * disk-backed store nobody else has open, the opener first makes sure
 * nothing dirty is left (fdatasync; an error there refuses the open), then
 * drops every cached page (POSIX_FADV_DONTNEED drops clean, unmapped
 * pages), and the MAP_POPULATE that follows reads what the disk holds.
 * Costs one read of the file from the disk at start. tmpfs (/dev/shm) is
 * skipped: its page cache is the data. */
static int drop_cached_pages(int fd, const char *path, bool shared, struct paste_error *err)
{
	struct statfs sfs;
	if (shared || fstatfs(fd, &sfs) < 0 || sfs.f_type == TMPFS_MAGIC)
		return 0;
	if (fdatasync(fd) < 0)
		return paste_error_set(err, -errno, "%s: the disk reports an error for the store "
				       "(fdatasync at open: %s): not opened; check the device", path, strerror(errno));
	int r = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (r)
		return paste_error_set(err, -r, "%s: cannot drop cached pages before recovery: %s",
				       path, strerror(r));
	return 0;
}

/* Small folios on a disk-backed store. Since Linux 6.16 ext4 (xfs before
 * it) caches files in large folios, up to 2 MiB, and a folio is dirtied
 * and written back whole: one byte stored through the mapping makes the
 * next fdatasync write ~1.5 MiB (a pkvs group commit in fsync mode ~6 MiB
 * instead of a few pages: docs/results.md, "Small folios for a disk store").
 * Readahead is what builds large folios, so the file is read once in
 * random mode (POSIX_FADV_RANDOM: read-around of single pages, still at
 * sequential speed for 1 MiB reads) before the mapping populates from
 * those pages, and MADV_RANDOM keeps later faults (after an eviction)
 * from reading ahead. Then a stored byte costs one 4 KiB page at the
 * group commit. Costs one read of the file at open, which the populate
 * would do anyway. Only where the store's durability would be fsync:
 * tmpfs has no writeback and a DAX mapping no page cache. */
static void cache_in_small_folios(int fd, uint64_t size)
{
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) != 0)
		return;
	size_t chunk = 1u << 20;
	uint8_t *b = malloc(chunk);
	for (uint64_t off = 0; b && off < size; off += chunk)
		if (pread(fd, b, chunk, (off_t)off) <= 0)
			break;
	free(b);
}

int paste_store_open(struct paste_store **out, const char *path,
		     const struct paste_store_config *cfg, int flags,
		     struct paste_error *err)
{
	struct paste_store_config none = {0};
	struct paste_store_geom g;
	bool rdonly = flags & PASTE_STORE_RDONLY;
	int fd = -1, r;

	*out = NULL;
	if (!cfg)
		cfg = &none;
	if (!path || !*path)
		return paste_error_set(err, -EINVAL, "store path is empty");
	if (flags & ~(PASTE_STORE_CREATE | PASTE_STORE_EXCL | PASTE_STORE_RDONLY |
		      PASTE_STORE_ONE_THREAD))
		return paste_error_set(err, -EINVAL, "%s: unknown open flags 0x%x", path, flags);
	if ((flags & PASTE_STORE_CREATE) && rdonly)
		return paste_error_set(err, -EINVAL, "%s: cannot create a store read-only", path);
	if ((flags & PASTE_STORE_CREATE) && (r = store_geom_from_config(&g, path, cfg, err)) < 0)
		return r;
	/* Create, or open and lock. A writable open then checks that the path
	 * still names the file it locked: a start that just created the store
	 * and failed removes it again (paste_store_unlink_created), and an
	 * open that raced it would otherwise work on a file without a name.
	 * Then it starts over, at most a few times. */
	bool created = false, in_use = false;
	for (int tries = 0;; tries++) {
		if (flags & PASTE_STORE_CREATE) {
			fd = store_create(path, &g, err);
			if (fd == -EEXIST && (flags & PASTE_STORE_EXCL))
				return paste_error_set(err, -EEXIST, "%s: already exists (left untouched)", path);
			if (fd < 0 && fd != -EEXIST)
				return fd;
			created = fd >= 0;   /* and locked */
		}
		if (fd < 0) {
			fd = open(path, (rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
			if (fd < 0)
				return paste_error_set(err, -errno, "%s: cannot open: %s%s", path, strerror(errno),
					errno == ENOENT && !(flags & PASTE_STORE_CREATE) ? " (create it first)" : "");
		}
		/* Two writers would each build a free list over the same buffers
		 * and hand one buffer to both. Read-only inspection of a live
		 * store is allowed, but it says so (paste_store_in_use): a reader
		 * that takes the shared lock keeps writers out while it looks.
		 * The lock goes away with the fd, even on kill -9. */
		if (!rdonly && flock(fd, LOCK_EX | LOCK_NB) < 0) {
			r = errno == EWOULDBLOCK
				? paste_error_set(err, -EBUSY, "%s: in use (locked by a running server or another open)", path)
				: paste_error_set(err, -errno, "%s: cannot lock: %s", path, strerror(errno));
			close(fd);
			return r;
		}
		struct stat at, named;
		if (rdonly || created || tries == 3 ||
		    (fstat(fd, &at) == 0 && stat(path, &named) == 0 &&
		     at.st_dev == named.st_dev && at.st_ino == named.st_ino))
			break;
		close(fd);
		fd = -1;
	}
	if (rdonly && flock(fd, LOCK_SH | LOCK_NB) < 0)
		in_use = true;
	/* A store this open created was formatted without a name
	 * (store_create), and its descriptor keeps that unnamed origin: a
	 * mapping of it shows in /proc/PID/maps as "/#123 (deleted)". So the
	 * store works through a descriptor opened by its name, and the first
	 * stays open only to hold the lock. */
	int lock_fd = -1;
	if (created) {
		struct stat a, b;
		int named = open(path, O_RDWR | O_CLOEXEC);
		if (named >= 0 && fstat(named, &a) == 0 && fstat(fd, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			lock_fd = fd;
			fd = named;
		} else if (named >= 0) {
			close(named);
		}
	}
	struct stat sb;
	struct paste_store *st = NULL;
	if (fstat(fd, &sb) < 0) {
		r = paste_error_set(err, -errno, "%s: fstat: %s", path, strerror(errno));
		goto fail;
	}
	if ((r = store_validate(fd, path, cfg, &g, err)) < 0)
		goto fail;
	if ((r = drop_cached_pages(fd, path, in_use, err)) < 0)
		goto fail;
	st = calloc(1, sizeof(*st));
	if (st) {
		st->path = strdup(path);
		st->refs = calloc(g.nbufs, sizeof(*st->refs));
		st->free_bits = calloc((g.nbufs + 63) / 64, sizeof(*st->free_bits));
	}
	if (!st || !st->path || !st->refs || !st->free_bits) {
		r = paste_error_set(err, -ENOMEM, "%s: out of memory for %u buffer counts", path, g.nbufs);
		goto fail;
	}
	st->fd = fd;
	st->geom = g;
	st->buf_shift = (unsigned)__builtin_ctz(g.buf_size);
	st->in_use = in_use;
	st->created = created;
	st->lock_fd = lock_fd;
	st->one_thread = flags & PASTE_STORE_ONE_THREAD;
	st->dev = sb.st_dev;
	st->ino = sb.st_ino;
	pthread_mutex_init(&st->lock, NULL);
	pthread_mutex_init(&st->fail_lock, NULL);
	/* What backs the file, once: a DAX mount is mapped MAP_SYNC, a disk
	 * is cached in small folios (writable opens), and persist objects
	 * resolve AUTO from it (paste_store_medium). */
	st->medium = paste_durability_detect(path);
	enum paste_durability backing = rdonly ? PASTE_DUR_NONE : st->medium;
	if (backing == PASTE_DUR_FSYNC)
		cache_in_small_folios(fd, g.file_size);
	st->base = store_map(fd, path, g.file_size, rdonly, backing == PASTE_DUR_PMEM, &st->map_sync);
	if (!st->base) {
		r = paste_error_set(err, -errno, "%s: cannot map %llu bytes: %s", path,
				    (unsigned long long)g.file_size, strerror(errno));
		goto fail;
	}
	if (backing == PASTE_DUR_FSYNC)   /* a fault after an eviction reads no folio ahead */
		madvise(st->base, g.file_size, MADV_RANDOM);
	*out = st;
	return 0;
fail:
	if (st) {
		free(st->path);
		free(st->refs);
		free(st->free_bits);
		free(st);
	}
	if (created)
		unlink(path);   /* a failed create leaves no file (still ours: locked) */
	close(fd);
	if (lock_fd >= 0)
		close(lock_fd);
	return r;
}

void paste_store_close(struct paste_store *st)
{
	if (!st)
		return;
	munmap(st->base, st->geom.file_size);
	close(st->fd);
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	pthread_mutex_destroy(&st->lock);
	pthread_mutex_destroy(&st->fail_lock);
	free(st->path);
	free(st->refs);
	free(st->free_bits);
	free(st);
}

enum paste_durability paste_store_medium(const struct paste_store *st)
{
	return st->medium;
}

bool paste_store_map_sync(const struct paste_store *st) { return st->map_sync; }
bool store_one_thread(const struct paste_store *st) { return st->one_thread; }
bool store_is_private(const struct paste_store *st) { return __atomic_load_n(&st->map_private, __ATOMIC_ACQUIRE); }
int store_fsync_users(struct paste_store *st, bool direct, int delta)
{
	return __atomic_add_fetch(&st->fsync_users[direct], delta, __ATOMIC_ACQ_REL);
}

/* The new mapping is made beside the old and moved over it (mremap with
 * MREMAP_FIXED replaces in one step), so a failure leaves the old one.
 * MAP_POPULATE on a private writable mapping breaks copy-on-write for
 * every page now: one copy of the file (~0.3 s per GiB), and the
 * page cache copy can then be dropped by the kernel as clean. */
int store_map_private(struct paste_store *st, struct paste_error *err)
{
	int r = 0;
	pthread_mutex_lock(&st->lock);
	if (!st->map_private) {
		size_t size = st->geom.file_size;
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_POPULATE, st->fd, 0);
		if (m == MAP_FAILED || mremap(m, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, st->base) == MAP_FAILED) {
			r = -errno;
			if (m != MAP_FAILED)
				munmap(m, size);
			paste_error_set(err, r, "%s: cannot map the store privately for direct writes: %s",
					st->path, strerror(-r));
		} else {
			/* A direct write over a cached page is not issued inline
			 * (io_uring's nowait attempt finds the page and hands the
			 * write to a worker thread) and must invalidate it: the
			 * page cache copy is of no use now, so drop it (the
			 * tree too works in this mapping then: lib/btree_api.c).
			 * Failing to drop it costs speed, not safety. */
			drop_cached_pages(st->fd, st->path, false, NULL);
			madvise(st->base, size, MADV_DONTFORK);
			__atomic_store_n(&st->map_private, true, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}
bool paste_store_in_use(const struct paste_store *st) { return st->in_use; }
bool paste_store_created(const struct paste_store *st) { return st->created; }

int paste_store_unlink_created(struct paste_store *st)
{
	struct stat at, named;
	if (!st->created)
		return -EPERM;
	if (fstat(st->fd, &at) < 0 || stat(st->path, &named) < 0)
		return -errno;
	if (at.st_dev != named.st_dev || at.st_ino != named.st_ino)
		return -ESTALE;   /* the name is someone else's now */
	return unlink(st->path) == 0 ? 0 : -errno;
}

/* ---- the failed state ------------------------------------------------- */

int paste_store_failed(const struct paste_store *st, const char **why)
{
	int f = __atomic_load_n(&st->failed, __ATOMIC_ACQUIRE);
	if (why)
		*why = f ? st->fail_why : "";
	return f;
}

void paste_store_fail(struct paste_store *st, int code, const char *fmt, ...)
{
	if (code >= 0)
		code = -EIO;
	pthread_mutex_lock(&st->fail_lock);
	if (!__atomic_load_n(&st->failed, __ATOMIC_RELAXED)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(st->fail_why, sizeof(st->fail_why), fmt, ap);
		va_end(ap);
		__atomic_store_n(&st->failed, code, __ATOMIC_RELEASE);
		fprintf(stderr, "paste: %s: store failed: %s; nothing more is acknowledged\n",
			st->path, st->fail_why);
	}
	pthread_mutex_unlock(&st->fail_lock);
}

/* fstat of our descriptor sees removal (no links left) and truncation;
 * stat of the path sees a replacement (another file renamed over it, or a
 * fresh store created by another server after removal). */
int paste_store_watch(struct paste_store *st, uint32_t interval_ms)
{
	int f = paste_store_failed(st, NULL);
	if (f)
		return f;
	uint64_t now = paste_clock_ns(), next = __atomic_load_n(&st->watch_next_ns, __ATOMIC_RELAXED);
	if (interval_ms && now < next)
		return 0;
	/* One thread per interval does the stat calls. */
	if (!__atomic_compare_exchange_n(&st->watch_next_ns, &next,
					 now + (uint64_t)interval_ms * 1000000ull, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return paste_store_failed(st, NULL);
	struct stat a, b;
	if (fstat(st->fd, &a) < 0)
		paste_store_fail(st, -errno, "fstat of the store failed: %s", strerror(errno));
	else if (a.st_nlink == 0)
		paste_store_fail(st, -ENOENT, "the store file was removed while in use");
	else if ((uint64_t)a.st_size < st->geom.file_size)
		paste_store_fail(st, -EIO, "the store file was truncated to %llu of %llu bytes while in use",
				 (unsigned long long)a.st_size, (unsigned long long)st->geom.file_size);
	else if (stat(st->path, &b) < 0)
		paste_store_fail(st, -errno, "the store path no longer names the store (%s)", strerror(errno));
	else if (b.st_dev != st->dev || b.st_ino != st->ino)
		paste_store_fail(st, -ESTALE, "the store path now names another file (replaced while in use)");
	return paste_store_failed(st, NULL);
}

const struct paste_store_geom *paste_store_geom(const struct paste_store *st) { return &st->geom; }
const char *paste_store_path(const struct paste_store *st) { return st->path; }
int paste_store_fd(const struct paste_store *st) { return st->fd; }
uint8_t *paste_store_base(const struct paste_store *st) { return st->base; }

uint8_t *paste_store_buf(const struct paste_store *st, uint32_t idx)
{
	if (idx >= st->geom.nbufs)
		return NULL;
	return st->base + st->geom.buf_offset + ((uint64_t)idx << st->buf_shift);
}

uint32_t paste_store_index(const struct paste_store *st, const void *addr)
{
	uintptr_t first = (uintptr_t)(st->base + st->geom.buf_offset);
	uintptr_t a = (uintptr_t)addr;
	if (a < first || ((a - first) >> st->buf_shift) >= st->geom.nbufs)
		return PASTE_NO_BUF;
	return (uint32_t)((a - first) >> st->buf_shift);
}

uint8_t *paste_store_lane(const struct paste_store *st, uint32_t lane, uint64_t *len)
{
	if (lane >= st->geom.log_lanes)
		return NULL;
	if (len)
		*len = st->geom.lane_size;
	return st->base + st->geom.log_offset + lane * st->geom.lane_size;
}

uint8_t *paste_store_nodes(const struct paste_store *st, uint32_t *pages)
{
	if (pages)
		*pages = (uint32_t)(st->geom.node_size / PASTE_STORE_NODE_PAGE);
	return st->geom.node_size ? st->base + st->geom.node_offset : NULL;
}

uint8_t *paste_store_ckpt(const struct paste_store *st, uint32_t lane, uint32_t slot)
{
	if (lane >= st->geom.log_lanes || slot >= 2)
		return NULL;
	return st->base + st->geom.ckpt_offset + (uint64_t)(lane * 2 + slot) * PASTE_CKPT_SLOT_SIZE;
}

/* ---- buffer ownership ------------------------------------------------ */

static bool index_ok(const struct paste_store *st, uint32_t idx, const char *op)
{
	if (idx < st->geom.nbufs)
		return true;
	fprintf(stderr, "paste: %s: %s of buffer %u: out of range (store has %u buffers)\n",
		st->path, op, idx, st->geom.nbufs);
	return false;
}

/* A reference count going wrong means two owners of one buffer: data
 * silently overwritten. Stopping is the only safe answer. */
static void ownership_bug(const struct paste_store *st, uint32_t idx, const char *what)
{
	fprintf(stderr, "paste: %s: buffer %u %s: aborting rather than give one buffer to two owners\n",
		st->path, idx, what);
	abort();
}

static void map_lock(struct paste_store *st)
{
	if (!st->one_thread)
		pthread_mutex_lock(&st->lock);
}

static void map_unlock(struct paste_store *st)
{
	if (!st->one_thread)
		pthread_mutex_unlock(&st->lock);
}

/* refs[idx] += d; the count before. */
static inline uint32_t count_add(struct paste_store *st, uint32_t idx, int32_t d)
{
	if (st->one_thread) {
		uint32_t old = st->refs[idx];
		st->refs[idx] = old + (uint32_t)d;
		return old;
	}
	/* acq_rel on a drop: whoever drops the last reference sees every
	 * write the other holders made, before the buffer is reused. */
	return d > 0 ? __atomic_fetch_add(&st->refs[idx], (uint32_t)d, __ATOMIC_RELAXED)
		     : __atomic_fetch_sub(&st->refs[idx], (uint32_t)-d, __ATOMIC_ACQ_REL);
}

static inline void held_add(struct paste_store *st, int32_t d)
{
	if (st->one_thread)
		st->nheld += (uint32_t)d;
	else
		__atomic_add_fetch(&st->nheld, (uint32_t)d, __ATOMIC_RELAXED);
}

int paste_store_start(struct paste_store *st)
{
	map_lock(st);
	if (st->started) {
		map_unlock(st);
		return -EALREADY;
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < st->geom.nbufs; i++) {
		if (__atomic_load_n(&st->refs[i], __ATOMIC_RELAXED) == 0) {
			__atomic_store_n(&st->refs[i], ON_FREE_LIST, __ATOMIC_RELAXED);
			st->free_bits[i / 64] |= 1ull << (i % 64);
			n++;
		}
	}
	st->cursor = 0;
	__atomic_store_n(&st->nfree, n, __ATOMIC_RELAXED);
	st->started = true;
	map_unlock(st);
	return 0;
}

/* One lock round trip (~20-50 ns uncontended) per batch, not per buffer. */
uint32_t paste_store_alloc(struct paste_store *st, uint32_t *idx, uint32_t n)
{
	map_lock(st);
	uint32_t have = st->nfree;
	uint32_t k = n < have ? n : have;   /* 0 before start: nothing is free */
	uint32_t words = (st->geom.nbufs + 63) / 64, w = st->cursor;
	for (uint32_t i = 0; i < k;) {
		uint64_t bits = st->free_bits[w];
		if (!bits) {
			w = w + 1 == words ? 0 : w + 1;
			continue;
		}
		uint32_t b = w * 64 + (uint32_t)__builtin_ctzll(bits);
		st->free_bits[w] = bits & (bits - 1);
		__atomic_store_n(&st->refs[b], 1, __ATOMIC_RELAXED);
		idx[i++] = b;
	}
	st->cursor = w;
	__atomic_store_n(&st->nfree, have - k, __ATOMIC_RELAXED);
	map_unlock(st);
	held_add(st, (int32_t)k);
	return k;
}

uint32_t paste_store_ref(struct paste_store *st, uint32_t idx)
{
	if (!index_ok(st, idx, "reference"))
		return 0;
	uint32_t old = count_add(st, idx, 1);
	if (old & ON_FREE_LIST)
		ownership_bug(st, idx, "referenced while on the free list");
	if (old == 0)
		held_add(st, 1);
	return old + 1;
}

uint32_t paste_store_unref(struct paste_store *st, uint32_t idx, bool keep_if_free)
{
	if (!index_ok(st, idx, "release"))
		return 0;
	uint32_t old = count_add(st, idx, -1);
	if (old == 0 || (old & ON_FREE_LIST))
		ownership_bug(st, idx, "released with no reference held (double unref)");
	if (old > 1)
		return old - 1;
	held_add(st, -1);
	if (keep_if_free)
		return 0;
	map_lock(st);
	/* Before start, paste_store_start collects every count-0 buffer. */
	if (st->started) {
		__atomic_store_n(&st->refs[idx], ON_FREE_LIST, __ATOMIC_RELAXED);
		st->free_bits[idx / 64] |= 1ull << (idx % 64);
		__atomic_store_n(&st->nfree, st->nfree + 1, __ATOMIC_RELAXED);
	}
	map_unlock(st);
	return 0;
}

uint32_t paste_store_refcount(const struct paste_store *st, uint32_t idx)
{
	if (idx >= st->geom.nbufs)
		return 0;
	return __atomic_load_n(&st->refs[idx], __ATOMIC_RELAXED) & ~ON_FREE_LIST;
}

uint32_t paste_store_nfree(const struct paste_store *st)
{
	return __atomic_load_n(&st->nfree, __ATOMIC_RELAXED);
}

uint32_t paste_store_nheld(const struct paste_store *st)
{
	return __atomic_load_n(&st->nheld, __ATOMIC_RELAXED);
}

size_t paste_store_read(const struct paste_store *st, const struct paste_extent *ext, uint32_t n,
			uint64_t from, void *out, size_t cap)
{
	size_t got = 0;
	for (uint32_t i = 0; i < n && got < cap; i++) {
		if (from >= ext[i].len) {
			from -= ext[i].len;
			continue;
		}
		size_t k = ext[i].len - from;
		if (k > cap - got)
			k = cap - got;
		memcpy((uint8_t *)out + got, paste_store_buf(st, ext[i].buf) + ext[i].off + from, k);
		got += k;
		from = 0;
	}
	return got;
}
