/* test_kv_strmap.c - the byte-string hash table (services/kv_strmap.c)
 * against a model (an array of flags): random inserts, finds and removes
 * over thousands of keys, growth, iteration visiting each node once,
 * keys with zero bytes, the empty key, and a tag telling equal bytes
 * apart. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv_strmap.h"

#define N 6000

struct ent {
	struct kv_strmap_node node;
	uint8_t key[8];
	size_t len;
	uint32_t tag;
	int in, seen;
};

static struct ent ents[N];

/* Key i: its number's bytes little-endian, zero bytes kept (4 to 8
 * bytes long in turn); key 0 is the empty key; the odd ones' tag is 1 and
 * their bytes repeat their even neighbour's. */
static void make(uint32_t i)
{
	struct ent *e = &ents[i];
	uint32_t v = i / 2;
	e->tag = i & 1;
	e->len = i < 2 ? 0 : 4 + v % 5;
	memset(e->key, 0, sizeof(e->key));
	memcpy(e->key, &v, 4);
	e->node.key = e->key;
	e->node.len = e->len;
	e->node.tag = e->tag;
}

static struct ent *find(struct kv_strmap *m, const struct ent *e)
{
	uint64_t h = kv_strmap_hash(m, e->tag, e->key, e->len);
	struct kv_strmap_node *x = kv_strmap_find(m, e->tag, e->key, e->len, h);
	return x ? KV_STRMAP_ENTRY(x, struct ent, node) : NULL;
}

static uint32_t model_count(void)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < N; i++)
		n += (uint32_t)ents[i].in;
	return n;
}

static void check_all(struct kv_strmap *m)
{
	int bad = 0;
	for (uint32_t i = 0; i < N; i++) {
		struct ent *f = find(m, &ents[i]);
		if (ents[i].in ? f != &ents[i] : f != NULL)
			bad++;
		ents[i].seen = 0;
	}
	CHECK_EQ(bad, 0);
	uint32_t b = 0, visits = 0;
	int twice = 0, absent = 0;
	for (struct kv_strmap_node *x = kv_strmap_next(m, &b, NULL); x;
	     x = kv_strmap_next(m, &b, x)) {
		struct ent *e = KV_STRMAP_ENTRY(x, struct ent, node);
		twice += e->seen++ > 0;
		absent += !e->in;
		visits++;
	}
	CHECK_EQ(twice, 0);
	CHECK_EQ(absent, 0);
	CHECK_EQ(visits, model_count());
	CHECK_EQ(m->n, model_count());
}

int main(void)
{
	struct kv_strmap m = { 0 };
	for (uint32_t i = 0; i < N; i++)
		make(i);
	/* Empty: nothing found, no buckets. */
	CHECK(find(&m, &ents[0]) == NULL);
	CHECK_EQ(m.nb, 0);

	/* Insert all: growth by doubling keeps the load at most 1. */
	for (uint32_t i = 0; i < N; i++) {
		CHECK_EQ(kv_strmap_reserve(&m), 0);
		kv_strmap_insert(&m, &ents[i].node,
				 kv_strmap_hash(&m, ents[i].tag, ents[i].key, ents[i].len));
		ents[i].in = 1;
	}
	CHECK(m.nb >= N && (m.nb & (m.nb - 1)) == 0 && m.nb < 2 * N);
	check_all(&m);
	/* The empty key and a tag apart. */
	CHECK(find(&m, &ents[0]) == &ents[0]);
	CHECK(find(&m, &ents[1]) == &ents[1]);
	CHECK(find(&m, &ents[2]) == &ents[2]);
	struct ent probe = ents[4];
	probe.len = 7;                          /* one more zero byte: another key */
	CHECK(find(&m, &probe) == NULL);

	/* Random operations against the model. */
	srand(7);
	for (int round = 0; round < 20; round++) {
		for (int k = 0; k < 2000; k++) {
			uint32_t i = (uint32_t)rand() % N;
			struct ent *e = &ents[i];
			if (e->in) {
				kv_strmap_remove(&m, &e->node);
				e->in = 0;
			} else {
				CHECK(find(&m, e) == NULL);
				if (kv_strmap_reserve(&m))
					continue;
				kv_strmap_insert(&m, &e->node,
						 kv_strmap_hash(&m, e->tag, e->key, e->len));
				e->in = 1;
			}
		}
		check_all(&m);
	}

	/* Emptied the way a caller clears it: each first node removed. */
	uint32_t b = 0;
	for (struct kv_strmap_node *x; (x = kv_strmap_next(&m, &b, NULL));) {
		struct ent *e = KV_STRMAP_ENTRY(x, struct ent, node);
		kv_strmap_remove(&m, x);
		e->in = 0;
	}
	CHECK_EQ(m.n, 0);
	check_all(&m);
	kv_strmap_free(&m);
	CHECK(m.b == NULL && m.nb == 0);
	return check_done();
}
