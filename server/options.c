/*
 * options.c - long options from a table (options.h). Runs once at start.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#define MAX_OPTS 64

int opt_u64(const char *prog, const char *name, const char *v, uint64_t min, uint64_t max,
	    bool suffix, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (suffix && end != v) {
		uint64_t mul = 1;
		switch (*end) {
		case 'k': case 'K': mul = 1ull << 10; end++; break;
		case 'm': case 'M': mul = 1ull << 20; end++; break;
		case 'g': case 'G': mul = 1ull << 30; end++; break;
		}
		if (x > UINT64_MAX / mul)
			errno = ERANGE;
		x *= mul;
	}
	if (errno || end == v || *end || *v == '-' || x > max || x < min) {
		fprintf(stderr, "%s: --%s: '%s' is not a number in %" PRIu64 "..%" PRIu64 "\n",
			prog, name, v, min, max);
		return -1;
	}
	*out = x;
	return 0;
}

static void store_uint(void *dst, uint8_t size, uint64_t v)
{
	switch (size) {
	case 1: { uint8_t x = (uint8_t)v; memcpy(dst, &x, 1); break; }
	case 2: { uint16_t x = (uint16_t)v; memcpy(dst, &x, 2); break; }
	case 4: { uint32_t x = (uint32_t)v; memcpy(dst, &x, 4); break; }
	default: memcpy(dst, &v, 8); break;
	}
}

/* "'V' is not a, b or c" */
static int bad_choice(const char *prog, const struct opt *o, const char *v)
{
	fprintf(stderr, "%s: --%s: '%s' is not ", prog, o->name, v);
	for (const struct opt_choice *c = o->choices; c->name; c++)
		fprintf(stderr, "%s%s", c->name, !c[1].name ? "\n" : !c[2].name ? " or " : ", ");
	return -1;
}

static int set_value(const char *prog, const struct opt *o, const char *v)
{
	uint64_t x;
	switch (o->kind) {
	case OPT_FLAG:
		*(bool *)o->dst = true;
		return 0;
	case OPT_STR:
		*(const char **)o->dst = v;
		return 0;
	case OPT_NUM:
	case OPT_SIZE:
		if (opt_u64(prog, o->name, v, o->min, o->max, o->kind == OPT_SIZE, &x))
			return -1;
		store_uint(o->dst, o->dst_size, x * (o->scale ? o->scale : 1));
		return 0;
	case OPT_CHOICE:
		for (const struct opt_choice *c = o->choices; c->name; c++) {
			if (!strcmp(v, c->name)) {
				*(int *)o->dst = c->value;
				return 0;
			}
		}
		return bad_choice(prog, o, v);
	}
	return -1;
}

void opt_usage(FILE *f, const char *prog, const struct opt *opts, int n, const char *tail)
{
	fprintf(f, "usage: %s [options]\n", prog);
	for (int i = 0; i < n; i++) {
		char left[64];
		snprintf(left, sizeof(left), "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
			 opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-20s %s\n", left, opts[i].help);
	}
	fprintf(f, "  %-20s %s\n", "--help", "this text");
	if (tail)
		fputs(tail, f);
}

int opt_parse(const char *prog, const struct opt *opts, int n, const char *tail,
	      int argc, char **argv)
{
	struct option lo[MAX_OPTS + 2] = { 0 };
	if (n > MAX_OPTS)
		n = MAX_OPTS;
	for (int i = 0; i < n; i++)
		lo[i] = (struct option){ opts[i].name, opts[i].kind == OPT_FLAG ? 0 : 1, 0, 256 + i };
	lo[n] = (struct option){ "help", 0, 0, 256 + MAX_OPTS };
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 256 + MAX_OPTS) {
			opt_usage(stdout, prog, opts, n, tail);
			return 1;
		}
		if (c < 256 || c >= 256 + n) {
			fprintf(stderr, "%s: unknown or incomplete option '%s' (see --help)\n", prog,
				argv[optind - 1]);
			return -1;
		}
		if (set_value(prog, &opts[c - 256], optarg))
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[optind]);
		return -1;
	}
	return 0;
}
