/* test_btree_group.c - groups of changes (paste_btree_group_*): a
 * committed group is in the tree and after a replay; an aborted one is put
 * back exactly (values, tags and words, reference counts) and is not
 * replayed; a group cut short by a crash (no COMMIT) is dropped by
 * recovery whatever follows it; no checkpoint and no clear inside one;
 * a group's memory, kept for the next, carries nothing of it over. */
#include "btree_fixture.h"

static struct tenv E;

static void setup(const char *name)
{
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = 16u << 20, .buf_size = 2048, .log_lanes = 2,
					      .node_size = 2u << 20 };
	E.mode = PASTE_DUR_EMULATED;
	E.npool = 32;
	tenv_start(&E, name);
}

static struct paste_extent val(uint32_t i, uint32_t len)
{
	return (struct paste_extent){ E.pool[i % E.npool], i * 8 % 512, len };
}

/* The value's length of key k, or -1 when absent; *tag its tag. */
static int64_t len_of(const char *k, uint8_t *tag)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	struct paste_btree_attr a;
	uint32_t n, len;
	if (paste_btree_lookup(E.t, k, (uint32_t)strlen(k), ext, &n, &len, &a))
		return -1;
	if (tag)
		*tag = a.tag;
	return len;
}

static int put(const char *k, uint32_t i, uint32_t len, uint8_t tag)
{
	struct paste_extent v = val(i, len);
	struct paste_btree_attr a = { .tag = tag, .has_word = tag == 3, .word = 77 };
	return paste_btree_put(E.t, k, (uint32_t)strlen(k), &v, 1, &a, NULL);
}

static void settle(void)
{
	paste_persist_fence(E.p);
	paste_btree_maintain(E.t);
}

static void test_commit(void)
{
	setup("group-commit");
	CHECK_EQ(put("c", 1, 30, 0), 0);
	CHECK_EQ(paste_btree_group_begin(E.t), 0);
	CHECK_EQ(paste_btree_group_begin(E.t), -EBUSY);
	CHECK_EQ(put("a", 2, 10, 1), 0);
	CHECK_EQ(put("b", 3, 20, 2), 0);
	CHECK_EQ(paste_btree_del(E.t, "c", 1, NULL), 0);
	CHECK_EQ(len_of("a", NULL), 10);                 /* seen as they are made */
	CHECK_EQ(paste_btree_checkpoint(E.t), -EBUSY);
	CHECK_EQ(paste_btree_clear(E.t, NULL), -EBUSY);
	uint64_t lsn = 0;
	CHECK_EQ(paste_btree_group_commit(E.t, &lsn), 0);
	CHECK(lsn > 0);
	CHECK_EQ(paste_btree_group_commit(E.t, NULL), -EINVAL);   /* none open */
	CHECK(tenv_reopen(&E));
	uint8_t tag = 99;
	CHECK_EQ(len_of("a", &tag), 10);
	CHECK_EQ(tag, 1);
	CHECK_EQ(len_of("b", &tag), 20);
	CHECK_EQ(tag, 2);
	CHECK_EQ(len_of("c", NULL), -1);
	CHECK_EQ(tree_check(E.t), 0);
	/* An empty group writes nothing. */
	struct paste_btree_info before, after;
	paste_btree_info(E.t, &before);
	CHECK_EQ(paste_btree_group_begin(E.t), 0);
	CHECK_EQ(paste_btree_group_commit(E.t, NULL), 0);
	paste_btree_info(E.t, &after);
	CHECK_EQ(after.last_lsn, before.last_lsn);
	tenv_finish(&E);
}

static void test_abort(void)
{
	setup("group-abort");
	CHECK_EQ(put("keep", 1, 40, 3), 0);              /* with a word */
	CHECK_EQ(put("gone", 2, 50, 0), 0);
	for (int i = 0; i < 300; i++) {                   /* a range to delete */
		char k[16];
		snprintf(k, sizeof(k), "r%04d", i);
		CHECK_EQ(put(k, (uint32_t)i, 16, 4), 0);
	}
	settle();
	CHECK_EQ(audit_refs(&E), 0);
	CHECK_EQ(paste_btree_group_begin(E.t), 0);
	CHECK_EQ(put("keep", 5, 60, 0), 0);              /* overwritten ... */
	CHECK_EQ(paste_btree_del(E.t, "gone", 4, NULL), 0);   /* ... deleted ... */
	CHECK_EQ(put("new", 6, 70, 1), 0);               /* ... created ... */
	uint64_t del = 0;
	CHECK_EQ(paste_btree_delrange(E.t, "r0010", 5, "r0200", 5, &del, NULL), 0);   /* ... a range */
	CHECK_EQ(del, 190);
	CHECK_EQ(put("keep", 7, 80, 2), 0);              /* twice */
	CHECK_EQ(paste_btree_group_abort(E.t), 0);
	uint8_t tag = 0;
	CHECK_EQ(len_of("keep", &tag), 40);
	CHECK_EQ(tag, 3);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	struct paste_btree_attr a;
	uint32_t n, len;
	CHECK_EQ(paste_btree_lookup(E.t, "keep", 4, ext, &n, &len, &a), 0);
	CHECK(a.has_word && a.word == 77);
	CHECK_EQ(len_of("gone", NULL), 50);
	CHECK_EQ(len_of("new", NULL), -1);
	CHECK_EQ(len_of("r0100", NULL), 16);
	CHECK_EQ(paste_btree_count(E.t), 302);
	CHECK_EQ(tree_check(E.t), 0);
	settle();
	settle();
	CHECK_EQ(audit_refs(&E), 0);                     /* not a reference too many or few */
	/* The aborted group's records are in the log, without a COMMIT:
	 * a replay leaves them out. */
	CHECK(tenv_reopen(&E));
	CHECK_EQ(len_of("keep", NULL), 40);
	CHECK_EQ(len_of("new", NULL), -1);
	CHECK_EQ(paste_btree_count(E.t), 302);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.replay_dropped, 5);        /* two sets, a del, a range, a set */
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

/* Groups one after another on the memory the last one left: an abort
 * puts back its own changes only, after committed groups and after an
 * aborted one whose arena grew past what is kept. */
static void test_reuse(void)
{
	setup("group-reuse");
	char k[16];
	for (int g = 0; g < 50; g++) {
		CHECK_EQ(paste_btree_group_begin(E.t), 0);
		snprintf(k, sizeof(k), "g%02d", g);
		CHECK_EQ(put(k, (uint32_t)g, 10 + (uint32_t)g, 1), 0);
		CHECK_EQ(paste_btree_group_commit(E.t, NULL), 0);
	}
	CHECK_EQ(paste_btree_group_begin(E.t), 0);       /* an arena of ~200 KiB */
	for (int i = 0; i < 4000; i++) {
		snprintf(k, sizeof(k), "big%04d", i);
		CHECK_EQ(put(k, (uint32_t)i, 16, 2), 0);
	}
	CHECK_EQ(paste_btree_group_abort(E.t), 0);
	for (int g = 0; g < 3; g++) {
		CHECK_EQ(paste_btree_group_begin(E.t), 0);
		CHECK_EQ(put("g07", 99, 99, 2), 0);
		CHECK_EQ(paste_btree_del(E.t, "g08", 3, NULL), 0);
		CHECK_EQ(paste_btree_group_abort(E.t), 0);
	}
	uint8_t tag = 0;
	CHECK_EQ(len_of("g07", &tag), 17);
	CHECK_EQ(tag, 1);
	CHECK_EQ(len_of("g08", NULL), 18);
	CHECK_EQ(len_of("g49", NULL), 59);
	CHECK_EQ(len_of("big0000", NULL), -1);
	CHECK_EQ(paste_btree_count(E.t), 50);
	CHECK_EQ(tree_check(E.t), 0);
	settle();
	settle();
	CHECK_EQ(audit_refs(&E), 0);
	tenv_finish(&E);
}

/* A crash inside a group: its records without a COMMIT, then (after the
 * restart) other changes and another group that commits. */
static void test_cut_short(void)
{
	setup("group-cut");
	CHECK_EQ(put("x", 1, 10, 0), 0);
	CHECK_EQ(paste_btree_group_begin(E.t), 0);
	CHECK_EQ(put("x", 2, 11, 0), 0);
	CHECK_EQ(put("y", 3, 12, 0), 0);
	paste_persist_fence(E.p);          /* durable, but never committed */
	tenv_close(&E);                    /* the crash: the group is still open */
	CHECK(tenv_open(&E));
	CHECK_EQ(len_of("x", NULL), 10);
	CHECK_EQ(len_of("y", NULL), -1);
	/* After the cut group: a group that is cut too, then a plain change,
	 * then a group that commits; all in one log. */
	CHECK_EQ(paste_btree_group_begin(E.t), 0);
	CHECK_EQ(put("z", 4, 13, 0), 0);
	CHECK_EQ(paste_btree_group_abort(E.t), 0);
	CHECK_EQ(put("w", 5, 14, 0), 0);
	CHECK_EQ(paste_btree_group_begin(E.t), 0);
	CHECK_EQ(put("v", 6, 15, 0), 0);
	CHECK_EQ(put("x", 7, 16, 0), 0);
	CHECK_EQ(paste_btree_group_commit(E.t, NULL), 0);
	CHECK(tenv_reopen(&E));
	CHECK_EQ(len_of("x", NULL), 16);
	CHECK_EQ(len_of("y", NULL), -1);
	CHECK_EQ(len_of("z", NULL), -1);
	CHECK_EQ(len_of("w", NULL), 14);
	CHECK_EQ(len_of("v", NULL), 15);
	CHECK_EQ(tree_check(E.t), 0);
	settle();
	CHECK_EQ(audit_refs(&E), 0);
	tenv_finish(&E);
}

/* Groups of thousands of changes: one committed is replayed whole (its
 * records are buffered until the COMMIT: more than the first buffer's
 * worth), one aborted puts back thousands of overwrites (each releasing a
 * value once durable: more releases than the ring held). */
static void test_large(void)
{
	setup("group-large");
	enum { N = 3000 };
	char k[16];
	for (int i = 0; i < N; i++) {
		snprintf(k, sizeof(k), "k%05d", i);
		CHECK_EQ(put(k, (uint32_t)i, 20, 0), 0);
	}
	settle();
	CHECK_EQ(paste_btree_group_begin(E.t), 0);
	for (int i = 0; i < N; i++) {
		snprintf(k, sizeof(k), "k%05d", i);
		CHECK_EQ(put(k, (uint32_t)i + 1, 30, 1), 0);
	}
	CHECK_EQ(paste_btree_group_abort(E.t), 0);
	for (int i = 0; i < N; i += 97) {
		snprintf(k, sizeof(k), "k%05d", i);
		CHECK_EQ(len_of(k, NULL), 20);
	}
	settle();
	settle();
	CHECK_EQ(audit_refs(&E), 0);
	CHECK_EQ(paste_btree_group_begin(E.t), 0);
	for (int i = 0; i < 500; i++) {
		snprintf(k, sizeof(k), "g%05d", i);
		CHECK_EQ(put(k, (uint32_t)i, 40, 2), 0);
	}
	CHECK_EQ(paste_btree_group_commit(E.t, NULL), 0);
	paste_persist_fence(E.p);
	CHECK(tenv_reopen(&E));
	for (int i = 0; i < 500; i++) {
		snprintf(k, sizeof(k), "g%05d", i);
		CHECK_EQ(len_of(k, NULL), 40);
	}
	CHECK_EQ(paste_btree_count(E.t), N + 500);
	CHECK_EQ(tree_check(E.t), 0);
	settle();
	CHECK_EQ(audit_refs(&E), 0);
	tenv_finish(&E);
}

int main(void)
{
	make_dir("btree-group");
	test_commit();
	test_abort();
	test_reuse();
	test_cut_short();
	test_large();
	rmdir(dir);
	return check_done();
}
