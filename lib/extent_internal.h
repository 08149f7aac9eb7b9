/* extent_internal.h - copying extents (struct paste_extent, 12 bytes)
 * between their packed form in log records and tree entries and arrays.
 * Not API.
 *
 * Why not one memcpy of 12 x n bytes: with n unknown but bounded, gcc
 * inlines it as `rep movsq`, whose start-up costs a tree lookup ~25 ns
 * for the one extent most values have (docs/results.md, "The tree
 * search"), and a SET as much again in the log record and the tree entry.
 * A loop of fixed 12-byte copies is a load and a store or two per extent. */
#ifndef PASTE_EXTENT_INTERNAL_H
#define PASTE_EXTENT_INTERNAL_H

#include <stdint.h>
#include <string.h>

static inline void extents_copy(void *to, const void *from, uint32_t n)
{
	uint8_t *t = to;
	const uint8_t *f = from;
	for (uint32_t i = 0; i < n; i++)
		memcpy(t + 12 * (size_t)i, f + 12 * (size_t)i, 12);
}

#endif
