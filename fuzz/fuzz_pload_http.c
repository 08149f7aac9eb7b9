/* libFuzzer target for bench/pload's response parser and its request
 * Connection-header check: any bytes, any length; the result must be
 * consistent with the bytes it was given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pload_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy so ASan sees any read past the end. */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	struct pload_response r;
	int rc = pload_parse_response(buf, size, &r);
	if (rc == 1) {
		/* A complete head is inside the buffer and starts with the
		 * status line; the total covers at least the head. */
		if (r.status < 100 || r.status > 999 || size < 16 || memcmp(buf, "HTTP/1.", 7) ||
		    r.total < 16)
			abort();
		/* The verdict does not depend on bytes past the total. */
		if (r.total < size) {
			struct pload_response r2;
			if (pload_parse_response(buf, (size_t)r.total, &r2) != 1 ||
			    r2.status != r.status || r2.total != r.total)
				abort();
		}
	} else if (rc != 0 && rc != -1) {
		abort();
	}
	/* The request side (--reconnect): a verdict in range, and a head
	 * length inside the buffer that ends with the blank line. */
	size_t head = 0;
	int c = pload_request_connection(buf, size, &head);
	if (c < -2 || c > 1 || (c >= -1 && (head < 4 || head > size || memcmp(buf + head - 4, "\r\n\r\n", 4))))
		abort();
	free(buf);
	return 0;
}
