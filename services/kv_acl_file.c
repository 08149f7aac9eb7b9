/*
 * kv_acl_file.c - the ACL file (--aclfile): its users replace the
 * built-in ones at start and on ACL LOAD (all or none: kv_acl_load), and
 * ACL SAVE writes them (kv_acl_save's text) to a temporary file, syncs
 * it, renames it over the old one and syncs the directory, so that a
 * crash leaves the old file or the new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_acl.h"

static char *acl_file;                 /* --aclfile; NULL: none */

static int read_file(const char *path, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	char *p = NULL;
	int r = 0;
	if (fstat(fd, &st) || !(p = malloc((size_t)st.st_size + 1))) {
		r = -ENOMEM;
	} else {
		size_t got = 0;
		while (got < (size_t)st.st_size) {
			ssize_t k = read(fd, p + got, (size_t)st.st_size - got);
			if (k <= 0) {
				r = k < 0 ? -errno : -EIO;
				break;
			}
			got += (size_t)k;
		}
		*len = got;
	}
	close(fd);
	if (r)
		free(p);
	else
		*out = p;
	return r;
}

static int load_file(const char *path, char *err, size_t cap)
{
	char *text = NULL;
	size_t len = 0;
	int r = read_file(path, &text, &len);
	if (r) {
		snprintf(err, cap, "ERR Error loading ACLs, opening file '%s': %s", path, strerror(-r));
		return -1;
	}
	r = kv_acl_load(path, text, len, err, cap);
	free(text);
	return r;
}

int kv_acl_start(const char *path, char *err, size_t cap)
{
	free(acl_file);
	acl_file = NULL;
	if (!path || !*path)
		return 0;
	if (!(acl_file = strdup(path))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	return load_file(path, err, cap);
}

/* Written to a temporary file, synced, renamed over the old one, and
 * the directory synced: a crash leaves the old file or the new one. */
static int save_file(const char *path)
{
	char *text = kv_acl_save();
	if (!text)
		return -ENOMEM;
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 16);
	int r = 0;
	if (!tmp) {
		free(text);
		return -ENOMEM;
	}
	snprintf(tmp, plen + 16, "%s.tmp-%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
	} else {
		size_t len = strlen(text), at = 0;
		while (at < len && r == 0) {
			ssize_t k = write(fd, text + at, len - at);
			if (k < 0)
				r = -errno;
			else
				at += (size_t)k;
		}
		if (!r && fsync(fd))
			r = -errno;
		close(fd);
		if (!r && rename(tmp, path))
			r = -errno;
		if (r) {
			unlink(tmp);
		} else {                 /* the rename itself durable: the directory */
			char *slash = strrchr(tmp, '/');
			if (slash)
				*slash = 0;
			int dfd = open(slash ? (slash == tmp ? "/" : tmp) : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd >= 0) {
				if (fsync(dfd))
					r = -errno;
				close(dfd);
			}
		}
	}
	free(tmp);
	free(text);
	return r;
}

const char *kv_acl_file_path(void)
{
	return acl_file;
}

int kv_acl_file_load(char *err, size_t cap)
{
	return load_file(acl_file, err, cap);
}

int kv_acl_file_save(void)
{
	return save_file(acl_file);
}
