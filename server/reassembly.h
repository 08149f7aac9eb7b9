/*
 * reassembly.h - a growing byte buffer: a request split across reads put
 * together (HTTP heads, RESP commands, the floor server's commands), or a
 * long reply built before it is queued (SCAN, KEYS, COMMAND).
 *
 * It grows by doubling from 512 bytes and is kept for the connection's
 * next split request: an allocation per connection that splits one, not
 * per request. Zeroed, it is empty and owns nothing.
 */
#ifndef PASTE_SERVER_REASSEMBLY_H
#define PASTE_SERVER_REASSEMBLY_H

#include <stddef.h>
#include <stdint.h>

struct reasm {
	char *p;
	uint32_t len, cap;
};

/* Append n bytes: 0, or -ENOMEM (nothing appended), -E2BIG past 4 GiB. */
int reasm_append(struct reasm *b, const void *p, size_t n);
/* Forget the first n bytes (what a parse used), keeping the rest. */
void reasm_consume(struct reasm *b, uint32_t n);
/* Free the memory (the buffer is then empty and may be used again). */
void reasm_free(struct reasm *b);

#endif
