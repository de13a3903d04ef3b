/*
 * sjson.c - strict JSON pieces with serde_json's grammar, for the header
 * parser (safetensors.c): whitespace, strings (escapes, surrogate pairs,
 * no raw control characters), numbers, literals, skipping any value with
 * its recursion limit, and plain 64-bit integers taken exactly from text.
 * Also Rust's UTF-8 check and the message quoting helper.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sjson.h"

size_t pl_quote(char *dst, size_t cap, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (!cap)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (o + 5 >= cap || o > 96) {
			if (o + 4 <= cap)
				memcpy(dst + o, "...", 3), o += 3;
			break;
		}
		if (c < 0x20 || c == 0x7f || c == '\\') {
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[c >> 4];
			dst[o++] = hex[c & 15];
		} else {
			dst[o++] = (char)c;
		}
	}
	dst[o] = '\0';
	return o;
}

int sj_jerr(struct sj *j, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return cm_err_set(j->e, j->code ? j->code : RL_E_HEADER_JSON, "%s: %s at byte %zu",
			  j->lead ? j->lead : "invalid header JSON", what,
			  (size_t)(j->p - j->buf));
}

static int oom(struct cm_err *e)
{
	return cm_err_set(e, -ENOMEM, "out of memory reading header");
}

void sj_ws(struct sj *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' ||
				 *j->p == '\r'))
		j->p++;
}

/* Consumes c after optional whitespace, or fails naming what was expected. */
int sj_expect(struct sj *j, char c, const char *what)
{
	sj_ws(j);
	if (j->p >= j->end)
		return sj_jerr(j, "unexpected end, expected %s", what);
	if (*j->p != c)
		return sj_jerr(j, "expected %s", what);
	j->p++;
	return 0;
}

int sj_next(struct sj *j, char close, const char *what)
{
	int r;

	sj_ws(j);
	if (j->p < j->end && *j->p == ',') {
		j->p++;
		return 1;
	}
	if ((r = sj_expect(j, close, what)))
		return r;
	j->depth--;
	return 0;
}

int sj_empty(struct sj *j, char close)
{
	sj_ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		j->depth--;
		return 1;
	}
	return 0;
}

int sj_enter(struct sj *j)
{
	int max = j->max_depth ? j->max_depth : JSON_MAX_DEPTH;

	if (++j->depth > max) {
		j->limit = 1;
		return sj_jerr(j, "nesting deeper than %d levels, the limit", max);
	}
	j->p++;
	return 0;
}

static int sb_put(struct sj *j, const char *s, size_t n)
{
	if (j->sb_len + n + 1 > j->sb_cap) {
		size_t cap = j->sb_cap ? j->sb_cap : 64;
		char *nb;

		while (cap < j->sb_len + n + 1)
			cap *= 2;
		nb = cm_realloc(j->sb, cap);
		if (!nb)
			return oom(j->e);
		j->sb = nb;
		j->sb_cap = cap;
	}
	memcpy(j->sb + j->sb_len, s, n);
	j->sb_len += n;
	j->sb[j->sb_len] = '\0';
	return 0;
}

static int hex4(struct sj *j, unsigned *out)
{
	unsigned v = 0;

	if (j->end - j->p < 4)
		return sj_jerr(j, "unexpected end in \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = j->p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return sj_jerr(j, "invalid \\u escape");
	}
	j->p += 4;
	*out = v;
	return 0;
}

static int put_utf8(struct sj *j, unsigned cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return sb_put(j, u, n);
}

/*
 * Decodes the string at j->p (which is '"') into j->sb / j->sb_len. Raw
 * control characters, unknown escapes and unpaired surrogates are errors,
 * as in serde_json's parse_str. The text is already valid UTF-8.
 */
int sj_string(struct sj *j)
{
	int r;

	j->p++;
	j->sb_len = 0;
	if ((r = sb_put(j, "", 0)))
		return r;
	for (;;) {
		const char *run = j->p;
		unsigned cp, lo;

		while (j->p < j->end && *j->p != '"' && *j->p != '\\' &&
		       (unsigned char)*j->p >= 0x20)
			j->p++;
		if (j->p > run && (r = sb_put(j, run, (size_t)(j->p - run))))
			return r;
		if (j->p >= j->end)
			return sj_jerr(j, "unterminated string");
		if (*j->p == '"') {
			j->p++;
			if (j->no_nul && memchr(j->sb, 0, j->sb_len))
				return sj_jerr(j, "string containing U+0000 (\\u0000)");
			return 0;
		}
		if (*j->p != '\\')
			return sj_jerr(j, "control character 0x%02x in string",
				    (unsigned char)*j->p);
		j->p++;
		if (j->p >= j->end)
			return sj_jerr(j, "unterminated string");
		switch (*j->p++) {
		case '"': r = sb_put(j, "\"", 1); break;
		case '\\': r = sb_put(j, "\\", 1); break;
		case '/': r = sb_put(j, "/", 1); break;
		case 'b': r = sb_put(j, "\b", 1); break;
		case 'f': r = sb_put(j, "\f", 1); break;
		case 'n': r = sb_put(j, "\n", 1); break;
		case 'r': r = sb_put(j, "\r", 1); break;
		case 't': r = sb_put(j, "\t", 1); break;
		case 'u':
			if ((r = hex4(j, &cp)))
				return r;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return sj_jerr(j, "lone trailing surrogate \\u%04x", cp);
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
					return sj_jerr(j, "lone leading surrogate \\u%04x", cp);
				j->p += 2;
				if ((r = hex4(j, &lo)))
					return r;
				if (lo < 0xdc00 || lo > 0xdfff)
					return sj_jerr(j, "invalid surrogate pair");
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			r = put_utf8(j, cp);
			break;
		default:
			j->p--;
			return sj_jerr(j, "invalid escape");
		}
		if (r)
			return r;
	}
}

/* One or more digits from at (*pp ends past them), or "invalid number"
 * there (the code returned, j->p moved to the offending byte). */
static int digits(struct sj *j, const char **pp, const char *at)
{
	const char *p = at;

	if (p >= j->end || *p < '0' || *p > '9') {
		j->p = p;
		return sj_jerr(j, "invalid number");
	}
	while (p < j->end && *p >= '0' && *p <= '9')
		p++;
	*pp = p;
	return 0;
}

/* Scans a number token with serde_json's grammar. */
int sj_number(struct sj *j, struct sj_num *n)
{
	const char *p = j->p;
	int r;

	n->s = p;
	n->neg = n->frac = n->exp = 0;
	if (p < j->end && *p == '-')
		n->neg = 1, p++;
	if (p >= j->end || *p < '0' || *p > '9') {
		j->p = p;
		return sj_jerr(j, "invalid number");
	}
	if (*p == '0') {
		p++;
		if (p < j->end && *p >= '0' && *p <= '9') {
			j->p = p;
			return sj_jerr(j, "invalid number (leading zero)");
		}
	} else {
		while (p < j->end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < j->end && *p == '.') {
		n->frac = 1;
		if ((r = digits(j, &p, p + 1)))
			return r;
	}
	if (p < j->end && (*p == 'e' || *p == 'E')) {
		n->exp = 1;
		p++;
		if (p < j->end && (*p == '+' || *p == '-'))
			p++;
		if ((r = digits(j, &p, p)))
			return r;
	}
	n->len = (size_t)(p - n->s);
	j->p = p;
	return 0;
}

/*
 * serde_json refuses a number whose value is beyond the range of a double
 * ("number out of range"). Decides it with strtod on a normalized copy:
 * at most 800 significant digits plus a sticky digit, which rounds exactly.
 */
int sj_number_is_finite(const struct sj_num *n)
{
	char buf[900];
	size_t o = 0, nd = 0;
	long long dexp = 0, e10 = 0;
	int seen_nonzero = 0, sticky = 0, eneg = 0;
	const char *p = n->s + n->neg, *end = n->s + n->len;

	if (n->neg)
		buf[o++] = '-';
	buf[o++] = '.';
	for (int part = 0; part < 2; part++) {
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			if (part == 0 && (seen_nonzero || *p != '0'))
				dexp++;
			if (!seen_nonzero && *p == '0') {
				if (part == 1)
					dexp--;
				continue;
			}
			seen_nonzero = 1;
			if (nd < 800)
				buf[o++] = *p, nd++;
			else if (*p != '0')
				sticky = 1;
		}
		if (p < end && *p == '.')
			p++;
	}
	if (!seen_nonzero)
		return 1;
	if (sticky)
		buf[o++] = '1';
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (*p == '+' || *p == '-')
			eneg = *p++ == '-';
		for (; p < end; p++)
			if (e10 < 1000000000)
				e10 = e10 * 10 + (*p - '0');
	}
	dexp += eneg ? -e10 : e10;
	if (dexp > 400)
		return 0;
	if (dexp < -400)
		return 1;
	snprintf(buf + o, sizeof(buf) - o, "e%lld", dexp);
	return isfinite(strtod(buf, NULL));
}

int sj_literal(struct sj *j, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n))
		return sj_jerr(j, "invalid literal");
	j->p += n;
	return 0;
}

int sj_object(struct sj *j, sj_member_fn member, void *arg)
{
	int r;

	if ((r = sj_enter(j)))
		return r;
	if (sj_empty(j, '}'))
		return 0;
	for (;;) {
		sj_ws(j);
		if (j->p >= j->end || *j->p != '"')
			return sj_jerr(j, "expected a string key");
		if ((r = sj_string(j)) || (r = sj_expect(j, ':', "':'")) || (r = member(j, arg)))
			return r;
		if ((r = sj_next(j, '}', "',' or '}'")) <= 0)
			return r;
	}
}

static int skip_member(struct sj *j, void *arg)
{
	(void)arg;
	return sj_skip_value(j);
}

/* Validates and skips any value (serde's Content / IgnoredAny). */
int sj_skip_value(struct sj *j)
{
	struct sj_num n;
	int r;

	sj_ws(j);
	if (j->p >= j->end)
		return sj_jerr(j, "unexpected end, expected a value");
	if (j->max_values && ++j->nvalues > j->max_values) {
		j->limit = 1;
		return cm_err_set(j->e, RL_E_TOO_LARGE, "%s: more than %llu JSON values, the "
				  "limit (at byte %zu)", j->what ? j->what : "JSON",
				  (unsigned long long)j->max_values, (size_t)(j->p - j->buf));
	}
	switch (*j->p) {
	case '{':
		return sj_object(j, skip_member, NULL);
	case '[':
		if ((r = sj_enter(j)))
			return r;
		if (sj_empty(j, ']'))
			return 0;
		for (;;) {
			if ((r = sj_skip_value(j)))
				return r;
			if ((r = sj_next(j, ']', "',' or ']'")) <= 0)
				return r;
		}
	case '"':
		return sj_string(j);
	case 't':
		return sj_literal(j, "true");
	case 'f':
		return sj_literal(j, "false");
	case 'n':
		return sj_literal(j, "null");
	default:
		if ((r = sj_number(j, &n)))
			return r;
		if (!sj_number_is_finite(&n))
			return sj_jerr(j, "number out of range");
		return 0;
	}
}

int sj_check_document(struct sj *j)
{
	int r;

	if ((r = sj_skip_value(j)))
		return r;
	sj_ws(j);
	if (j->p < j->end)
		return sj_jerr(j, "unexpected data after the JSON value");
	return 0;
}

/* A usize as serde_json reads one: a plain non-negative integer < 2^64. */
int sj_u64_value(struct sj *j, uint64_t *out, const char *field)
{
	struct sj_num n;
	uint64_t v = 0;
	int r;

	sj_ws(j);
	if (j->p >= j->end || !(*j->p == '-' || (*j->p >= '0' && *j->p <= '9')))
		return sj_jerr(j, "%s: expected a non-negative integer", field);
	if ((r = sj_number(j, &n)))
		return r;
	if (n.neg || n.frac || n.exp)
		return sj_jerr(j, "%s: expected a non-negative integer, got %.*s", field,
			    (int)CM_MIN(n.len, 40), n.s);
	for (size_t i = 0; i < n.len; i++)
		if (cm_mul64(v, 10, &v) || cm_add64(v, (uint64_t)(n.s[i] - '0'), &v))
			return sj_jerr(j, "%s: integer %.*s%s does not fit in 64 bits", field,
				    (int)CM_MIN(n.len, 40), n.s, n.len > 40 ? "..." : "");
	*out = v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* UTF-8 (Rust's str::from_utf8)                                       */
/* ------------------------------------------------------------------ */

/* Returns the offset of the first invalid byte, or len if s is valid. */
size_t sj_utf8_check(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		unsigned char lo = 0x80, hi = 0xbf;
		uint64_t w;

		/* ASCII runs eight bytes at a time. */
		while (len - i >= 8 && (memcpy(&w, s + i, 8), !(w & 0x8080808080808080ull)))
			i += 8;
		if (i == len)
			break;
		c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3;
		else
			return i;
		/* No overlongs, no UTF-16 surrogates, nothing above U+10FFFF. */
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
		else if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
		if (len - i <= n)
			return i;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return i;
		for (size_t k = 2; k <= n; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
		i += n + 1;
	}
	return len;
}

