/* commit-io - what one group commit costs on a disk, the two ways fsync
 * mode can make it (lib/persist_fsync.c), apart from any server:
 *
 *   pagecache  the file mapped MAP_SHARED; each commit dirties N pages
 *              through the mapping (a fault per page the last sync cleaned)
 *              and calls fdatasync, which writes them back;
 *   direct     the file mapped MAP_PRIVATE (copied at map time); each
 *              commit dirties N pages and writes them with one O_DIRECT
 *              pwrite, then fdatasync (a cache flush).
 *
 * The pages move forward through the file, as next-fit buffers do. Prints
 * wall and CPU (user + system: this thread's faults, write-back and
 * bio submission) per commit. Usage:
 *   taskset -c 1 build/bench/commit-io /var/tmp/ci.file [pages=32] [commits=2000]
 * The file (256 MiB) is created, zero-filled and removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <paste.h>

#define FILE_SIZE (256u << 20)
#define PAGE 4096u

static double now_s(void)
{
	return (double)paste_clock_ns() * 1e-9;
}

static double cpu_s(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
	       (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

static int run(const char *path, int direct, unsigned pages, unsigned commits)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		fprintf(stderr, "commit-io: %s: %s\n", path, strerror(errno));
		return -1;
	}
	static char zero[1 << 20];
	for (unsigned off = 0; off < FILE_SIZE; off += sizeof(zero))
		if (pwrite(fd, zero, sizeof(zero), off) != (ssize_t)sizeof(zero)) {
			fprintf(stderr, "commit-io: filling %s: %s\n", path, strerror(errno));
			goto fail;
		}
	fsync(fd);
	int dfd = direct ? open(path, O_RDWR | O_DIRECT) : fd;
	uint8_t *m = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE,
			  (direct ? MAP_PRIVATE : MAP_SHARED) | MAP_POPULATE, fd, 0);
	if (dfd < 0 || m == MAP_FAILED) {
		fprintf(stderr, "commit-io: %s: %s\n", direct ? "O_DIRECT" : "mmap", strerror(errno));
		goto fail;
	}
	if (direct)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	size_t span = (size_t)pages * PAGE, off = 0;
	double t0 = now_s(), c0 = cpu_s();
	for (unsigned i = 0; i < commits; i++) {
		if (off + span > FILE_SIZE)
			off = 0;
		for (size_t p = 0; p < span; p += PAGE)
			memset(m + off + p, (int)i, 1024);      /* a 1 KiB value per page */
		if (direct && pwrite(dfd, m + off, span, (off_t)off) != (ssize_t)span) {
			fprintf(stderr, "commit-io: direct write: %s\n", strerror(errno));
			goto fail;
		}
		if (fdatasync(dfd) < 0) {
			fprintf(stderr, "commit-io: fdatasync: %s\n", strerror(errno));
			goto fail;
		}
		off += span;
	}
	double wall = now_s() - t0, cpu = cpu_s() - c0;
	printf("%-9s %3u pages/commit: %7.1f us wall, %7.1f us CPU per commit\n",
	       direct ? "direct" : "pagecache", pages, wall / commits * 1e6, cpu / commits * 1e6);
	munmap(m, FILE_SIZE);
	if (direct)
		close(dfd);
	close(fd);
	unlink(path);
	return 0;
fail:
	close(fd);
	unlink(path);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: commit-io FILE [pages=32] [commits=2000]\n");
		return 2;
	}
	unsigned pages = argc > 2 ? (unsigned)atoi(argv[2]) : 32;
	unsigned commits = argc > 3 ? (unsigned)atoi(argv[3]) : 2000;
	if (pages == 0 || pages > 1024 || commits == 0) {
		fprintf(stderr, "commit-io: pages 1..1024, commits > 0\n");
		return 2;
	}
	for (int rep = 0; rep < 2; rep++)
		for (int direct = 0; direct < 2; direct++)
			if (run(argv[1], direct, pages, commits) < 0)
				return 1;
	return 0;
}
