/* hex_internal.h - one hexadecimal digit's value, for the parsers' escapes
 * (lib/http_parse.c: %XX in a target; lib/resp_parse.c: \xXX in an inline
 * command).
 * Not API. */
#ifndef PASTE_HEX_INTERNAL_H
#define PASTE_HEX_INTERNAL_H

/* 0..15, or -1 when c is not a hexadecimal digit (either case). */
static inline int hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
