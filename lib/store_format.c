/* store_format.c - the packet store's on-disk layout: the superblock, the
 * geometry derived from it, formatting a new file and validating an
 * existing one. The runtime (mapping, reference counts, free list, failed
 * state, watch) is in store.c, the upgrade from earlier layouts in
 * store_upgrade.c; what they share is in store_internal.h.
 *
 * On-disk layout, version 3 (all integers little-endian):
 *
 *   0            superblock (struct store_super, 112 bytes) in a 4096-byte page
 *   ckpt_offset  log_lanes * 2 checkpoint slots of 64 bytes (owned by the
 *                WAL), the region rounded up to 4096; zero at format
 *   log_offset   log_lanes lanes of lane_size bytes (multiple of 4096)
 *   node_offset  node_size bytes of 4096-byte pages owned by the B+tree
 *                (lib/btree*.c): pages 0 and 1 are its two meta slots; zero
 *                at format; node_size may be 0 (no tree)
 *   buf_offset   nbufs buffers of buf_size bytes (power of two, 512..65536)
 *
 * Earlier versions are refused at open with a message naming `paste-store
 * upgrade` (store_upgrade.c describes them).
 *
 * Everything after the superblock's sizes is derived by geom_layout(), and
 * open() recomputes it and insists the stored offsets agree, so a corrupted
 * but checksum-valid superblock cannot point buffers into the log.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "paste.h"
#include "store_internal.h"

#define STORE_PAGE        4096u
#define STORE_MIN_BUFS    64u
#define STORE_MIN_BUF     512u
#define STORE_MAX_BUF     65536u
#define STORE_LANES       2u             /* one per thread: room for two */
#define STORE_LOG_PER_BUF 64u           /* auto log: bytes per buffer per lane ... */
#define STORE_LOG_MIN     (1ull << 20)  /* ... but at least this much */
#define STORE_MAX_SIZE    (1ull << 50)  /* keeps all offset arithmetic far from overflow */
#define NODE_MIN_PAGES    3u            /* two meta slots and one tree page */
#define NODE_AUTO_DIV     8u            /* auto node area: 1/8 of the file ... */

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static bool buf_size_ok(uint32_t b)
{
	return b >= STORE_MIN_BUF && b <= STORE_MAX_BUF && (b & (b - 1)) == 0;
}

/* Per-lane bytes for a whole log area of log_size bytes. */
static uint64_t lane_bytes(uint64_t log_size, uint32_t lanes)
{
	return round_up((log_size + lanes - 1) / lanes, STORE_PAGE);
}

/* Fill the offsets from file_size, buf_size, log_lanes, lane_size and
 * node_size; return how many buffers fit (64-bit: the caller checks it
 * fits in nbufs). */
static uint64_t geom_layout(struct paste_store_geom *g)
{
	g->ckpt_offset = STORE_PAGE;
	g->log_offset = g->ckpt_offset +
		round_up((uint64_t)g->log_lanes * 2 * PASTE_CKPT_SLOT_SIZE, STORE_PAGE);
	g->node_offset = g->log_offset + (uint64_t)g->log_lanes * g->lane_size;
	g->meta_offset = g->node_size ? g->node_offset : 0;
	g->buf_offset = g->node_offset + g->node_size;
	uint64_t n = g->file_size > g->buf_offset ? (g->file_size - g->buf_offset) / g->buf_size : 0;
	g->nbufs = n < PASTE_NO_BUF ? (uint32_t)n : PASTE_NO_BUF;
	return n;
}

/* Why a stored geometry is impossible, or NULL when it is what version 2
 * would have written. Checked in an order that keeps geom_layout's
 * arithmetic in range. */
const char *store_geom_check(const struct paste_store_geom *g)
{
	if (!buf_size_ok(g->buf_size))
		return "buffer size not a power of two in 512..65536";
	if (g->log_lanes == 0 || g->log_lanes > PASTE_MAX_LANES)
		return "log lane count out of range";
	if (g->file_size > STORE_MAX_SIZE || g->file_size % STORE_PAGE)
		return "file size out of range or not a multiple of 4096";
	if (g->lane_size == 0 || g->lane_size % STORE_PAGE || g->lane_size > g->file_size)
		return "bad lane size";
	if (g->node_size % STORE_PAGE || g->node_size > g->file_size ||
	    (g->node_size && g->node_size < NODE_MIN_PAGES * STORE_PAGE) ||
	    g->node_size / STORE_PAGE >= UINT32_MAX)
		return "bad node area size";
	struct paste_store_geom want = *g;
	uint64_t n = geom_layout(&want);
	if (want.ckpt_offset != g->ckpt_offset || want.log_offset != g->log_offset ||
	    want.node_offset != g->node_offset || want.buf_offset != g->buf_offset)
		return "area offsets overlap or leave gaps";
	if (n >= PASTE_NO_BUF || want.nbufs != g->nbufs)
		return "buffer count does not match the file size";
	if (g->nbufs < STORE_MIN_BUFS)
		return "fewer than 64 buffers";
	return NULL;
}

/* Geometry for a new store from cfg (0 fields take defaults). */
int store_geom_from_config(struct paste_store_geom *g, const char *path,
			   const struct paste_store_config *cfg, struct paste_error *err)
{
	memset(g, 0, sizeof(*g));
	g->version = PASTE_STORE_VERSION;
	g->file_size = cfg->size ? cfg->size : PASTE_DEFAULT_STORE_SIZE;
	g->buf_size = cfg->buf_size ? cfg->buf_size : PASTE_DEFAULT_BUF_SIZE;
	g->log_lanes = cfg->log_lanes ? cfg->log_lanes : STORE_LANES;
	if (!buf_size_ok(g->buf_size))
		return paste_error_set(err, -EINVAL, "%s: buffer size %u is not a power of two between %u and %u",
				       path, g->buf_size, STORE_MIN_BUF, STORE_MAX_BUF);
	if (g->log_lanes > PASTE_MAX_LANES)
		return paste_error_set(err, -EINVAL, "%s: %u log lanes asked for, at most %u",
				       path, g->log_lanes, PASTE_MAX_LANES);
	if (g->file_size > STORE_MAX_SIZE)
		return paste_error_set(err, -EINVAL, "%s: store size %llu bytes is over the %llu-byte limit",
				       path, (unsigned long long)g->file_size, STORE_MAX_SIZE);
	/* Whole pages: the last buffer and every 64-byte line lie inside the
	 * file, which the persistence shim's line copies rely on. */
	if (g->file_size % STORE_PAGE)
		return paste_error_set(err, -EINVAL, "%s: store size %llu bytes is not a multiple of %u",
				       path, (unsigned long long)g->file_size, STORE_PAGE);
	uint64_t log = cfg->log_size;
	if (!log) {
		/* Every lane can name every buffer once (a one-extent record is
		 * 64 bytes): one thread can fill the store before its lane
		 * fills. Costs 64 B per buffer per lane (3 % at 2 KiB, 2 lanes). */
		log = g->file_size / g->buf_size * STORE_LOG_PER_BUF * g->log_lanes;
		if (log < STORE_LOG_MIN)
			log = STORE_LOG_MIN;
	}
	if (log > g->file_size)
		return paste_error_set(err, -EINVAL, "%s: log size %llu bytes exceeds the store size %llu",
				       path, (unsigned long long)log, (unsigned long long)g->file_size);
	g->lane_size = lane_bytes(log, g->log_lanes);
	if (cfg->node_size == PASTE_STORE_NO_NODES) {
		g->node_size = 0;
	} else if (cfg->node_size) {
		if (cfg->node_size % STORE_PAGE || cfg->node_size < NODE_MIN_PAGES * STORE_PAGE ||
		    cfg->node_size > g->file_size)
			return paste_error_set(err, -EINVAL, "%s: node area of %llu bytes: it must be a multiple "
					       "of %u, at least %u bytes (two meta pages and a tree page) and "
					       "inside the store", path, (unsigned long long)cfg->node_size,
					       STORE_PAGE, NODE_MIN_PAGES * STORE_PAGE);
		g->node_size = cfg->node_size;
	} else {
		/* Auto: 1/8 of the file, shrunk so that a store big enough for
		 * 64 buffers without a tree still gets them, and left out when
		 * that leaves less than NODE_MIN_PAGES. */
		g->node_size = 0;
		geom_layout(g);
		uint64_t want = g->file_size / NODE_AUTO_DIV / STORE_PAGE * STORE_PAGE;
		uint64_t min_bufs = g->buf_offset + (uint64_t)STORE_MIN_BUFS * g->buf_size;
		uint64_t room = g->file_size > min_bufs ? (g->file_size - min_bufs) / STORE_PAGE * STORE_PAGE : 0;
		if (want > room)
			want = room;
		g->node_size = want >= NODE_MIN_PAGES * STORE_PAGE ? want : 0;
	}
	uint64_t n = geom_layout(g);
	if (n < STORE_MIN_BUFS) {
		uint64_t need = g->buf_offset + (uint64_t)STORE_MIN_BUFS * g->buf_size;
		return paste_error_set(err, -EINVAL,
			"%s: store size %llu bytes is too small: superblock, checkpoints, a %llu-byte log "
			"and a %llu-byte node area take %llu, and %u buffers of %u bytes need %llu bytes in all",
			path, (unsigned long long)g->file_size,
			(unsigned long long)(g->lane_size * g->log_lanes), (unsigned long long)g->node_size,
			(unsigned long long)g->buf_offset, STORE_MIN_BUFS, g->buf_size,
			(unsigned long long)need);
	}
	if (n >= PASTE_NO_BUF)
		return paste_error_set(err, -EINVAL, "%s: %llu buffers do not fit 32-bit indices; use larger buffers",
				       path, (unsigned long long)n);
	return 0;
}

/* The superblock fields that are also geometry fields, one list for
 * both directions of the copy. */
#define GEOM_FIELDS(X) X(version) X(buf_size) X(nbufs) X(log_lanes) X(file_size) \
	X(ckpt_offset) X(log_offset) X(lane_size) X(buf_offset) X(uuid[0]) X(uuid[1]) \
	X(node_offset) X(node_size)

static void super_from_geom(struct store_super *sb, const struct paste_store_geom *g)
{
	memset(sb, 0, sizeof(*sb));
	memcpy(sb->magic, PASTE_STORE_MAGIC, 8);
	sb->header_size = sizeof(*sb);
#define TO_SUPER(f) sb->f = g->f;
	GEOM_FIELDS(TO_SUPER)
#undef TO_SUPER
}

void store_geom_from_super(struct paste_store_geom *g, const struct store_super *sb)
{
#define TO_GEOM(f) g->f = sb->f;
	GEOM_FIELDS(TO_GEOM)
#undef TO_GEOM
	g->meta_offset = g->node_size ? g->node_offset : 0;
}

static uint32_t super_crc(const struct store_super *sb)
{
	return paste_crc32c(0, sb, offsetof(struct store_super, crc));
}

/* The new directory entry is durable only once the directory is synced. */
static int fsync_parent(const char *path)
{
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = (dfd >= 0 && fsync(dfd) == 0) ? 0 : -errno;
	if (dfd >= 0)
		close(dfd);
	free(copy);
	return r;
}

/* On a disk, write the zeros too. fallocate leaves unwritten extents, and
 * the first write-back into one converts it to written: a metadata change,
 * so every group commit that reaches a fresh part of the store also waits
 * for a journal commit (on ext4 an fdatasync of 12 buffers and a page
 * takes 345 us on unwritten extents, 180 us on written ones, and pkvs in
 * fsync mode runs at the fdatasync's pace). Databases zero-fill their log
 * segments for the same reason (docs/results.md, "Zero-filled disk
 * stores"). Costs one sequential write of the file at creation (~2.7 s per
 * GiB on a virtio disk); tmpfs and DAX have no journal to wait for, and
 * are skipped. */
static int zero_fill(int fd, const char *path, uint64_t size)
{
	if (paste_durability_detect(path) != PASTE_DUR_FSYNC)
		return 0;
	size_t chunk = 1u << 20;
	uint8_t *zero = calloc(1, chunk);
	if (!zero)
		return -1;
	int r = 0;
	for (uint64_t off = 0; r == 0 && off < size; off += chunk) {
		size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
		r = pwrite(fd, zero, n, (off_t)off) == (ssize_t)n ? 0 : -1;
	}
	free(zero);
	return r;
}

/* A file for the new store that has no name yet: O_TMPFILE in path's
 * directory, or where the file system lacks it, a named temporary beside
 * path (*tmp then holds its name, to link and unlink). */
static int unnamed_create(const char *path, char *tmp, size_t cap)
{
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	int fd = open(dirname(copy), O_RDWR | O_TMPFILE | O_CLOEXEC, 0644);
	free(copy);
	tmp[0] = 0;
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd >= 0 ? fd : -errno;
	if ((size_t)snprintf(tmp, cap, "%s.new-XXXXXX", path) >= cap)
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0 || fchmod(fd, 0644) == 0)
		return fd >= 0 ? fd : -errno;
	int e = errno;
	unlink(tmp);
	close(fd);
	return -e;
}

/* Give the formatted file its name: -EEXIST when path exists (it is
 * never replaced). */
static int name_it(int fd, const char *tmp, const char *path)
{
	if (tmp[0])
		return link(tmp, path) == 0 ? 0 : -errno;
	if (linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno == EEXIST)
		return -EEXIST;
	char proc[40];   /* without CAP_DAC_READ_SEARCH, through /proc */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 ? 0 : -errno;
}

/* Create and format a new file, locked (LOCK_EX) for the caller. Returns
 * the fd, -EEXIST (err untouched) when the path exists, or another error.
 * Touches nothing that existed.
 *
 * The store is formatted in a file without a name (O_TMPFILE), synced and
 * locked, and only then linked under path, which fails if the name exists
 * by then. So a create that fails (a full disk at fallocate, an I/O error
 * at the sync, a crash) leaves no file behind, and a server that loses a
 * race to create one store finds a complete store, locked by the winner:
 * it says "in use", never "bad magic" or "truncated" as it would reading a
 * half-formatted file. (Locking before formatting under the final name
 * would settle the race too, but a failed or crashed create would still
 * leave a file the next start refuses.) Where the file system has no
 * O_TMPFILE the file is a named temporary beside path, linked the same
 * way and then unlinked; only a crash mid-format can leave that one. */
int store_create(const char *path, struct paste_store_geom *g, struct paste_error *err)
{
	if (access(path, F_OK) == 0)
		return -EEXIST;
	char tmp[PATH_MAX];
	int fd = unnamed_create(path, tmp, sizeof(tmp));
	if (fd < 0)
		return paste_error_set(err, fd, "%s: cannot create: %s", path, strerror(-fd));
	const char *step = "allocate space";
	errno = 0;
	/* fallocate reserves the blocks now, so a full disk fails here and not
	 * as SIGBUS on a mapped store later. The new blocks read as zeros,
	 * which is what formats the checkpoint slots and the log. */
	int r = fallocate(fd, 0, 0, (off_t)g->file_size);
	if (r < 0 && errno == EOPNOTSUPP)
		r = ftruncate(fd, (off_t)g->file_size);
	if (r == 0) {
		step = "write zeros";
		r = zero_fill(fd, path, g->file_size);
	}
	if (r == 0) {
		step = "get random bytes for the uuid";
		r = getrandom(g->uuid, sizeof(g->uuid), 0) == sizeof(g->uuid) ? 0 : -1;
	}
	if (r == 0) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		struct store_super sb;
		super_from_geom(&sb, g);
		sb.created_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		sb.crc = super_crc(&sb);
		uint8_t buf[STORE_PAGE] = {0};   /* the page holds only the superblock */
		memcpy(buf, &sb, sizeof(sb));
		step = "write the superblock";
		r = pwrite(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) ? 0 : -1;
	}
	if (r == 0) {
		step = "sync";
		r = fsync(fd);
	}
	if (r == 0) {
		step = "lock";
		r = flock(fd, LOCK_EX | LOCK_NB);
	}
	bool named = false;
	if (r == 0) {
		step = "name";
		if ((r = name_it(fd, tmp, path)) == 0)
			named = true;
		else if (r == -EEXIST)
			goto lost;   /* another creator won: its store is there */
		else
			errno = -r;
	}
	if (r == 0) {
		step = "sync the directory";
		if ((r = fsync_parent(path)) < 0)
			errno = -r;
	}
	if (tmp[0])
		unlink(tmp);
	if (r != 0) {
		int e = errno ? errno : EIO;
		if (named)
			unlink(path);   /* ours, complete and locked: nobody else uses it */
		close(fd);
		return paste_error_set(err, -e, "%s: cannot %s while creating: %s", path, step, strerror(e));
	}
	return fd;
lost:
	if (tmp[0])
		unlink(tmp);
	close(fd);
	return -EEXIST;
}

/* Validate the superblock of an open file; fill *g. Reads only. */
int store_validate(int fd, const char *path, const struct paste_store_config *cfg,
		   struct paste_store_geom *g, struct paste_error *err)
{
	struct stat stt;
	if (fstat(fd, &stt) < 0)
		return paste_error_set(err, -errno, "%s: cannot stat: %s", path, strerror(errno));
	if (!S_ISREG(stt.st_mode))
		return paste_error_set(err, -EINVAL, "%s: not a regular file", path);
	struct store_super sb;
	memset(&sb, 0, sizeof(sb));
	ssize_t n = pread(fd, &sb, sizeof(sb), 0);
	if (n < 0)
		return paste_error_set(err, -errno, "%s: cannot read the superblock: %s", path, strerror(errno));
	if (n == 0)   /* e.g. a crash between create and format: say so, touch nothing */
		return paste_error_set(err, -EBADMSG, "%s: empty file (truncated, 0 bytes): not a "
				       "complete paste store; remove it to create a new one", path);
	if (n < 8 || memcmp(sb.magic, PASTE_STORE_MAGIC, 8) != 0)
		return paste_error_set(err, -EINVAL, "%s: not a paste store (bad magic)", path);
	if ((size_t)n < offsetof(struct store_super, header_size))
		return paste_error_set(err, -EBADMSG, "%s: truncated: file has %zd bytes, less than a superblock",
				       path, n);
	if (sb.version == 1)
		return paste_error_set(err, -EPROTO, "%s: layout version 1, this build reads %u (it adds "
				       "a B+tree node area): run `paste-store --store %s upgrade` to convert "
				       "it in place (every record and buffer is kept; the upgraded store has "
				       "no node area, so it serves the log but not a tree)",
				       path, PASTE_STORE_VERSION, path);
	if (sb.version == 2)
		return paste_error_set(err, -EPROTO, "%s: layout version 2, this build reads %u (its tree "
				       "entries and records carry a value checksum, a tag and a word): run "
				       "`paste-store --store %s upgrade` to convert it", path,
				       PASTE_STORE_VERSION, path);
	if (sb.version != PASTE_STORE_VERSION)
		return paste_error_set(err, -EPROTO, "%s: layout version %u, this build reads %u",
				       path, sb.version, PASTE_STORE_VERSION);
	if ((size_t)n < sizeof(sb))
		return paste_error_set(err, -EBADMSG, "%s: truncated: file has %zd bytes, less than a superblock",
				       path, n);
	if (super_crc(&sb) != sb.crc)
		return paste_error_set(err, -EBADMSG, "%s: superblock checksum mismatch: corrupted", path);
	store_geom_from_super(g, &sb);
	const char *why = sb.header_size != sizeof(sb) ? "header size" : store_geom_check(g);
	if (why)
		return paste_error_set(err, -EBADMSG, "%s: inconsistent superblock geometry (%s): corrupted",
				       path, why);
	if ((uint64_t)stt.st_size < g->file_size)
		return paste_error_set(err, -EBADMSG, "%s: truncated: file has %llu bytes, superblock says %llu",
				       path, (unsigned long long)stt.st_size, (unsigned long long)g->file_size);
	const char *mis = "geometry mismatch";
	if (cfg->buf_size && cfg->buf_size != g->buf_size)
		return paste_error_set(err, -EINVAL, "%s: %s: store has %u-byte buffers, asked for %u",
				       path, mis, g->buf_size, cfg->buf_size);
	if (cfg->size && cfg->size != g->file_size)
		return paste_error_set(err, -EINVAL, "%s: %s: store has %llu bytes, asked for %llu",
				       path, mis, (unsigned long long)g->file_size, (unsigned long long)cfg->size);
	if (cfg->log_lanes && cfg->log_lanes != g->log_lanes)
		return paste_error_set(err, -EINVAL, "%s: %s: store has %u log lanes, asked for %u",
				       path, mis, g->log_lanes, cfg->log_lanes);
	if (cfg->log_size && lane_bytes(cfg->log_size, g->log_lanes) != g->lane_size)
		return paste_error_set(err, -EINVAL, "%s: %s: store has a %llu-byte log, asked for %llu",
				       path, mis, (unsigned long long)(g->lane_size * g->log_lanes),
				       (unsigned long long)cfg->log_size);
	if (cfg->node_size && (cfg->node_size == PASTE_STORE_NO_NODES ? 0 : cfg->node_size) != g->node_size) {
		char want[32] = "none";
		if (cfg->node_size != PASTE_STORE_NO_NODES)
			snprintf(want, sizeof(want), "%llu", (unsigned long long)cfg->node_size);
		return paste_error_set(err, -EINVAL, "%s: %s: store has a %llu-byte node area, asked for %s",
				       path, mis, (unsigned long long)g->node_size, want);
	}
	return 0;
}
