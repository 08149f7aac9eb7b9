/*
 * store_medium.c - what backs a store file, and so what durability AUTO
 * means for it: a DAX mount (cache-line write-back persists: pmem), tmpfs
 * (DRAM that emulates it: emulated), anything else (a disk: fsync).
 * The store asks once per open (to map DAX files MAP_SYNC and to cache a
 * disk's file in small folios) and keeps the answer for its persist
 * objects (paste_store_medium). A few syscalls and ~30 lines of
 * /proc/self/mountinfo read per call.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include "paste.h"
#include "store_internal.h"

static bool has_dax_option(char *opts)
{
	char *save = NULL;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
		if (strcmp(o, "dax") == 0 || strcmp(o, "dax=always") == 0)
			return true;
	return false;
}

/* mountinfo: "id parent maj:min root mnt mount-opts [tags] - fstype src super-opts" */
static bool mount_is_dax(unsigned major, unsigned minor)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	bool dax = false;
	while (f && !dax && getline(&line, &cap, f) > 0) {
		unsigned ma, mi;
		char mopts[512], sopts[512];
		if (sscanf(line, "%*s %*s %u:%u %*s %*s %511s", &ma, &mi, mopts) != 3 ||
		    ma != major || mi != minor)
			continue;
		char *sep = strstr(line, " - ");
		dax = has_dax_option(mopts) ||
		      (sep && sscanf(sep + 3, "%*s %*s %511s", sopts) == 1 && has_dax_option(sopts));
	}
	free(line);
	if (f)
		fclose(f);
	return dax;
}

enum paste_durability paste_durability_detect(const char *path)
{
	struct statfs sfs;
	char *dir = NULL;
	const char *probe = path;
	enum paste_durability d = PASTE_DUR_FSYNC;

	/* A store about to be created is judged by its directory. */
	if (statfs(probe, &sfs) < 0 && errno == ENOENT && (dir = strdup(path)))
		probe = dirname(dir);
	if (statfs(probe, &sfs) == 0) {
		struct statx sx;
		if (sfs.f_type == TMPFS_MAGIC)
			d = PASTE_DUR_EMULATED;
		else if (statx(AT_FDCWD, probe, 0, STATX_BASIC_STATS, &sx) == 0 &&
			 (((sx.stx_attributes_mask & sx.stx_attributes) & STATX_ATTR_DAX) ||
			  mount_is_dax(sx.stx_dev_major, sx.stx_dev_minor)))
			d = PASTE_DUR_PMEM;
	}
	free(dir);
	return d;
}

const char *store_fs_name(const char *path)
{
	struct statfs sfs;
	if (statfs(path, &sfs) != 0)
		return "unknown";
	switch (sfs.f_type) {
	case TMPFS_MAGIC: return "tmpfs";
	case EXT4_SUPER_MAGIC: return "ext4";
	case XFS_SUPER_MAGIC: return "xfs";
	default: return "not DAX";
	}
}
