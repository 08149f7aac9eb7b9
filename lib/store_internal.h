/* store_internal.h - what lib/store.c (the runtime: open, mapping,
 * references, free list, failed state, watch) and lib/store_upgrade.c
 * (earlier layouts made the current one) ask of lib/store_format.c (the
 * on-disk layout, described at its top). Not API. */
#ifndef PASTE_STORE_INTERNAL_H
#define PASTE_STORE_INTERNAL_H

#include <assert.h>
#include <stddef.h>
#include "paste.h"

/* The superblock. A packed struct is the byte layout on x86-64
 * (little-endian, no padding); the asserts pin every offset so a change
 * shows up at compile time. */
struct store_super {
	char     magic[8];
	uint32_t version;
	uint32_t header_size;
	uint32_t buf_size;
	uint32_t nbufs;
	uint32_t log_lanes;
	uint64_t file_size;
	uint64_t ckpt_offset;
	uint64_t log_offset;
	uint64_t lane_size;
	uint64_t buf_offset;
	uint64_t uuid[2];
	uint64_t created_ns;   /* CLOCK_REALTIME at format */
	/* since version 2 (version 1 had its CRC here, at 92) */
	uint64_t node_offset;  /* B+tree node area (= buf_offset when node_size is 0) */
	uint64_t node_size;    /* bytes, a multiple of 4096: 0 or >= 3 pages */
	uint32_t crc;          /* CRC32C of every byte before it */
} __attribute__((packed));

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "layout is little-endian");
static_assert(sizeof(struct store_super) == 112, "superblock size");
static_assert(offsetof(struct store_super, version) == 8, "layout");
static_assert(offsetof(struct store_super, log_lanes) == 24, "layout");
static_assert(offsetof(struct store_super, file_size) == 28, "layout");
static_assert(offsetof(struct store_super, buf_offset) == 60, "layout");
static_assert(offsetof(struct store_super, uuid) == 68, "layout");
static_assert(offsetof(struct store_super, created_ns) == 84, "layout");
static_assert(offsetof(struct store_super, node_offset) == 92, "layout");
static_assert(offsetof(struct store_super, node_size) == 100, "layout");
static_assert(offsetof(struct store_super, crc) == 108, "layout");

/* The geometry fields of a superblock, and why that geometry is
 * impossible (NULL: it is what this layout writes; every offset follows
 * from the sizes). */
void store_geom_from_super(struct paste_store_geom *g, const struct store_super *sb);
const char *store_geom_check(const struct paste_store_geom *g);

/* Geometry for a new store from cfg (0 fields take defaults); -EINVAL with
 * a sentence naming path when cfg cannot make a store. */
int store_geom_from_config(struct paste_store_geom *g, const char *path,
			   const struct paste_store_config *cfg, struct paste_error *err);

/* Create and format a new file with geometry g (its uuid is filled in).
 * Returns the fd, -EEXIST (err untouched) when the path exists, or
 * another error; on failure only a file it created is removed. */
int store_create(const char *path, struct paste_store_geom *g, struct paste_error *err);

/* Validate the superblock of the open file fd against itself, the file's
 * size and cfg's non-zero fields; fill *g. Reads only. */
int store_validate(int fd, const char *path, const struct paste_store_config *cfg,
		   struct paste_store_geom *g, struct paste_error *err);

/* The file system a path is on, for messages: "tmpfs", "ext4", "xfs",
 * "not DAX" or "unknown" (lib/store_medium.c). */
const char *store_fs_name(const char *path);

/* What lib/persist_fsync.c asks of lib/store.c: replace the shared mapping
 * with a private copy at the same address, once per store (fsync mode's
 * direct writes then are the only way bytes reach the file). Done before
 * the store carries I/O: the first persist object's open. */
int store_map_private(struct paste_store *st, struct paste_error *err);
bool store_is_private(const struct paste_store *st);
/* Opened with PASTE_STORE_ONE_THREAD: the log's lanes take no lock. */
bool store_one_thread(const struct paste_store *st);
/* Live fsync persist objects on the store, writing directly or through
 * the page cache, after adding delta. */
int store_fsync_users(struct paste_store *st, bool direct, int delta);

#endif
