/* test_store_refs.c - packet store buffer ownership: the allocator and
 * free list, reference counts (shared, keep_if_free, taken before start),
 * out-of-range indices, ownership bugs that must abort, two threads
 * churning the counts, and a one-thread store's plain counts (the same
 * cases, and one thread handing the store to the next). */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include "store_fixture.h"

static void test_allocator(int flags)
{
	struct paste_store *st = create_small_with(flags);
	if (!st)
		return;
	uint32_t n = paste_store_geom(st)->nbufs;
	uint32_t *idx = malloc(n * sizeof(*idx));
	CHECK_EQ(paste_store_alloc(st, idx, 4), 0);   /* before start */
	CHECK_EQ(paste_store_nfree(st), 0);
	CHECK_EQ(paste_store_start(st), 0);
	CHECK_EQ(paste_store_start(st), -EALREADY);
	CHECK_EQ(paste_store_nfree(st), n);
	CHECK_EQ(paste_store_nheld(st), 0);

	uint32_t got = 0, k;
	while ((k = paste_store_alloc(st, idx + got, 100)) > 0)
		got += k;
	CHECK_EQ(got, n);
	CHECK_EQ(paste_store_nfree(st), 0);
	CHECK_EQ(paste_store_nheld(st), n);
	CHECK_EQ(idx[0], 0);   /* low indices first */
	int distinct = 1;
	uint8_t *seen = calloc(n, 1);
	for (uint32_t i = 0; i < n; i++) {
		if (idx[i] >= n || seen[idx[i]] || paste_store_refcount(st, idx[i]) != 1)
			distinct = 0;
		else
			seen[idx[i]] = 1;
	}
	CHECK(distinct);
	free(seen);
	uint32_t one;
	CHECK_EQ(paste_store_alloc(st, &one, 1), 0);   /* exhausted */

	CHECK_EQ(paste_store_unref(st, 5, false), 0);
	CHECK_EQ(paste_store_nfree(st), 1);
	CHECK_EQ(paste_store_nheld(st), n - 1);
	CHECK_EQ(paste_store_alloc(st, &one, 1), 1);
	CHECK_EQ(one, 5);

	/* keep_if_free: count 0 but not on the list. */
	CHECK_EQ(paste_store_unref(st, 6, true), 0);
	CHECK_EQ(paste_store_refcount(st, 6), 0);
	CHECK_EQ(paste_store_nfree(st), 0);
	CHECK_EQ(paste_store_nheld(st), n - 1);
	CHECK_EQ(paste_store_ref(st, 6), 1);   /* the keeper reposts it */
	CHECK_EQ(paste_store_nheld(st), n);

	/* Shared references: freed only when the last goes. */
	CHECK_EQ(paste_store_ref(st, 9), 2);
	CHECK_EQ(paste_store_ref(st, 9), 3);
	CHECK_EQ(paste_store_unref(st, 9, false), 2);
	CHECK_EQ(paste_store_unref(st, 9, false), 1);
	CHECK_EQ(paste_store_nfree(st), 0);
	CHECK_EQ(paste_store_unref(st, 9, false), 0);
	CHECK_EQ(paste_store_nfree(st), 1);

	/* Out-of-range indices are refused, not followed. */
	CHECK_EQ(paste_store_ref(st, n), 0);
	CHECK_EQ(paste_store_unref(st, PASTE_NO_BUF, false), 0);
	CHECK_EQ(paste_store_refcount(st, n), 0);
	CHECK_EQ(paste_store_nfree(st), 1);
	free(idx);
	paste_store_close(st);
}

/* Next fit: allocations continue from where the last one stopped, in
 * file order, and do not go back to buffers freed behind it until the
 * search wraps at the end of the store. A batch's receive buffers are then
 * adjacent in the file, and a group commit writes a few long runs instead
 * of one scattered page per value (a LIFO free list handed the freed
 * holes out first). */
static void test_next_fit(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	uint32_t n = paste_store_geom(st)->nbufs;
	uint32_t *idx = malloc(n * sizeof(*idx));
	CHECK_EQ(paste_store_start(st), 0);
	CHECK_EQ(paste_store_alloc(st, idx, 200), 200);
	for (uint32_t i = 0; i < 200; i++)
		CHECK_EQ(idx[i], i);
	for (uint32_t i = 0; i < 100; i += 2)          /* holes behind the cursor */
		CHECK_EQ(paste_store_unref(st, i, false), 0);
	CHECK_EQ(paste_store_alloc(st, idx, 10), 10);
	for (uint32_t i = 0; i < 10; i++)
		CHECK_EQ(idx[i], 200 + i);                 /* not the holes */
	/* Everything up to the end, then the search wraps to the holes. */
	uint32_t rest = n - 210;
	CHECK_EQ(paste_store_alloc(st, idx, rest), rest);
	CHECK_EQ(idx[rest - 1], n - 1);
	CHECK_EQ(paste_store_alloc(st, idx, 3), 3);
	CHECK(idx[0] == 0 && idx[1] == 2 && idx[2] == 4);
	CHECK_EQ(paste_store_nfree(st), 47);
	free(idx);
	paste_store_close(st);
}

/* Recovery takes references before start; start must leave those out. */
static void test_refs_before_start(int flags)
{
	struct paste_store *st = create_small_with(flags);
	if (!st)
		return;
	uint32_t n = paste_store_geom(st)->nbufs;
	CHECK_EQ(paste_store_ref(st, 0), 1);
	CHECK_EQ(paste_store_ref(st, 3), 1);
	CHECK_EQ(paste_store_ref(st, 3), 2);
	CHECK_EQ(paste_store_ref(st, n - 1), 1);
	CHECK_EQ(paste_store_unref(st, n - 1, false), 0);   /* back to 0 before start */
	CHECK_EQ(paste_store_nheld(st), 2);
	CHECK_EQ(paste_store_start(st), 0);
	CHECK_EQ(paste_store_nfree(st), n - 2);
	uint32_t *idx = malloc(n * sizeof(*idx));
	uint32_t got = paste_store_alloc(st, idx, n);
	CHECK_EQ(got, n - 2);
	int clash = 0;
	for (uint32_t i = 0; i < got; i++)
		clash += idx[i] == 0 || idx[i] == 3;
	CHECK_EQ(clash, 0);
	CHECK_EQ(paste_store_refcount(st, 3), 2);
	free(idx);
	paste_store_close(st);
}

/* Runs fn in a child with stderr silenced; returns the signal it died of. */
static int child_signal(struct paste_store *st, void (*fn)(struct paste_store *))
{
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);
		fn(st);
		_exit(0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static void double_unref(struct paste_store *st)
{
	uint32_t b;
	paste_store_alloc(st, &b, 1);
	paste_store_unref(st, b, false);
	paste_store_unref(st, b, false);
}

static void unref_never_taken(struct paste_store *st)
{
	paste_store_unref(st, 11, true);
	paste_store_unref(st, 11, true);
}

static void ref_free_buffer(struct paste_store *st)
{
	uint32_t b;
	paste_store_alloc(st, &b, 1);
	paste_store_unref(st, b, false);
	paste_store_ref(st, b);
}

static void single_unref(struct paste_store *st)
{
	uint32_t b;
	paste_store_alloc(st, &b, 1);
	paste_store_unref(st, b, false);
}

static void test_ownership_bugs_abort(int flags)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	paste_store_start(st);
	paste_store_close(st);   /* the lock must not be held across fork */
	CHECK_EQ(paste_store_open(&st, path, NULL, flags, NULL), 0);
	if (!st)
		return;
	paste_store_start(st);
	CHECK_EQ(child_signal(st, single_unref), 0);
	CHECK_EQ(child_signal(st, double_unref), SIGABRT);
	CHECK_EQ(child_signal(st, unref_never_taken), SIGABRT);
	CHECK_EQ(child_signal(st, ref_free_buffer), SIGABRT);
	paste_store_close(st);
}

static void *churn(void *arg)
{
	struct paste_store *st = arg;
	uint32_t b[16];
	for (int i = 0; i < 5000; i++) {
		uint32_t k = paste_store_alloc(st, b, 16);
		for (uint32_t j = 0; j < k; j++) {
			paste_store_ref(st, b[j]);
			paste_store_unref(st, b[j], false);
			paste_store_unref(st, b[j], false);
		}
	}
	return NULL;
}

static void test_threads(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	paste_store_start(st);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, churn, st);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(paste_store_nfree(st), paste_store_geom(st)->nbufs);
	CHECK_EQ(paste_store_nheld(st), 0);
	paste_store_close(st);
}

/* A one-thread store passed from thread to thread, each start ordered
 * after the last one's join: every count comes back, as with locks. */
static void test_one_thread_handoff(void)
{
	struct paste_store *st = create_small_with(PASTE_STORE_ONE_THREAD);
	if (!st)
		return;
	paste_store_start(st);
	for (int i = 0; i < 4; i++) {
		pthread_t t;
		pthread_create(&t, NULL, churn, st);
		pthread_join(t, NULL);
	}
	uint32_t b;
	CHECK_EQ(paste_store_alloc(st, &b, 1), 1);
	CHECK_EQ(paste_store_ref(st, b), 2);
	CHECK_EQ(paste_store_nheld(st), 1);
	CHECK_EQ(paste_store_unref(st, b, false), 1);
	CHECK_EQ(paste_store_unref(st, b, false), 0);
	CHECK_EQ(paste_store_nfree(st), paste_store_geom(st)->nbufs);
	CHECK_EQ(paste_store_nheld(st), 0);
	paste_store_close(st);
}

int main(void)
{
	if (sf_begin())
		return 1;
	for (int pass = 0; pass < 2; pass++) {
		int flags = pass ? PASTE_STORE_ONE_THREAD : 0;
		test_allocator(flags);
		test_refs_before_start(flags);
		test_ownership_bugs_abort(flags);
	}
	test_next_fit();
	test_threads();
	test_one_thread_handoff();
	return sf_end();
}
