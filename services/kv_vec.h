/*
 * kv_vec.h - the growing arrays the services' tables keep (pub/sub's
 * topics and subscribers, client tracking's clients and keys, the heap
 * of blocked clients): a pointer, a count and a capacity that doubles,
 * so n appends copy O(n) elements in all.
 */
#ifndef PASTE_SERVICES_KV_VEC_H
#define PASTE_SERVICES_KV_VEC_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Room for need elements of elem bytes at *p (capacity *cap, first 4,
 * then doubled): 0, or -ENOMEM with *p and *cap as they were. */
static inline int kv_vec_grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t n = *cap ? *cap * 2 : 4;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, (size_t)n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

#endif
