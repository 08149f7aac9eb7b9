/*
 * kv_strmap.c - the chained hash table of kv_strmap.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kv_strmap.h"
#include "paste.h"

uint64_t kv_strmap_hash(struct kv_strmap *m, uint32_t tag, const void *p, size_t len)
{
	if (!m->seeded) {
		/* No entropy: still a hash, only a guessable one. */
		if (getrandom(m->seed, sizeof(m->seed), 0) != sizeof(m->seed)) {
			m->seed[0] = (uint64_t)(uintptr_t)m;
			m->seed[1] = (uint64_t)(uintptr_t)&m->seed;
		}
		m->seeded = 1;
	}
	uint8_t d[16];
	uint64_t h;
	paste_siphash128(m->seed, p, len, d);
	memcpy(&h, d, sizeof(h));
	return h ^ (tag * 0x9e3779b97f4a7c15ull);
}

struct kv_strmap_node *kv_strmap_find(const struct kv_strmap *m, uint32_t tag, const void *p,
				      size_t len, uint64_t h)
{
	if (!m->nb)
		return NULL;
	for (struct kv_strmap_node *x = m->b[h & (m->nb - 1)]; x; x = x->next)
		if (x->h == h && x->tag == tag && x->len == len && !memcmp(x->key, p, len))
			return x;
	return NULL;
}

int kv_strmap_reserve(struct kv_strmap *m)
{
	if (m->n < m->nb)
		return 0;
	if (m->nb > UINT32_MAX / 2)
		return -ENOMEM;                 /* the bucket count would wrap */
	uint32_t nb = m->nb ? 2 * m->nb : 64;
	struct kv_strmap_node **b = calloc(nb, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nb; i++)
		while (m->b[i]) {
			struct kv_strmap_node *x = m->b[i];
			m->b[i] = x->next;
			x->next = b[x->h & (nb - 1)];
			b[x->h & (nb - 1)] = x;
		}
	free(m->b);
	m->b = b;
	m->nb = nb;
	return 0;
}

void kv_strmap_insert(struct kv_strmap *m, struct kv_strmap_node *x, uint64_t h)
{
	x->h = h;
	x->next = m->b[h & (m->nb - 1)];
	m->b[h & (m->nb - 1)] = x;
	m->n++;
}

void kv_strmap_remove(struct kv_strmap *m, struct kv_strmap_node *x)
{
	struct kv_strmap_node **pp = &m->b[x->h & (m->nb - 1)];
	while (*pp != x)
		pp = &(*pp)->next;
	*pp = x->next;
	m->n--;
}

struct kv_strmap_node *kv_strmap_next(const struct kv_strmap *m, uint32_t *bucket,
				      struct kv_strmap_node *x)
{
	if (x && x->next)
		return x->next;
	if (x)
		(*bucket)++;
	for (; *bucket < m->nb; (*bucket)++)
		if (m->b[*bucket])
			return m->b[*bucket];
	return NULL;
}

void kv_strmap_free(struct kv_strmap *m)
{
	free(m->b);
	m->b = NULL;
	m->nb = m->n = 0;
}
