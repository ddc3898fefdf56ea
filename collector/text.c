// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Strings the target chose as JSON text (text.h): the one place the capture and its stacks block make
 * untrusted bytes valid UTF-8.
 */
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, surrogates or code points
 * above U+10FFFF), or 0 if the byte at p does not start one. */
static size_t utf8_sequence(const unsigned char *p, size_t left)
{
	unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xC2 && p[0] <= 0xDF)
		n = 2;
	else if (p[0] >= 0xE0 && p[0] <= 0xEF)
		n = 3, lo = p[0] == 0xE0 ? 0xA0 : 0x80, hi = p[0] == 0xED ? 0x9F : 0xBF;
	else if (p[0] >= 0xF0 && p[0] <= 0xF4)
		n = 4, lo = p[0] == 0xF0 ? 0x90 : 0x80, hi = p[0] == 0xF4 ? 0x8F : 0xBF;
	else
		return 0;
	if (left < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((p[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

/*
 * A string the target chose (a thread name, an argument, a path) as JSON text: whatever bytes it holds,
 * the capture stays valid UTF-8. Each byte that does not start a well-formed sequence becomes U+FFFD;
 * control characters are escaped by json-c (\u001b). docs/capture-format.md says so.
 */
json_object *text_json(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s), used = 0;
	char *clean = malloc(3 * left + 1);
	json_object *o;

	if (!clean)
		return json_object_new_string("\xEF\xBF\xBD");
	while (left) {
		size_t n = utf8_sequence(p, left);

		if (n) {
			memcpy(clean + used, p, n);
			used += n;
		} else {
			memcpy(clean + used, "\xEF\xBF\xBD", 3); /* U+FFFD REPLACEMENT CHARACTER */
			used += 3;
			n = 1;
		}
		p += n;
		left -= n;
	}
	clean[used] = '\0';
	o = json_object_new_string(clean);
	free(clean);
	return o;
}
