/* libFuzzer target for services/kv_hll.c, which reads HyperLogLog values
 * a client may have written byte by byte (SET, SETRANGE, RESTORE). The
 * first two bytes pick a register and a count and whether the rest is
 * taken as it is or behind a sparse header; then every reader must agree:
 * a value the dense conversion accepts is whole, so the merge accepts it
 * and its count equals the count of its registers; a sparse update of a
 * whole value keeps it whole, raises exactly that register (or asks for
 * the dense form) and touches no other. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kv_hll.h"

static uint8_t dense[KV_HLL_DENSE_SIZE], after[KV_HLL_DENSE_SIZE];
static uint8_t max[KV_HLL_REGS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2 || size > 8192)
		return 0;
	uint32_t reg = (uint32_t)data[0] * 64 % KV_HLL_REGS;
	uint8_t count = (uint8_t)(1 + data[1] % 40);
	bool raw = data[1] & 0x80;
	data += 2, size -= 2;
	size_t len = raw ? size : KV_HLL_HDR + size;
	uint8_t *v = malloc(len + 3);
	if (!v)
		return 0;
	if (raw) {
		memcpy(v, data, size);
	} else {
		kv_hll_new(v);
		memcpy(v + KV_HLL_HDR, data, size);
	}
	int enc = kv_hll_encoding(v, len);
	if (enc < 0)
		goto out;
	bool bad;
	uint64_t c = kv_hll_count(v, len, &bad);
	memset(max, 0, sizeof(max));
	bool merged = kv_hll_merge(max, v, len);
	if (enc == KV_HLL_DENSE) {
		if (bad || !merged || c != kv_hll_count_regs(max))
			abort();
		goto out;
	}
	bool whole = kv_hll_to_dense(v, len, dense);
	if (whole != merged || whole == bad)
		abort();
	if (!whole)
		goto out;
	if (c != kv_hll_count_regs(max) || c != kv_hll_count(dense, KV_HLL_DENSE_SIZE, &bad))
		abort();
	uint8_t old = kv_hll_dense_get(dense + KV_HLL_HDR, reg);
	size_t nlen = len;
	int r = kv_hll_sparse_set(v, &nlen, reg, count, 1u << 20);
	if (r < 0 || (r == 2) != (count > 32) || (r == 1) != (count > old && count <= 32) ||
	    !kv_hll_to_dense(v, nlen, after))
		abort();
	for (uint32_t i = 0; i < KV_HLL_REGS; i++) {
		uint8_t want = kv_hll_dense_get(dense + KV_HLL_HDR, i);
		if (i == reg && r == 1)
			want = count;
		if (kv_hll_dense_get(after + KV_HLL_HDR, i) != want)
			abort();
	}
out:
	free(v);
	return 0;
}
