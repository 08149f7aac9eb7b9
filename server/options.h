/*
 * options.h - a table of long options, parsed with getopt_long and printed
 * as the usage text, so a program's main() is its table.
 *
 * Every value is checked: a number must be all digits and within
 * [min, max] (K/M/G suffixes for sizes), a choice one of its names;
 * anything else is a one-line message naming the option and the value.
 */
#ifndef PASTE_SERVER_OPTIONS_H
#define PASTE_SERVER_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum opt_kind {
	OPT_FLAG,      /* no argument: *(bool *)dst = true */
	OPT_STR,       /* *(const char **)dst = the argument */
	OPT_NUM,       /* decimal, in [min, max], times scale, into dst_size bytes */
	OPT_SIZE,      /* OPT_NUM with a K/M/G suffix allowed */
	OPT_CHOICE,    /* one of choices[]: *(int *)dst = its value */
	OPT_CONFIG,    /* --NAME FILE: options from FILE, before the command line's */
};

struct opt_choice {
	const char *name;
	int value;
};
/* The servers' --engine and --durability choices (enum paste_engine,
 * enum paste_durability), one list for every binary. */
extern const struct opt_choice opt_engines[], opt_durabilities[];

struct opt {
	const char *name;         /* without "--" */
	const char *arg;          /* the argument in the usage ("N", "ADDR"); NULL for a flag */
	const char *help;
	enum opt_kind kind;
	void *dst;
	uint8_t dst_size;         /* OPT_NUM/OPT_SIZE: 1, 2, 4 or 8 bytes (unsigned, or int >= 0) */
	uint64_t min, max;
	uint64_t scale;           /* stored = parsed * scale (seconds -> ms: 1000); 0 means 1 */
	const struct opt_choice *choices;   /* OPT_CHOICE: ends with a NULL name */
};

#define OPT_FLAG_(n, d, h)            { n, NULL, h, OPT_FLAG, d, 0, 0, 0, 0, NULL }
#define OPT_STR_(n, a, d, h)          { n, a, h, OPT_STR, d, 0, 0, 0, 0, NULL }
#define OPT_NUM_(n, a, d, lo, hi, h)  { n, a, h, OPT_NUM, d, sizeof(*(d)), lo, hi, 1, NULL }
#define OPT_SIZE_(n, a, d, hi, h)     { n, a, h, OPT_SIZE, d, sizeof(*(d)), 0, hi, 1, NULL }
#define OPT_SECS_(n, a, d, hi, h)     { n, a, h, OPT_NUM, d, sizeof(*(d)), 0, hi, 1000, NULL }
#define OPT_CHOICE_(n, a, d, c, h)    { n, a, h, OPT_CHOICE, d, sizeof(*(d)), 0, 0, 0, c }
#define OPT_CONFIG_(n, h)             { n, "FILE", h, OPT_CONFIG, NULL, 0, 0, 0, 0, NULL }

/* Parse argv against opts[0..n). --help prints the usage to stdout,
 * --version "PROG (paste) VERSION". Returns 0 (parsed), 1 (--help or
 * --version printed: exit 0) or -1 (a message was printed to stderr:
 * exit 2).
 *
 * A table with an OPT_CONFIG entry (phttpd, pkvs: --config FILE) reads
 * FILE first, then the command line, so the command line wins. FILE has
 * one option per line: "name = value" ("name value" too), or "name" alone
 * for a flag; the name is a long option's, without "--" (with it is fine
 * too); blank lines and lines starting with '#' are skipped. Every value
 * is checked as on the command line; an unknown name or a bad value is an
 * error naming FILE and the line. The file's text stays allocated (string
 * options point into it). */
int opt_parse(const char *prog, const struct opt *opts, int n, const char *tail,
	      int argc, char **argv);
/* "usage: PROG [options]", a line per option, --help, then tail. */
void opt_usage(FILE *f, const char *prog, const struct opt *opts, int n, const char *tail);
/* A decimal number in 0..max, with a K/M/G suffix when suffix is true;
 * -1 after printing "PROG: --NAME: 'V' is not a number in 0..MAX". */
int opt_u64(const char *prog, const char *name, const char *v, uint64_t min, uint64_t max,
	    bool suffix, uint64_t *out);

#endif
