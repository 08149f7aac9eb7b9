/* store_internal.h - what lib/store.c (the runtime: open, mapping,
 * references, free list, failed state, watch) asks of lib/store_format.c
 * (the on-disk layout, described at its top). Not API. */
#ifndef PASTE_STORE_INTERNAL_H
#define PASTE_STORE_INTERNAL_H

#include "paste.h"

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
/* Live fsync persist objects on the store, writing directly or through
 * the page cache, after adding delta. */
int store_fsync_users(struct paste_store *st, bool direct, int delta);

#endif
