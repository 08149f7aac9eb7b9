/* test_siphash.c - paste_siphash128 against the published SipHash-2-4
 * 128-bit vectors (key 00..0f, message 00..len-1), and what a keyed
 * digest must do: another key or one changed byte gives another digest. */
#include <string.h>
#include "check.h"
#include "paste.h"

static const char *const vectors[] = {
	"a3817f04ba25a8e66df67214c7550293",
	"da87c1d86b99af44347659119b22fc45",
	"8177228da4a45dc7fca38bdef60affe4",
};

static void hex(const uint8_t *d, char *out)
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

int main(void)
{
	uint8_t k[16], in[64], out[16], other[16];
	for (int i = 0; i < 16; i++)
		k[i] = (uint8_t)i;
	for (int i = 0; i < 64; i++)
		in[i] = (uint8_t)i;
	uint64_t key[2];
	memcpy(key, k, 16);
	for (size_t n = 0; n < sizeof(vectors) / sizeof(vectors[0]); n++) {
		char h[33];
		paste_siphash128(key, in, n, out);
		hex(out, h);
		CHECK(strcmp(h, vectors[n]) == 0);
		if (strcmp(h, vectors[n]))
			fprintf(stderr, "  length %zu: %s, want %s\n", n, h, vectors[n]);
	}
	/* Every length through two words and a tail, every byte matters. */
	for (size_t n = 1; n < 64; n++) {
		paste_siphash128(key, in, n, out);
		in[n / 2] ^= 1;
		paste_siphash128(key, in, n, other);
		in[n / 2] ^= 1;
		CHECK(memcmp(out, other, 16) != 0);
		uint64_t key2[2] = { key[0] ^ 1, key[1] };
		paste_siphash128(key2, in, n, other);
		CHECK(memcmp(out, other, 16) != 0);
	}
	return check_done();
}
