/* test_wal_truncate.c - write-ahead log truncation: the checkpoint is
 * durable before buffers are released (raced against a slow emulated
 * fence), a failed store makes truncation write nothing, and a fence that
 * fails after the checkpoint was written leaves the lane's slot unclaimed.
 * The last looks at a lane's checkpoint state in DRAM, which is why
 * wal_fixture.h includes the log's private header. */
#include "wal_fixture.h"

/* A lane's two checkpoint slots and their bytes when taken: whether either
 * has been written since. */
struct ckpt_snap {
	const uint8_t *slot[2];
	uint8_t before[2][64];
};

static void ckpt_snap(struct ckpt_snap *c, struct paste_store *st, uint32_t lane)
{
	for (uint32_t s = 0; s < 2; s++) {
		c->slot[s] = paste_store_ckpt(st, lane, s);
		memcpy(c->before[s], c->slot[s], 64);
	}
}

static bool ckpt_written(const struct ckpt_snap *c, uint32_t s)
{
	return memcmp(c->slot[s], c->before[s], 64) != 0;
}

/* Truncation must make the checkpoint durable before it releases buffers.
 * With a 30 ms emulated fence, a watcher thread sees the checkpoint change
 * first and the buffer come back only after the fence's wait. A watcher
 * that is late only makes the gap look longer, so this cannot fail for a
 * correct order. */
struct watch {
	struct paste_store *st;
	uint32_t buf;
	struct ckpt_snap ckpt;
	volatile bool stop;
	bool ckpt_first;
	uint64_t released_ns;
};

static void *watcher(void *arg)
{
	struct watch *wt = arg;
	for (bool last = false; !last;) {
		last = wt->stop;   /* set once the truncation returned: one more look */
		if (paste_store_refcount(wt->st, wt->buf) == 0) {
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			wt->released_ns = paste_clock_ns();
			wt->ckpt_first = ckpt_written(&wt->ckpt, 0) || ckpt_written(&wt->ckpt, 1);
			break;
		}
	}
	return NULL;
}

static void test_truncate_persists_first(void)
{
	struct env e;
	if (!start(&e, "order"))
		return;
	struct paste_persist *slow;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED, .pm_latency_ns = 30000000 };
	CHECK_EQ(paste_persist_open(&slow, e.st, &pc, NULL), 0);
	uint32_t b;
	uint64_t lsn = put(&e, 3, 1, &b);
	CHECK_EQ(paste_store_refcount(e.st, b), 1);
	struct watch wt = { .st = e.st, .buf = b };
	ckpt_snap(&wt.ckpt, e.st, 3);
	pthread_t th;
	pthread_create(&th, NULL, watcher, &wt);
	uint64_t t0 = paste_clock_ns();
	CHECK_EQ(paste_wal_truncate(e.w, lsn, slow), 1);
	wt.stop = true;
	pthread_join(th, NULL);
	CHECK(wt.released_ns != 0);
	CHECK(wt.ckpt_first);
	CHECK(wt.released_ns - t0 >= 30000000);
	paste_persist_close(slow);
	/* And the truncation holds across a restart. */
	if (!env_reopen(&e))
		return;
	CHECK_EQ(paste_wal_lookup(e.w, lsn, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(paste_store_refcount(e.st, b), 0);
	finish(&e);
}

/* A failed store: truncation writes nothing (no checkpoint that no fence
 * can make durable), keeps every record and buffer, returns the failure;
 * a restart finds the records. */
static void test_truncate_failed_store(void)
{
	struct env e;
	if (!start(&e, "failed"))
		return;
	uint32_t b[2];
	uint64_t l0 = put(&e, 0, 1, &b[0]);
	put(&e, 1, 1, &b[1]);
	uint8_t before[LANES][2][64];
	for (uint32_t i = 0; i < LANES; i++)
		for (uint32_t k = 0; k < 2; k++)
			memcpy(before[i][k], paste_store_ckpt(e.st, i, k), 64);
	paste_store_fail(e.st, -EIO, "test_wal: injected failure");
	CHECK_EQ(paste_wal_truncate(e.w, UINT64_MAX, e.p), -EIO);
	CHECK_EQ(paste_wal_truncate(e.w, UINT64_MAX, e.p), -EIO);
	for (uint32_t i = 0; i < LANES; i++)
		for (uint32_t k = 0; k < 2; k++)
			CHECK(memcmp(before[i][k], paste_store_ckpt(e.st, i, k), 64) == 0);
	CHECK_EQ(paste_wal_lookup(e.w, l0, NULL, NULL, NULL), 0);
	CHECK_EQ(paste_store_refcount(e.st, b[0]), 1);
	CHECK_EQ(paste_store_refcount(e.st, b[1]), 1);
	if (!env_reopen(&e))
		return;
	CHECK_EQ(records(e.w), 2);
	finish(&e);
}

/* The fence of a truncation fails after the checkpoint was written (the
 * store fails while the slow fence waits): the lane must not claim the
 * slot it wrote, so its next checkpoint would not overwrite the newest
 * durable one; buffers stay held, the error is returned. */
struct failer {
	struct paste_store *st;
	struct ckpt_snap ckpt;
	volatile bool stop;
};

static void *fail_on_ckpt_write(void *arg)
{
	struct failer *f = arg;
	while (!f->stop) {
		if (ckpt_written(&f->ckpt, 0) || ckpt_written(&f->ckpt, 1)) {
			paste_store_fail(f->st, -EIO, "test_wal: failure during the fence");
			break;
		}
	}
	return NULL;
}

static void test_truncate_fence_fails(void)
{
	struct env e;
	if (!start(&e, "fencefail"))
		return;
	struct paste_persist *slow;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED, .pm_latency_ns = 400000000 };
	CHECK_EQ(paste_persist_open(&slow, e.st, &pc, NULL), 0);
	uint32_t b;
	uint64_t lsn = put(&e, 2, 1, &b);
	struct wal_lane *l = &e.w->lanes[2];
	int slot = l->ckpt_slot;
	uint64_t seq = l->ckpt_seq, head_lsn = l->head_lsn, head = l->head;
	uint32_t head_epoch = l->head_epoch, ckpt_epoch = l->ckpt_epoch;
	struct failer f = { .st = e.st };
	ckpt_snap(&f.ckpt, e.st, 2);
	pthread_t th;
	pthread_create(&th, NULL, fail_on_ckpt_write, &f);
	CHECK_EQ(paste_wal_truncate(e.w, lsn, slow), -EIO);
	f.stop = true;
	pthread_join(th, NULL);
	CHECK(ckpt_written(&f.ckpt, slot == 0 ? 1 : 0));    /* written */
	CHECK_EQ(l->ckpt_slot, slot);                       /* but not claimed */
	CHECK_EQ(l->ckpt_seq, seq);
	CHECK_EQ(l->head_lsn, head_lsn);
	CHECK_EQ(l->head_epoch, head_epoch);
	CHECK_EQ(l->ckpt_epoch, ckpt_epoch);
	CHECK_EQ(l->head, head);
	CHECK_EQ(paste_store_refcount(e.st, b), 1);
	CHECK_EQ(paste_wal_lookup(e.w, lsn, NULL, NULL, NULL), 0);
	paste_persist_close(slow);
	finish(&e);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/paste-waltrunc-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_truncate_persists_first();
	test_truncate_failed_store();
	test_truncate_fence_fails();
	rmdir(dir);
	return check_done();
}
