/* test_kv_evict.c - maxmemory's parts (services/kv_evict.c): the access
 * table (a key's word by database and name, a long key's by its kept
 * prefix; idle seconds, a word never written standing for the start,
 * RESTORE's IDLETIME and FREQ, the LFU counter's logarithmic steps and
 * decay), the random sample of a key range, the key each policy chooses
 * (LRU the idlest, LFU the least counted, volatile-* only keys with a
 * deadline, volatile-ttl the soonest, random any, noeviction none), an
 * eviction as a delete, the bound kept by kv_evict_over, and the touch's
 * cost per call (printed). */
#include <time.h>

#include "kv_fixture.h"
#include "kv_evict.h"

static struct kenv E;

static void touch(uint32_t db, const char *key)
{
	kv_access_touch(E.kv, db, key, strlen(key));
}

static uint64_t idle(uint32_t db, const char *key)
{
	return kv_access_idle(E.kv, db, key, strlen(key));
}

static void policy(const char *p)
{
	const char *why;
	CHECK_EQ(kv_evict_set(NULL, "maxmemory-policy", 0, p, strlen(p), &why), 0);
}

static void setting(const char *name, uint64_t v)
{
	const char *why;
	CHECK_EQ(kv_evict_set(NULL, name, v, NULL, 0, &why), 0);
}

static void test_table(void)
{
	kenv_start(&E, "table", 16u << 20, 2048);
	kv_access_init();
	CHECK(kv_access_bits == 16);
	struct kv *kv = E.kv;
	/* the same key, the same word; another database, another word */
	uint32_t a = kv_access_slot(kv->dbmap[0], (const uint8_t *)"key:1", 5);
	CHECK_EQ(kv_access_slot(kv->dbmap[0], (const uint8_t *)"key:1", 5), a);
	CHECK(kv_access_slot(kv->dbmap[1], (const uint8_t *)"key:1", 5) != a ||
	      kv_access_slot(kv->dbmap[1], (const uint8_t *)"key:2", 5) != a);
	/* long keys: by the prefix their tree key keeps */
	static uint8_t l1[1000], l2[2000];
	memset(l1, 'L', sizeof(l1));
	memset(l2, 'L', sizeof(l2));
	CHECK_EQ(kv_access_slot(3, l1, sizeof(l1)), kv_access_slot(3, l2, sizeof(l2)));
	/* idle seconds; a word never written is the start */
	policy("allkeys-lru");
	int64_t t0 = kv->now_ms;
	touch(0, "a");
	kv->now_ms = t0 + 5000;
	CHECK_EQ(idle(0, "a"), 5);
	touch(0, "b");
	CHECK_EQ(idle(0, "b"), 0);
	CHECK(idle(0, "never-touched-key") <= (uint64_t)(kv->now_ms / 1000 - t0 / 1000) + 2);
	kv_access_set_idle(kv, 0, "c", 1, 1000);
	CHECK_EQ(idle(0, "c"), 1000);
	/* LFU: lfu-log-factor 0 steps every access; a period of decay
	 * takes one off per lfu-decay-time minutes */
	policy("allkeys-lfu");
	CHECK(kv_access_lfu);
	setting("lfu-log-factor", 0);
	kv_access_set_freq(kv, 0, "f", 1, KV_LFU_INIT);
	for (int i = 0; i < 20; i++)
		touch(0, "f");
	CHECK_EQ(kv_access_freq(kv, 0, "f", 1), KV_LFU_INIT + 20);
	kv->now_ms += 10 * 60 * 1000;
	CHECK_EQ(kv_access_freq(kv, 0, "f", 1), KV_LFU_INIT + 10);
	setting("lfu-decay-time", 5);
	CHECK_EQ(kv_access_freq(kv, 0, "f", 1), KV_LFU_INIT + 18);
	touch(0, "f");                           /* decays to 23, then one step */
	CHECK_EQ(kv_access_freq(kv, 0, "f", 1), KV_LFU_INIT + 19);
	kv_access_set_freq(kv, 0, "g", 1, 255);
	touch(0, "g");
	CHECK_EQ(kv_access_freq(kv, 0, "g", 1), 255);
	/* the default factor: steps get rarer as the counter grows */
	setting("lfu-log-factor", 10);
	setting("lfu-decay-time", 1);
	kv_access_set_freq(kv, 0, "h", 1, KV_LFU_INIT);
	for (int i = 0; i < 1000; i++)
		touch(0, "h");
	/* Step c -> c + 1 takes ~10 (c - 5) + 1 touches: 1000 make ~19. The
	 * bounds are many deviations out (the steps are random): no steps
	 * rarer with the counter would give 255, none at all 5. */
	uint32_t h = kv_access_freq(kv, 0, "h", 1);
	CHECK(h > 8 && h < 40);
	/* the settings' ranges */
	const char *why = NULL;
	CHECK_EQ(kv_evict_set(NULL, "maxmemory-samples", 0, NULL, 0, &why), -1);
	CHECK(why && strstr(why, "between 1 and 2147483647"));
	CHECK_EQ(kv_evict_set(NULL, "maxmemory-eviction-tenacity", 101, NULL, 0, &why), -1);
	CHECK_EQ(kv_evict_set(NULL, "maxmemory-policy", 0, "lru", 3, &why), -1);
	CHECK_EQ(kv_evict_set(NULL, "hz", 1, NULL, 0, &why), 1);
	char buf[32];
	CHECK(!strcmp(kv_evict_get("maxmemory-policy", buf, sizeof(buf)), "allkeys-lfu"));
	CHECK(kv_evict_get("hz", buf, sizeof(buf)) == NULL);
	policy("noeviction");
	CHECK(!kv_access_lfu);
	kenv_finish(&E);
}

static void test_sample(void)
{
	kenv_start(&E, "sample", 16u << 20, 2048);
	struct kv *kv = E.kv;
	char key[16];
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "s%d", i);
		CHECK_EQ(put_str(&E, 1, key, "v", KV_NO_TTL), 0);
	}
	for (int i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "z%03d", i);
		CHECK_EQ(put_str(&E, 0, key, "v", KV_NO_TTL), 0);
	}
	uint8_t lo = kv->dbmap[1], hi = (uint8_t)(lo + 1), t[PASTE_BTREE_MAX_KEY];
	uint32_t tlen;
	struct paste_btree_attr a;
	int seen[10] = { 0 };
	for (int i = 0; i < 400; i++) {
		CHECK_EQ(kv_evict_sample(kv, &lo, 1, &hi, 1, t, &tlen, &a), 1);
		CHECK(t[0] == lo && tlen == 3 && t[1] == 's');
		if (t[0] == lo && tlen == 3)
			seen[t[2] - '0']++;
	}
	for (int i = 0; i < 10; i++)
		CHECK(seen[i] > 5);                 /* about 40 each */
	uint8_t elo = kv->dbmap[5], ehi = (uint8_t)(elo + 1);
	CHECK_EQ(kv_evict_sample(kv, &elo, 1, &ehi, 1, t, &tlen, &a), 0);
	kenv_finish(&E);
}

/* key -> its name from a tree key */
static bool named(const uint8_t *t, uint32_t tlen, const char *key)
{
	return tlen == strlen(key) + 1 && !memcmp(t + 1, key, tlen - 1);
}

static void test_choose(void)
{
	kenv_start(&E, "choose", 16u << 20, 2048);
	struct kv *kv = E.kv;
	uint8_t t[PASTE_BTREE_MAX_KEY];
	uint32_t tlen;
	char key[16];
	int64_t now = kv->now_ms;
	setting("maxmemory-samples", 100);
	/* LRU: the one key not read since */
	policy("allkeys-lru");
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		CHECK_EQ(put_str(&E, 0, key, "v", KV_NO_TTL), 0);
		touch(0, key);
	}
	kv->now_ms = now + 100000;
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (i != 3)
			touch(0, key);
	}
	CHECK_EQ(kv_evict_choose(kv, t, &tlen), 1);
	CHECK(named(t, tlen, "k3"));
	/* the pool's keys are scored again at the pick: k4 and k5 idle, one
	 * evicted; then the other is read and k8 left idle: k8 goes, not the
	 * one the pool saw idle */
	kv->now_ms = now + 200000;
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (i != 4 && i != 5)
			touch(0, key);
	}
	CHECK_EQ(kv_evict_choose(kv, t, &tlen), 1);
	bool four = named(t, tlen, "k4");
	CHECK(four || named(t, tlen, "k5"));
	CHECK_EQ(kv_evict_key(kv, t, tlen), 1);
	kv->now_ms = now + 300000;
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (i != 8)
			touch(0, key);
	}
	CHECK_EQ(kv_evict_choose(kv, t, &tlen), 1);
	CHECK(named(t, tlen, "k8"));
	CHECK_EQ(put_str(&E, 0, four ? "k4" : "k5", "v", KV_NO_TTL), 0);
	/* LFU: the key counted least */
	policy("allkeys-lfu");
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		kv_access_set_freq(kv, 0, key, strlen(key), i == 6 ? 2 : 40);
	}
	CHECK_EQ(kv_evict_choose(kv, t, &tlen), 1);
	CHECK(named(t, tlen, "k6"));
	/* volatile-*: only keys with a deadline; ttl: the soonest */
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "v%d", i);
		CHECK_EQ(put_str(&E, 2, key, "v", now + 1000000 - i * 1000), 0);
	}
	policy("volatile-ttl");
	CHECK_EQ(kv_evict_choose(kv, t, &tlen), 1);
	CHECK(named(t, tlen, "v4") && t[0] == kv->dbmap[2]);
	const char *const vol[] = { "volatile-lru", "volatile-lfu", "volatile-random" };
	for (int p = 0; p < 3; p++) {
		policy(vol[p]);
		for (int i = 0; i < 20; i++) {
			CHECK_EQ(kv_evict_choose(kv, t, &tlen), 1);
			CHECK(t[0] == kv->dbmap[2] && tlen == 3 && t[1] == 'v');
		}
	}
	uint64_t before = kv_evict_count(), used = kv_evict_used(kv);
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(kv_evict_choose(kv, t, &tlen), 1);
		CHECK_EQ(kv_evict_key(kv, t, tlen), 1);
	}
	CHECK_EQ(kv_evict_count() - before, 5);
	CHECK(kv_evict_used(kv) <= used - 5 * (2 * KV_EVICT_ENTRY_COST + 1));   /* at once */
	CHECK_EQ(kv_dbsize(kv, 2), 0);
	CHECK_EQ(kv_evict_choose(kv, t, &tlen), 0);       /* no deadline left */
	CHECK_EQ(kv_evict_key(kv, t, tlen), 0);           /* gone already */
	/* random: any key, until none */
	policy("allkeys-random");
	int n = 0;
	while (kv_evict_choose(kv, t, &tlen) == 1 && n < 100)
		n += kv_evict_key(kv, t, tlen) == 1;
	CHECK_EQ(n, 10);
	CHECK_EQ(kv_keys(kv), 0);
	policy("noeviction");
	CHECK_EQ(put_str(&E, 0, "x", "v", KV_NO_TTL), 0);
	CHECK_EQ(kv_evict_choose(kv, t, &tlen), 0);
	setting("maxmemory-samples", 5);
	kenv_finish(&E);
}

static void test_bound(void)
{
	kenv_start(&E, "bound", 32u << 20, 2048);
	struct kv *kv = E.kv;
	static char val[1001];
	memset(val, 'x', 1000);
	char key[16];
	for (int i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "b%03d", i);
		CHECK_EQ(put_str(&E, 0, key, val, i % 2 ? kv->now_ms + 100000 : KV_NO_TTL), 0);
	}
	uint64_t used = kv_evict_used(kv), max = used - 50 * 1100;
	const char *why;
	/* Which keys go and the bound, not the time a step may take: without
	 * a limit (tenacity 100), as a sanitizer build on a loaded machine
	 * outlasts the default 500 us and leaves the rest to the next pass. */
	CHECK_EQ(kv_evict_set(NULL, "maxmemory-eviction-tenacity", 100, NULL, 0, &why), 0);
	policy("noeviction");
	CHECK_EQ(kv_evict_set(NULL, "maxmemory", max, NULL, 0, &why), 0);
	CHECK(kv_evict_over(kv));                  /* over, nothing evicted */
	CHECK_EQ(kv_dbsize(kv, 0), 200);
	policy("volatile-random");
	CHECK(!kv_evict_over(kv));
	CHECK(kv_evict_used(kv) <= max);
	CHECK(kv_dbsize(kv, 0) >= 140 && kv_dbsize(kv, 0) < 155);
	CHECK_EQ(kv_dbexpires(kv, 0), kv_dbsize(kv, 0) - 100);   /* no persistent key went */
	/* a bound the volatile keys cannot meet: refused once they are gone */
	CHECK_EQ(kv_evict_set(NULL, "maxmemory", 50 * 1100, NULL, 0, &why), 0);
	CHECK(kv_evict_over(kv));
	CHECK_EQ(kv_dbexpires(kv, 0), 0);
	CHECK_EQ(kv_dbsize(kv, 0), 100);
	/* inside a group nothing is evicted */
	policy("allkeys-lru");
	CHECK_EQ(kv_begin(kv), 0);
	CHECK(kv_evict_over(kv));
	CHECK_EQ(kv_dbsize(kv, 0), 100);
	CHECK_EQ(kv_commit(kv), 0);
	CHECK(!kv_evict_over(kv));
	CHECK(kv_evict_used(kv) <= 50 * 1100);
	CHECK(kv_dbsize(kv, 0) >= 45 && kv_dbsize(kv, 0) <= 53);
	CHECK_EQ(kv_evict_set(NULL, "maxmemory", 0, NULL, 0, &why), 0);
	CHECK(!kv_evict_over(kv));
	CHECK_EQ(kv_evict_set(NULL, "maxmemory-eviction-tenacity", 10, NULL, 0, &why), 0);
	policy("noeviction");
	kenv_finish(&E);
}

/* What a GET or SET pays: one stamp of a 16-byte key (printed). */
static void test_cost(void)
{
	kenv_start(&E, "cost", 16u << 20, 2048);
	kv_access_init();
	struct kv *kv = E.kv;
	char keys[1024][17];
	for (int i = 0; i < 1024; i++)
		snprintf(keys[i], sizeof(keys[i]), "key:%012d", i * 7919);
	struct timespec a, b;
	const int n = 4 << 20;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++)
		kv_access_touch(kv, 0, keys[i & 1023], 16);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n;
	printf("kv_access_touch: %.1f ns per 16-byte key (1024 keys)\n", ns);
	CHECK(ns < 100);
	/* keys enough that their words are out of the cache */
	enum { MANY = 1 << 18 };
	char (*many)[17] = malloc(sizeof(*many) * MANY);
	CHECK(many != NULL);
	if (!many)
		return;
	for (int i = 0; i < MANY; i++)
		snprintf(many[i], sizeof(many[i]), "key:%012d", i);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++)
		kv_access_touch(kv, 0, many[(uint32_t)i * 2654435761u % MANY], 16);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n;
	printf("kv_access_touch: %.1f ns per 16-byte key (%d keys)\n", ns, MANY);
	CHECK(ns < 200);
	free(many);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kv-evict");
	test_table();
	test_sample();
	test_choose();
	test_bound();
	test_cost();
	rmdir(kv_dir);
	return check_done();
}
