/* opts.c - see opts.h. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "opts.h"

/* ------------------------------------------------------------------ */
/* Value parsers                                                       */
/* ------------------------------------------------------------------ */

/* Decimal digits at *p into *v; returns how many, *v saturating (over = 1). */
static int digits(const char **p, uint64_t *v, int *over)
{
	int n = 0;

	*v = 0;
	for (; **p >= '0' && **p <= '9'; (*p)++, n++) {
		unsigned d = (unsigned)(**p - '0');

		if (*v > (UINT64_MAX - d) / 10)
			*over = 1;
		else
			*v = *v * 10 + d;
	}
	return n;
}

/* K, M, G, T, optionally followed by "iB" or "B", or a bare "B" (any case,
 * as fio takes them: "4mb" is 4 MiB): the shift. */
static int size_suffix(const char **p)
{
	static const char units[] = "kmgt";
	const char *u = **p ? strchr(units, tolower((unsigned char)**p)) : NULL;
	int shift = u ? 10 * (int)(u - units + 1) : 0;

	if (u)
		(*p)++;
	if (u && tolower((unsigned char)(*p)[0]) == 'i' && tolower((unsigned char)(*p)[1]) == 'b')
		*p += 2;
	else if (tolower((unsigned char)(*p)[0]) == 'b')
		*p += 1;
	return shift;
}

/*
 * Sizes: digits, an optional fraction, an optional suffix; every suffix a
 * power of 1024, KB and MB too, as fio's default kb_base has them (its
 * kb_base=1000 meaning is rlperf's, not ours). A fraction must come to whole bytes ("1.5M" yes, "1.3K" no).
 */
int opts_parse_size(const char *s, int64_t *out)
{
	const char *p = s + (*s == '-');
	uint64_t ip, frac = 0, scale = 1;
	unsigned __int128 total, fbytes;
	int over = 0, shift;

	if (!digits(&p, &ip, &over))
		return OPTS_E_SYNTAX;
	if (*p == '.') {
		p++;
		for (int n = 0; *p >= '0' && *p <= '9'; p++, n++) {
			if (n == 18)  /* frac < 10^18 keeps frac << 40 in 128 bits */
				return OPTS_E_SYNTAX;
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
		}
		if (scale == 1)
			return OPTS_E_SYNTAX;
	}
	shift = size_suffix(&p);
	if (*p)
		return OPTS_E_SYNTAX;
	if (*s == '-' || over)
		return OPTS_E_RANGE;
	fbytes = (unsigned __int128)frac << shift;
	if (fbytes % scale)
		return OPTS_E_FRACTION;
	total = ((unsigned __int128)ip << shift) + fbytes / scale;
	if (total > INT64_MAX)
		return OPTS_E_RANGE;
	*out = (int64_t)total;
	return 0;
}

int opts_parse_int(const char *s, int64_t *out)
{
	const char *p = s + (*s == '-');
	uint64_t v;
	int over = 0;

	if (!digits(&p, &v, &over) || *p)
		return OPTS_E_SYNTAX;
	if (over || v > (uint64_t)INT64_MAX)
		return OPTS_E_RANGE;
	*out = *s == '-' ? -(int64_t)v : (int64_t)v;
	return 0;
}

int opts_parse_milli(const char *s, int64_t *out)
{
	const char *p = s + (*s == '-');
	uint64_t v, frac = 0;
	int over = 0, n = 0;

	if (!digits(&p, &v, &over))
		return OPTS_E_SYNTAX;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9' && n < 3; p++, n++)
			frac = frac * 10 + (uint64_t)(*p - '0');
		if (!n)
			return OPTS_E_SYNTAX;
	}
	if (*p)
		return OPTS_E_SYNTAX;
	for (; n < 3; n++)
		frac *= 10;
	if (over || v > (uint64_t)(INT64_MAX - 999) / 1000)
		return OPTS_E_RANGE;
	*out = (int64_t)(v * 1000 + frac) * (*s == '-' ? -1 : 1);
	return 0;
}

/* Decimal or 0x hex, no sign or space (strtoull takes "-5" as 2^64 - 5). */
int opts_parse_u64(const char *s, uint64_t *out)
{
	int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	const char *p = hex ? s + 2 : s;
	uint64_t v = 0;
	int n = 0, over = 0;

	if (!hex)
		n = digits(&p, &v, &over);
	for (; hex && isxdigit((unsigned char)*p); p++, n++) {
		if (v >> 60)
			over = 1;
		v = v << 4 | (uint64_t)(isdigit((unsigned char)*p) ? *p - '0'
								 : tolower((unsigned char)*p) - 'a' + 10);
	}
	if (!n || *p)
		return OPTS_E_SYNTAX;
	if (over)
		return OPTS_E_RANGE;
	*out = v;
	return 0;
}

void opts_format_size(int64_t v, char *buf, size_t cap)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (v && u < 3 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, cap, "%" PRId64, v);
	else
		snprintf(buf, cap, "%" PRId64 "%c", v, units[u]);
}

/* ------------------------------------------------------------------ */
/* The table                                                           */
/* ------------------------------------------------------------------ */

static int is_ranged(const struct opt *o)
{
	return o->kind == OPT_INT || o->kind == OPT_SIZE || o->kind == OPT_MILLI;
}

/* The option's range: the library's (narrowed by lo/hi where set), else lo/hi. */
static void opt_range(const struct opt *o, int64_t *lo, int64_t *hi)
{
	*lo = o->lo;
	*hi = o->hi;
	if (o->bounds && o->bounds(o->param, lo, hi) == 0) {
		if (o->lo > *lo)
			*lo = o->lo;
		if (o->hi && o->hi < *hi)
			*hi = o->hi;
	}
}

static void format_value(const struct opt *o, int64_t v, char *buf, size_t cap)
{
	if (o->kind == OPT_SIZE) {
		opts_format_size(v, buf, cap);
	} else if (o->kind == OPT_MILLI && v % 1000) {
		snprintf(buf, cap, "%" PRId64 ".%03" PRId64, v / 1000, (v < 0 ? -v : v) % 1000);
		for (size_t n = strlen(buf); buf[n - 1] == '0'; n--)
			buf[n - 1] = '\0';
	} else {
		snprintf(buf, cap, "%" PRId64, o->kind == OPT_MILLI ? v / 1000 : v);
	}
}

static void range_text(const struct opt *o, char *buf, size_t cap)
{
	char a[32], b[32];
	int64_t lo, hi;

	opt_range(o, &lo, &hi);
	format_value(o, lo, a, sizeof(a));
	format_value(o, hi, b, sizeof(b));
	snprintf(buf, cap, "[%s, %s]", a, b);
}

static const char *metavar(const struct opt *o, char *buf, size_t cap)
{
	size_t n = 0;

	if (o->metavar || o->kind != OPT_CHOICE)
		return o->metavar ? o->metavar : "";
	buf[0] = '\0';
	for (const char *const *c = o->choices; *c && n + 1 < cap; c++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", c == o->choices ? "" : "|", *c);
	return buf;
}

void opts_usage(const struct opt_cmd *cmd, FILE *f)
{
	char left[96], mv[96], range[80];

	fprintf(f, "usage: %s %s%s[options]\n", cmd->prog, cmd->args ? cmd->args : "",
		cmd->args ? " " : "");
	if (cmd->about)
		fprintf(f, "%s", cmd->about);
	fprintf(f, "options (--opt VALUE or --opt=VALUE):\n");
	for (const struct opt *o = cmd->opts; o->name; o++) {
		snprintf(left, sizeof(left), "--%s%s%s", o->name, o->kind == OPT_FLAG ? "" : " ",
			 metavar(o, mv, sizeof(mv)));
		range[0] = '\0';
		if (is_ranged(o))
			range_text(o, range, sizeof(range));
		fprintf(f, "  %-26s %s%s%s\n", left, o->help, *range ? " " : "", range);
	}
	fprintf(f, "  %-26s %s\n", "-h, --help", "print this help and exit");
	if (cmd->opts->name)
		fprintf(f, "Sizes are bytes, or take K, M, G, T (or KB, MB.. or KiB, MiB..): powers of "
			"1024.\n");
}

static int bad_value(const struct opt_cmd *cmd, const struct opt *o, const char *v, int err)
{
	static const char *const what[] = { [OPT_INT] = "an integer", [OPT_SIZE] = "a size (bytes, or a number with K, M, G or T, optionally + B or iB: powers of 1024)",
					    [OPT_MILLI] = "a number (up to 3 decimals)",
					    [OPT_U64] = "a whole number (decimal or 0x hex)" };
	char range[80];

	if (err == OPTS_E_SYNTAX)
		fprintf(stderr, "%s: --%s: '%s' is not %s\n", cmd->prog, o->name, v, what[o->kind]);
	else if (err == OPTS_E_FRACTION)
		fprintf(stderr, "%s: --%s: '%s' is not a whole number of bytes\n", cmd->prog,
			o->name, v);
	else if (o->kind == OPT_U64)
		fprintf(stderr, "%s: --%s must be in [0, %" PRIu64 "], not %s\n", cmd->prog,
			o->name, UINT64_MAX, v);
	else {
		range_text(o, range, sizeof(range));
		fprintf(stderr, "%s: --%s must be in %s, not %s\n", cmd->prog, o->name, range, v);
	}
	return OPTS_USAGE;
}

static int set_choice(const struct opt_cmd *cmd, const struct opt *o, const char *v)
{
	char mv[96];

	for (int i = 0; o->choices[i]; i++) {
		if (!strcmp(o->choices[i], v)) {
			*(int *)o->dst = i;
			return OPTS_OK;
		}
	}
	fprintf(stderr, "%s: --%s must be one of %s, not '%s'\n", cmd->prog, o->name,
		metavar(o, mv, sizeof(mv)), v);
	return OPTS_USAGE;
}

static int set_value(const struct opt_cmd *cmd, const struct opt *o, const char *v)
{
	int64_t n = 0, lo, hi;
	int err = 0;

	switch (o->kind) {
	case OPT_FLAG:
		*(int *)o->dst = 1;
		return OPTS_OK;
	case OPT_STRING:
		*(const char **)o->dst = v;
		return OPTS_OK;
	case OPT_CHOICE:
		return set_choice(cmd, o, v);
	case OPT_LIST:
		if (((struct opt_list *)o->dst)->n == OPT_LIST_MAX) {
			fprintf(stderr, "%s: --%s given more than %d times\n", cmd->prog, o->name,
				OPT_LIST_MAX);
			return OPTS_USAGE;
		}
		((struct opt_list *)o->dst)->v[((struct opt_list *)o->dst)->n++] = v;
		return OPTS_OK;
	case OPT_U64:
		err = opts_parse_u64(v, (uint64_t *)o->dst);
		return err ? bad_value(cmd, o, v, err) : OPTS_OK;
	case OPT_INT:
		err = opts_parse_int(v, &n);
		break;
	case OPT_SIZE:
		err = opts_parse_size(v, &n);
		break;
	case OPT_MILLI:
		err = opts_parse_milli(v, &n);
		break;
	}
	opt_range(o, &lo, &hi);
	if (!err && (n < lo || n > hi))
		err = OPTS_E_RANGE;
	if (err)
		return bad_value(cmd, o, v, err);
	*(int64_t *)o->dst = n;
	return OPTS_OK;
}

static const struct opt *find(const struct opt_cmd *cmd, const char *name, size_t len)
{
	for (const struct opt *o = cmd->opts; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

/* argv[*i] starts with '-': one option and its value (which may be argv[*i + 1]). */
static int take_option(const struct opt_cmd *cmd, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *name = a + 2, *eq = strchr(a, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct opt *o = a[1] == '-' ? find(cmd, name, len) : NULL;
	int help = (a[1] == '-' && len == 4 && !strncmp(name, "help", 4)) || !strcmp(a, "-h");

	if (help && !eq) {
		opts_usage(cmd, stdout);
		return OPTS_HELP;
	}
	if (!o && !help) {
		fprintf(stderr, "%s: unknown option '%.*s' (%s --help lists them)\n", cmd->prog,
			(int)(eq ? (size_t)(eq - a) : strlen(a)), a, cmd->prog);
		return OPTS_USAGE;
	}
	if (help || (o->kind == OPT_FLAG && eq)) {
		fprintf(stderr, "%s: --%.*s takes no value\n", cmd->prog, (int)len, name);
		return OPTS_USAGE;
	}
	if (o->kind == OPT_FLAG || eq)
		return set_value(cmd, o, eq ? eq + 1 : NULL);
	if (*i + 1 >= argc) {
		char mv[96];

		fprintf(stderr, "%s: --%s needs a value (%s)\n", cmd->prog, o->name,
			metavar(o, mv, sizeof(mv)));
		return OPTS_USAGE;
	}
	return set_value(cmd, o, argv[++*i]);
}

int opts_parse(const struct opt_cmd *cmd, int argc, char **argv)
{
	unsigned nargs = 0;
	int options_end = 0, r;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!options_end && !strcmp(a, "--")) {
			options_end = 1;
		} else if (!options_end && a[0] == '-' && a[1]) {
			r = take_option(cmd, argc, argv, &i);
			if (r != OPTS_OK)
				return r;
		} else if (nargs < cmd->max_args) {
			cmd->argv_out[nargs++] = a;
		} else {
			fprintf(stderr, "%s: unexpected argument '%s' (usage: %s %s [options])\n",
				cmd->prog, a, cmd->prog, cmd->args ? cmd->args : "");
			return OPTS_USAGE;
		}
	}
	if (nargs < cmd->min_args) {
		fprintf(stderr, "%s: %s is missing (usage: %s %s [options]; --help lists them)\n",
			cmd->prog, cmd->args, cmd->prog, cmd->args);
		return OPTS_USAGE;
	}
	return OPTS_OK;
}

int opts_exit_status(int parsed)
{
	return parsed == OPTS_HELP ? 0 : 2;
}
