/*
 * reassembly.c - the growing byte buffer of reassembly.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reassembly.h"

int reasm_append(struct reasm *b, const void *p, size_t n)
{
	if (n > UINT32_MAX - b->len)
		return -E2BIG;
	uint32_t need = b->len + (uint32_t)n;
	if (need > b->cap) {
		uint64_t cap = b->cap ? b->cap : 512;
		while (cap < need)
			cap *= 2;
		if (cap > UINT32_MAX)
			cap = UINT32_MAX;
		char *q = realloc(b->p, cap);
		if (!q)
			return -ENOMEM;
		b->p = q;
		b->cap = (uint32_t)cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len = need;
	return 0;
}

void reasm_consume(struct reasm *b, uint32_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

void reasm_free(struct reasm *b)
{
	free(b->p);
	*b = (struct reasm){ 0 };
}
