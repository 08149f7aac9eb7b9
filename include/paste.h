/*
 * paste.h - the whole public API of libpaste.
 *
 * paste brings PASTE (Honda et al., NSDI 2018) to stock Linux on io_uring:
 * one submission per event-loop pass serves every connection, receive
 * buffers are carved from a named file (the packet store), and an app makes
 * a request durable where it landed (flush + log record + hold) instead of
 * copying it. See docs/design.md for the data path and the on-disk layout.
 *
 * Conventions:
 *  - Functions that can fail return 0 (or a count) on success and a negative
 *    errno on failure; where a struct paste_error is passed, it receives a
 *    sentence a user can act on.
 *  - Buffer indices are uint32_t; PASTE_NO_BUF means "not a store buffer".
 *  - Nothing here allocates per request on the hot path.
 */
#ifndef PASTE_H
#define PASTE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

struct paste_error {
	int code;          /* negative errno, 0 when no error */
	char msg[256];     /* human-readable, names the file and the problem */
};

/* Fill *err (if non-NULL) with code and a printf-style message; returns code. */
int paste_error_set(struct paste_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Append a "; "-separated sentence to err->msg while it fits (err->code
 * unchanged; err may be NULL): recovery reports everything it noticed. */
void paste_error_append(struct paste_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Exit statuses of phttpd(1), pkvs(1) and paste-store(1), documented in
 * their EXIT STATUS sections; the systemd units do not restart on USAGE
 * or DAMAGED, which a restart cannot cure. */
enum paste_exit {
	PASTE_EXIT_OK = 0,
	PASTE_EXIT_FAILURE = 1,   /* a run-time failure (the store failed while serving) */
	PASTE_EXIT_USAGE = 2,     /* bad usage or configuration */
	PASTE_EXIT_DAMAGED = 3,   /* the store is damaged: a start refused (paste-store salvage) */
	PASTE_EXIT_IN_USE = 4,    /* the store is locked by another process (a creation race lost too) */
	PASTE_EXIT_IO = 5,        /* an I/O error at start: cannot create, allocate, read or sync */
};
/* The exit status for a start that failed with err, a negative errno from
 * opening the store, its persistence, log or tree: -EBADMSG (damage,
 * a bad superblock included) DAMAGED; -EBUSY IN_USE; what a setting, a
 * path or the layout version gets wrong (-EINVAL, -EPROTO, -ENODEV,
 * -EOPNOTSUPP, -ERANGE, -E2BIG, -ENAMETOOLONG, -ENOENT, -ENOTDIR) USAGE;
 * what the file system or device says (-EIO, -ENOSPC, -EDQUOT, -EFBIG,
 * -EROFS, -EACCES, -EPERM, -ENXIO, -ESTALE) IO; anything else FAILURE. */
int paste_exit_status(int err);

/* ------------------------------------------------------------------ */
/* Clock (lib/clock.c)                                                 */
/* ------------------------------------------------------------------ */

/* CLOCK_MONOTONIC in nanoseconds (a vDSO call, ~20 ns). */
uint64_t paste_clock_ns(void);
/* CLOCK_MONOTONIC_COARSE in milliseconds (~5 ns; resolution a few ms):
 * once-per-pass timestamps, timeouts. */
uint64_t paste_clock_coarse_ms(void);

/* ------------------------------------------------------------------ */
/* CRC32C (Castagnoli), SSE4.2 instruction when the CPU has it         */
/* ------------------------------------------------------------------ */

/* Continue a CRC32C over p[0..n). Start with crc = 0. Roughly 0.1 us per
 * KiB with SSE4.2; a table fallback is used on CPUs without it. */
uint32_t paste_crc32c(uint32_t crc, const void *p, size_t n);

/* SipHash-2-4 with a 128-bit output of data[0..len) under a 128-bit key
 * (lib/siphash.c): a digest whose collisions nobody without the key can
 * arrange. ~1.5 cycles per byte. */
void paste_siphash128(const uint64_t key[2], const void *data, size_t len, uint8_t out[16]);

/* ------------------------------------------------------------------ */
/* Packet store (lib/store.c, lib/store_format.c)                     */
/* ------------------------------------------------------------------ */
/*
 * A file holding a versioned superblock, a log area split into lanes, a
 * node area of 4 KiB pages for the B+tree (lib/btree*.c), and an array of
 * fixed-size packet buffers named by index. The file and the indices
 * survive restarts. Layout (version PASTE_STORE_VERSION) is in
 * docs/design.md. Opening validates everything and never reformats an
 * existing file. A store of an earlier layout (1: no node area; 2: tree
 * entries and records without a value CRC, tag and word) is refused with
 * a message naming paste_store_upgrade / `paste-store upgrade`.
 */

#define PASTE_STORE_MAGIC       "PASTESTO"   /* 8 bytes, no NUL stored */
#define PASTE_STORE_VERSION     3u
#define PASTE_STORE_NODE_PAGE   4096u        /* node area page size */
#define PASTE_STORE_NO_NODES    UINT64_MAX   /* node_size: no node area (no tree) */
#define PASTE_NO_BUF            UINT32_MAX
#define PASTE_DEFAULT_BUF_SIZE  2048u
#define PASTE_DEFAULT_STORE_SIZE (256ull << 20)
#define PASTE_DEFAULT_STORE_PATH "/dev/shm/paste.store"
#define PASTE_MAX_LANES         64u

struct paste_store;

struct paste_store_config {
	uint64_t size;       /* whole file size in bytes (create only); 0 = default */
	uint32_t buf_size;   /* bytes per buffer, power of two >= 512; 0 = default */
	uint32_t log_lanes;  /* independent log lanes (one per thread); 0 = 2 */
	uint64_t log_size;   /* bytes for the whole log area; 0 = auto (64 B per buffer per lane, >= 1 MiB) */
	uint64_t node_size;  /* B+tree node area, bytes (a multiple of 4096, >= 3 pages: two meta
			      * pages + tree pages); 0 = auto (1/8 of the file, shrunk to leave
			      * 64 buffers, none below 3 pages); PASTE_STORE_NO_NODES = none */
};

enum paste_store_open_flags {
	PASTE_STORE_CREATE = 1,  /* create (and format) the file if it does not exist */
	PASTE_STORE_EXCL   = 2,  /* with CREATE: fail if it exists */
	PASTE_STORE_RDONLY = 4,  /* map read-only (inspection tools) */
	/* One thread at a time takes and drops references, allocates and
	 * appends to the log (handoffs between threads ordered by the caller,
	 * as pthread_create and pthread_join order them): counts change
	 * without locked instructions and the log's lanes take no lock. */
	PASTE_STORE_ONE_THREAD = 8,
};

/* Geometry as stored in the superblock. */
struct paste_store_geom {
	uint32_t version;
	uint32_t buf_size;
	uint32_t nbufs;
	uint32_t log_lanes;
	uint64_t file_size;
	uint64_t log_offset;   /* byte offset of lane 0 in the file */
	uint64_t lane_size;    /* bytes per lane */
	uint64_t ckpt_offset;  /* byte offset of the per-lane checkpoint slots */
	uint64_t buf_offset;   /* byte offset of buffer 0 */
	uint64_t uuid[2];      /* random at format time */
	uint64_t node_offset;  /* byte offset of the node area (after the lanes) */
	uint64_t node_size;    /* its bytes (0: no node area, e.g. upgraded from version 1) */
	uint64_t meta_offset;  /* the tree's two meta slots: node pages 0 and 1 (0 if none) */
};

/* Open (and with PASTE_STORE_CREATE, create) a store. The mapping is
 * MAP_SHARED and prefaulted (MAP_POPULATE), so first-touch faults do not
 * land on the hot path. An existing file is validated: bad magic, another
 * layout version, a geometry that disagrees with cfg (when cfg sets it), a
 * bad superblock checksum or a truncated file each give a distinct message
 * and -EINVAL/-EPROTO/-EBADMSG. Never reformats an existing file. A new
 * file gets its name only once it is formatted, synced and locked: a
 * failed create leaves no file, and of two opens creating one store at
 * once the loser finds the winner's, locked (-EBUSY, "in use"). A writable
 * open of a store another holds is -EBUSY. */
int paste_store_open(struct paste_store **out, const char *path,
		     const struct paste_store_config *cfg, int flags,
		     struct paste_error *err);
void paste_store_close(struct paste_store *st);

/* Make the closed store at path, of layout version 1 or 2, version 3,
 * keeping every key, log record and buffer index. Without a node area
 * (version 1, or 2 created without one) only the superblock is rewritten,
 * in place (one 112-byte write + fsync): the store serves the log, not a
 * tree. A version-2 store with a node area is converted in a copy,
 * path.upgrade-XXXXXX beside it: the live keys (the tree of the newest
 * valid meta slot and its log records after the checkpoint, replayed) are
 * written there as a version-3 tree (paste_btree_set: each value stays in
 * its buffers, tag 0, no word), the old tree records leave the log,
 * records that are not the tree's keep their LSNs and buffers; the copy is
 * reopened and checked, synced and renamed over path. A crash at any
 * point leaves path the old store or the whole new one; a copy a crash
 * left is removed by the next upgrade. Costs a read and a write of the
 * file and room for a second one. Takes the exclusive lock for the whole
 * time (-EBUSY while a server holds the store). Returns 0 with err->msg
 * saying what was done; -EALREADY when it is version 3 already; -EPROTO
 * for another version; -EINVAL/-EBADMSG for a file that is not a sound
 * version-1 or -2 store or a damaged tree (a page failing its CRC or
 * checks, both meta slots bad); -ENAMETOOLONG for a key version 3's record
 * header leaves no room for; -ENOSPC for a tree that does not fit the node
 * area, or a file system without room for the copy; -EMLINK for a file
 * with other hard links. Nothing is written when it fails. */
int paste_store_upgrade(const char *path, struct paste_error *err);

const struct paste_store_geom *paste_store_geom(const struct paste_store *st);
const char *paste_store_path(const struct paste_store *st);
int paste_store_fd(const struct paste_store *st);
uint8_t *paste_store_base(const struct paste_store *st);   /* mapping start */

/* Index <-> address. paste_store_buf returns NULL for an index out of
 * range; paste_store_index returns PASTE_NO_BUF for an address outside the
 * buffer area (any byte inside a buffer maps to that buffer). */
uint8_t *paste_store_buf(const struct paste_store *st, uint32_t idx);
uint32_t paste_store_index(const struct paste_store *st, const void *addr);

/* Copy bytes [from, from + cap) of a value held as extents into out (fewer
 * when the value ends first); returns how many were copied. */
struct paste_extent;
size_t paste_store_read(const struct paste_store *st, const struct paste_extent *ext, uint32_t n,
			uint64_t from, void *out, size_t cap);

/* An append point (lib/append.c): copies that must live in store buffers
 * (small values, values that arrived in DRAM, the cleaner's moves) are
 * packed one after another, 8-byte aligned, so a 100-byte value takes
 * about 100 bytes and not a buffer. It holds one reference on the buffer
 * it fills (paste_append_close drops it). One thread uses one. */
struct paste_append {
	uint32_t buf, used;
};
#define PASTE_APPEND_INIT { PASTE_NO_BUF, 0 }
/* Room for len bytes as extents ext[0..*n) (at most max, never more than
 * ceil(len / buf_size): a range that would need one more at the append
 * point starts in a fresh buffer), each holding a reference of the
 * caller's. A fresh buffer is taken only while more than floor are
 * free. -ENOSPC (nothing held), -E2BIG (more than max extents). */
int paste_append_reserve(struct paste_store *st, struct paste_append *a, uint64_t len,
			 uint32_t floor, struct paste_extent *ext, uint32_t max, uint32_t *n);
/* paste_append_reserve, and the bytes src[0..len) copied there. */
int paste_append_copy(struct paste_store *st, struct paste_append *a, const void *src,
		      uint64_t len, uint32_t floor, struct paste_extent *ext, uint32_t max,
		      uint32_t *n);
void paste_append_close(struct paste_store *st, struct paste_append *a);

/* Buffer ownership. Every buffer has an in-DRAM reference count (0 = free).
 * After open every count is 0 and the free list is empty; recovery (see
 * paste_wal_open) takes references for buffers that live records point at,
 * then paste_store_start builds the free list from the buffers still at 0.
 * Before paste_store_start, paste_store_alloc hands out nothing (returns 0).
 * The free list is shared by all threads (a mutex; ports take and return
 * buffers in batches to keep it off the per-request path). */
int paste_store_start(struct paste_store *st);

/* Take up to n free buffers (count set to 1). Returns how many were taken. */
uint32_t paste_store_alloc(struct paste_store *st, uint32_t *idx, uint32_t n);
/* Add a reference (hold). Returns the new count. */
uint32_t paste_store_ref(struct paste_store *st, uint32_t idx);
/* Drop a reference. At 0 the buffer goes back to the free list unless
 * keep_if_free is true, in which case the caller keeps it (count 0, not on
 * the free list) to repost it without touching the shared list.
 * Returns the new count. */
uint32_t paste_store_unref(struct paste_store *st, uint32_t idx, bool keep_if_free);
uint32_t paste_store_refcount(const struct paste_store *st, uint32_t idx);
uint32_t paste_store_nfree(const struct paste_store *st);
/* Buffers with count > 0 (posted in port rings, in a batch, or held). */
uint32_t paste_store_nheld(const struct paste_store *st);

/* The failed state. PostgreSQL's lesson: after a failed fsync the kernel
 * may have dropped the dirty pages and marked them clean, so a later
 * fdatasync that returns 0 proves nothing about them, and the error is
 * reported once per open file description, so another thread may never
 * see it. Hence the first failed flush, fence or sync of a store (or a
 * store file found removed, replaced or truncated) puts the whole store
 * into a failed state that every thread and every later barrier sees:
 * no durability epoch advances again in any thread, so nothing not
 * covered by an earlier successful barrier is ever acknowledged. The
 * state lasts until the store is closed; a restart recovers from what
 * the file really holds (docs/design.md, "After an I/O error").
 *
 * paste_store_failed returns 0, or the negative errno of the first
 * failure, with *why (if non-NULL) pointing at the sentence its
 * paste_store_fail was given (the operation and the error; the line on
 * stderr adds the store's path). One atomic load: cheap enough for
 * every request. paste_store_fail enters the state (the first caller's
 * error and sentence win) and prints the sentence once to stderr. */
int paste_store_failed(const struct paste_store *st, const char **why);
void paste_store_fail(struct paste_store *st, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Check that the file behind the mapping is still the store: not removed
 * (st_nlink 0), replaced (the path names another inode) or truncated
 * (shorter than the mapping: touching the lost pages raises SIGBUS).
 * Each finding fails the store. Costs a clock read; at most once per
 * `interval_ms` (0: every call) it also costs an fstat and a stat.
 * Returns paste_store_failed(st, NULL). */
int paste_store_watch(struct paste_store *st, uint32_t interval_ms);

/* What backs the store, as the durability PASTE_DUR_AUTO means for it:
 * PMEM on a DAX file system, EMULATED on tmpfs, FSYNC elsewhere (the
 * answer paste_durability_detect gave for its path at open). */
enum paste_durability paste_store_medium(const struct paste_store *st);
/* True when the store is mapped with MAP_SYNC (a DAX file system):
 * cache-line write-back + sfence then persist data and metadata. */
bool paste_store_map_sync(const struct paste_store *st);

/* Read-only opens take a shared lock when they can. True when they could
 * not: a server holds the store, and its bytes may change under the
 * reader (inspection tools must not report damage then). */
bool paste_store_in_use(const struct paste_store *st);

/* Did this open create the file (PASTE_STORE_CREATE found none)? A start
 * that fails after creating its store calls paste_store_unlink_created
 * before paste_store_close, so a failed start leaves no file behind (the
 * next start would meet a store of the failed one's geometry). It unlinks
 * the path only while it names this store's file, which this open holds
 * locked. 0, -EPERM when this open did not create it, -ESTALE when the path
 * names another file now, or the unlink's error. */
bool paste_store_created(const struct paste_store *st);
int paste_store_unlink_created(struct paste_store *st);

/* Log area of one lane: its bytes, and its two checkpoint slots. */
uint8_t *paste_store_lane(const struct paste_store *st, uint32_t lane, uint64_t *len);
uint8_t *paste_store_ckpt(const struct paste_store *st, uint32_t lane, uint32_t slot);
#define PASTE_CKPT_SLOT_SIZE 64u
/* The node area (owned by the B+tree): its first byte and *pages (pages of
 * PASTE_STORE_NODE_PAGE bytes), or NULL and 0 when the store has none. */
uint8_t *paste_store_nodes(const struct paste_store *st, uint32_t *pages);

/* ------------------------------------------------------------------ */
/* Persistence (lib/persist.c)                                         */
/* ------------------------------------------------------------------ */

enum paste_durability {
	PASTE_DUR_AUTO = 0,   /* from the file system: DAX -> pmem, tmpfs -> emulated, else fsync */
	PASTE_DUR_NONE,       /* nothing is flushed; acks are not durable */
	PASTE_DUR_EMULATED,   /* cache-line write-back + sfence on DRAM (optional latency) */
	PASTE_DUR_PMEM,       /* cache-line write-back + sfence on a DAX mapping */
	PASTE_DUR_FSYNC,      /* dirty ranges made durable by fdatasync (group commit) */
};

const char *paste_durability_name(enum paste_durability d);
/* Parse "auto|none|emulated|pmem|fsync"; -EINVAL otherwise. */
int paste_durability_parse(const char *s, enum paste_durability *out);
/* What PASTE_DUR_AUTO resolves to for this path (statfs magic, DAX flag;
 * a path not yet created is judged by its directory). lib/store_medium.c */
enum paste_durability paste_durability_detect(const char *path);

/* One per thread: it tracks what that thread flushed since its last fence. */
struct paste_persist;

struct paste_persist_config {
	enum paste_durability mode;   /* AUTO is resolved from the store path */
	uint64_t pm_latency_ns;       /* emulated: busy wait per fence (PASTE: 10000) */
	/* fsync: how many persist objects (threads) will write this store at
	 * once; 0 means 1. Direct writes go in file-system blocks (4 KiB on
	 * ext4); where one is larger than a buffer two threads could write
	 * one block, so with writers > 1 the first open picks the page cache
	 * instead, and a second direct writer is refused. */
	uint32_t writers;
};

int paste_persist_open(struct paste_persist **out, struct paste_store *st,
		       const struct paste_persist_config *cfg, struct paste_error *err);
void paste_persist_close(struct paste_persist *p);
enum paste_durability paste_persist_mode(const struct paste_persist *p);
/* Which write-back was chosen: "clwb", "clflushopt", "clflush"; in fsync
 * mode "direct writes" or "page cache"; else "none". */
const char *paste_persist_flush_insn(const struct paste_persist *p);

/* Fault injection (test builds only: libpaste_shim, -DPASTE_PERSIST_SHIM).
 * PASTE_FAULT="OP:N[+][:ERRNO][,...]" makes the Nth call (process-wide,
 * counted from 1; with '+' the Nth and every later one) of OP fail with
 * ERRNO (EIO by default; ENOSPC also understood). OP is flush (the store
 * fails at that flush), fence (sfence path), fdatasync (the synchronous
 * fence in fsync mode) or commit (the end of an asynchronous group commit);
 * for the last two the writes and the fdatasync run, and their result is
 * replaced. A production build ignores the variable. */

/* Start writing back [addr, addr+len) without waiting (clwb/clflushopt per
 * 64-byte line; fsync mode records the range, rounded out to the disk's
 * direct-I/O block, for the next commit to write). addr must lie in
 * the store mapping. Costs ~5 ns per line on DRAM. */
void paste_persist_flush(struct paste_persist *p, const void *addr, size_t len);
/* True when something was flushed since the last fence/commit. */
bool paste_persist_pending(const struct paste_persist *p);
/* Make everything flushed so far durable, synchronously: sfence (+ the
 * emulated latency), or fdatasync in fsync mode. Used by the epoll engine
 * before each write() and by rare operations (truncation). Returns 0, or
 * a negative errno when the store is (now) failed: then nothing flushed
 * since the last successful barrier may be acknowledged, ever. In fsync
 * mode each persist object syncs through a descriptor of its own, opened
 * with the object, so every thread sees a writeback error. */
int paste_persist_fence(struct paste_persist *p);

/* Durability epochs, for readers in other threads. Every flush belongs
 * to the persist object's open epoch (paste_persist_epoch); a successful
 * fence or group commit closes it and publishes it as durable
 * (paste_persist_durable, an atomic load any thread may do). A record
 * tagged with epoch e at append time is durable once
 * e <= paste_persist_durable(p). NONE mode reports everything durable
 * (UINT64_MAX). After a failure (see paste_store_failed) nothing is ever
 * published again. */
uint64_t paste_persist_epoch(const struct paste_persist *p);
uint64_t paste_persist_durable(const struct paste_persist *p);

/* Asynchronous group commit for fsync mode, driven by the uring port:
 * begin_commit moves what is pending into commit `ticket`, starts its I/O
 * (direct writes of the flushed blocks, then fdatasync; or fdatasync of
 * the page cache: see PASTE_DUR_FSYNC in man paste_persist) in the persist
 * object's own io_uring, and returns an eventfd that becomes readable when
 * that I/O ended; or -ENODATA if nothing is pending, -EBUSY while a commit
 * is in flight, -EOPNOTSUPP without io_uring (refused by sysctl or seccomp:
 * fences only, fdatasync of the page cache), or the store's failure. The
 * caller reads the eventfd (8 bytes; the uring port queues the read in its
 * ring) and then calls end_commit with the read's result. Only one commit
 * is in flight at a time per persist object. */
int paste_persist_begin_commit(struct paste_persist *p, uint64_t *ticket);
/* res: the eventfd read's result; res < 0 fails the store, as does a
 * failed write or fdatasync of the commit. Returns 0 when the commit made
 * its epoch durable, else the store's failure (negative errno). */
int paste_persist_end_commit(struct paste_persist *p, uint64_t ticket, int res);

/* ------------------------------------------------------------------ */
/* Write-ahead log (lib/wal.c)                                         */
/* ------------------------------------------------------------------ */
/*
 * Records live in the store's log lanes and point at packet buffers that
 * hold the data (zero copy). Each record carries its LSN, an epoch, the
 * extents, the data length, a CRC32C of the data and a CRC32C of the record
 * itself, so a torn or stale record is detected. Each lane has a persisted
 * checkpoint (head offset, head LSN) so recovery does not scan the whole
 * area. One lane is written by one thread only, through one persist object.
 *
 * Visibility: readers (lookup, read, info's counts) and truncation see a
 * record only once it is durable, i.e. once the persist object that
 * appended it has published the epoch the record was flushed in
 * (paste_persist_durable; see "Durability epochs" above). Before that no
 * client can hold an ack for it, so from every client's view it does not
 * exist yet. Recovered records are durable. foreach and check, for tools,
 * see every record the log holds.
 */

struct paste_wal;

struct paste_extent {
	uint32_t buf;   /* store buffer index */
	uint32_t off;   /* offset inside the buffer */
	uint32_t len;   /* bytes */
};

#define PASTE_WAL_MAX_EXTENTS 64u

struct paste_wal_info {
	uint64_t first_lsn;   /* lowest visible (durable) LSN, 0 if none */
	uint64_t last_lsn;    /* highest visible (durable) LSN, 0 if none */
	uint64_t records;     /* visible live records */
	uint64_t bytes;       /* data bytes of visible live records */
	uint64_t log_used;    /* log-area bytes in use, all lanes, pending records too */
	uint64_t log_size;    /* log-area bytes, all lanes */
	uint32_t epoch;
	uint64_t pending;     /* records appended but not durable yet (not in records) */
};

/* Recover every lane (scan from the checkpoint, stop at the first invalid
 * record), take buffer references for live records, then the caller calls
 * paste_store_start. Deletes no live record. Where a lane stopped at a
 * torn tail (nothing durable past it), err->msg says so (the return value
 * is still 0). A lane stopped by damage, i.e. with records past the stop
 * that were durable (their durable marks or the lane's checkpoint say so),
 * or whose checkpoint slots are both damaged, is reported the same way by
 * a read-only open; a writable one (p != NULL) refuses with -EBADMSG and a
 * sentence naming the store, the lane, the offset and the LSNs at stake,
 * having written nothing (docs/design.md, "Damage"). With p != NULL the
 * new epoch is then persisted through p (paste_wal_begin: appends need
 * that), and where a lane stopped at a torn record, that record's magic is
 * zeroed in the same fence, so it cannot come back once its free buffers
 * are reused (a later open sees a clean end there). p == NULL opens
 * read-only (tools): no byte of the store is written and
 * appends/truncation fail with -EROFS. */
int paste_wal_open(struct paste_wal **out, struct paste_store *st,
		   struct paste_persist *p, struct paste_error *err);
/* paste_wal_open in two steps, for a caller with more to check before the
 * store may be written (pkvs's tree: a damaged tree refuses the start, and
 * nothing may be written then): paste_wal_recover recovers and refuses as
 * paste_wal_open does but writes nothing (appends and truncation fail with
 * -EROFS until begun); paste_wal_begin persists the epoch and seals the
 * torn stops through the p given to recover (0 at once when begun already;
 * on failure the log stays unbegun). paste_btree_open begins a log it is
 * given unbegun once the tree has passed its checks. */
int paste_wal_recover(struct paste_wal **out, struct paste_store *st,
		      struct paste_persist *p, struct paste_error *err);
int paste_wal_begin(struct paste_wal *w, struct paste_error *err);
void paste_wal_close(struct paste_wal *w);

/* Append a record in `lane` for the data at ext[0..n). Takes a reference on
 * every buffer named (the caller keeps its own), flushes the data and the
 * record through p (no fence: the caller fences once per batch) and tags
 * it with paste_persist_epoch(p): it becomes visible once p publishes that
 * epoch. p must stay open while the log is. Use one p per lane.
 * Returns 0 and *lsn, -ENOSPC when the lane is full (truncate first),
 * -EINVAL for bad extents, -E2BIG for n > PASTE_WAL_MAX_EXTENTS. */
int paste_wal_append(struct paste_wal *w, uint32_t lane, struct paste_persist *p,
		     const struct paste_extent *ext, uint32_t n, uint64_t *lsn);

/* Find a live, durable record. Returns 0 and its extents (valid until the
 * record is truncated), -ENOENT if absent, truncated, or not durable yet
 * (appended, but its appender's fence or group commit has not completed:
 * it has no ack yet; after a store failure it never gets one). */
int paste_wal_lookup(struct paste_wal *w, uint64_t lsn,
		     const struct paste_extent **ext, uint32_t *n, uint32_t *len);

/* Like paste_wal_lookup (same -ENOENT for a record not durable yet), for
 * a reader that may race a truncation in another thread: copies the
 * extents into ext[PASTE_WAL_MAX_EXTENTS] and takes a reference on each
 * buffer (the caller drops them with paste_store_unref), both under the
 * lane lock. */
int paste_wal_read(struct paste_wal *w, uint64_t lsn, struct paste_extent *ext,
		   uint32_t *n, uint32_t *len);

/* Drop every durable record with LSN <= upto in every lane: persist the
 * new checkpoints (flush + fence through p), then release the buffers.
 * A lane stops at its first record that is not durable yet (it stays, as
 * does everything after it). Returns the number of records dropped, or a
 * negative errno: the store's failure (then nothing is written, or the
 * fence failed: the records stay live and their buffers held). */
int64_t paste_wal_truncate(struct paste_wal *w, uint64_t upto, struct paste_persist *p);

void paste_wal_info(const struct paste_wal *w, struct paste_wal_info *out);

/* Visit live records in LSN order (for dump/check), durable or not: for
 * tools on a closed store, where all are. Stop when cb returns non-zero. */
typedef int (*paste_wal_visit_fn)(void *arg, uint64_t lsn, uint32_t lane,
				  const struct paste_extent *ext, uint32_t n,
				  uint32_t len, uint32_t data_crc);
int paste_wal_foreach(struct paste_wal *w, paste_wal_visit_fn cb, void *arg);

/* Verify every live record: extents in range, data CRC matches.
 * Returns the number of damaged records (0 = clean), problems in err. */
int paste_wal_check(struct paste_wal *w, struct paste_error *err);

/* Salvage (paste-store salvage): what a damaged store still holds, kept
 * explicitly, on a copy. Reports come as lines to say (arg its first
 * argument): what was kept, and what was lost. */
typedef void (*paste_salvage_fn)(void *arg, const char *line);
/* Rebuild every damaged lane (paste_wal_open's rule) of a store opened
 * writable and not started: the records before the damage and every chain
 * of valid records past it that was durable are laid out again from the
 * lane's start, without the damaged bytes between; the rest of the lane is
 * zeroed and its checkpoint rewritten, all made durable through p. A torn
 * tail is left to the next open, which cuts it as usual. For each gap say
 * hears its bytes, the LSNs it lay between and those of the records whose
 * header survived; for each lane, what was kept. Returns the number of
 * lanes rebuilt (0: the log was not damaged), or a negative errno (err).
 * The store's reference counts are as before the call. */
int paste_wal_salvage(struct paste_store *st, struct paste_persist *p, paste_salvage_fn say,
		      void *arg, struct paste_error *err);

/* ------------------------------------------------------------------ */
/* B+tree (lib/btree.c, btree_api.c, btree_page.c, btree_ckpt.c,       */
/*         btree_recover.c)                                            */
/* ------------------------------------------------------------------ */
/*
 * A persistent ordered map from byte-string keys (1..PASTE_BTREE_MAX_KEY
 * bytes, ordered by memcmp, a prefix first) to values that stay where they
 * landed: extents of held packet buffers, zero copy. The tree lives in the
 * store's node area (4 KiB pages) and is owned by one thread.
 *
 * Durability. The write-ahead log is the commit point: set, del and clear
 * append one log record (through the tree's persist object and lane; no
 * fence) and then change the tree in DRAM-speed page writes. The caller's
 * batch barrier (the port's one fence or group commit, or
 * paste_persist_fence) makes every record of the batch durable at once, so
 * replies are sent PASTE_SEND_DURABLE, exactly as for paste_wal_append.
 * The tree itself is persisted by copy-on-write checkpoints (LMDB-style:
 * the pages written since the last one are flushed and fenced, then one of
 * two checksummed meta slots names the new root and the checkpoint LSN,
 * fenced, then the log is truncated to that LSN). Recovery reads the
 * newest valid meta, walks the tree and replays the log records after the
 * checkpoint LSN: its cost is bounded by the checkpoint interval, not by
 * history (1 M keys: see paste_btree_open).
 *
 * Buffer references. The tree holds one reference per value extent; every
 * log record holds its own (paste_wal_append). The references of a value
 * that an overwrite, del or clear replaced are dropped only once that
 * change is durable (paste_btree_maintain), so after a crash at any
 * instant the recovered tree references no freed or reused buffer.
 *
 * Reads (get, cursors) in the owning thread see every applied change,
 * durable or not; the server makes any reply that depends on them
 * durable-gated (PASTE_SEND_DURABLE), which is why one owning thread
 * suffices. Extents returned by get and cursors stay valid until the next
 * paste_btree_maintain or paste_btree_close.
 *
 * One tree per store: its checkpoints truncate the whole log
 * (paste_wal_truncate), so the store's other lanes must not hold records
 * the tree does not cover. The record format is the tree's own, carried in
 * ordinary log records: extents 0..n-1 are the value, and the last extent
 * is a header the tree copies densely into a store buffer it holds (magic,
 * op, lengths, tag, word, the value's CRC32C, key), so the log's CRC of the
 * record continues the value's own (paste_btree_record_parse reads it
 * back).
 */

struct paste_btree;

#define PASTE_BTREE_MAX_KEY     512u
#define PASTE_BTREE_MAX_EXTENTS (PASTE_WAL_MAX_EXTENTS - 1u)  /* 63: the record's last
							       * extent is the tree's header,
							       * so a body for a value must be
							       * collected with max_held <=
							       * 63 buffers */
#define PASTE_BTREE_MAX_HEIGHT  40u   /* a tree of 2^32 pages is at most 33 high */

struct paste_btree_config {
	uint32_t lane;          /* log lane the tree appends to (its thread's) */
	uint32_t ckpt_records;  /* maintain checkpoints after this many records (0: 65536) ... */
	uint32_t ckpt_ms;       /* ... or this long after the first record since the last
				 * checkpoint (0: 1000) ... */
	uint32_t ckpt_log_pct;  /* ... or once the tree's records since fill this % of the
				 * lane (0: 50; 1..90) ... or once fewer than an eighth of the
				 * node area's pages are free */
	bool no_point_index;    /* no DRAM point index: every lookup descends the tree
				 * (saves 85-170 bytes of DRAM per key of <= 32 bytes) */
	/* Keys the point index leaves out (NULL: none): those for which it
	 * returns true are found by descents, and cost no DRAM and no index
	 * probe when written. A pure function of the key's bytes. pkvs leaves
	 * out a list's elements, which walks read and pops delete. */
	bool (*point_skip)(const uint8_t *key, uint32_t klen);
	/* The cleaner (paste_btree_maintain): when fewer than clean_free_pct %
	 * of the store's buffers are free (0: 20; 100: always), buffers whose
	 * live value bytes are under clean_live_pct % of their size (0: 80)
	 * are emptied, the best by LFS's cost-benefit first, by copying their
	 * live values densely into fresh buffers, at most clean_step_bytes
	 * (0: 256 KiB) copied and 4096 keys looked at per call; a checkpoint
	 * then frees them. no_clean turns it off. */
	uint32_t clean_free_pct, clean_live_pct, clean_step_bytes;
	bool no_clean;
	/* Pages a put leaves free for deletes (paste_btree_deleting), so a
	 * tree that fills can still delete: delete_reserve_pct % of the node
	 * area, at least a delete group's or a range delete's worth (0: no
	 * reserve, every page for any change). */
	uint32_t delete_reserve_pct;
};

struct paste_btree_info {
	uint64_t keys;
	uint32_t height;             /* 0: empty */
	uint32_t pages_used;         /* pages in the tree */
	uint32_t pages_total;        /* tree pages in the node area (all but the 2 meta pages) */
	uint32_t pages_free;         /* allocatable now */
	uint32_t pages_pending;      /* replaced since the last checkpoint: free after the next */
	uint32_t pages_dirty;        /* written since the last checkpoint */
	uint64_t ckpt_seq;           /* meta sequence of the last checkpoint (0: none yet) */
	uint64_t ckpt_lsn;           /* every record <= it is in the checkpointed tree */
	uint64_t ckpt_gen;           /* its generation */
	uint64_t last_lsn;           /* newest record applied */
	uint64_t checkpoints;        /* done by this open */
	uint64_t records_since;      /* appended since the last checkpoint */
	uint64_t releases_waiting;   /* buffer references waiting for a change to be durable */
	uint64_t replayed;           /* log records applied at open */
	uint64_t replay_skipped;     /* log records after the checkpoint that were not the tree's */
	uint64_t replay_dropped;     /* records of groups without their COMMIT (cut short) */
	uint64_t recovery_ns;        /* paste_btree_open: meta + walk + replay + point index */
	uint64_t walk_ns;            /* of which the walk of the checkpointed tree */
	uint64_t point_keys;         /* keys in the DRAM point index (0: none built) */
	uint64_t point_bytes;        /* its DRAM */
	uint64_t hinted_sets;        /* overwrites by this open that went straight to their leaf
				      * entry by the point index's hint, with no descent */
	uint64_t hinted_dels;        /* deletes by this open that did (the leaf kept enough
				      * entries not to merge) */
	uint64_t descents;           /* searches root to leaf by this open (a lookup's or a
				      * cursor's kept path answers the change that follows) */
	uint64_t leaf_descents;      /* of which searched only the leaf of one of the last two
				      * (the key between its bounding separators) */
	uint32_t header_buf;         /* the buffer the tree copies record headers into, holding
				      * one reference (PASTE_NO_BUF: none yet) */
	/* Space: the bytes of the values the tree holds (live), the buffers
	 * they lie in, and the cleaner's work since open. */
	uint64_t live_bytes;
	uint32_t live_bufs;          /* buffers holding at least one live value byte */
	uint64_t clean_cycles;       /* victim selections */
	uint64_t clean_victims;      /* buffers chosen to be emptied */
	uint64_t clean_moved;        /* values copied to fresh buffers */
	uint64_t clean_moved_bytes;
	uint64_t clean_damaged;      /* values left in place: their bytes fail their CRC32C */
	uint64_t clean_ns;           /* time spent cleaning */
	uint64_t space_checkpoints;  /* checkpoints run because free buffers were short */
	uint32_t clean_buf;          /* the buffer the cleaner copies into, holding one
				      * reference (PASTE_NO_BUF: none) */
};

/* Open the tree of a store whose log is open (paste_wal_open) and whose
 * store is not started yet (paste_store_start comes after: the tree takes
 * references before the free list is built). Recovery: the newest valid
 * meta slot; a walk of the checkpointed tree that checks every page (CRC,
 * magic, page number, generation, level, bounds, key order against the
 * parent's separators, extents inside the buffer area, fill, key count) and
 * takes one buffer reference per value extent; the free-page set is what
 * the walk did not reach; then every live log record with LSN > the
 * checkpoint LSN (paste_wal_foreach, LSN order, any lane) whose last
 * extent is a tree header is applied (SET/DEL/CLEAR; replaced values' references
 * are dropped at once: replayed records are durable). Records that are not
 * the tree's are skipped. A writable open (p != NULL) then truncates log
 * records the checkpoint already covers. p == NULL opens read-only for
 * tools: the replay goes to a private copy-on-write mapping of the node
 * area, and not one byte of the store is written.
 * Cost: the walk is linear in the checkpointed tree (~2.3 us per page with
 * its checks: 1 M keys of 16 bytes, 16 K pages, take ~37 ms), the replay
 * ~1 us per record, so recovery is bounded by the checkpoint interval, not
 * by history: 1 M keys with a 20 000-record tail recover in ~57 ms, and
 * a writable open's point index adds 0.1-0.2 s (146-258 ms in all)
 * (tests/unit/test_btree_recover.c; docs/results.md, "Recovery time";
 * docs/design.md, "The B+tree"). Errors (err names the store and the problem):
 * -ENODEV no node area (a store upgraded from version 1, or created with
 * PASTE_STORE_NO_NODES); -EBADMSG a damaged tree (a meta slot that passes
 * its CRC but names a page that fails its checks: the tree is not opened,
 * nothing is written); -ENOSPC the replay ran out of node pages; -EINVAL
 * bad arguments (cfg->lane out of range); -ENOMEM. A torn or damaged meta
 * slot with a valid older one is not an error: the older one is used and
 * err->msg says so (the return value is 0). */
int paste_btree_open(struct paste_btree **out, struct paste_store *st, struct paste_wal *w,
		     struct paste_persist *p, const struct paste_btree_config *cfg,
		     struct paste_error *err);
/* Salvage the tree of a store whose log was salvaged (paste_wal_salvage)
 * and recovered with p (paste_wal_recover), its store not started: what
 * paste-store salvage does after the log. A tree that opens keeps every
 * key but those whose value fails its CRC32C (deleted, each said). A
 * damaged one (-EBADMSG from paste_btree_open: a page that fails its
 * checks, both meta slots damaged) is rebuilt: the keys of the
 * checkpointed tree's leaves that pass their checks (with both meta slots
 * damaged, of the newest tree whose pages do), under a fresh empty meta
 * into which the whole log is replayed, each kept key put back unless the
 * log holds it newer; say hears every page lost with the key range it
 * held, every damaged value's key, and the counts. Starts the store,
 * checkpoints (truncating the log) and closes the tree. Returns 0 (intact),
 * 1 (repaired), or a negative errno (err). */
int paste_btree_salvage(struct paste_store *st, struct paste_wal *w, struct paste_persist *p,
			const struct paste_btree_config *cfg, paste_salvage_fn say, void *arg,
			struct paste_error *err);
/* Free the DRAM state. Drops the header buffer's reference and the
 * references whose change is durable; the tree's own value references stay
 * with the store (the durable tree still names those buffers). Does not
 * checkpoint: the log holds what the last checkpoint does not. */
void paste_btree_close(struct paste_btree *t);

/* Set key to the value at val[0..n) (n <= PASTE_BTREE_MAX_EXTENTS, 0 for an
 * empty value; each extent inside one buffer). Appends one log record
 * (header + value extents; flushed, no fence: durable with the caller's
 * next barrier), then applies it: the tree takes its own reference on each
 * value buffer (the caller keeps and later drops its own), and the old
 * value's references, if any, are dropped once this record is durable.
 * *lsn (if non-NULL) gets the record's LSN. Cost: the record (a header
 * copy of ~12 + klen bytes, the log's CRC of the value bytes), a descent,
 * and on the first change of a page since the last checkpoint a copy of
 * it (and of its path to the root); ~1-2 us for small values.
 * When the lane, the node area or the store's buffers (for header
 * buffers) run short, it checkpoints synchronously once (~3 fences) and
 * retries; paste_btree_maintain normally keeps that from happening.
 * Returns 0; -EINVAL (klen 0, bad extents), -ENAMETOOLONG (klen >
 * PASTE_BTREE_MAX_KEY, or > buf_size - 28: the record's header, word and
 * key share one buffer extent), -E2BIG (n > PASTE_BTREE_MAX_EXTENTS), -EROFS
 * (read-only), -ENOSPC (still full after a checkpoint: lane, node area or
 * store; nothing was logged or changed: answer an error), or the store's
 * failure (nothing changed). */
int paste_btree_set(struct paste_btree *t, const void *key, uint32_t klen,
		    const struct paste_extent *val, uint32_t n, uint64_t *lsn);

/* What a key carries beside its value, kept in its leaf entry and in its
 * log record: an application tag (0..PASTE_BTREE_TAG_MAX: pkvs's type),
 * an optional 64-bit word (pkvs's expiry deadline), and the CRC32C of the
 * value's bytes, which the tree computes at every set and which
 * paste_btree_check and the cleaner verify. */
#define PASTE_BTREE_TAG_MAX 15u
struct paste_btree_attr {
	uint8_t tag;
	bool has_word;
	bool has_crc;        /* out: false when the point index answered a lookup */
	uint64_t word;
	uint32_t crc;        /* out: CRC32C of the value (when has_crc) */
};
/* paste_btree_set with a tag and a word (attr NULL: tag 0, no word; its
 * crc fields are ignored). */
int paste_btree_put(struct paste_btree *t, const void *key, uint32_t klen,
		    const struct paste_extent *val, uint32_t n, const struct paste_btree_attr *attr,
		    uint64_t *lsn);
/* Delete key: -ENOENT (no record written) when absent; else like set (one
 * record, the value's references dropped once it is durable). */
int paste_btree_del(struct paste_btree *t, const void *key, uint32_t klen, uint64_t *lsn);
/* Delete every key (FLUSHALL): one record; O(pages) to free the pages and
 * queue every value reference for release. */
int paste_btree_clear(struct paste_btree *t, uint64_t *lsn);
/* Delete every key k with lo <= k < hi (hilen 0: no end) in one record,
 * when the range holds at most PASTE_BTREE_RANGE_MAX keys (-E2BIG, nothing
 * done, otherwise: take a shorter range, e.g. up to the key a cursor
 * reaches after that many). *deleted (if non-NULL) gets the count (0: no
 * record written). Replaying the record deletes the same keys: a range
 * delete is idempotent. -ENAMETOOLONG when lolen + hilen > buf_size - 20
 * (the record's header and both bounds share one buffer extent); inside
 * a group, -EBUSY where it would need a checkpoint for node pages.
 * Otherwise as paste_btree_del. */
#define PASTE_BTREE_RANGE_MAX 256u
int paste_btree_delrange(struct paste_btree *t, const void *lo, uint32_t lolen, const void *hi,
			 uint32_t hilen, uint64_t *deleted, uint64_t *lsn);

/* Groups: the changes made between begin and commit are one unit. After a
 * crash at any instant either all of them are in the recovered tree or
 * none: their records are marked as a group's and only a COMMIT record,
 * appended by commit, lets recovery apply them. They are applied to the
 * tree as they are made (reads in the owning thread see them), and commit
 * is as durable as any change (the caller's next barrier). While a group
 * is open nothing checkpoints: a change that would need a checkpoint to
 * find room fails with -ENOSPC, and clear fails with -EBUSY. abort puts
 * back, in DRAM, what every change of the group replaced (their records
 * stay in the log, a group without its COMMIT, which recovery drops).
 * One group at a time (-EBUSY); commit of an empty group writes nothing.
 * abort returns 0, or -ENOSPC / -ENOMEM when the node area or memory ran
 * out while putting changes back: then the DRAM tree holds part of the
 * group, so the store is failed (paste_store_fail: nothing more is
 * acknowledged, no checkpoint keeps it) and a restart recovers without
 * the group. Cost: a lookup and a copy of the old entry per change (for
 * abort). */
int paste_btree_group_begin(struct paste_btree *t);
int paste_btree_group_commit(struct paste_btree *t, uint64_t *lsn);
int paste_btree_group_abort(struct paste_btree *t);

/* Look key up: 0 and its value's extents copied to ext[0..*n) (room for
 * PASTE_BTREE_MAX_EXTENTS), *len the value's bytes; -ENOENT when absent;
 * -EINVAL/-ENAMETOOLONG for a bad key. A key of <= 32 bytes whose value
 * has at most two extents is answered by the DRAM point index (a hash of
 * the key and, mostly, one cache line), a hit or a miss alike; other keys
 * and values, and trees opened with no_point_index or read-only, descend
 * the tree (bench/btree-get, keys like "key:000000001234"): ~60 ns with
 * 100 keys, ~140 ns with 10 000, ~440 ns with 1 M (a tree larger than
 * the cache). */
int paste_btree_get(struct paste_btree *t, const void *key, uint32_t klen,
		    struct paste_extent *ext, uint32_t *n, uint32_t *len);
/* paste_btree_get, and the key's tag and word in *attr (if non-NULL; its
 * CRC too when the lookup reached the leaf). The point index answers keys
 * without a word; a key with one is read from its leaf. */
int paste_btree_lookup(struct paste_btree *t, const void *key, uint32_t klen,
		       struct paste_extent *ext, uint32_t *n, uint32_t *len,
		       struct paste_btree_attr *attr);
uint64_t paste_btree_count(const struct paste_btree *t);
/* The bytes of the values the tree names now: paste_btree_info's
 * live_bytes less those of values replaced or deleted whose references
 * wait for their change to be durable (they count as live until then).
 * O(1). */
uint64_t paste_btree_live_now(const struct paste_btree *t);
/* A look ahead: key will be looked up soon (the next command of a
 * batch), so start loading what paste_btree_get and the point index's
 * part of paste_btree_set/del read first: the key's home slot in the
 * point index. Changes nothing. Returns 1 when it did (the index answers
 * for this key), 0 when a lookup of this key descends the tree instead
 * (a key over 32 bytes, no index), -EINVAL for no tree or key. Costs a
 * CRC32C of the key and a prefetch, against a cache miss (~150 ns) when
 * the lookup comes ~1 us later: in pkvs's pipelined 1 KiB GET it brings
 * the lookup from ~10 % of the server's CPU to ~1.5 %, for ~2.5 % spent
 * looking ahead (this and paste_resp_peek_key: docs/results.md, "Looked
 * up one command ahead"). */
int paste_btree_prefetch(struct paste_btree *t, const void *key, uint32_t klen);
/* The tree's key order: memcmp over the shorter length, then the shorter
 * first. <0, 0, >0. */
int paste_btree_keycmp(const void *a, uint32_t alen, const void *b, uint32_t blen);

/* Ordered iteration and range scans. A cursor remembers the last key it
 * returned, so changes to the tree between calls are fine: it then
 * re-seeks (one descent) to the first key after it; otherwise a step is a
 * few instructions. Fields are private. */
struct paste_btree_cursor {
	struct paste_btree *t;
	uint64_t mods;
	uint32_t depth;
	uint32_t page[PASTE_BTREE_MAX_HEIGHT];
	uint16_t idx[PASTE_BTREE_MAX_HEIGHT];
	bool positioned, have_key, done;
	bool back;                      /* positioned for cursor_prev */
	bool fresh;                     /* no key returned since the last seek */
	uint32_t klen;
	uint8_t key[PASTE_BTREE_MAX_KEY];
	struct paste_btree_attr attr;   /* of the last key returned (paste_btree_cursor_attr) */
};
/* Position c before the first key >= start (start NULL or slen 0: the
 * first key). A start key longer than PASTE_BTREE_MAX_KEY is cut to it. */
void paste_btree_cursor_init(struct paste_btree_cursor *c, struct paste_btree *t,
			     const void *start, uint32_t slen);
/* The next key in order: 1 with *key (the cursor's copy, valid until the
 * next call) and *klen, and if ext is non-NULL the value as in
 * paste_btree_get; 0 at the end. A range scan stops when
 * paste_btree_keycmp says the key is past its end. */
int paste_btree_cursor_next(struct paste_btree_cursor *c, const uint8_t **key, uint32_t *klen,
			    struct paste_extent *ext, uint32_t *n, uint32_t *len);
/* The previous key in order: the greatest key below the last one
 * returned (by next or prev), or below start when none was (start NULL
 * or slen 0: the last key of the tree); as cursor_next otherwise. Steps
 * that keep one direction cost as next's; a change of direction re-seeks
 * (one descent). */
int paste_btree_cursor_prev(struct paste_btree_cursor *c, const uint8_t **key, uint32_t *klen,
			    struct paste_extent *ext, uint32_t *n, uint32_t *len);
/* Go forward past at most n keys, stopping before the first key >= end
 * (end NULL: no bound), as that many cursor_next calls would but a leaf
 * at a time: a whole leaf costs one compare with its last key, the leaf
 * where it stops a binary search. Returns how many keys it passed; the
 * next cursor_next returns the key after them. O(log N + passed / keys
 * per leaf): a count of a key range (init at its start, skip to its end)
 * or a seek to the i-th key of one. cursor_attr is not of a key passed. */
uint64_t paste_btree_cursor_skip(struct paste_btree_cursor *c, uint64_t n, const void *end,
				 uint32_t elen);
/* The changes that follow are part of a delete (the previous setting is
 * returned, to put back): a put among them (a grave, a record that
 * shrinks) may use the pages every other put leaves free
 * (paste_btree_config.delete_reserve_pct), so a store whose tree filled
 * can still delete and make room. */
bool paste_btree_deleting(struct paste_btree *t, bool on);
/* Put the cursor at a key of [lo, hi) picked by a random descent (seed
 * chooses a child at each level, then a key of the leaf): the next
 * cursor_next returns it. O(log N) where an exact i-th key costs
 * cursor_skip's walk; each key's chance is near 1/count, off by how
 * unevenly the pages along its path are filled (at most 2x a level).
 * 0, or -ENOENT when the leaf reached holds no key of the range (an
 * empty range, or a leaf at its edge: try another seed). */
int paste_btree_cursor_sample(struct paste_btree_cursor *c, const void *lo, uint32_t lolen,
			      const void *hi, uint32_t hilen, uint64_t seed);
/* The tag, word and CRC of the key cursor_next or cursor_prev last returned. */
const struct paste_btree_attr *paste_btree_cursor_attr(const struct paste_btree_cursor *c);

/* Once per event-loop pass, after the barrier: drop the references whose
 * change became durable (one atomic load plus one paste_store_unref per
 * reference), and checkpoint when one is due (see paste_btree_config).
 * Returns 0, 1 when it checkpointed, or a negative errno from the
 * checkpoint (the store's failure). */
int paste_btree_maintain(struct paste_btree *t);
/* Checkpoint now: CRC and flush every page written since the last one,
 * fence (this also makes every record applied so far durable), write and
 * flush the other meta slot (seq + 1, root, checkpoint LSN = the last
 * record applied, generation, counts, CRC), fence, start the next
 * generation (pages replaced in this one become free), then truncate the
 * log to the checkpoint LSN (paste_wal_truncate: one more fence). Costs
 * the flushes of the dirty pages and three fences (in fsync mode three
 * fdatasyncs; a group commit of the port in flight is covered, not
 * disturbed). Returns 0 (also when nothing changed), or a negative errno:
 * -EROFS, or the store's failure: then no meta slot was published whose
 * pages were not durable (a failed first fence writes no meta; a failed
 * second one leaves the previous meta the one in force), and the tree
 * stays as it was in DRAM. */
int paste_btree_checkpoint(struct paste_btree *t);
/* Make room now (a write found the store full): release what is durable,
 * checkpoint, and run the cleaner for up to max_steps steps until
 * `want` buffers are free. Returns the free buffers then, or the store's
 * failure. The caller refuses its write if that is still too few. */
int64_t paste_btree_make_room(struct paste_btree *t, uint32_t want, uint32_t max_steps);

void paste_btree_info(const struct paste_btree *t, struct paste_btree_info *out);
/* The LSN of the newest record applied (paste_btree_info's last_lsn,
 * cheaply): it only grows, across restarts too. */
uint64_t paste_btree_last_lsn(const struct paste_btree *t);

/* Verify the tree in the mapping: page magic, numbers, types, levels,
 * bounds, key order against the separators, extents inside the buffer
 * area, CRCs of the pages not written since the last checkpoint, every
 * page reached once, the page states (tree pages used, others free or
 * pending), the key count, and that every buffer holds at least as many
 * references as tree extents name it. Returns the number of problems (0:
 * clean) with the first few in err, or a negative errno. O(pages + keys). */
int paste_btree_check(struct paste_btree *t, struct paste_error *err);

/* A log record read as a tree record. */
enum paste_btree_op { PASTE_BTREE_SET = 1, PASTE_BTREE_DEL = 2, PASTE_BTREE_CLEAR = 3,
		      PASTE_BTREE_DELRANGE = 4, PASTE_BTREE_COMMIT = 5 };
struct paste_btree_record {
	enum paste_btree_op op;
	const uint8_t *key;            /* in the store (the header buffer) */
	uint32_t klen;
	const struct paste_extent *val;   /* ext[0..n): the value's extents */
	uint32_t n;
	uint32_t vlen;
	struct paste_btree_attr attr;  /* tag, word, the value's CRC (has_crc) */
	const uint8_t *hi;             /* DELRANGE: the range's end (key is its start) */
	uint32_t hilen;
	bool group, first;             /* a member of a group (the group's first), which
					* a COMMIT record ends */
	struct paste_extent header;    /* ext[n]: the header's own extent, the record's last */
};
/* Is the log record ext[0..n) a tree record? 0 and *r filled, or -EINVAL
 * (not one: wrong magic, op, lengths, or extents outside the store).
 * Reads the header bytes from the store once. */
int paste_btree_record_parse(const struct paste_store *st, const struct paste_extent *ext,
			     uint32_t n, struct paste_btree_record *r);

/* ------------------------------------------------------------------ */
/* Request bodies (lib/body.c)                                         */
/* ------------------------------------------------------------------ */
/*
 * Gathers a body of known length (Content-Length) from a connection's DATA
 * events into extents of store buffers, ready for paste_wal_append. Zero
 * copy: each read is held where it landed (paste_port_hold) and named by
 * (buffer, offset, length). Copy: the bytes go densely into fresh store
 * buffers (whole buffers filled). Three limits keep one body from hurting
 * the others:
 *  - the reserve: a body takes no buffer (held or fresh) while the store has
 *    fewer than `reserve` free, so every port's ring can still be refilled
 *    and a request that frees space (a truncation) can still arrive; below
 *    it collection fails with 507;
 *  - the extent cap: a held read pins a whole buffer however few bytes it
 *    carries, so a body trickling in tiny reads is held only while the
 *    extents left can take the rest of it densely copied; then it is copied;
 *  - max_held: likewise for store space, a read is held only while the
 *    buffers taken so far, plus this one, plus a dense copy of the rest fit
 *    in max_held; then the rest is copied densely.
 * So a body never needs more than paste_body_max bytes' worth of buffers
 * (one that would is refused at its head) and never runs out of extents.
 * One struct paste_body per connection, used by that connection's thread
 * only; nothing here allocates memory or makes a syscall.
 */

struct paste_port;
struct paste_event;

#define PASTE_BODY_MAX_EXTENTS PASTE_WAL_MAX_EXTENTS
#define PASTE_BODY_DEFAULT_RESERVE 256u

struct paste_body_config {
	bool copy;          /* copy into fresh store buffers instead of holding (the
			     * paper's "copy" bar); events without a store buffer
			     * (epoll engine) are always copied */
	uint32_t reserve;   /* free store buffers bodies never take, so every port's
			     * ring can refill and a request that frees space still
			     * gets in (0: PASTE_BODY_DEFAULT_RESERVE) */
	uint64_t max_held;  /* store bytes one unfinished body may pin (buffers x
			     * buf_size); past it the rest is copied densely; 0: only
			     * the extent cap limits it */
};

/* Per connection, owned by the service; zeroed = idle. Read the fields,
 * do not write them. */
struct paste_body {
	struct paste_extent ext[PASTE_BODY_MAX_EXTENTS];  /* the bytes so far, in order */
	uint32_t n;                     /* extents in use */
	uint32_t bufs;                  /* store buffers this body holds a reference on
					 * (one per extent: equal to n) */
	uint64_t len, left;             /* body length, bytes still to come */
	bool copying;                   /* ext[n-1] is a copy buffer being filled */
	uint16_t error;                 /* 0, or the HTTP status that says why collection
					 * failed (507: store below the reserve, or out of
					 * extents) */
};

/* The longest body paste_body_begin accepts: the extent cap
 * (PASTE_BODY_MAX_EXTENTS x buf_size), lowered to max_held rounded down to
 * whole buffers when max_held is set. A service answers 413 above it (and
 * applies its own Content-Length limit too). cfg may be NULL (defaults).
 * A few instructions. */
uint64_t paste_body_max(const struct paste_body_config *cfg, const struct paste_store *st);

/* Start collecting a body of len bytes into the idle b. Returns 0;
 * -E2BIG when len > paste_body_max (answer 413; b is unchanged, nothing
 * is read); -EBUSY when b still holds references (release it first).
 * len 0 is a complete, empty body. A few stores, nothing taken. */
int paste_body_begin(struct paste_body *b, const struct paste_body_config *cfg,
		     const struct paste_store *st, uint64_t len);

/* Add bytes [off, off+len) of DATA event ev (ev->data + off; from the
 * current batch of port pt) to b, and count them off b->left. Zero copy
 * when cfg allows it and the limits above do: the event's buffer is held
 * (paste_port_hold: a reference for b; the port puts a free buffer in its
 * ring slot at the next poll) and becomes one extent; cost: a few
 * instructions and one atomic add. Otherwise the bytes are copied into
 * fresh buffers, filling the last one before taking another; cost: the
 * memcpy plus one paste_store_alloc (the store's mutex) per new buffer.
 * Copies are not flushed: paste_wal_append flushes every extent.
 * Returns 0; or -ENOSPC once collection failed (the store went below the
 * reserve, or no extent was left): b->error is then 507, b's references
 * are already released (n = bufs = 0), and this and every later feed of
 * the body still count their bytes off b->left and drop them, so the
 * service reads the body to its end and answers b->error. -EINVAL (b
 * unchanged) for len > b->left, a non-DATA event, or bytes beyond ev->len.
 * cfg may be NULL (defaults) but should be the one paste_body_begin saw. */
int paste_body_feed(struct paste_body *b, const struct paste_body_config *cfg,
		    struct paste_port *pt, const struct paste_event *ev,
		    uint32_t off, uint32_t len);

/* Add len bytes at p, bytes the service holds in its own memory (a
 * command it put together across reads), to b by dense
 * copy, as paste_body_feed copies: the same reserve and extent cap, the
 * same -ENOSPC (b->error 507, references released, bytes still counted
 * off b->left) and -EINVAL (b unchanged) for len > b->left. cfg may be
 * NULL (defaults). Cost: the memcpy plus one paste_store_alloc per new
 * buffer. */
int paste_body_copy(struct paste_body *b, const struct paste_body_config *cfg,
		    struct paste_store *st, const void *p, uint64_t len);

/* Drop every reference b holds (paste_store_unref: one atomic per extent,
 * the store's mutex per buffer that becomes free) and make b idle (all
 * counts and b->error zero). Call it once the log took its own references
 * (after paste_wal_append, whatever it returned), and on close or timeout
 * of a connection in the middle of a body. Read b->error before. An idle
 * b costs nothing. */
void paste_body_release(struct paste_body *b, struct paste_store *st);

/* ------------------------------------------------------------------ */
/* HTTP/1.1 request head parser (lib/http_parse.c)                     */
/* ------------------------------------------------------------------ */
/*
 * Zero-copy: the result points into the caller's bytes. Incremental: call
 * again with more bytes (the same prefix plus new data) and it resumes its
 * scan for the end of the head where it stopped.
 */

enum paste_http_method {
	PASTE_HTTP_OTHER = 0, PASTE_HTTP_GET, PASTE_HTTP_HEAD, PASTE_HTTP_POST,
	PASTE_HTTP_PUT, PASTE_HTTP_DELETE,
};

struct paste_http_req {
	enum paste_http_method method;
	const char *method_str; uint32_t method_len;
	const char *target;     uint32_t target_len;   /* as sent, not decoded */
	/* The target taken apart (RFC 9112 section 3.2), not decoded. path:
	 * up to the first '?' or '#' (origin-form), the path after the
	 * authority (absolute-form; a static "/" when it is empty), "*"
	 * (asterisk-form), or empty (CONNECT's authority-form). query: after
	 * the '?' up to any '#', or NULL when there is no '?'. A fragment
	 * ('#...') is part of neither. host: the absolute-form or
	 * authority-form target's authority, else the Host field's value, or
	 * NULL when there is neither (HTTP/1.0 only). */
	const char *path;       uint32_t path_len;
	const char *query;      uint32_t query_len;
	const char *host;       uint32_t host_len;
	uint8_t  version_minor;     /* 0 or 1 (HTTP/1.x only) */
	bool     keep_alive;        /* after Connection: and version defaults */
	bool     has_content_length;
	uint64_t content_length;    /* 0 when absent */
	bool     expect_continue;   /* HTTP/1.1 "Expect: 100-continue": the client may
				     * wait for "100 Continue" before sending the body */
	uint32_t head_len;          /* bytes up to and including the blank line */
	uint32_t nheaders;
};

struct paste_http_parser {
	uint32_t scanned;       /* bytes already searched for the end of head */
	uint32_t max_head;      /* limit for the head: default 8192 -> 431 */
	uint64_t max_body;      /* limit for Content-Length: default 1 MiB -> 413 */
};

void paste_http_parser_init(struct paste_http_parser *ps, uint32_t max_head, uint64_t max_body);
/* Returns head length (> 0) when a whole head is in p[0..len) and *req is
 * filled; 0 when more bytes are needed; or a negative HTTP status to answer
 * before closing: -400 malformed (an HTTP/1.1 request without Host, two
 * Host fields, a Host that is not host[:port], a target in no form of RFC
 * 9112 section 3.2 included), -413 body over max_body, -417 an Expect
 * other than 100-continue (HTTP/1.1; HTTP/1.0 requests' Expect is ignored,
 * RFC 9110 section 10.1.1), -431 head over max_head, -501 unsupported
 * Transfer-Encoding, -505 not HTTP/1.0 or 1.1. */
int paste_http_parse(struct paste_http_parser *ps, const char *p, size_t len,
		     struct paste_http_req *req);
const char *paste_http_reason(int status);
/* Percent-decode p[0..n) (a target's path or query part) into out: %XX
 * becomes one byte (either case of hex digit; %00 included), every other
 * byte stays as it is ('+' too: RFC 3986 has no space rule). Returns the
 * decoded length, -EINVAL for a '%' not followed by two hex digits, or
 * -ENOSPC when the result does not fit in cap bytes (whichever comes
 * first in p). */
int64_t paste_http_unescape(const char *p, size_t n, uint8_t *out, size_t cap);

/* ------------------------------------------------------------------ */
/* Redis protocol (RESP) parser (lib/resp_parse.c, lib/resp_reply.c)   */
/* ------------------------------------------------------------------ */
/*
 * Requests as redis-server reads them: RESP2 multibulk (*N\r\n, then N
 * times $len\r\n<len bytes>\r\n) and inline commands (a line of words
 * split as Redis's sdssplitargs splits them: "..." with \" \\ \n \r \t \b
 * \a \xHH escapes, '...' with \', a closing quote followed by a blank or
 * the line end; unlike Redis a NUL byte is an ordinary byte). A first byte
 * '*' means multibulk, anything else inline. Zero copy: arguments point
 * into the caller's bytes, except inline arguments with quotes, which are
 * unquoted into a scratch area the caller gives. Incremental: call again
 * with the same bytes plus more (possibly at another address) and the
 * parser resumes where it stopped; a command arriving one byte per call
 * costs O(n) in total. Bounded: no call looks past max_command
 * (multibulk) or max_inline (inline) bytes, and every limit is enforced as
 * soon as the bytes that break it are in. Nothing is allocated.
 *
 * Large values. A multibulk command whose LAST argument is a bulk of
 * stream_min bytes or more, or whose last bulk (data and CRLF) is not all
 * in the bytes given, is returned once that bulk's "$L\r\n" line is in:
 * PASTE_RESP_STREAM, "the head is complete; argv[argc - 1] is a bulk of
 * L = argv[argc - 1].len bytes starting at offset cmd->used; a CRLF
 * follows them". The caller collects the L bytes where they land
 * (paste_body_begin(L), then paste_body_feed: zero copy in store buffers)
 * and checks the CRLF after them with paste_resp_stream_crlf, which takes
 * it across chunk boundaries. So a 1 MiB SET never needs 1 MiB of
 * contiguous memory. A big bulk that is NOT the last argument
 * (MSET k1 <big> k2 v2) is not streamed: that command is PASTE_RESP_MORE
 * until it is all in one contiguous buffer, and it must fit in
 * max_command bytes (refused with PASTE_RESP_E_TOO_BIG as soon as its
 * bulk lengths say it cannot). One streamed argument per command keeps
 * the parser a few words and the result a plain argv; the commands that
 * carry several values (MSET, HSET) rarely carry big ones.
 *
 * Errors. After any PASTE_RESP_E_* the stream cannot be resynchronised
 * (where the next command starts is unknown): answer
 * paste_resp_put_proto_error and close the connection, as Redis does.
 */

#define PASTE_RESP_DEFAULT_MAX_ARGS    65536u
#define PASTE_RESP_DEFAULT_MAX_INLINE  (64u << 10)                 /* Redis's */
#define PASTE_RESP_DEFAULT_MAX_BULK    (1ull << 20)
#define PASTE_RESP_DEFAULT_MAX_COMMAND ((1u << 20) + (64u << 10))
#define PASTE_RESP_DEFAULT_STREAM_MIN  4096u
#define PASTE_RESP_NO_STREAM           UINT64_MAX

/* Results of paste_resp_parse. The errors' texts (paste_resp_strerror)
 * are Redis's where Redis refuses the same input. */
enum paste_resp_result {
	PASTE_RESP_MORE   = 0,   /* need more bytes: call again with them */
	PASTE_RESP_CMD    = 1,   /* a whole command in cmd */
	PASTE_RESP_STREAM = 2,   /* a command's head; its last bulk streams */
	PASTE_RESP_E_MBULK_LEN = -1,     /* "*N" not an integer (or no CRLF) */
	PASTE_RESP_E_TOO_MANY_ARGS = -2, /* N or inline words > max_args or argv_cap */
	PASTE_RESP_E_DOLLAR = -3,        /* an element not starting with '$' */
	PASTE_RESP_E_BULK_LEN = -4,      /* "$L" not an integer >= 0 (or no CRLF) */
	PASTE_RESP_E_BULK_TOO_BIG = -5,  /* L > max_bulk */
	PASTE_RESP_E_BULK_CRLF = -6,     /* bulk data not followed by CRLF */
	PASTE_RESP_E_TOO_BIG = -7,       /* a multibulk command > max_command */
	PASTE_RESP_E_INLINE_TOO_BIG = -8,/* no LF within max_inline bytes */
	PASTE_RESP_E_QUOTES = -9,        /* unbalanced quotes in an inline command */
	PASTE_RESP_E_SCRATCH = -10,      /* unquoted inline arguments > scratch_cap */
};

struct paste_resp_config {
	uint32_t max_args;     /* arguments per command (0: 65536); cmd->argv_cap caps it too */
	uint32_t max_inline;   /* an inline command with its LF (0: 64 KiB) */
	uint32_t max_command;  /* a contiguous multibulk command, or a streamed one's
				* head (0: 1 MiB + 64 KiB; at most INT_MAX) */
	uint64_t max_bulk;     /* one bulk argument (0: 1 MiB) */
	uint64_t stream_min;   /* a last bulk this long streams (0: 4096); PASTE_RESP_NO_STREAM:
				* never stream, not even a last bulk that is not all in */
};

/* One per connection. Read the fields, do not write them. */
struct paste_resp_parser {
	struct paste_resp_config cfg;   /* as given to init, defaults filled in */
	uint64_t bulk_len;   /* in a bulk's data: its length */
	uint32_t pos;        /* bytes of the current command already checked */
	uint32_t nargs;      /* multibulk: N, 0 before the "*N" line */
	uint32_t argc;       /* multibulk: arguments complete */
	uint8_t state;       /* 0 between commands */
	uint8_t crlf;        /* paste_resp_stream_crlf: the CR was seen */
	uint8_t bad;         /* PASTE_RESP_E_DOLLAR: the byte found instead */
};

struct paste_resp_arg {
	const char *p;       /* NULL: the streamed last argument */
	size_t len;
};

/* The caller sets the first four fields; the parser keeps nothing in them
 * between calls, so one per thread serves all of its connections. */
struct paste_resp_cmd {
	struct paste_resp_arg *argv;   /* receives the arguments */
	uint32_t argv_cap;             /* its length: more arguments -> E_TOO_MANY_ARGS */
	char *scratch;                 /* inline arguments with quotes are unquoted here
					* (max_inline bytes always suffice; NULL: a command
					* with a non-empty quoted word gets
					* PASTE_RESP_E_SCRATCH) */
	uint32_t scratch_cap;
	uint32_t argc;                 /* out: arguments (0: an empty inline line, or a
					* "*0" / "*-1": nothing to run, drop `used` bytes) */
	uint32_t used;                 /* out: CMD: the command's length (the next starts
					* at p + used); STREAM: where the last bulk's data
					* starts; otherwise 0 */
	bool is_inline;                /* out: an inline command */
};

/* Prepare ps for a connection. cfg NULL: all defaults (a zero field: its
 * default; a zero-filled parser is a default one). A few stores. */
void paste_resp_parser_init(struct paste_resp_parser *ps, const struct paste_resp_config *cfg);
/* Forget the command in progress (keeps the limits). A few stores. */
void paste_resp_parser_reset(struct paste_resp_parser *ps);

/* Parse the command at p[0..len): the bytes of the connection after the
 * previous command, the same prefix plus new bytes on each call until a
 * result other than PASTE_RESP_MORE. Returns PASTE_RESP_MORE, PASTE_RESP_CMD
 * (argv[0..argc) point into p or cmd->scratch), PASTE_RESP_STREAM (see
 * "Large values"; argv[argc - 1].p is NULL), or a PASTE_RESP_E_* (< 0: reply
 * it and close). Any result but MORE leaves ps ready for the next command.
 * Costs: inline, one memchr over the new bytes, then one pass over the
 * line; multibulk, a pass over each "*N"/"$L" line (a partial one, at most
 * 22 bytes, is looked at again on the next call) and none over bulk data;
 * when a command took several calls, its earlier arguments are found
 * again from their "$L" lines (O(argc), once, at the end). */
int paste_resp_parse(struct paste_resp_parser *ps, const char *p, size_t len,
		     struct paste_resp_cmd *cmd);

/* A look ahead, for prefetching: when p[0..len) begins with a multibulk
 * command of two or more arguments whose first two are all in, point
 * *key at the second (the key of GET, SET, DEL, INCR...) and return true.
 * Checks no limit and keeps nothing: a guess that paste_resp_parse, run
 * on the same bytes, confirms (the same argv[1]) or refutes with an
 * error. Costs three short number lines; no pass over the bytes. */
bool paste_resp_peek_key(const char *p, size_t len, const char **key, size_t *klen);

/* After PASTE_RESP_STREAM and the argument's bytes: p[0..len) are the
 * bytes after them. Returns 1 or 2, the bytes of the CRLF (complete: the
 * command is whole and the next one starts after them); 0 when more are
 * needed (every byte given, at most the CR, was taken); or
 * PASTE_RESP_E_BULK_CRLF. A compare or two. */
int paste_resp_stream_crlf(struct paste_resp_parser *ps, const char *p, size_t len);

/* "Protocol error: ..." for a PASTE_RESP_E_* code (static, no CRLF);
 * "Unknown error" for anything else. */
const char *paste_resp_strerror(int code);

/* ASCII case-insensitive: does the argument equal name (NUL-terminated)?
 * paste_resp_lookup: the index in names[0..n) of the first that matches,
 * or -1. Costs one byte compare per byte of a name of the right length. */
bool paste_resp_arg_eq(const struct paste_resp_arg *a, const char *name);
int paste_resp_lookup(const struct paste_resp_arg *a, const char *const *names, size_t n);
/* The argument as Redis's string2ll reads it: optional '-', no '+', no
 * blanks, no leading zeros. 0, -EINVAL (not an integer) or -ERANGE. */
int paste_resp_arg_i64(const struct paste_resp_arg *a, int64_t *v);

/* Reply writers. Each writes one reply at out[0..cap) and returns its
 * length, or -ENOBUFS when it does not fit (nothing written), -EOVERFLOW
 * when it would exceed INT_MAX bytes. proto is 2 or 3 (the HELLO the
 * client sent; anything but 3 means 2): a RESP3 type is written as Redis
 * writes it for a RESP2 client. Cost: the bytes, plus ~20 ns per number
 * (a double: up to three snprintf/strtod rounds, ~1 us). */
int paste_resp_put_simple(char *out, size_t cap, const char *s);   /* +s\r\n */
int paste_resp_put_error(char *out, size_t cap, const char *s);    /* -s\r\n ("ERR ...") */
int paste_resp_put_int(char *out, size_t cap, int64_t v);          /* :v\r\n */
/* v's decimal digits alone, no type and no CRLF (the text INCR stores),
 * without snprintf's ~600 instructions. */
int paste_resp_put_i64_text(char *out, size_t cap, int64_t v);
int paste_resp_put_bulk_head(char *out, size_t cap, uint64_t len); /* $len\r\n */
int paste_resp_put_bulk(char *out, size_t cap, const void *p, size_t n); /* $n\r\n...\r\n */
int paste_resp_put_array(char *out, size_t cap, uint64_t n);       /* *n\r\n */
int paste_resp_put_null(char *out, size_t cap, int proto);         /* 3: _\r\n  2: $-1\r\n */
int paste_resp_put_null_array(char *out, size_t cap, int proto);   /* 3: _\r\n  2: *-1\r\n */
int paste_resp_put_map(char *out, size_t cap, int proto, uint64_t n); /* %n  2: *2n */
int paste_resp_put_set(char *out, size_t cap, int proto, uint64_t n); /* ~n  2: *n */
/* An out-of-band message (pub/sub): 3: >n (a push, which a client tells
 * apart from replies)  2: *n. */
int paste_resp_put_push(char *out, size_t cap, int proto, uint64_t n);
int paste_resp_put_double(char *out, size_t cap, int proto, double d); /* ,d  2: bulk */
/* The same framing for a double already written as text num[0..n) (a
 * caller that formats its own, as Redis's sorted-set replies do). */
int paste_resp_put_double_text(char *out, size_t cap, int proto, const char *num, size_t n);
int paste_resp_put_bool(char *out, size_t cap, int proto, bool b); /* #t #f  2: :1 :0 */
/* =len\r\nfmt:data\r\n (fmt: 3 bytes, "txt" or "mkd"; else -EINVAL); 2: bulk. */
int paste_resp_put_verbatim(char *out, size_t cap, int proto, const char *fmt,
			    const void *p, size_t n);
/* "-ERR <paste_resp_strerror(code)>\r\n"; for PASTE_RESP_E_DOLLAR
 * "...expected '$', got 'x'" with ps->bad (printable ASCII as is, other
 * bytes as \xHH; ps may be NULL). CR and LF in a simple string or an
 * error are written as spaces, so a reply is always one line. */
int paste_resp_put_proto_error(char *out, size_t cap, const struct paste_resp_parser *ps,
			       int code);

/* ------------------------------------------------------------------ */
/* The paste port (lib/port.c, lib/port_uring.c, lib/port_epoll.c)     */
/* ------------------------------------------------------------------ */
/*
 * One per thread, and used only by the thread that opened it (the ring is
 * SINGLE_ISSUER). paste_port_poll is the netmap poll() of PASTE: it submits
 * every reply queued since the previous call (after the persistence barrier
 * the replies wait for), waits for work, and returns one batch of events for
 * all connections. In steady state it is one io_uring_enter per call.
 */

/* URING: the paste port. EPOLL: the socket-API baseline (the paper's
 * "Linux" bars): each poll returns ONE ready connection's events, read(2)
 * into a private buffer, and its replies are written behind a barrier of
 * their own, so in fsync mode every reply waits for its own fdatasync.
 * EPOLL_BATCH: the fallback for where io_uring is refused (a sysctl, a
 * seccomp policy such as container runtimes' defaults): each poll reads
 * every ready connection (up to 1 MiB of data), so the replies of the
 * whole batch share one barrier, the first write's fence or fdatasync
 * (the group commit Redis's event loop does); still a read(2) and a
 * write(2) per request. */
enum paste_engine { PASTE_ENGINE_URING = 0, PASTE_ENGINE_EPOLL, PASTE_ENGINE_EPOLL_BATCH };
/* "uring", "epoll", "epoll-batch"; "?" for anything else. */
const char *paste_engine_name(enum paste_engine e);
#define PASTE_PORT_MAX_LISTEN 4u
#define PASTE_PORT_LAT_BUCKETS 20u   /* barrier latency: <= 1 us, 2 us, ... 2^18 us, more */

struct paste_port;

struct paste_port_config {
	enum paste_engine engine;
	const char *host;          /* listen address, default "127.0.0.1" */
	uint16_t port;             /* listen port (SO_REUSEPORT: one socket per thread) */
	uint32_t ring_bufs;        /* provided store buffers per port (power of 2), default 4096 */
	uint32_t max_conns;        /* connection slots, default 4096 */
	uint32_t conn_data_size;   /* bytes of app state per connection, zeroed at accept */
	int busy_poll;             /* 1: never sleep in the kernel (spin on the CQ) */
	struct paste_store *store; /* required: receive buffers come from here */
	struct paste_persist *persist; /* optional: the barrier before durable replies */
	/* uring batch waiting, for tuning (0 = default). Each pass waits
	 * for the send completions it expects plus open connections / want_div
	 * (default 4, at most 64) more, and on Linux >= 6.12 settles for what
	 * arrived after min_wait_us (default 50, at most 1000000: -EINVAL).
	 * no_min_wait: wait for one completion instead (older kernels do). */
	uint32_t min_wait_us;
	uint32_t want_div;
	bool no_min_wait;
	/* Dense receives (uring, Linux 6.12: IOU_PBUF_RING_INC, probed at
	 * open): the kernel fills each provided buffer a receive after the
	 * other, whatever the connection, so a small request takes about its
	 * own size of the store and events carry an offset into their buffer.
	 * no_dense_recv asks for whole buffers per receive (as older kernels
	 * give). paste_port_stats.dense_recv says which. */
	bool no_dense_recv;
	/* fsync mode, uring engine: after a group commit ends, how long the
	 * next may wait for the connections it answered to send again, so
	 * that one fdatasync serves them all (closed-loop clients otherwise
	 * split into two groups whose commits alternate, each paying the
	 * disk's fixed cost). It waits until 3/4 as many events as the last
	 * commit covered have arrived, or for at most commit_hold_us
	 * (0: half the last commit's duration, at most 500 us; -1: never
	 * wait; at most 1000000). */
	int32_t commit_hold_us;
	/* TCP_DEFER_ACCEPT on the listener, in seconds (0: off, the default;
	 * at most 3600). The kernel then completes a connection only when its
	 * first data arrives, so accept and the first receive happen together
	 * and a connection that never speaks costs no slot. A silent client is
	 * still accepted, but only after about this long (rounded up to the
	 * SYN-ACK retransmission schedule: 1 s -> ~1 s, 2 s -> ~3 s), so it is
	 * for protocols where the client speaks first (HTTP). Both engines. */
	uint32_t defer_accept_s;
	/* More than one listener on host (pkvs: HTTP and RESP on one port
	 * object, one thread, one submission per pass): nports > 0 listens
	 * on ports[0..nports) instead of `port`, at most
	 * PASTE_PORT_MAX_LISTEN. Every event says which listener its
	 * connection came through (paste_event.listener). */
	uint32_t nports;
	uint16_t ports[PASTE_PORT_MAX_LISTEN];
	/* Backpressure: a connection whose unsent output (replies queued,
	 * behind the durability gate or not, and what its sends have not
	 * delivered yet) exceeds max_output bytes is no longer read until it
	 * drains to half of that; a client that pipelines and never reads
	 * then costs at most about this much memory (plus the replies to
	 * what it had sent before the pause took hold: at most what one pass
	 * receives). 0: the default, PASTE_PORT_MAX_OUTPUT;
	 * PASTE_PORT_UNLIMITED: never paused. Every engine. */
	uint64_t max_output;
	/* Over max_conns: a connection through listener i (as in ports; 0 for
	 * `port`) that finds every slot in use is accepted aside (a plain
	 * descriptor, not a slot), what it sent so far is read and dropped,
	 * refuse[i] (a NUL-terminated string the app keeps alive as long as
	 * the port) is sent, and it is closed: Redis's "-ERR max number of
	 * clients reached", an HTTP 503. NULL: it waits in the listen backlog
	 * until a slot frees (the backlog's own limit applies). No event, no
	 * slot; counted in paste_port_stats.refused. Every engine. */
	const char *refuse[PASTE_PORT_MAX_LISTEN];
	/* Record each connection's peer address (paste_port_conn_addr; a
	 * server that names its clients or serves only loopback ones). The
	 * epoll engines take it from accept4; the uring engine asks the
	 * kernel with a getsockopt(SO_PEERNAME) linked before the first
	 * receive, so it is known by the first DATA event (Linux 6.7; before
	 * it, unknown). false: no cost. */
	bool peer_addrs;
};
#define PASTE_PORT_MAX_OUTPUT (64ull << 20)
#define PASTE_PORT_UNLIMITED UINT64_MAX

enum paste_event_type { PASTE_EV_ACCEPT = 1, PASTE_EV_DATA, PASTE_EV_CLOSED };

struct paste_event {
	uint16_t type;
	uint16_t listener;       /* index of the listener the connection came through */
	uint32_t conn;           /* connection slot */
	uint32_t buf;            /* store buffer index, or PASTE_NO_BUF (epoll engine) */
	uint32_t off, len;       /* data points at the first byte: buffer + off */
	const uint8_t *data;
};

struct paste_port_stats {
	uint64_t polls;          /* paste_port_poll calls that returned events */
	uint64_t events;         /* events returned */
	uint64_t syscalls;       /* io_uring_enter / epoll_wait / read / write / fsync issued */
	uint64_t accepts, closes;
	uint64_t bytes_in, bytes_out;
	uint64_t enobufs;        /* multishot recv re-armed after the ring ran dry */
	uint64_t fences;         /* persistence barriers paid */
	uint64_t commits;        /* group commits (fsync mode) */
	uint64_t held;           /* buffers held by the app */
	uint32_t conns;          /* open connections */
	uint32_t ring_free;      /* buffers posted in the ring now */
	bool dense_recv;         /* receives fill buffers incrementally (paste_port_config) */
	uint32_t cached;         /* uring: free store buffers in the port's allocation
				  * cache (up to 64; the store counts them as in use) */
	/* Barrier latency (a fence, or a group commit from its start to its
	 * completion): counts per bucket, bucket i holding latencies of at
	 * most 2^i microseconds (the last: everything longer), and the sum. */
	uint64_t barrier_hist[PASTE_PORT_LAT_BUCKETS];
	uint64_t barrier_ns;
	uint32_t accept_heavy;   /* uring, defer_accept_s set: 1 while recent passes saw
				  * >= 1 new connection per 4 reads (short connections):
				  * passes then wait for one completion, without the
				  * min_wait timer */
	uint32_t paused;         /* connections not read now: output over max_output */
	uint64_t queued;         /* bytes queued to send and not yet sent, all connections */
	uint64_t pauses;         /* times a connection's reading was paused */
	uint64_t refused;        /* connections over max_conns sent refuse[] and closed */
};

int paste_port_open(struct paste_port **out, const struct paste_port_config *cfg,
		    struct paste_error *err);
void paste_port_close(struct paste_port *pt);

/* Submit queued replies and wait up to timeout_ms (-1 forever) for events.
 * timeout_ms bounds the whole call, also while the port only works for
 * itself (epoll: writing to a slow reader as its socket drains).
 * Returns the number of events in *evs (valid until the next call), 0 on
 * timeout, or -EINTR when a signal arrived. Buffers delivered in the
 * previous batch and not held are recycled here. */
int paste_port_poll(struct paste_port *pt, struct paste_event **evs, int timeout_ms);

/* Keep the buffer of a DATA event of the current batch (a reference for the
 * caller; drop it with paste_store_unref). The port puts a free buffer in
 * the ring in its place. -EINVAL for an epoll-engine event (no store buffer). */
int paste_port_hold(struct paste_port *pt, const struct paste_event *ev);

/* Per-connection app state (conn_data_size bytes), NULL for a bad slot. */
void *paste_port_conn_data(struct paste_port *pt, uint32_t conn);

enum paste_send_flags {
	PASTE_SEND_DURABLE = 1,  /* leaves only after this thread's flushes are durable */
};
/* Queue a reply copied from p[0..n) (into a per-connection output buffer).
 * Returns 0; -ENOTCONN (not open, or closing); -EIO (PASTE_SEND_DURABLE on
 * a failed store: nothing queued, a non-durable error reply still can be).
 * -ENOMEM (no memory to queue it) and -E2BIG (over 4 GiB queued) lose a
 * reply from the middle of the stream, so the port closes the connection
 * once what was queued before has left: later sends get -ENOTCONN and the
 * client sees the close, never a later reply in the lost one's place. */
int paste_port_send(struct paste_port *pt, uint32_t conn, const void *p, size_t n, int flags);
/* Queue a reply straight from a store buffer (no copy); the buffer is
 * pinned (a reference) until the kernel is done with it. Returns as
 * paste_port_send, and -EINVAL for a range outside the store (nothing
 * queued, the connection stays open). */
int paste_port_send_store(struct paste_port *pt, uint32_t conn, uint32_t buf,
			  uint32_t off, uint32_t len, int flags);
/* Queue bytes [from, from + len) of a value held as extents of store
 * buffers. Up to PASTE_SEND_COPY_MAX bytes are copied (paste_port_send:
 * cheaper than a pin and an iovec of their own); longer ranges are sent
 * from the buffers (paste_port_send_store per extent). Returns as those;
 * on an error the bytes queued before it stay queued. Extents outside the
 * store: -EINVAL, nothing queued (copied or pinned alike). */
#define PASTE_SEND_COPY_MAX 512u
int paste_port_send_extents(struct paste_port *pt, uint32_t conn, const struct paste_extent *ext,
			    uint32_t n, uint64_t from, uint64_t len, int flags);
/* Close after everything queued has been sent. No further events for conn
 * after its CLOSED event. */
void paste_port_close_conn(struct paste_port *pt, uint32_t conn);
/* Close without sending what is still queued (a client that stopped
 * reading: Redis drops a pub/sub client past its output limit): nothing
 * more is sent, its CLOSED event comes in the next batch. */
void paste_port_drop_conn(struct paste_port *pt, uint32_t conn);
/* Bytes queued for conn and not yet sent (gated or not, in the kernel's
 * hands or not); 0 for a slot not open. */
uint64_t paste_port_conn_queued(const struct paste_port *pt, uint32_t conn);
/* Whether replies queued for conn have not all been sent yet (behind the
 * durability gate, queued, or in the kernel's hands: a slow reader). An
 * idle timer should not run while it is true. false for a bad slot. */
bool paste_port_conn_sending(const struct paste_port *pt, uint32_t conn);

/* conn's peer address (peer_addrs; *plen 0: unknown), its local address
 * (the listener's, or the socket's own where the engine has one; *llen 0:
 * unknown) and descriptor (epoll: the socket; uring: its direct
 * descriptor). Any pointer may be NULL; *peer is written only with plen,
 * *local only with llen. 0, or -ENOTCONN for a slot not open. */
struct sockaddr_storage;
int paste_port_conn_addr(const struct paste_port *pt, uint32_t conn, struct sockaddr_storage *peer,
			 uint32_t *plen, struct sockaddr_storage *local, uint32_t *llen, int *fd);
void paste_port_stats(const struct paste_port *pt, struct paste_port_stats *out);
enum paste_engine paste_port_engine(const struct paste_port *pt);
/* Bound port (useful with port 0): of listener 0, and of listener i
 * (0 for an i the port does not have). */
uint16_t paste_port_local_port(const struct paste_port *pt);
uint16_t paste_port_listener_port(const struct paste_port *pt, uint32_t i);

/* Kernel feature probe for the uring engine: 0 if usable, else -errno with
 * a message naming what is missing. */
int paste_uring_probe(struct paste_error *err);

#ifdef __cplusplus
}
#endif
#endif /* PASTE_H */
