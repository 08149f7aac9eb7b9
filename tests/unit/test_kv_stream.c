/* test_kv_stream.c - streams over the typed core (services/kv_stream.c):
 * IDs in the tree's order; field encodings and damaged ones refused;
 * entries appended, walked both ways and deleted with the record (count,
 * last ID, largest deleted, entries added) agreeing, and an emptied
 * stream kept; exact and node-wise approximate trims; groups, pending
 * entries and consumers kept apart per group and dropped with their
 * group; a change cut off before its commit gone after a reopen. */
#include <errno.h>

#include "kv_fixture.h"
#include "kv_stream.h"

static struct kenv E;

static int open_or_new(struct kv_stream *s, const char *key)
{
	key_of(&E, &s->key, 0, key);
	int r = kv_stream_open(E.kv, s, false);
	if (r == -ENOENT)
		kv_stream_new(E.kv, s);
	return r;
}

/* Append id with one pair f=v. */
static int add(struct kv_stream *s, uint64_t ms, uint64_t seq, const char *f, const char *v)
{
	struct paste_resp_arg av[2] = { { f, strlen(f) }, { v, strlen(v) } };
	uint8_t buf[256];
	size_t len = kv_stream_fields_size(av, 1);
	kv_stream_fields_encode(buf, av, 1);
	return kv_stream_append(E.kv, s, (struct kv_sid){ ms, seq }, buf, len);
}

static uint64_t walk_count(const struct kv_stream *s, bool back)
{
	struct kv_stream_walk w;
	struct kv_sid from = back ? (struct kv_sid){ UINT64_MAX, UINT64_MAX } : (struct kv_sid){ 0, 0 };
	kv_stream_walk_init(E.kv, &w, s->o.coll.id, from, back);
	uint64_t n = 0;
	struct kv_sid prev = from;
	bool ordered = true;
	while (kv_stream_walk_next(E.kv, &w) == 1) {
		if (n && (back ? kv_sid_cmp(w.id, prev) >= 0 : kv_sid_cmp(w.id, prev) <= 0))
			ordered = false;
		prev = w.id;
		n++;
	}
	CHECK(ordered);
	return n;
}

static void test_ids_and_fields(void)
{
	uint8_t a[16], b[16];
	kv_sid_put(a, (struct kv_sid){ 1, UINT64_MAX });
	kv_sid_put(b, (struct kv_sid){ 2, 0 });
	CHECK(memcmp(a, b, 16) < 0);
	CHECK(kv_sid_cmp(kv_sid_get(a), (struct kv_sid){ 1, UINT64_MAX }) == 0);
	char s[48];
	CHECK_EQ(kv_sid_fmt(s, (struct kv_sid){ UINT64_MAX, 7 }), 22);
	CHECK(!strcmp(s, "18446744073709551615-7"));

	struct paste_resp_arg av[4] = { { "f", 1 }, { "", 0 }, { "field2", 6 }, { "value", 5 } };
	size_t len = kv_stream_fields_size(av, 2);
	uint8_t buf[64];
	kv_stream_fields_encode(buf, av, 2);
	uint32_t n = 0;
	CHECK_EQ(kv_stream_fields_decode(buf, len, &n, NULL, NULL), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(kv_stream_fields_decode(buf, len - 1, &n, NULL, NULL), -EBADMSG);
	buf[4] = 200;                                   /* a length past the end */
	CHECK_EQ(kv_stream_fields_decode(buf, len, &n, NULL, NULL), -EBADMSG);
}

static void test_entries(void)
{
	kenv_start(&E, "entries", 64u << 20, 2048);
	struct kv_stream s;
	CHECK_EQ(open_or_new(&s, "s"), -ENOENT);
	for (uint64_t i = 1; i <= 50; i++)
		CHECK_EQ(add(&s, i, 0, "k", "v"), 0);
	CHECK_EQ(s.o.coll.count, 50);
	CHECK_EQ(s.o.coll.added, 50);
	CHECK_EQ(s.o.coll.last_ms, 50);
	CHECK_EQ(walk_count(&s, false), 50);
	CHECK_EQ(walk_count(&s, true), 50);
	struct kv_sid e;
	CHECK_EQ(kv_stream_edge(E.kv, &s, false, &e), 1);
	CHECK_EQ(e.ms, 1);
	CHECK_EQ(kv_stream_edge(E.kv, &s, true, &e), 1);
	CHECK_EQ(e.ms, 50);

	/* Back from an ID: that ID and below. */
	struct kv_stream_walk w;
	kv_stream_walk_init(E.kv, &w, s.o.coll.id, (struct kv_sid){ 20, 0 }, true);
	CHECK_EQ(kv_stream_walk_next(E.kv, &w), 1);
	CHECK_EQ(w.id.ms, 20);
	CHECK_EQ(w.node, 1);

	CHECK_EQ(kv_stream_delete(E.kv, &s, (struct kv_sid){ 30, 0 }), 1);
	CHECK_EQ(kv_stream_delete(E.kv, &s, (struct kv_sid){ 30, 0 }), 0);
	CHECK_EQ(kv_stream_delete(E.kv, &s, (struct kv_sid){ 10, 0 }), 1);
	CHECK_EQ(s.o.coll.count, 48);
	CHECK_EQ(s.o.coll.del_ms, 30);                  /* the largest deleted */
	uint8_t *val;
	size_t vlen;
	CHECK_EQ(kv_stream_get(E.kv, &s, (struct kv_sid){ 10, 0 }, &val, &vlen), -ENOENT);
	CHECK_EQ(kv_stream_get(E.kv, &s, (struct kv_sid){ 11, 0 }, &val, &vlen), 0);
	uint32_t pairs;
	CHECK_EQ(kv_stream_fields_decode(val, vlen, &pairs, NULL, NULL), 0);
	free(val);

	/* Every entry deleted: the stream stays, with its last ID. */
	for (uint64_t i = 1; i <= 50; i++)
		kv_stream_delete(E.kv, &s, (struct kv_sid){ i, 0 });
	CHECK_EQ(s.o.coll.count, 0);
	CHECK(kenv_reopen(&E));
	CHECK_EQ(open_or_new(&s, "s"), 0);
	CHECK_EQ(s.o.coll.count, 0);
	CHECK_EQ(s.o.coll.last_ms, 50);
	CHECK_EQ(s.o.coll.added, 50);
	CHECK_EQ(s.o.coll.del_ms, 50);
	CHECK_EQ(members_of(&E, s.o.coll.id, KV_STREAM_ENTRY), 0);
	kenv_finish(&E);
}

static void test_trim(void)
{
	kenv_start(&E, "trim", 64u << 20, 2048);
	struct kv_stream s;
	open_or_new(&s, "s");
	s.node_max = 10;
	for (uint64_t i = 1; i <= 100; i++)
		CHECK_EQ(add(&s, i, 0, "f", "v"), 0);
	struct kv_sid none = { 0, 0 };
	/* Nodes of 10: ~55 with a limit of 30 takes three whole nodes. */
	CHECK_EQ(kv_stream_trim(E.kv, &s, false, 55, none, true, 30), 30);
	CHECK_EQ(s.o.coll.count, 70);
	CHECK_EQ(kv_stream_trim(E.kv, &s, false, 55, none, true, 0), 10);
	CHECK_EQ(s.o.coll.count, 60);
	/* A node partly deleted: its live entries go together. */
	CHECK_EQ(kv_stream_delete(E.kv, &s, (struct kv_sid){ 45, 0 }), 1);
	CHECK_EQ(kv_stream_trim(E.kv, &s, false, 50, none, true, 0), 9);
	CHECK_EQ(s.o.coll.count, 50);
	/* Exact. */
	CHECK_EQ(kv_stream_trim(E.kv, &s, false, 47, none, false, 0), 3);
	CHECK_EQ(kv_stream_trim(E.kv, &s, true, 0, (struct kv_sid){ 60, 0 }, false, 0), 6);
	struct kv_sid e;
	CHECK_EQ(kv_stream_edge(E.kv, &s, false, &e), 1);
	CHECK_EQ(e.ms, 60);
	/* MINID ~: only nodes wholly below the threshold. */
	CHECK_EQ(kv_stream_trim(E.kv, &s, true, 0, (struct kv_sid){ 75, 0 }, true, 0), 1 + 10);
	CHECK_EQ(s.o.coll.count, 30);
	CHECK_EQ(members_of(&E, s.o.coll.id, KV_STREAM_ENTRY), 30);
	CHECK_EQ(s.o.coll.del_ms, 45);                  /* trims are no deletes */

	/* A node emptied by a trim or by deletes is gone: the next append
	 * opens a new one, as in Redis. */
	open_or_new(&s, "t");
	s.node_max = 4;
	add(&s, 1, 0, "f", "v");
	add(&s, 2, 0, "f", "v");
	CHECK_EQ(kv_stream_trim(E.kv, &s, false, 0, none, false, 0), 2);
	for (uint64_t i = 3; i <= 5; i++)
		add(&s, i, 0, "f", "v");
	CHECK_EQ(kv_stream_trim(E.kv, &s, true, 0, (struct kv_sid){ 5, 0 }, true, 0), 0);
	CHECK_EQ(kv_stream_nodes(E.kv, &s), 1);
	add(&s, 6, 0, "f", "v");                        /* node 2 full (4 added) */
	add(&s, 7, 0, "f", "v");                        /* node 3 */
	CHECK_EQ(kv_stream_nodes(E.kv, &s), 2);
	CHECK_EQ(kv_stream_delete(E.kv, &s, (struct kv_sid){ 7, 0 }), 1);
	add(&s, 8, 0, "f", "v");
	struct kv_stream_walk w;
	kv_stream_walk_init(E.kv, &w, s.o.coll.id, (struct kv_sid){ 8, 0 }, false);
	CHECK_EQ(kv_stream_walk_next(E.kv, &w), 1);
	CHECK_EQ(w.node, 4);

	/* MINID ~ bounds a node by its last entry, deleted too. */
	open_or_new(&s, "m");
	add(&s, 6, 0, "f", "v");
	add(&s, 7, 4, "f", "v");
	CHECK_EQ(kv_stream_delete(E.kv, &s, (struct kv_sid){ 7, 4 }), 1);
	CHECK_EQ(kv_stream_trim(E.kv, &s, true, 0, (struct kv_sid){ 7, 4 }, true, 0), 0);
	CHECK_EQ(kv_stream_trim(E.kv, &s, true, 0, (struct kv_sid){ 7, 5 }, true, 0), 1);
	kenv_finish(&E);
}

static void test_groups(void)
{
	kenv_start(&E, "groups", 64u << 20, 2048);
	struct kv_stream s;
	open_or_new(&s, "s");
	CHECK_EQ(add(&s, 1, 0, "f", "v"), 0);
	struct kv_sgroup g1 = { .last = { 1, 0 }, .read = 1, .num = kv_new_id(E.kv), .pending = 2 };
	struct kv_sgroup g2 = { .last = { 0, 0 }, .read = -1, .num = kv_new_id(E.kv) };
	CHECK_EQ(kv_sgroup_put(E.kv, &s, "g1", 2, &g1), 0);
	CHECK_EQ(kv_sgroup_put(E.kv, &s, "g2", 2, &g2), 0);
	CHECK_EQ(kv_stream_groups(E.kv, &s), 2);
	struct kv_sgroup got;
	CHECK_EQ(kv_sgroup_get(E.kv, &s, "g1", 2, &got), 0);
	CHECK(got.num == g1.num && got.read == 1 && got.pending == 2 && got.last.ms == 1);
	CHECK_EQ(kv_sgroup_get(E.kv, &s, "g3", 2, &got), -ENOENT);

	CHECK_EQ(kv_spending_put(E.kv, &s, g1.num, (struct kv_sid){ 1, 0 }, 111, 1, "alice", 5), 0);
	CHECK_EQ(kv_spending_put(E.kv, &s, g1.num, (struct kv_sid){ 2, 0 }, 222, 3, "bob", 3), 0);
	CHECK_EQ(kv_spending_put(E.kv, &s, g2.num, (struct kv_sid){ 1, 0 }, 333, 1, "carol", 5), 0);
	struct kv_sconsumer c = { .seen_ms = 5, .pending = 1 };
	CHECK_EQ(kv_sconsumer_put(E.kv, &s, g1.num, "alice", 5, &c), 0);
	CHECK_EQ(kv_sconsumer_put(E.kv, &s, g1.num, "bob", 3, &c), 0);
	CHECK_EQ(kv_sconsumer_put(E.kv, &s, g2.num, "carol", 5, &c), 0);

	struct kv_spending p;
	CHECK_EQ(kv_spending_get(E.kv, &s, g1.num, (struct kv_sid){ 2, 0 }, &p), 0);
	CHECK(p.delivered_ms == 222 && p.count == 3 && p.clen == 3 && !memcmp(p.consumer, "bob", 3));
	struct kv_spending_walk pw;
	uint64_t n = 0;
	kv_spending_walk_init(E.kv, &pw, s.o.coll.id, g1.num, (struct kv_sid){ 0, 0 });
	while (kv_spending_walk_next(E.kv, &pw) == 1)
		n++;
	CHECK_EQ(n, 2);                                 /* the other group's not among them */
	/* The newest pending entry: the group's own, not the next group's;
	 * the largest ID; none for a group without entries. */
	struct kv_sid last = { 0, 0 };
	CHECK_EQ(kv_spending_last(E.kv, s.o.coll.id, g1.num, &last), 1);
	CHECK(last.ms == 2 && last.seq == 0);
	CHECK_EQ(kv_spending_last(E.kv, s.o.coll.id, g2.num, &last), 1);
	CHECK(last.ms == 1 && last.seq == 0);
	uint64_t g3 = kv_new_id(E.kv);
	CHECK_EQ(kv_spending_last(E.kv, s.o.coll.id, g3, &last), 0);
	CHECK_EQ(kv_spending_put(E.kv, &s, g3, (struct kv_sid){ UINT64_MAX, UINT64_MAX }, 1, 1, "d", 1), 0);
	CHECK_EQ(kv_spending_last(E.kv, s.o.coll.id, g3, &last), 1);
	CHECK(last.ms == UINT64_MAX && last.seq == UINT64_MAX);
	CHECK_EQ(kv_spending_delete(E.kv, &s, g3, (struct kv_sid){ UINT64_MAX, UINT64_MAX }), 1);
	struct kv_sconsumer_walk cw;
	n = 0;
	kv_sconsumer_walk_init(E.kv, &cw, s.o.coll.id, g1.num);
	while (kv_sconsumer_walk_next(E.kv, &cw) == 1)
		n++;
	CHECK_EQ(n, 2);

	CHECK(kenv_reopen(&E));
	CHECK_EQ(open_or_new(&s, "s"), 0);
	CHECK_EQ(kv_sgroup_delete(E.kv, &s, "g1", 2, &g1), 0);
	CHECK_EQ(kv_stream_groups(E.kv, &s), 1);
	CHECK_EQ(kv_spending_get(E.kv, &s, g1.num, (struct kv_sid){ 1, 0 }, &p), -ENOENT);
	CHECK_EQ(kv_sconsumer_get(E.kv, &s, g1.num, "alice", 5, &c), -ENOENT);
	CHECK_EQ(kv_spending_get(E.kv, &s, g2.num, (struct kv_sid){ 1, 0 }, &p), 0);
	CHECK_EQ(kv_sconsumer_get(E.kv, &s, g2.num, "carol", 5, &c), 0);
	CHECK_EQ(members_of(&E, s.o.coll.id, KV_STREAM_PEL), 1);
	CHECK_EQ(members_of(&E, s.o.coll.id, KV_STREAM_CONSUMER), 1);
	kenv_finish(&E);
}

/* An append and a delivery cut off before their COMMIT: none of them. */
static void test_cut(void)
{
	kenv_start(&E, "cut", 64u << 20, 2048);
	struct kv_stream s;
	open_or_new(&s, "s");
	CHECK_EQ(add(&s, 1, 0, "f", "v"), 0);
	kenv_settle(&E);
	CHECK_EQ(kv_stream_begin(E.kv, &s, 0), 0);
	CHECK_EQ(add(&s, 2, 0, "f", "v"), 0);
	CHECK_EQ(kv_spending_put(E.kv, &s, 9, (struct kv_sid){ 2, 0 }, 1, 1, "c", 1), 0);
	CHECK_EQ(kv_coll_save(E.kv, &s.key, &s.o), 0);
	kenv_settle(&E);
	kv_close(E.kv);                  /* no COMMIT: a crash here */
	E.kv = NULL;
	paste_persist_close(E.p);
	paste_store_close(E.st);
	CHECK(kenv_open(&E));
	CHECK_EQ(open_or_new(&s, "s"), 0);
	CHECK_EQ(s.o.coll.count, 1);
	CHECK_EQ(s.o.coll.last_ms, 1);
	CHECK_EQ(members_of(&E, s.o.coll.id, KV_STREAM_ENTRY), 1);
	CHECK_EQ(members_of(&E, s.o.coll.id, KV_STREAM_PEL), 0);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kvstream");
	test_ids_and_fields();
	test_entries();
	test_trim();
	test_groups();
	test_cut();
	rmdir(kv_dir);
	return check_done();
}
