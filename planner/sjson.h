/*
 * sjson.h - strict JSON reading with serde_json's grammar and limits, the
 * pieces planner/safetensors.c builds the reference's types from. Internal
 * to planner/.
 */
#ifndef PLANNER_SJSON_H
#define PLANNER_SJSON_H

#include <stddef.h>
#include <stdint.h>

#include "planner.h"

/*
 * serde_json's recursion limit: the depth counter starts at 128 and entering
 * a container that brings it to 0 fails, so 127 nested containers (the
 * top-level object included) are the most it accepts.
 */
#define JSON_MAX_DEPTH 127

/*
 * A cursor over JSON text, with the last decoded string. The fields after e
 * may stay zero: the header parser's limits and wording. Other documents
 * (an index, a spec) set their own code, message lead and depth limit.
 */
struct sj {
	const char *buf, *p, *end;
	int depth;            /* containers open */
	struct cm_err *e;
	int code;             /* error code (0: RL_E_HEADER_JSON) */
	const char *lead;     /* message lead (NULL: "invalid header JSON") */
	int max_depth;        /* nesting limit (0: JSON_MAX_DEPTH) */
	int no_nul;           /* 1: a string holding U+0000 is an error */
	/* Bounds checked before a tree is built (0: none): values read by
	 * sj_skip_value(); over it, RL_E_TOO_LARGE naming what. limit is set
	 * when the error was this bound or the depth's. */
	uint64_t max_values, nvalues;
	const char *what;
	int limit;
	char *sb;             /* the last decoded string (NUL-terminated; may hold NULs) */
	size_t sb_len, sb_cap;
};

struct sj_num {
	const char *s;
	size_t len;
	int neg, frac, exp;
};

/* Records the cursor's error code (RL_E_HEADER_JSON by default) with the
 * message and byte position; returns it. */
int sj_jerr(struct sj *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Skips JSON whitespace (space, tab, CR, LF only). */
void sj_ws(struct sj *j);
/* Skips whitespace and consumes c, or fails naming what was expected. */
int sj_expect(struct sj *j, char c, const char *what);
/*
 * After an element of an array or object: 1 when a ',' follows (another
 * element comes), 0 when close ends the container (which is left: depth
 * decremented), or an error naming what was expected.
 */
int sj_next(struct sj *j, char close, const char *what);
/* Right after sj_enter(): 1 when close follows at once (the empty
 * container is consumed and left), else 0. */
int sj_empty(struct sj *j, char close);
/* Opens the container at j->p (one level deeper, within the limit). */
int sj_enter(struct sj *j);
/* Decodes the string at j->p (a '"') into j->sb / j->sb_len. */
int sj_string(struct sj *j);
/* Scans the number token at j->p. */
int sj_number(struct sj *j, struct sj_num *n);
/* Whether a number token's value is within a double's range. */
int sj_number_is_finite(const struct sj_num *n);
/* Consumes the literal word (true, false, null). */
int sj_literal(struct sj *j, const char *word);
/* Validates and skips any value. */
int sj_skip_value(struct sj *j);
/*
 * Reads the object at j->p (a '{'): for each member, decodes its key into
 * j->sb / j->sb_len and, past the ':', calls member(j, arg) to read the
 * value (the key is gone once it reads a string). Returns 0 when the object
 * is closed (and left), or the first error.
 */
typedef int (*sj_member_fn)(struct sj *j, void *arg);
int sj_object(struct sj *j, sj_member_fn member, void *arg);
/*
 * Validates the whole text as one strict JSON value followed only by JSON
 * whitespace (NUL and other control bytes are neither whitespace nor
 * allowed raw in strings). Returns 0 or the cursor's error code.
 */
int sj_check_document(struct sj *j);
/* Reads a plain non-negative integer below 2^64 (field names the error). */
int sj_u64_value(struct sj *j, uint64_t *out, const char *field);
/* Offset of the first byte that is not valid UTF-8, or len. */
size_t sj_utf8_check(const unsigned char *s, size_t len);

#endif /* PLANNER_SJSON_H */
