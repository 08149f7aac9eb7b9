/* libFuzzer target for bench/pload's RESP2 reply framer (--resp) and its
 * request-file check. The first byte picks a piece size; the rest is the
 * stream. Fed whole and fed in pieces, the framer must find the same
 * replies at the same offsets and fail at the same byte; offsets stay in
 * range; a file pload_resp_commands accepts frames as that many arrays. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pload_resp.h"

#define MAX_SEEN 4096

struct result {
	size_t n;                 /* replies */
	size_t end[MAX_SEEN];     /* stream offset past each (the first MAX_SEEN) */
	uint8_t type[MAX_SEEN];
	bool null[MAX_SEEN];
	bool failed;
	size_t fail_at;
};

static void frame(const char *buf, size_t len, size_t piece, struct result *res)
{
	struct pload_resp p;
	pload_resp_init(&p);
	memset(res, 0, sizeof *res);
	for (size_t off = 0; off < len;) {
		size_t chunk = len - off < piece ? len - off : piece;
		size_t pos = 0;
		while (pos < chunk) {
			size_t used = (size_t)-1;
			int r = pload_resp_feed(&p, buf + off + pos, chunk - pos, &used);
			if (used > chunk - pos)
				abort();
			if (r < 0) {
				res->failed = true;
				res->fail_at = off + pos + used;
				return;
			}
			pos += used;
			if (r == 0) {
				if (pos != chunk)
					abort();
				break;
			}
			if (r != 1 || used == 0 || !strchr("+-:$*", p.type) ||
			    (p.null && p.type != '$' && p.type != '*'))
				abort();
			if (res->n < MAX_SEEN) {
				res->end[res->n] = off + pos;
				res->type[res->n] = p.type;
				res->null[res->n] = p.null;
			}
			res->n++;
		}
		off += chunk;
	}
}

static struct result whole, pieces;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t piece = (size_t)(data[0] % 17) + 1;
	size_t len = size - 1;
	/* An exact-size copy so ASan sees any read past the end. */
	char *buf = malloc(len ? len : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, len);

	frame(buf, len, len ? len : 1, &whole);
	frame(buf, len, piece, &pieces);
	if (whole.n != pieces.n || whole.failed != pieces.failed ||
	    (whole.failed && (whole.fail_at != pieces.fail_at || whole.fail_at >= len)))
		abort();
	for (size_t i = 0; i < whole.n && i < MAX_SEEN; i++)
		if (whole.end[i] != pieces.end[i] || whole.type[i] != pieces.type[i] ||
		    whole.null[i] != pieces.null[i] || whole.end[i] > len ||
		    (i && whole.end[i] <= whole.end[i - 1]))
			abort();

	long cmds = pload_resp_commands(buf, len);
	if (cmds == 0 || cmds < -1)
		abort();
	if (cmds > 0) {
		/* Commands are replies too: that many arrays, the last ending at len. */
		if (whole.failed || whole.n != (size_t)cmds)
			abort();
		for (size_t i = 0; i < whole.n && i < MAX_SEEN; i++)
			if (whole.type[i] != '*' || whole.null[i])
				abort();
		if (whole.n <= MAX_SEEN && whole.end[whole.n - 1] != len)
			abort();
	}
	free(buf);
	return 0;
}
