/* pload_http: just enough of an HTTP/1.1 response parser for bench/pload.
 * The status and the whole response length (head + Content-Length), nothing
 * else; unit-tested in tests/unit/test_pload_http.c. Plus the one request
 * header pload looks at (Connection, for --reconnect). */
#ifndef PLOAD_HTTP_H
#define PLOAD_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct pload_response {
	int status;               /* 100..999 */
	uint64_t total;           /* head + body bytes */
};

/* 1: the head is complete and *r is filled; 0: need more bytes; -1: not a
 * response pload can measure (malformed status line or header, chunked or
 * close-delimited body, conflicting Content-Length). */
int pload_parse_response(const char *buf, size_t len, struct pload_response *r);

/* The Connection header of a request, for --reconnect: 1 if its value lists
 * "close", 0 without a Connection header, -1 with any other value, -2 when
 * req does not start with a complete head. *head_len is the head's length
 * (up to and including the blank line) when the result is >= -1. */
int pload_request_connection(const char *req, size_t len, size_t *head_len);

#endif
