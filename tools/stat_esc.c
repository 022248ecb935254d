// SPDX-License-Identifier: MIT
/*
 * stat_esc - printable ASCII from untrusted bytes (stat_esc.h). Octal, as
 * ps and ls -b show odd bytes, so a name stays readable and unambiguous.
 */
#include "stat_esc.h"

void sr_escape(char *out, size_t outlen, const char *in, size_t inlen)
{
	static const char digits[] = "01234567";
	size_t i, o = 0;

	if (!outlen)
		return;
	for (i = 0; i < inlen && in[i]; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c >= 0x20 && c < 0x7f && c != '\\') {
			if (o + 1 >= outlen)
				break;
			out[o++] = (char)c;
			continue;
		}
		if (o + 4 >= outlen)
			break;
		out[o++] = '\\';
		out[o++] = digits[c >> 6];
		out[o++] = digits[(c >> 3) & 7];
		out[o++] = digits[c & 7];
	}
	out[o] = '\0';
}
