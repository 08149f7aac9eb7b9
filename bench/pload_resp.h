/* pload_resp: the RESP2 side of bench/pload (--resp). An incremental reply
 * framer and the check of a request file; unit-tested in
 * tests/unit/test_pload_resp.c, fuzzed by fuzz/fuzz_pload_resp.c.
 *
 * The framer reads a stream of replies byte by byte for the type and
 * header lines and skips bulk payloads by count: nothing is copied or
 * buffered, so a reply may be split at any byte across receives. It knows
 * every RESP2 type: simple string (+), error (-), integer (:), bulk string
 * ($, including the null $-1) and array (*, including *-1 and nested
 * arrays up to PLOAD_RESP_MAX_DEPTH levels). Everything is bounded: a
 * simple string or error line up to PLOAD_RESP_MAX_LINE bytes, a bulk up
 * to PLOAD_RESP_MAX_BULK, an array up to PLOAD_RESP_MAX_ARRAY elements, an
 * integer within int64. Anything else (RESP3 types, a bare LF, a missing
 * CRLF after a bulk, "$-2", ...) is a protocol error. */
#ifndef PLOAD_RESP_H
#define PLOAD_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLOAD_RESP_MAX_DEPTH 32
#define PLOAD_RESP_MAX_LINE 65536u
#define PLOAD_RESP_MAX_BULK (512ull << 20)      /* Redis's proto-max-bulk-len */
#define PLOAD_RESP_MAX_ARRAY 0x7fffffffull

struct pload_resp {
	uint8_t state;
	uint8_t kind;             /* type byte of the value being read */
	uint8_t top;              /* type byte of the reply (the outermost value) */
	bool neg;                 /* a '-' began the number */
	uint8_t type;             /* after a complete reply: its type byte */
	bool null;                /* ... and whether it was $-1 or *-1 */
	uint32_t depth;           /* open arrays */
	uint32_t n;               /* digits or line bytes read so far */
	uint64_t num;             /* the header's number */
	uint64_t left;            /* bulk payload bytes still to skip */
	uint64_t pending[PLOAD_RESP_MAX_DEPTH];  /* elements left per open array */
};

/* Ready for the first byte of a reply. */
void pload_resp_init(struct pload_resp *p);

/* Feed the next len bytes of the stream. Returns 1 when a whole reply
 * ended inside them: *used is the count of bytes consumed (the reply's
 * last byte is buf[*used - 1]), p->type is its type byte ('+', '-', ':',
 * '$', '*') and p->null tells a null bulk or array; call again with the
 * rest for the next reply. Returns 0 when all len bytes were consumed and
 * the reply goes on (*used == len). Returns -1 on a protocol error (*used
 * is the offset of the offending byte); the parser stays failed until
 * pload_resp_init. */
int pload_resp_feed(struct pload_resp *p, const char *buf, size_t len, size_t *used);

/* A request file for --resp: one or more complete RESP commands, each an
 * array of one or more bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
 * back to back with nothing after the last. Returns how many, or -1 if
 * buf is anything else (inline commands included). */
long pload_resp_commands(const char *buf, size_t len);

#endif
