/*
 * test_options.c - server/options.c, the option table phttpd's main() is
 * made of, with options shaped like phttpd's batch-wait knobs: a number
 * whose 0 would mean "default" and is therefore refused (--want-div 0,
 * --min-wait-us 0), its upper bound, a flag (--no-min-wait), seconds
 * scaled to ms, and what a bad value prints: one line naming the option,
 * the value and the range, and -1 (phttpd: exit 2). --help prints the
 * table (1: exit 0).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "options.h"

struct knobs {
	uint32_t min_wait_us, want_div;
	bool no_min_wait;
	uint64_t to_ms;
};

/* Parse argv (NULL-terminated, argv[0] included) into k; the exit code
 * opt_parse gives, and what it printed to stderr in err. */
static int parse(struct knobs *k, char *err, size_t errsz, char **argv)
{
	const struct opt opts[] = {
		OPT_NUM_("min-wait-us", "N", &k->min_wait_us, 1, 1000000, "settle after N us"),
		OPT_NUM_("want-div", "N", &k->want_div, 1, 1048576, "wait for 1/N of the connections"),
		OPT_FLAG_("no-min-wait", &k->no_min_wait, "one completion per pass"),
		OPT_SECS_("idle-timeout", "S", &k->to_ms, 1000000, "seconds"),
	};
	int argc = 0;
	while (argv[argc])
		argc++;
	optind = 0;                     /* getopt_long again from the start */
	fflush(stderr);
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	int r = opt_parse("t", opts, (int)(sizeof(opts) / sizeof(opts[0])), NULL, argc, argv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(err, 1, errsz - 1, tmp);
	err[n] = 0;
	fclose(tmp);
	return r;
}

#define ARGV(...) ((char *[]){ "t", __VA_ARGS__, NULL })

int main(void)
{
	struct knobs k = { 0 };
	char err[256];

	CHECK_EQ(parse(&k, err, sizeof(err), ARGV("--min-wait-us", "200", "--want-div", "2",
						  "--no-min-wait", "--idle-timeout", "3")), 0);
	CHECK_EQ(k.min_wait_us, 200);
	CHECK_EQ(k.want_div, 2);
	CHECK(k.no_min_wait);
	CHECK_EQ(k.to_ms, 3000);
	CHECK_EQ(err[0], 0);

	/* the bounds are inclusive */
	CHECK_EQ(parse(&k, err, sizeof(err), ARGV("--min-wait-us", "1000000", "--want-div", "1")), 0);
	CHECK_EQ(k.min_wait_us, 1000000);
	CHECK_EQ(k.want_div, 1);

	/* 0 would silently mean the default: refused, and said so */
	k = (struct knobs){ 0 };
	CHECK_EQ(parse(&k, err, sizeof(err), ARGV("--want-div", "0")), -1);
	CHECK(strstr(err, "--want-div: '0' is not a number in 1..1048576") != NULL);
	CHECK_EQ(k.want_div, 0);
	CHECK_EQ(parse(&k, err, sizeof(err), ARGV("--min-wait-us", "0")), -1);
	CHECK(strstr(err, "--min-wait-us: '0' is not a number in 1..1000000") != NULL);
	CHECK_EQ(parse(&k, err, sizeof(err), ARGV("--min-wait-us", "1000001")), -1);
	CHECK(strstr(err, "'1000001'") != NULL);
	/* not numbers, negative, a suffix where none is allowed, no value */
	const char *bad[] = { "x", "-1", "4K", "", "2 " };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(parse(&k, err, sizeof(err), ARGV("--want-div", (char *)bad[i])), -1);
		CHECK(strstr(err, "--want-div") != NULL);
	}
	CHECK_EQ(parse(&k, err, sizeof(err), ARGV("--want-div")), -1);
	CHECK(strstr(err, "'--want-div'") != NULL);
	/* a flag takes no value */
	CHECK_EQ(parse(&k, err, sizeof(err), ARGV("--no-min-wait=1")), -1);
	CHECK(err[0] != 0);

	/* --help: the table on stdout, 1 */
	fflush(stdout);
	int saved = dup(1);
	FILE *out = tmpfile();
	dup2(fileno(out), 1);
	int r = parse(&k, err, sizeof(err), ARGV("--help"));
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	rewind(out);
	char usage[1024];
	size_t n = fread(usage, 1, sizeof(usage) - 1, out);
	usage[n] = 0;
	fclose(out);
	CHECK_EQ(r, 1);
	CHECK(strstr(usage, "--min-wait-us N") != NULL);
	CHECK(strstr(usage, "--want-div N") != NULL);
	CHECK(strstr(usage, "--no-min-wait") != NULL);
	return check_done();
}
