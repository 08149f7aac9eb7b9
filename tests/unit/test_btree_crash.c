/* test_btree_crash.c - crash images of the B+tree (libpaste_shim).
 *
 * A workload (batches of SET/DEL and a CLEAR, each value in a buffer
 * allocated for it, so freed buffers are reused at once; one barrier per
 * batch; checkpoints every few dozen records) runs in a child with
 * PASTE_SHIM_IMAGE (the image holds only lines written back and then
 * fenced) and PASTE_FAULT making its Nth barrier fail, for N = 1, 2, ...
 * until a run completes: every crash point at barrier granularity, inside
 * checkpoints too (pages fenced but not the meta; the meta but not the
 * log's truncation). At the failed barrier PASTE_SHIM_CRASH decides which
 * of the lines written back since the last barrier reach the image, as
 * real PM may persist any of them: none, only the last, the last k, or a
 * random subset (a checkpoint whose meta could become durable before its
 * pages is caught here). Another child opens a copy of the image and checks:
 * the tree equals the model after some prefix of the operations, no
 * shorter than the acknowledged ones (nothing acknowledged lost, nothing
 * half applied); every value's bytes are the ones written for it (no
 * freed or reused buffer referenced); paste_btree_check and
 * paste_wal_check clean; every buffer's reference count is exactly the
 * tree's extents plus the log's; and the checkpoint in force is the one
 * the crashed process last committed (a failed checkpoint leaves the
 * previous meta, or, when the meta's lines may persist, the new one).
 * Emulated PM (fence) and fsync (fdatasync). */
#include <sys/wait.h>
#include "btree_fixture.h"

#define NKEYS   400u
#define BATCHES 60u
#define PERB    10u

struct journal {
	uint64_t acked, issued;   /* operations acknowledged, attempted */
	uint64_t ckpt_seq;        /* the checkpoint the writer believes committed */
	uint32_t done, failed;
	uint32_t fence_failed;    /* the batch's own barrier failed (no checkpoint ran in it) */
	uint32_t unfenced;        /* the crash policy may persist lines of the failed barrier */
	uint32_t direct;          /* fsync mode wrote directly (not through the page cache) */
	uint64_t buf_offset;
	uint32_t buf_size, nbufs;
	uint8_t free[1024];       /* buffers free (count 0) just before the last barrier */
};

static char image[120], jpath[120];
static uint8_t keyb[NKEYS][400];
static uint32_t klen[NKEYS];

enum { OP_SET, OP_DEL, OP_CLEAR };
struct op {
	uint8_t type;
	uint32_t key, len;
};

static struct op ops[BATCHES * PERB];

static void make_ops(void)
{
	uint64_t s = 7;
	for (uint32_t i = 0; i < NKEYS; i++) {
		klen[i] = i % 5 == 0 ? 200 + (uint32_t)(rnd(&s) % 200) : 2 + (uint32_t)(rnd(&s) % 24);
		for (uint32_t j = 0; j < klen[i]; j++)
			keyb[i][j] = (uint8_t)(j < 2 ? (j ? i : i >> 8) : rnd(&s) % 26 + 'a');
	}
	for (uint32_t i = 0; i < BATCHES * PERB; i++) {
		uint64_t r = rnd(&s) % 100;
		ops[i].type = i == BATCHES * PERB * 2 / 3 ? OP_CLEAR : r < 75 ? OP_SET : OP_DEL;
		ops[i].key = (uint32_t)(rnd(&s) % NKEYS);
		ops[i].len = 1 + (uint32_t)(rnd(&s) % 1000);
	}
}

static uint8_t pattern(uint32_t op, uint32_t j)
{
	return (uint8_t)(op * 131u + j * 7u + 1u);
}

/* Which buffers are free now: anything may overwrite them at any moment
 * (another thread's receives, the kernel's writeback of a reused page), so
 * the verifier fills them with garbage before it opens the image. A value
 * or record that still needs one of them is caught by its bytes. */
static void snap_free(struct journal *j, struct paste_store *st)
{
	const struct paste_store_geom *g = paste_store_geom(st);
	j->buf_offset = g->buf_offset;
	j->buf_size = g->buf_size;
	j->nbufs = g->nbufs < 8 * sizeof(j->free) ? g->nbufs : 8 * sizeof(j->free);
	memset(j->free, 0, sizeof(j->free));
	for (uint32_t b = 0; b < j->nbufs; b++)
		if (paste_store_refcount(st, b) == 0)
			j->free[b / 8] |= (uint8_t)(1u << (b % 8));
}

static void put_journal(const struct journal *j)
{
	int fd = open(jpath, O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || pwrite(fd, j, sizeof(*j), 0) != (ssize_t)sizeof(*j))
		perror("journal");
	close(fd);
}

/* The crashing process: returns through _exit. */
static void writer(enum paste_durability mode)
{
	check_fail = 0;   /* this process's own checks */
	struct tenv e;
	memset(&e, 0, sizeof(e));
	e.scfg = (struct paste_store_config){ .size = 2u << 20, .buf_size = 1024, .log_lanes = 2,
					      .log_size = 64u << 10, .node_size = 256u << 10 };
	e.tcfg = (struct paste_btree_config){ .ckpt_records = 30 };
	e.mode = mode;
	struct journal j = { 0 };
	put_journal(&j);
	if (!tenv_open(&e)) {
		/* The first barrier (the log persisting its epoch) failed:
		 * nothing was written, a crash image of a fresh store. */
		j.failed = 1;
		put_journal(&j);
		_exit(check_fail == 1 ? 0 : 3);
	}
	j.direct = strcmp(paste_persist_flush_insn(e.p), "direct writes") == 0;
	uint64_t i = 0;
	for (uint32_t b = 0; b < BATCHES && !j.failed; b++) {
		for (uint32_t k = 0; k < PERB && !j.failed; k++, i++) {
			const struct op *o = &ops[i];
			int rc;
			if (o->type == OP_SET) {
				uint32_t buf;
				if (paste_store_alloc(e.st, &buf, 1) != 1)
					_exit(4);   /* the store is sized so that this never happens */
				uint8_t *p = paste_store_buf(e.st, buf);
				for (uint32_t x = 0; x < o->len; x++)
					p[x] = pattern((uint32_t)i, x);
				struct paste_extent v = { buf, 0, o->len };
				rc = paste_btree_set(e.t, keyb[o->key], klen[o->key], &v, 1, NULL);
				paste_store_unref(e.st, buf, false);
			} else if (o->type == OP_DEL) {
				rc = paste_btree_del(e.t, keyb[o->key], klen[o->key], NULL);
				rc = rc == -ENOENT ? 0 : rc;
			} else {
				rc = paste_btree_clear(e.t, NULL);
			}
			if (rc < 0)
				j.failed = 1;   /* the store failed: nothing more is logged */
			else
				j.issued = i + 1;
		}
		snap_free(&j, e.st);
		put_journal(&j);
		if (!j.failed && paste_persist_fence(e.p) == 0) {
			j.acked = j.issued;
		} else {
			j.fence_failed = !j.failed;
			j.failed = 1;
		}
		snap_free(&j, e.st);
		put_journal(&j);
		if (!j.failed && paste_btree_maintain(e.t) < 0) {
			/* The store failed for good: no later checkpoint either. */
			j.failed = 1;
			if (paste_btree_checkpoint(e.t) >= 0)
				_exit(5);
		}
		struct paste_btree_info in;
		paste_btree_info(e.t, &in);
		j.ckpt_seq = in.ckpt_seq;
		put_journal(&j);
	}
	j.done = !j.failed;
	put_journal(&j);
	tenv_close(&e);
	_exit(0);
}

struct mstate {
	bool present;
	uint32_t op, len;
};

static void model_at(uint64_t p, struct mstate *m)
{
	memset(m, 0, sizeof(*m) * NKEYS);
	for (uint64_t i = 0; i < p; i++) {
		const struct op *o = &ops[i];
		if (o->type == OP_SET)
			m[o->key] = (struct mstate){ true, (uint32_t)i, o->len };
		else if (o->type == OP_DEL)
			m[o->key].present = false;
		else
			memset(m, 0, sizeof(*m) * NKEYS);
	}
}

/* Does the tree hold exactly model m, with every value's bytes intact? */
static bool tree_is(struct tenv *e, const struct mstate *m)
{
	for (uint32_t k = 0; k < NKEYS; k++) {
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n, len;
		int rc = paste_btree_get(e->t, keyb[k], klen[k], ext, &n, &len);
		if (!m[k].present) {
			if (rc != -ENOENT)
				return false;
			continue;
		}
		if (rc != 0 || n != 1 || len != m[k].len)
			return false;
		const uint8_t *p = paste_store_buf(e->st, ext[0].buf) + ext[0].off;
		for (uint32_t x = 0; x < len; x++)
			if (p[x] != pattern(m[k].op, x))
				return false;
	}
	return true;
}

static void verifier(const struct journal *j)
{
	struct tenv e;
	memset(&e, 0, sizeof(e));
	e.mode = PASTE_DUR_EMULATED;
	e.tcfg = (struct paste_btree_config){ .ckpt_records = 30 };
	if (!tenv_open(&e))   /* path is the copy of the image */
		_exit(10);
	struct mstate m[NKEYS];
	uint64_t match = UINT64_MAX;
	for (uint64_t p = j->acked; p <= j->issued && match == UINT64_MAX; p++) {
		model_at(p, m);
		if (tree_is(&e, m))
			match = p;
	}
	struct paste_btree_info in;
	paste_btree_info(e.t, &in);
	struct paste_error err = { 0 };
	int wal_bad = paste_wal_check(e.w, &err);
	int tree_bad = tree_check(e.t);
	uint32_t refs = audit_refs(&e);
	bool seq_ok = in.ckpt_seq == j->ckpt_seq;
	if (j->unfenced && match != UINT64_MAX) {
		/* Lines of the failed barrier persisted in any subset: a later
		 * record of the batch may be whole behind an earlier one that
		 * is not. Its durable mark says it was never durable, so that is
		 * a torn tail, not damage: the log checks clean (wal_bad 0). A
		 * checkpoint's meta may have persisted in the barrier that
		 * failed (its pages were fenced before it). */
		seq_ok |= !j->fence_failed && in.ckpt_seq == j->ckpt_seq + 1;
	}
	if (match == UINT64_MAX || wal_bad != 0 || tree_bad || refs || !seq_ok) {
		fprintf(stderr, "  crash image: acked %llu issued %llu: prefix %s, wal check %d (%s), tree "
			"check %d, refs %u, checkpoint seq %llu (writer: %llu)\n",
			(unsigned long long)j->acked, (unsigned long long)j->issued,
			match == UINT64_MAX ? "none matches" : "ok", wal_bad, err.msg, tree_bad, refs,
			(unsigned long long)in.ckpt_seq, (unsigned long long)j->ckpt_seq);
		_exit(11);
	}
	/* The recovered store goes on: more changes, a checkpoint, a reopen. */
	uint32_t buf;
	if (paste_store_alloc(e.st, &buf, 1) == 1) {
		struct paste_extent v = { buf, 0, 10 };
		if (paste_btree_set(e.t, keyb[0], klen[0], &v, 1, NULL) != 0 ||
		    paste_btree_checkpoint(e.t) != 0)
			_exit(12);
		paste_store_unref(e.st, buf, false);
	}
	if (!tenv_reopen(&e) || tree_check(e.t) != 0)
		_exit(13);
	tenv_close(&e);
	_exit(0);
}

static int run_child(void (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		fn(arg);
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct wr_arg {
	enum paste_durability mode;
	char fault[64];
	char crash[64];           /* PASTE_SHIM_CRASH */
};

static void writer_main(void *a)
{
	const struct wr_arg *w = a;
	setenv("PASTE_SHIM_IMAGE", image, 1);
	setenv("PASTE_FAULT", w->fault, 1);
	setenv("PASTE_SHIM_CRASH", w->crash, 1);
	if (!getenv("PASTE_TEST_VERBOSE")) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);   /* "store failed" at every crash point */
	}
	writer(w->mode);
}

static void verifier_main(void *a)
{
	verifier(a);
}

static bool copy_file(const char *from, const char *to)
{
	size_t len = 0;
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char buf[1 << 16];
	ssize_t n;
	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		len += (size_t)write(out, buf, (size_t)n);
	close(in);
	close(out);
	return len > 0;
}

static void scribble(const struct journal *j)
{
	uint8_t junk[65536];
	memset(junk, 0xee, sizeof(junk));
	int fd = open(path, O_WRONLY);
	for (uint32_t b = 0; fd >= 0 && b < j->nbufs && j->buf_size <= sizeof(junk); b++)
		if (j->free[b / 8] & (1u << (b % 8)))
			CHECK_EQ(pwrite(fd, junk, j->buf_size, (off_t)(j->buf_offset + (uint64_t)b * j->buf_size)),
				 (ssize_t)j->buf_size);
	close(fd);
}

/* Every crash point of the workload in this mode, the writer's store in
 * directory `where`, the failed barrier's lines persisted as `policy` says
 * (seeded by the crash point for reverse and random); returns how many. */
static uint32_t crash_points(enum paste_durability mode, const char *op, uint32_t step,
			     const char *policy, const char *where)
{
	char store[sizeof(path)];
	snprintf(store, sizeof(store), "%s/writer.store", where);
	uint32_t points = 0, failures = 0, direct = 0;
	for (uint32_t nth = 1; nth < 2000; nth += step) {
		struct wr_arg w = { .mode = mode };
		bool seeded = !strcmp(policy, "reverse") || !strcmp(policy, "random");
		snprintf(w.fault, sizeof(w.fault), "%s:%u", op, nth);
		snprintf(w.crash, sizeof(w.crash), seeded ? "%s:%u" : "%s", policy, nth);
		snprintf(path, sizeof(path), "%s", store);
		unlink(path);
		unlink(image);
		int rc = run_child(writer_main, &w);
		struct journal j = { 0 };
		int fd = open(jpath, O_RDONLY);
		CHECK(fd >= 0 && pread(fd, &j, sizeof(j), 0) == (ssize_t)sizeof(j));
		close(fd);
		CHECK_EQ(rc, 0);
		if (rc)
			break;
		snprintf(path, sizeof(path), "%s/image-copy.store", dir);
		CHECK(copy_file(image, path));
		scribble(&j);
		j.unfenced = strcmp(policy, "none") != 0;
		int vr = run_child(verifier_main, &j);
		if (getenv("PASTE_TEST_VERBOSE"))
			fprintf(stderr, "  %s %s: acked %llu issued %llu seq %llu failed %u: verifier %d\n",
				w.fault, w.crash, (unsigned long long)j.acked, (unsigned long long)j.issued,
				(unsigned long long)j.ckpt_seq, j.failed, vr);
		if (vr) {
			fprintf(stderr, "  %s %s, crash %s: verifier exit %d\n", paste_durability_name(mode),
				w.fault, w.crash, vr);
			failures++;
		}
		points++;
		direct += j.direct;
		unlink(path);
		if (j.done)
			break;   /* the Nth barrier was never reached: every point done */
	}
	CHECK_EQ(failures, 0);
	/* On a disk fsync mode writes directly (every run but one whose
	 * first barrier failed); on tmpfs through the page cache. */
	CHECK(where == dir ? direct == 0 : direct + 1 >= points);
	unlink(store);
	unlink(image);
	unlink(jpath);
	return points;
}

int main(void)
{
	make_dir("btree-crash");
	snprintf(image, sizeof(image), "%s/shim.image", dir);
	snprintf(jpath, sizeof(jpath), "%s/journal", dir);
	make_ops();
	static const char *const policies[] = { "none", "last", "reverse", "random", "all" };
	uint32_t a = 0, b = 0, c = 0;
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		uint32_t n = crash_points(PASTE_DUR_EMULATED, "fence", 1, policies[i], dir);
		CHECK(n > 60);
		a += n;
	}
	/* fsync mode on tmpfs, through the page cache ... */
	for (size_t i = 0; i < 2; i++) {
		uint32_t n = crash_points(PASTE_DUR_FSYNC, "fdatasync", 3, policies[i ? 3 : 0], dir);
		CHECK(n > 20);
		b += n;
	}
	/* ... and with direct writes, on a disk: the image takes the blocks
	 * the commits write. */
	char disk[64];
	snprintf(disk, sizeof(disk), "%s/paste-test-btree-crash-XXXXXX", disk_dir() ? disk_dir() : "");
	if (disk_dir() && mkdtemp(disk)) {
		c = crash_points(PASTE_DUR_FSYNC, "fdatasync", 12, "random", disk);
		CHECK(c > 6);
		rmdir(disk);
	} else {
		printf("skip: direct writes (no disk-backed /var/tmp or /tmp)\n");
	}
	printf("crash images checked: %u (emulated PM, every barrier, 5 crash policies), "
	       "%u (fsync, page cache, every third barrier, 2 policies), %u (fsync, direct writes, "
	       "every twelfth, random subsets)\n", a, b, c);
	rmdir(dir);
	return check_done();
}
