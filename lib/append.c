/*
 * append.c - an append point in the store: where copies that must live in
 * store buffers go (small values, values that arrived in DRAM, the
 * cleaner's moves), packed one after another, so a 100-byte value takes
 * about 100 bytes of the store and not a whole buffer.
 *
 * The append point holds one reference on the buffer it fills; each range
 * it hands out carries references of its own (one per extent), which the
 * caller gives to whoever keeps the bytes (the tree, a log record) and
 * then drops. A buffer is therefore free once every value in it went, and
 * the cleaner (lib/btree_clean.c) moves the few that outlive their
 * neighbours.
 *
 * Cost: a memcpy, and the store's mutex once per buffer filled.
 */
#include <errno.h>
#include <string.h>
#include "paste.h"

/* A range that would cost one extent more at the append point than in
 * fresh buffers starts in a fresh one: a copy never needs more extents
 * than ceil(len / buf_size). Ranges start 8-byte aligned. */
int paste_append_reserve(struct paste_store *st, struct paste_append *a, uint64_t len,
			 uint32_t floor, struct paste_extent *ext, uint32_t max, uint32_t *n)
{
	uint32_t bs = paste_store_geom(st)->buf_size;
	uint64_t whole = (len + bs - 1) / bs;
	uint32_t tail = a->buf == PASTE_NO_BUF ? 0 : bs - a->used;
	if (tail < len && 1 + (len - tail + bs - 1) / bs > whole)
		tail = 0;
	if (whole > max)
		return -E2BIG;
	uint32_t k = 0;
	while (len) {
		if (!tail) {
			uint32_t b;
			if (paste_store_nfree(st) <= floor || paste_store_alloc(st, &b, 1) != 1) {
				for (uint32_t i = 0; i < k; i++)
					paste_store_unref(st, ext[i].buf, false);
				return -ENOSPC;
			}
			if (a->buf != PASTE_NO_BUF)
				paste_store_unref(st, a->buf, false);
			a->buf = b;
			a->used = 0;
			tail = bs;
		}
		uint32_t m = tail < len ? tail : (uint32_t)len;
		ext[k++] = (struct paste_extent){ a->buf, a->used, m };
		paste_store_ref(st, a->buf);
		a->used += (m + 7u) & ~7u;
		if (a->used > bs)
			a->used = bs;
		tail = bs - a->used;
		len -= m;
	}
	*n = k;
	return 0;
}

int paste_append_copy(struct paste_store *st, struct paste_append *a, const void *src,
		      uint64_t len, uint32_t floor, struct paste_extent *ext, uint32_t max,
		      uint32_t *n)
{
	int r = paste_append_reserve(st, a, len, floor, ext, max, n);
	const uint8_t *p = src;
	for (uint32_t i = 0; r == 0 && i < *n; i++) {
		memcpy(paste_store_buf(st, ext[i].buf) + ext[i].off, p, ext[i].len);
		p += ext[i].len;
	}
	return r;
}

void paste_append_close(struct paste_store *st, struct paste_append *a)
{
	if (a->buf != PASTE_NO_BUF)
		paste_store_unref(st, a->buf, false);
	a->buf = PASTE_NO_BUF;
	a->used = 0;
}
