/* persist.c - making bytes of the store durable: flush, fence, group commit.
 *
 * Modes and what each call costs (on DRAM-emulated PM and on ext4 on
 * virtio; docs/results.md, "WAL on emulated PM" and "WAL on disk"):
 *   EMULATED / PMEM  flush = queue the range (~2 ns; see WB_RANGES); fence =
 *                    clwb (else clflushopt, else clflush) per queued 64-byte
 *                    line, ~5 ns each to issue, then sfence, which waits for
 *                    the write-backs (a 1 KiB record: memcpy ~0.2 us,
 *                    memcpy + clwb + sfence ~0.45 us), plus pm_latency_ns of
 *                    busy waiting in EMULATED when anything was flushed
 *                    (PASTE's evaluation emulates slow PM with 10 us).
 *   FSYNC            flush = a min/max update of the dirty range, ~1 ns;
 *                    fence = fdatasync, ~55-100 us (p99 ~175 us); the
 *                    io_uring port instead submits the fdatasync itself
 *                    (begin_commit/end_commit) so one sync covers a batch.
 *   NONE             nothing; replies are not durable.
 *
 * Why not libpmem2 (1.12, installed): it maps the file itself, with no way
 * to ask for MAP_POPULATE, and the store must be prefaulted and MAP_SHARED
 * so io_uring provided buffers can live in it (tmpfs or ext4). On a non-DAX
 * file it reports page granularity and its flush becomes msync, so on
 * /dev/shm it cannot emulate PM with clwb + sfence as PASTE's evaluation
 * does; requiring cache-line granularity there fails the mapping. What
 * remains (picking clwb/clflushopt/clflush by CPUID) is twenty lines here,
 * and the crash-image shim must see every flushed line anyway. So it would
 * add a run-time dependency and take away control for nothing we need. On a
 * real DAX mount we do what it does: MAP_SYNC (store.c) + clwb + sfence.
 *
 * The crash-image shim (built with -DPASTE_PERSIST_SHIM, libpaste_shim):
 * on /dev/shm a killed process loses nothing, not even unflushed lines, so
 * kill -9 tests cannot catch a missing flush or fence. With the environment
 * variable PASTE_SHIM_IMAGE=FILE, the first paste_persist_open of the
 * process writes FILE as a copy of the whole store; from then on only lines
 * that were written back and then fenced (or covered by a completed
 * fdatasync) are written into it. Written back means what the hardware is
 * asked to write, not what a flush named: in EMULATED and PMEM the lines of
 * the queued ranges when their clwb is issued (so a range lost in the
 * queue's merging is missing from the image), with their bytes at that
 * moment; in fsync mode with direct writes the blocks a commit writes, with
 * the bytes it writes (persist_fsync.c); through the page cache, the
 * flushed lines with their bytes at flush time. FILE is what a power
 * failure would have left. One store per process. Each fence writes its
 * lines in write-back order under flock(LOCK_EX) on FILE: a copier that
 * takes flock(LOCK_SH) sees whole fences only; one that does not may see a
 * fence half applied, which is a legitimate crash during the fence.
 *
 * A failed barrier (PASTE_FAULT, below, or a real error) is where the shim
 * takes the process to crash. Real PM, like a disk's cache, may have
 * persisted any subset of the lines written back since the last barrier
 * before the crash; PASTE_SHIM_CRASH=POLICY says which reach the image
 * then: "none" (the default), "all", "last" (only the line written back
 * last), "reverse[:SEED]" (the last k lines, k from 1 to all drawn from
 * SEED: a prefix in reverse write-back order), "random[:SEED]" (each line
 * with probability 1/2). A SEED (decimal, default 1) makes a run
 * reproducible; each crash of the process draws anew. Only the failing
 * persist object's lines are candidates.
 */
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <immintrin.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include "paste.h"
#include "persist_internal.h"
#include "store_internal.h"

#if !defined(__x86_64__)
#error "persist.c: cache-line write-back is implemented for x86-64 only"
#endif

#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

#define LINE 64u
#define MAX_PM_LATENCY_NS 1000000000ull   /* 1 s: more is a typo, not an experiment */

struct shim_line {
	uint64_t off;
	uint8_t bytes[LINE];
};

struct shim_lines {
	struct shim_line *v;
	size_t n, cap;
};

/* Ranges flushed (EMULATED, PMEM) whose write-back waits for the fence.
 * Why wait: a cache-line write-back is ordered before every later locked
 * instruction (a lock, an atomic reference count, an LSN), which then
 * stalls until the line is written: issued per record, each write-back
 * would be paid at the next atomic (in a pkvs SET, ~16 % of the server's
 * CPU in the first atomics after the flushes: docs/results.md,
 * "Write-backs queued until the fence"). Issued together just before the
 * sfence, the batch's write-backs overlap. Adjacent ranges merge; a full
 * list is written back at once (bounded memory, 4 KiB). */
#define WB_RANGES 256u

struct paste_persist {
	struct paste_store *st;
	enum paste_durability mode;
	uint64_t pm_latency_ns;
	void (*writeback)(const uint8_t *p, const uint8_t *end);
	const char *insn;
	bool pending;
	uint32_t nwb;                     /* queued write-backs: [lo, hi) file offsets */
	struct { uint64_t lo, hi; } wb[WB_RANGES];
	struct fsync_io io;               /* fsync: lib/persist_fsync.c */
	bool io_open;
	bool in_flight;                   /* fsync: a begun, unfinished commit */
	uint64_t ticket;                  /* the last commit begun */
	uint64_t ticket_epoch;            /* the epoch that commit closes */
	int fd;                           /* fsync: this object's own descriptor */
	uint64_t epoch;                   /* open epoch: flushes belong to it */
	uint64_t durable;                 /* __atomic: highest durable epoch */
	struct shim_lines pend, flight;   /* shim only: snapshots not yet durable */
};

static const char *const durability_names[] = {
	[PASTE_DUR_AUTO] = "auto", [PASTE_DUR_NONE] = "none",
	[PASTE_DUR_EMULATED] = "emulated", [PASTE_DUR_PMEM] = "pmem",
	[PASTE_DUR_FSYNC] = "fsync",
};
#define NDURABILITY (sizeof(durability_names) / sizeof(durability_names[0]))

const char *paste_durability_name(enum paste_durability d)
{
	return (unsigned)d < NDURABILITY ? durability_names[d] : "unknown";
}

int paste_durability_parse(const char *s, enum paste_durability *out)
{
	for (unsigned i = 0; s && i < NDURABILITY; i++) {
		if (strcmp(s, durability_names[i]) == 0) {
			*out = (enum paste_durability)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- cache-line write-back, chosen by CPUID ---------------------------- */

__attribute__((target("clwb")))
static void writeback_clwb(const uint8_t *p, const uint8_t *end)
{
	for (; p < end; p += LINE)
		_mm_clwb((void *)p);   /* line stays cached: reads after it still hit */
}

__attribute__((target("clflushopt")))
static void writeback_clflushopt(const uint8_t *p, const uint8_t *end)
{
	for (; p < end; p += LINE)
		_mm_clflushopt((void *)p);   /* evicts: the next read misses */
}

static void writeback_clflush(const uint8_t *p, const uint8_t *end)
{
	for (; p < end; p += LINE)
		_mm_clflush(p);   /* evicts and serialises with other clflushes */
}

static void pick_writeback(struct paste_persist *p)
{
	unsigned a, b = 0, c, d;
	__get_cpuid_count(7, 0, &a, &b, &c, &d);
	if (b & (1u << 24)) {
		p->writeback = writeback_clwb;
		p->insn = "clwb";
	} else if (b & (1u << 23)) {
		p->writeback = writeback_clflushopt;
		p->insn = "clflushopt";
	} else {
		p->writeback = writeback_clflush;
		p->insn = "clflush";
	}
}

/* Busy wait, as PASTE's emulation does: sleeping would give the CPU away
 * and make a 10 us fence cost a context switch. */
static void spin_ns(uint64_t ns)
{
	uint64_t end = paste_clock_ns() + ns;
	do
		_mm_pause();
	while (paste_clock_ns() < end);
}

/* ---- the crash-image shim (test builds only) ---------------------------- */

#ifdef PASTE_PERSIST_SHIM
static pthread_mutex_t shim_lock = PTHREAD_MUTEX_INITIALIZER;
static int shim_fd = -1;
static uint64_t shim_uuid[2];

/* PASTE_SHIM_CRASH (the top): what a failed barrier's lines do. */
enum shim_policy { CRASH_NONE, CRASH_ALL, CRASH_LAST, CRASH_REVERSE, CRASH_RANDOM };
static enum shim_policy shim_policy;
static uint64_t shim_seed;        /* splitmix64 state, under shim_lock */

static int shim_parse_crash(const char *s)
{
	static const char *const names[] = { "none", "all", "last", "reverse", "random" };
	size_t n = s ? strcspn(s, ":") : 0;
	shim_policy = CRASH_NONE;
	shim_seed = 1;
	if (!s || !*s)
		return 0;
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strlen(names[i]) != n || strncmp(s, names[i], n) != 0)
			continue;
		if (s[n] == ':') {
			char *end;
			errno = 0;
			shim_seed = strtoull(s + n + 1, &end, 10);
			if (i < CRASH_REVERSE || s[n + 1] < '0' || s[n + 1] > '9' || *end || errno)
				return -EINVAL;
		}
		shim_policy = (enum shim_policy)i;
		return 0;
	}
	return -EINVAL;
}

static uint64_t shim_draw(void)
{
	uint64_t z = (shim_seed += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int write_all(int fd, const uint8_t *p, uint64_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (uint64_t)w;
	}
	return 0;
}

/* Copy the store to PASTE_SHIM_IMAGE once per process. Written under a
 * temporary name and renamed, so a copier never sees half an image. */
static int shim_attach(struct paste_store *st, struct paste_error *err)
{
	const char *image = getenv("PASTE_SHIM_IMAGE");
	const struct paste_store_geom *g = paste_store_geom(st);
	int r = 0;

	if (!image || !*image)
		return 0;
	pthread_mutex_lock(&shim_lock);
	if (shim_fd >= 0) {
		if (shim_uuid[0] != g->uuid[0] || shim_uuid[1] != g->uuid[1])
			r = paste_error_set(err, -EINVAL, "%s: shim image %s already mirrors another store "
					    "(one store per process)", paste_store_path(st), image);
		goto out;
	}
	const char *crash = getenv("PASTE_SHIM_CRASH");
	if (shim_parse_crash(crash) < 0) {
		r = paste_error_set(err, -EINVAL, "PASTE_SHIM_CRASH=%s: want none, all, last, "
				    "reverse[:SEED] or random[:SEED]", crash);
		goto out;
	}
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", image);
	int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || (r = write_all(fd, paste_store_base(st), g->file_size)) < 0 ||
	    rename(tmp, image) < 0) {
		r = r < 0 ? r : -errno;
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		r = paste_error_set(err, r, "%s: cannot write shim image %s: %s",
				    paste_store_path(st), image, strerror(-r));
		goto out;
	}
	shim_fd = fd;
	shim_uuid[0] = g->uuid[0];
	shim_uuid[1] = g->uuid[1];
out:
	pthread_mutex_unlock(&shim_lock);
	return r;
}

/* Lines [off, off + len) were written back, with the bytes at src. */
static void shim_record(struct shim_lines *l, uint64_t off, const uint8_t *src, uint64_t len)
{
	if (shim_fd < 0)
		return;
	for (uint64_t i = 0; i < len; i += LINE) {
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 256;
			struct shim_line *v = realloc(l->v, cap * sizeof(*v));
			if (!v) {
				fprintf(stderr, "paste shim: out of memory for flushed lines\n");
				abort();
			}
			l->v = v;
			l->cap = cap;
		}
		l->v[l->n].off = off + i;
		memcpy(l->v[l->n].bytes, src + i, LINE);
		l->n++;
	}
}

/* Lines [lo, hi) of the store are written back now, as they are. */
static void shim_snapshot(struct paste_persist *p, uint64_t lo, uint64_t hi)
{
	shim_record(&p->pend, lo, paste_store_base(p->st) + lo, hi - lo);
}

/* A flush: through the page cache the next fdatasync writes the line
 * whatever else happens, so it is recorded now; elsewhere the write-back
 * records it (writeback_queued, persist_shim_written). */
static void shim_flushed(struct paste_persist *p, uint64_t lo, uint64_t hi)
{
	if (p->mode == PASTE_DUR_FSYNC && !fsio_direct(&p->io))
		shim_snapshot(p, lo, hi);
}

void persist_shim_written(struct fsync_io *io, bool flight, uint64_t off, const uint8_t *bytes,
			  uint64_t len)
{
	struct paste_persist *p = (struct paste_persist *)((char *)io - offsetof(struct paste_persist, io));
	shim_record(flight ? &p->flight : &p->pend, off, bytes, len);
}

static void shim_write(const struct shim_line *x)
{
	if (pwrite(shim_fd, x->bytes, LINE, (off_t)x->off) != LINE)
		fprintf(stderr, "paste shim: image write at %llu failed: %s\n",
			(unsigned long long)x->off, strerror(errno));
}

/* The lines became durable: write them into the image, in write-back order. */
static void shim_apply(struct shim_lines *l)
{
	if (shim_fd < 0 || l->n == 0)
		return;
	pthread_mutex_lock(&shim_lock);
	flock(shim_fd, LOCK_EX);
	for (size_t i = 0; i < l->n; i++)
		shim_write(&l->v[i]);
	flock(shim_fd, LOCK_UN);
	pthread_mutex_unlock(&shim_lock);
	l->n = 0;
}

/* A barrier failed: the process crashes here. Of what it wrote back since
 * its last barrier (a commit's, then the rest), PASTE_SHIM_CRASH picks the
 * lines that reach the image, applied in write-back order; the others
 * never will. */
static void shim_crash(struct paste_persist *p)
{
	size_t nf = p->flight.n, n = nf + p->pend.n;
	if (shim_fd >= 0 && n) {
		pthread_mutex_lock(&shim_lock);
		size_t from = shim_policy == CRASH_ALL ? 0 : shim_policy == CRASH_LAST ? n - 1 :
			      shim_policy == CRASH_REVERSE ? n - 1 - shim_draw() % n : n;
		flock(shim_fd, LOCK_EX);
		for (size_t i = 0; i < n; i++)
			if (shim_policy == CRASH_RANDOM ? shim_draw() & 1 : i >= from)
				shim_write(i < nf ? &p->flight.v[i] : &p->pend.v[i - nf]);
		flock(shim_fd, LOCK_UN);
		pthread_mutex_unlock(&shim_lock);
	}
	p->flight.n = p->pend.n = 0;
}

static void shim_move(struct shim_lines *to, struct shim_lines *from)
{
	struct shim_lines t = *to;
	*to = *from;
	*from = t;
	from->n = 0;
}
#else
static int shim_attach(struct paste_store *st, struct paste_error *err) { (void)st; (void)err; return 0; }
static void shim_snapshot(struct paste_persist *p, uint64_t lo, uint64_t hi) { (void)p; (void)lo; (void)hi; }
static void shim_flushed(struct paste_persist *p, uint64_t lo, uint64_t hi) { (void)p; (void)lo; (void)hi; }
static void shim_apply(struct shim_lines *l) { (void)l; }
static void shim_crash(struct paste_persist *p) { (void)p; }
static void shim_move(struct shim_lines *to, struct shim_lines *from) { (void)to; (void)from; }
#endif

/* ---- fault injection (test builds) -------------------------------------- */

enum fault_op { FAULT_FLUSH, FAULT_FENCE, FAULT_FDATASYNC, FAULT_COMMIT, NFAULT_OPS };

#ifdef PASTE_PERSIST_SHIM
struct fault_rule {
	uint64_t nth;      /* 0: no rule */
	bool and_later;
	int err;
};
static struct fault_rule fault_rules[NFAULT_OPS];
static uint64_t fault_calls[NFAULT_OPS];     /* __atomic */
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;

static void fault_parse(void)
{
	static const char *const names[NFAULT_OPS] = { "flush", "fence", "fdatasync", "commit" };
	const char *env = getenv("PASTE_FAULT");
	char *copy = env ? strdup(env) : NULL, *save = NULL;
	for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
		char op[16], eno[16] = "EIO";
		unsigned long long n;
		char plus = 0;
		int k = sscanf(tok, "%15[a-z]:%llu%c", op, &n, &plus);
		const char *e = strchr(strchr(tok, ':') ? strchr(tok, ':') + 1 : tok, ':');
		if (e)
			snprintf(eno, sizeof(eno), "%s", e + 1);
		int op_i = -1;
		for (int i = 0; i < NFAULT_OPS; i++)
			if (k >= 2 && strcmp(op, names[i]) == 0)
				op_i = i;
		int err = strcmp(eno, "EIO") == 0 ? EIO : strcmp(eno, "ENOSPC") == 0 ? ENOSPC : 0;
		if (op_i < 0 || n == 0 || !err) {
			fprintf(stderr, "paste: PASTE_FAULT: cannot parse '%s' (OP:N[+][:EIO|ENOSPC], "
				"OP = flush|fence|fdatasync|commit)\n", tok);
			abort();
		}
		fault_rules[op_i] = (struct fault_rule){ n, plus == '+', err };
	}
	free(copy);
}

/* 0, or the negative errno this call of op is to fail with. */
static int fault_hit(enum fault_op op)
{
	pthread_once(&fault_once, fault_parse);
	const struct fault_rule *r = &fault_rules[op];
	if (!r->nth)
		return 0;
	uint64_t call = __atomic_add_fetch(&fault_calls[op], 1, __ATOMIC_RELAXED);
	return call == r->nth || (r->and_later && call > r->nth) ? -r->err : 0;
}
#else
static int fault_hit(enum fault_op op) { (void)op; return 0; }
#endif

/* ---- the persist object ------------------------------------------------ */

int paste_persist_open(struct paste_persist **out, struct paste_store *st,
		       const struct paste_persist_config *cfg, struct paste_error *err)
{
	struct paste_persist_config none = {0};
	*out = NULL;
	if (!cfg)
		cfg = &none;
	if (!st)
		return paste_error_set(err, -EINVAL, "persist: no store given");
	const char *path = paste_store_path(st);
	if ((unsigned)cfg->mode >= NDURABILITY)
		return paste_error_set(err, -EINVAL, "%s: unknown durability mode %d", path, (int)cfg->mode);
	if (cfg->pm_latency_ns > MAX_PM_LATENCY_NS)
		return paste_error_set(err, -EINVAL, "%s: emulated PM latency %llu ns is over 1 s",
				       path, (unsigned long long)cfg->pm_latency_ns);
	struct paste_persist *p = calloc(1, sizeof(*p));
	if (!p)
		return paste_error_set(err, -ENOMEM, "%s: out of memory", path);
	p->st = st;
	p->mode = cfg->mode == PASTE_DUR_AUTO ? paste_store_medium(st) : cfg->mode;
	p->pm_latency_ns = cfg->pm_latency_ns;
	p->fd = -1;
	p->epoch = 1;
	pick_writeback(p);
	int r = 0;
	if (p->mode == PASTE_DUR_PMEM && !paste_store_map_sync(st)) {
		/* clwb + sfence on a page-cache mapping persists nothing: the
		 * data sits in DRAM until writeback. Never claim pmem then. */
		r = paste_error_set(err, -EOPNOTSUPP, "%s: durability pmem needs a DAX file system "
				    "mapped with MAP_SYNC, but the store is on %s (no MAP_SYNC); "
				    "use --durability fsync (or emulated on tmpfs)", path,
				    store_fs_name(path));
	}
	if (r == 0 && p->mode == PASTE_DUR_FSYNC) {
		/* A descriptor of our own: Linux reports a writeback error once
		 * per open file description, so threads sharing one could
		 * each miss the other's error (PostgreSQL's fsync problem). */
		struct stat a, b;
		p->fd = open(path, O_RDWR | O_CLOEXEC);
		if (p->fd < 0)
			r = paste_error_set(err, -errno, "%s: cannot open for fdatasync: %s", path, strerror(errno));
		else if (fstat(p->fd, &a) < 0 || fstat(paste_store_fd(st), &b) < 0 ||
			 a.st_dev != b.st_dev || a.st_ino != b.st_ino)
			r = paste_error_set(err, -ESTALE, "%s: the path no longer names the open store", path);
	}
	if (r == 0 && p->mode == PASTE_DUR_FSYNC && (r = fsio_open(&p->io, st, p->fd, cfg->writers, err)) == 0)
		p->io_open = true;
	if (r == 0 && p->mode != PASTE_DUR_FSYNC && p->mode != PASTE_DUR_NONE && store_is_private(st))
		r = paste_error_set(err, -EINVAL, "%s: durability %s, but the store is mapped privately "
				    "for another persist object's direct writes (fsync mode): use one "
				    "durability per store", path, paste_durability_name(p->mode));
	if (r == 0)
		r = shim_attach(st, err);
	if (r < 0) {
		if (p->io_open)
			fsio_close(&p->io);
		if (p->fd >= 0)
			close(p->fd);
		free(p);
		return r;
	}
	*out = p;
	return 0;
}

void paste_persist_close(struct paste_persist *p)
{
	if (!p)
		return;
	if (p->io_open)
		fsio_close(&p->io);
	if (p->fd >= 0)
		close(p->fd);
	free(p->pend.v);
	free(p->flight.v);
	free(p);
}

uint64_t paste_persist_epoch(const struct paste_persist *p)
{
	return p->epoch;
}

uint64_t paste_persist_durable(const struct paste_persist *p)
{
	if (p->mode == PASTE_DUR_NONE)
		return UINT64_MAX;
	return __atomic_load_n(&p->durable, __ATOMIC_ACQUIRE);
}

/* Everything up to `epoch` is durable, unless the store failed meanwhile
 * (in this thread or another): then nothing is published, ever. */
static int publish(struct paste_persist *p, uint64_t epoch)
{
	int f = paste_store_failed(p->st, NULL);
	if (f)
		return f;
	if (epoch > __atomic_load_n(&p->durable, __ATOMIC_RELAXED))
		__atomic_store_n(&p->durable, epoch, __ATOMIC_RELEASE);
	return 0;
}

enum paste_durability paste_persist_mode(const struct paste_persist *p)
{
	return p->mode;
}

bool persist_writes_direct(const struct paste_persist *p)
{
	return p->mode == PASTE_DUR_FSYNC && fsio_direct(&p->io);
}

const char *paste_persist_flush_insn(const struct paste_persist *p)
{
	if (p->mode == PASTE_DUR_FSYNC)
		return fsio_direct(&p->io) ? "direct writes" : "page cache";
	return p->mode == PASTE_DUR_EMULATED || p->mode == PASTE_DUR_PMEM ? p->insn : "none";
}

static void writeback_queued(struct paste_persist *p)
{
	const uint8_t *base = paste_store_base(p->st);
	for (uint32_t i = 0; i < p->nwb; i++) {
		p->writeback(base + p->wb[i].lo, base + p->wb[i].hi);
		shim_snapshot(p, p->wb[i].lo, p->wb[i].hi);
	}
	p->nwb = 0;
}

void paste_persist_flush(struct paste_persist *p, const void *addr, size_t len)
{
	if (p->mode == PASTE_DUR_NONE || len == 0)
		return;
	int f = fault_hit(FAULT_FLUSH);
	if (f)
		paste_store_fail(p->st, f, "flush of %zu bytes failed (injected): %s", len, strerror(-f));
	const uint8_t *base = paste_store_base(p->st);
	uint64_t size = paste_store_geom(p->st)->file_size;
	uintptr_t a = (uintptr_t)addr, b = (uintptr_t)base;
	if (a < b || a - b >= size || len > size - (a - b)) {
		fprintf(stderr, "paste: %s: flush of %zu bytes at %p lies outside the store: ignored\n",
			paste_store_path(p->st), len, addr);
		return;
	}
	/* The file is whole pages, so whole lines never run past its end. */
	uint64_t lo = (a - b) & ~(uint64_t)(LINE - 1);
	uint64_t hi = (a - b + len + LINE - 1) & ~(uint64_t)(LINE - 1);
	if (p->mode == PASTE_DUR_FSYNC) {
		fsio_add(&p->io, lo, hi);
	} else if (p->nwb && lo <= p->wb[p->nwb - 1].hi && hi >= p->wb[p->nwb - 1].lo) {
		if (lo < p->wb[p->nwb - 1].lo)
			p->wb[p->nwb - 1].lo = lo;
		if (hi > p->wb[p->nwb - 1].hi)
			p->wb[p->nwb - 1].hi = hi;
	} else {
		if (p->nwb == WB_RANGES)
			writeback_queued(p);
		p->wb[p->nwb].lo = lo;
		p->wb[p->nwb++].hi = hi;
	}
	shim_flushed(p, lo, hi);
	p->pending = true;
}

bool paste_persist_pending(const struct paste_persist *p)
{
	return p->pending;
}

static void clear_pending(struct paste_persist *p)
{
	p->pending = false;
}

/* What a failed fsync-mode barrier had run, for its message. */
static const char *sync_what(const struct paste_persist *p)
{
	return fsio_direct(&p->io) ? "direct writes, fdatasync" : "fdatasync";
}

/* A failed barrier: the lines it covered are not known durable and never
 * will be (the shim's image takes what its crash policy says of them), and
 * neither is anything flushed after them. The pending state is
 * kept (nothing is "done"); the store's failed state stops every ack. */
static int barrier_failed(struct paste_persist *p, int r, const char *what)
{
	paste_store_fail(p->st, r, "%s failed: %s", what, strerror(-r));
	shim_crash(p);
	return paste_store_failed(p->st, NULL);
}

int paste_persist_fence(struct paste_persist *p)
{
	int f = paste_store_failed(p->st, NULL);
	if (f)
		return f;
	if (p->mode == PASTE_DUR_NONE)
		return 0;
	uint64_t closing = p->epoch;
	if (p->mode != PASTE_DUR_FSYNC) {
		writeback_queued(p);
		_mm_sfence();   /* waits for this thread's write-backs to complete */
		if (!p->pending)
			return publish(p, closing - 1);
		p->epoch++;
		if (p->mode == PASTE_DUR_EMULATED && p->pm_latency_ns)
			spin_ns(p->pm_latency_ns);
		if ((f = fault_hit(FAULT_FENCE)) < 0)
			return barrier_failed(p, f, "fence (injected)");
		shim_apply(&p->pend);
		clear_pending(p);
		return publish(p, closing);
	}
	/* The sync waits for a commit still in flight and covers it: apply
	 * its lines first so the image sees older snapshots before newer. */
	if (!p->pending && !p->in_flight)
		return publish(p, closing - 1);
	p->epoch++;
	int r = fsio_sync(&p->io, p->in_flight);
	if (r == 0)
		r = fault_hit(FAULT_FDATASYNC);
	if (r < 0)
		return barrier_failed(p, r, sync_what(p));
	shim_apply(&p->flight);
	shim_apply(&p->pend);
	clear_pending(p);
	return publish(p, closing);
}

int paste_persist_begin_commit(struct paste_persist *p, uint64_t *ticket)
{
	int f = paste_store_failed(p->st, NULL);
	if (f)
		return f;
	if (p->mode != PASTE_DUR_FSYNC || !p->pending)
		return -ENODATA;
	if (p->in_flight)
		return -EBUSY;
	if (!fsio_can_begin(&p->io))
		return -EOPNOTSUPP;      /* no io_uring: fences only (the epoll engine) */
	p->in_flight = true;
	*ticket = ++p->ticket;
	p->ticket_epoch = p->epoch++;
	shim_move(&p->flight, &p->pend);
	clear_pending(p);
	int fd = fsio_begin(&p->io);
	if (fd < 0) {
		p->in_flight = false;
		return barrier_failed(p, fd, "group commit (submitting its writes)");
	}
	return fd;
}

int paste_persist_end_commit(struct paste_persist *p, uint64_t ticket, int res)
{
	const char *path = paste_store_path(p->st);
	if (!p->in_flight || ticket != p->ticket) {
		fprintf(stderr, "paste: %s: end of commit %llu, which is not in flight: ignored\n",
			path, (unsigned long long)ticket);
		return -EINVAL;
	}
	p->in_flight = false;
	int r = fsio_end(&p->io);
	res = res < 0 ? res : r;
	if (res == 0)
		res = fault_hit(FAULT_COMMIT);
	if (res < 0) {
		char what[96];
		snprintf(what, sizeof(what), "group commit %llu (%s)", (unsigned long long)ticket, sync_what(p));
		return barrier_failed(p, res, what);
	}
	shim_apply(&p->flight);
	return publish(p, p->ticket_epoch);
}
