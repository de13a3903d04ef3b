/*
 * rlperf_num.c - fio's number and time syntax, read as fio 3.33 reads it
 * (its parse.c, checked against the fio binary), but strict: fio ignores
 * what follows a number it understands ("4x" is 4, "1.5k" is 1, "0x1k" is
 * 1, "8k8" is 8192), rlperf refuses such strings instead of guessing.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "rlperf.h"

/* Reads digits in base 10 or 16; returns the end, or NULL on overflow or
 * when there are none. */
static const char *read_digits(const char *p, int base, uint64_t *v)
{
	const char *start = p;

	*v = 0;
	for (;; p++) {
		int c = tolower((unsigned char)*p);
		unsigned d;

		if (isdigit(c))
			d = (unsigned)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			break;
		if (rp_mul64(*v, (uint64_t)base, v) || rp_add64(*v, d, v))
			return NULL;
	}
	return p == start ? NULL : p;
}

/*
 * The multiplier of a unit suffix. fio 3.33 (parse.c __get_mult_bytes):
 * "kib".."pib" use the base opposite to kb_base; every other spelling
 * starting with k, m, g, t or p ("k", "kb", "ki") uses kb_base itself.
 * That "ki" is 1024 with the default kb_base contradicts fio's HOWTO (which
 * says 1000) but is what fio does, so rlperf does it too.
 */
static int unit_mult(const char *u, unsigned kb_base, uint64_t *mult)
{
	static const char units[] = "kmgtp";
	static const char *const forms[] = { "", "b", "i", "ib" };
	const char *pos;
	unsigned pow, base = kb_base;
	size_t f;

	*mult = 1;
	if (!*u || !strcasecmp(u, "b"))
		return 0;
	pos = strchr(units, tolower((unsigned char)u[0]));
	if (!pos)
		return -1;
	for (f = 0; f < RP_ARRAY_SIZE(forms); f++)
		if (!strcasecmp(u + 1, forms[f]))
			break;
	if (f == RP_ARRAY_SIZE(forms))
		return -1;
	if (f == 3)  /* KiB: the other base */
		base = kb_base == 1000 ? 1024 : 1000;
	for (pow = (unsigned)(pos - units) + 1; pow; pow--)
		*mult *= base;
	return 0;
}

int rp_parse_size(const char *s, unsigned kb_base, uint64_t *out, int *pct)
{
	const char *p = s;
	uint64_t v, mult;

	if (pct)
		*pct = 0;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		/* fio reads no suffix after a hex number */
		p = read_digits(p + 2, 16, &v);
		if (!p || *p)
			return -1;
		*out = v;
		return 0;
	}
	p = read_digits(p, 10, &v);
	if (!p)
		return -1;
	if (*p == '%') {
		if (!pct || p[1] || v > 100)
			return -1;
		*pct = 1;
		*out = v;
		return 0;
	}
	if (unit_mult(p, kb_base, &mult) || rp_mul64(v, mult, out))
		return -1;
	return 0;
}

int rp_parse_time(const char *s, uint64_t *ns)
{
	static const struct {
		const char *suffix;
		uint64_t ns;
	} units[] = {
		{ "", 1000000000ull }, { "us", 1000ull }, { "usec", 1000ull },
		{ "ms", 1000000ull }, { "msec", 1000000ull }, { "s", 1000000000ull },
		{ "sec", 1000000000ull }, { "m", 60000000000ull },
		{ "h", 3600000000000ull }, { "d", 86400000000000ull },
	};
	uint64_t v;
	const char *p = read_digits(s, 10, &v);

	if (!p)
		return -1;
	for (size_t i = 0; i < RP_ARRAY_SIZE(units); i++)
		if (!strcasecmp(p, units[i].suffix))
			return rp_mul64(v, units[i].ns, ns) ? -1 : 0;
	return -1;
}
