/*
 * regex_limits.c - what ringload refuses of POSIX extended regular
 * expressions before glibc's regcomp() sees them.
 *
 * regcomp builds an automaton whose size can explode with the pattern:
 * "[a-c]" followed by N stacked stars took 3 s at N = 109, 45 s and 1.6 GB
 * at N = 200, and over a minute at N = 400. A rule is user input (a spec
 * file may come from anywhere), and a library must not hang or exhaust
 * memory on it, so rules are restricted to what cannot explode:
 *
 *   - at most PL_MAX_RULE_BYTES bytes;
 *   - no back-references (\1 .. \9, a glibc extension to ERE that makes
 *     matching exponential);
 *   - no stacked repetition operators: a repetition (*, +, ?, {m,n})
 *     directly after another ("a**", "a+*", "a{2}*", "a*?"); a group
 *     makes the intent explicit: "(a*)*" is fine;
 *   - groups nested at most PL_MAX_RULE_DEPTH deep;
 *   - {m,n} bounds whose product along the nesting (each bound counted as
 *     its largest value) is at most PL_MAX_RULE_REPEAT: "(a{10}){100}" is
 *     1000, "(a{10}){101}" is refused;
 *   - at most PL_MAX_RULE_ATOMS atoms (characters, bracket expressions)
 *     once every {m,n} is expanded, since regcomp copies the repeated part
 *     that many times: 50 copies of "(.{0,1000}x)" in 600 bytes took 0.7 s.
 *
 * Anything else goes to regcomp unchanged, which still decides whether the
 * pattern is valid. The scan only has to recognize the syntax that can
 * hide the refused forms: escapes and bracket expressions (where '*' and
 * '{' are literal characters).
 */
#include <stdio.h>
#include <string.h>

#include "pl_private.h"

struct rx {
	const char *p, *end;
	unsigned depth;                 /* open groups */
	/* Per open group (0: the whole pattern): the largest product of
	 * counts over its atoms, and its atoms after expansion. */
	uint64_t peak[PL_MAX_RULE_DEPTH + 1], atoms[PL_MAX_RULE_DEPTH + 1];
	uint64_t last_peak, last_atoms; /* the last atom or group; 0: none */
	int after_rep;                  /* the last token was a repetition */
	const char *why;                /* what was refused */
};

/* Skips a bracket expression ("[...]", p at '['); p ends past its ']'. */
static void skip_bracket(struct rx *x)
{
	const char *p = x->p + 1;

	if (p < x->end && *p == '^')
		p++;
	if (p < x->end && *p == ']')
		p++;                            /* a leading ']' is literal */
	while (p < x->end && *p != ']') {
		if (*p == '[' && p + 1 < x->end && (p[1] == ':' || p[1] == '=' || p[1] == '.')) {
			char kind = p[1];

			/* [:class:], [=equiv=], [.coll.]: until the matching "x]". */
			for (p += 2; p + 1 < x->end && !(p[0] == kind && p[1] == ']'); p++)
				;
			p += 2;
			continue;
		}
		p++;
	}
	x->p = p < x->end ? p + 1 : x->end;  /* unterminated: regcomp refuses it */
}

/*
 * Parses "{m}", "{m,}", "{m,n}" or (glibc takes it as {0,n}) "{,n}" at p;
 * returns 1 with the largest count (m when unbounded above), 0 when it is
 * no interval (then '{' is a plain character to regcomp).
 */
static int interval(const struct rx *x, uint64_t *bound, const char **after)
{
	const char *p = x->p + 1;
	uint64_t m = 0, n = 0;
	int mdigits = 0, ndigits = 0, comma = 0;

	for (; p < x->end && *p >= '0' && *p <= '9'; p++, mdigits++)
		m = m < 100000 ? m * 10 + (uint64_t)(*p - '0') : m;
	if (p < x->end && *p == ',') {
		comma = 1;
		for (p++; p < x->end && *p >= '0' && *p <= '9'; p++, ndigits++)
			n = n < 100000 ? n * 10 + (uint64_t)(*p - '0') : n;
	}
	if ((!mdigits && !comma) || p >= x->end || *p != '}')
		return 0;
	*bound = ndigits && n > m ? n : m;
	*after = p + 1;
	return 1;
}

/* An atom or a closed group follows: peak and atoms of the current group. */
static void note(struct rx *x, uint64_t peak, uint64_t atoms)
{
	x->last_peak = peak;
	x->last_atoms = atoms;
	x->peak[x->depth] = CM_MAX(x->peak[x->depth], peak);
	x->atoms[x->depth] += atoms;
}

/* Whether the atoms counted so far pass the limit (x->why set). */
static int too_many_atoms(struct rx *x)
{
	uint64_t n = 0;

	for (unsigned d = 0; d <= x->depth; d++)
		n += x->atoms[d];
	if (n <= PL_MAX_RULE_ATOMS)
		return 0;
	x->why = "more than 4096 atoms once {m,n} repetitions are expanded";
	return -1;
}

/* A repetition of the last atom: times is its largest count (1 for *, +, ?). */
static int repetition(struct rx *x, uint64_t times)
{
	if (x->after_rep) {
		x->why = "stacked repetition operators such as \"a**\" or \"a+*\" "
			 "(group them: \"(a*)*\")";
		return -1;
	}
	x->after_rep = 1;
	if (!x->last_atoms || times <= 1)
		return 0;       /* nothing to repeat (regcomp decides), or no copies */
	if (x->last_peak * times > PL_MAX_RULE_REPEAT) {
		x->why = "{m,n} counts whose product passes 1000";
		return -1;
	}
	/* The atom now stands for times copies of itself. */
	x->atoms[x->depth] += x->last_atoms * (times - 1);
	x->last_atoms *= times;
	x->last_peak *= times;
	x->peak[x->depth] = CM_MAX(x->peak[x->depth], x->last_peak);
	return too_many_atoms(x);
}

/* One token at x->p. Returns 0, or -1 with x->why set. */
static int token(struct rx *x)
{
	uint64_t bound;
	const char *after;
	char c = *x->p;

	if (c == '*' || c == '+' || c == '?') {
		x->p++;
		return repetition(x, 1);
	}
	if (c == '{' && interval(x, &bound, &after)) {
		x->p = after;
		return repetition(x, bound);
	}
	x->after_rep = 0;
	if (c == '\\' && x->p + 1 < x->end && x->p[1] >= '1' && x->p[1] <= '9') {
		x->why = "back-references (\\1 .. \\9)";
		return -1;
	}
	if (c == '(') {
		if (x->depth == PL_MAX_RULE_DEPTH) {
			x->why = "groups nested more than 8 deep";
			return -1;
		}
		x->depth++;
		x->peak[x->depth] = x->atoms[x->depth] = 0;
		x->last_peak = x->last_atoms = 0;
		x->p++;
		return 0;
	}
	if (c == ')' && !x->depth) {
		/* glibc reads it as a literal alone, but it would close the
		 * "^(" the pattern is wrapped in: "a)|(b" matches unanchored */
		x->why = "an unmatched ')' (write \\) for the character)";
		return -1;
	}
	if (c == ')') {
		uint64_t peak = x->peak[x->depth], atoms = x->atoms[x->depth];

		x->depth--;
		note(x, CM_MAX(peak, 1), CM_MAX(atoms, 1));
		x->p++;
		return 0;
	}
	if (c == '|') {
		x->last_peak = x->last_atoms = 0;
		x->p++;
		return 0;
	}
	if (c == '[')
		skip_bracket(x);
	else
		x->p += c == '\\' && x->p + 1 < x->end ? 2 : 1;
	note(x, 1, 1);
	return 0;
}

int pl_regex_check(const char *re, size_t idx, struct cm_err *e)
{
	struct rx x = { .p = re, .end = re + strlen(re) };
	char q[128];

	pl_quote(q, sizeof(q), re, (size_t)(x.end - re));
	if (x.end - re > PL_MAX_RULE_BYTES)
		return cm_err_set(e, RL_E_SPEC_REGEX, "rule %zu (\"%s\"): pattern of %zu bytes "
				  "(at most %u)", idx, q, (size_t)(x.end - re), PL_MAX_RULE_BYTES);
	while (x.p < x.end && !token(&x))
		;
	if (x.why || too_many_atoms(&x))
		return cm_err_set(e, RL_E_SPEC_REGEX, "rule %zu (\"%s\"): ringload refuses "
				  "%s: a deliberate limit of POSIX extended regex "
				  "(docs/sharding-spec.md)", idx, q, x.why);
	return 0;
}

/* Past the group that opens at p (or end, unbalanced: regcomp refuses it). */
static const char *group_end(const char *p, const char *end)
{
	struct rx x = { .p = p + 1, .end = end };
	unsigned depth = 1;

	while (x.p < x.end && depth) {
		char c = *x.p;

		if (c == '[') {
			skip_bracket(&x);
			continue;
		}
		depth += c == '(';
		depth -= c == ')';
		x.p += c == '\\' && x.p + 1 < x.end ? 2 : 1;
	}
	return x.p;
}

static const char ops[] = ".[]()|*+?{}^$\\";

/* The first '|' outside every group in [p, end), or end: where the
 * alternative that starts at p ends. */
static const char *alt_end(const char *p, const char *end)
{
	struct rx x = { .p = p, .end = end };
	unsigned depth = 0;

	while (x.p < x.end) {
		char c = *x.p;

		if (c == '[') {
			skip_bracket(&x);
			continue;
		}
		if (c == '|' && !depth)
			return x.p;
		depth += c == '(';
		depth -= c == ')' && depth;
		x.p += c == '\\' && x.p + 1 < x.end ? 2 : 1;
	}
	return end;
}

/* Whether re has a '|' outside every group (then no run is required). */
static int top_level_bar(const char *re)
{
	const char *end = re + strlen(re);

	return alt_end(re, end) < end;
}

/* Whether byte c ends literal text: an operator, or a byte of a multibyte
 * character (in a UTF-8 locale "\xc3\xa9*" repeats the whole character, so
 * dropping one byte before a '*' would be wrong: the text ends before). */
static int ends_literal(char c)
{
	return strchr(ops, c) || (unsigned char)c >= 0x80;
}

/* The literal prefix of the one alternative [p, end) (see below). */
static size_t alt_prefix(const char *p, const char *end, char *out, size_t cap)
{
	size_t n = 0;

	for (; p < end && n + 1 < cap; n++) {
		if (*p == '\\' && p + 1 < end && strchr(ops, p[1]))
			p++;            /* an escaped operator is that character */
		else if (ends_literal(*p))
			break;
		out[n] = *p++;
	}
	if (n && p < end && (*p == '*' || *p == '?' || *p == '{'))
		n--;
	return n;
}

/*
 * The literal text every name that re matches (as "^(re)$") starts with,
 * at most cap - 1 bytes of it, in out (not NUL-terminated); returns its
 * length. Conservative: the prefix ends at the first operator, class
 * escape or byte of a multibyte character, and a character a '*', '?' or
 * '{' makes optional is dropped; with '|' outside groups it is the common
 * prefix of the alternatives' ("a\.x|a\.y": "a."). Rules are tried only
 * on names with their prefix (rule_index.c).
 */
size_t pl_regex_prefix(const char *re, char *out, size_t cap)
{
	const char *end = re + strlen(re), *p = re, *bar = alt_end(re, end);
	size_t n = alt_prefix(re, bar, out, cap);
	char alt[PL_RULE_PREFIX];

	while (n && bar < end) {
		size_t m, i;

		p = bar + 1;
		bar = alt_end(p, end);
		m = alt_prefix(p, bar, alt, CM_MIN(cap, sizeof(alt)));
		for (i = 0; i < n && i < m && alt[i] == out[i]; i++)
			;
		n = i;
	}
	return n;
}

/*
 * The longest literal run outside groups that every name re matches
 * contains (at most cap - 1 bytes of it) in out; returns its length, 0
 * when there is none (always with '|' outside groups). A run ends at any
 * operator or byte of a multibyte character; a character made
 * optional by '*', '?' or '{' leaves it. "." in a run comes only from "\.".
 */
size_t pl_regex_must(const char *re, char *out, size_t cap)
{
	struct rx x = { .p = re, .end = re + strlen(re) };
	size_t best = 0, n = 0;
	char run[PL_MAX_RULE_BYTES + 1];

	if (top_level_bar(re))
		return 0;
	while (x.p <= x.end) {
		char c = x.p < x.end ? *x.p : '\0';

		if (n == PL_MAX_RULE_BYTES)    /* pl_regex_check() allows no longer */
			break;
		if (c == '\\' && x.p + 1 < x.end && strchr(ops, x.p[1])) {
			run[n++] = x.p[1];
			x.p += 2;
			continue;
		}
		if (c && !ends_literal(c)) {
			run[n++] = c;
			x.p++;
			continue;
		}
		if (n && (c == '*' || c == '?' || c == '{'))
			n--;
		if (n > best) {
			best = CM_MIN(n, cap - 1);
			memcpy(out, run, best);
		}
		n = 0;
		if (!c)
			break;
		if (c == '[')
			skip_bracket(&x);
		else if (c == '(')
			x.p = group_end(x.p, x.end);
		else if (c == '{' && memchr(x.p, '}', (size_t)(x.end - x.p)))
			x.p = (const char *)memchr(x.p, '}', (size_t)(x.end - x.p)) + 1;
		else
			x.p += c == '\\' && x.p + 1 < x.end ? 2 : 1;
	}
	return best;
}
