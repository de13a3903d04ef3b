/*
 * rule_index.c - which rule a tensor name takes: the first whose regex
 * matches, found without trying every rule on every name.
 *
 * Each rule has a key: the literal text every name it matches starts with
 * (pl_regex_prefix(); of "a\\.x|a\\.y" the alternatives' common "a."), else
 * a literal run every such name contains
 * (pl_regex_must(), ".*proj" has "proj"), else none (the empty prefix).
 * Rules are hashed by key, each entry chaining its rules in rule order. A
 * name looks up its own prefixes and, for the lengths keys have, its
 * substrings (FNV-1a hashes extended a byte at a time), and tries only the
 * chains found, smallest rule index first; the regex decides. 42,000
 * rules that match nothing against 25,000 tensors took 119 s as one
 * regexec per pair. Rules with no literal text at all ("[a-c]{3}") are
 * still tried on every name: at most PL_MAX_PLAIN_RULES of them (4096
 * such rules took 12.6 s on 25,000 tensors).
 */
#include <errno.h>
#include <string.h>

#include "pl_private.h"

#define FNV_BASIS 14695981039346656037ull
#define FNV_PRIME 1099511628211ull
#define SUB_BASIS (FNV_BASIS ^ 0x9e3779b97f4a7c15ull) /* substring keys hash apart */
/* Chains tried for one name at most; a name that finds more (hostile
 * keys) tries every rule in order instead. */
#define MAX_CHAINS 256

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * FNV_PRIME;
	return h;
}

/* Rule r's key: the prefix (anchored), else its literal run. */
static int anchored(const struct pl_rule *r)
{
	return r->plen || !r->mlen;
}

/* The slot of key (h, p, len, anch) in s's table: its entry, or the empty
 * one where it would go. The table is at most half full. */
static struct pl_prefix_slot *slot_of(const struct pl_spec *s, uint64_t h, const char *p,
				      size_t len, int anch)
{
	size_t mask = s->pcap - 1, i = (size_t)h & mask;

	for (;; i = (i + 1) & mask) {
		struct pl_prefix_slot *t = &s->ptab[i];
		const struct pl_rule *r;

		if (!t->used)
			return t;
		r = &s->rules[t->head];
		if (t->hash == h && anchored(r) == anch &&
		    (anch ? r->plen == len && !memcmp(r->prefix, p, len) :
			    r->mlen == len && !memcmp(r->must, p, len)))
			return t;
	}
}

/* Chains rule idx (the last so far) under its key. */
static void chain(struct pl_spec *s, uint32_t idx)
{
	struct pl_rule *r = &s->rules[idx];
	int anch = anchored(r);
	const char *key = anch ? r->prefix : r->must;
	size_t len = anch ? r->plen : r->mlen;
	uint64_t h = fnv(anch ? FNV_BASIS : SUB_BASIS, key, len);
	struct pl_prefix_slot *t = slot_of(s, h, key, len, anch);

	r->next = UINT32_MAX;
	if (!anch)
		s->mlens |= 1ull << len;
	if (t->used) {
		s->rules[t->tail].next = idx;
		t->tail = idx;
		return;
	}
	*t = (struct pl_prefix_slot){ h, idx, idx, 1 };
}

int pl_rule_index_add(struct pl_spec *s, struct cm_err *e)
{
	uint32_t idx = (uint32_t)s->nrules - 1;
	struct pl_rule *r = &s->rules[idx];
	int plain;

	r->plen = (uint8_t)pl_regex_prefix(r->pattern, r->prefix, PL_RULE_PREFIX);
	r->mlen = (uint8_t)pl_regex_must(r->pattern, r->must, PL_RULE_PREFIX);
	plain = !r->plen && !r->mlen;
	if (plain && s->nplain == PL_MAX_PLAIN_RULES) {
		char q[128];

		pl_quote(q, sizeof(q), r->pattern, strlen(r->pattern));
		return cm_err_set(e, RL_E_TOO_LARGE, "rule %u (\"%s\"): over the limit of %u "
				  "rules without literal text (docs/sharding-spec.md)", idx, q,
				  PL_MAX_PLAIN_RULES);
	}
	if (2 * s->nrules > s->pcap) {
		size_t cap = s->pcap ? 4 * s->pcap : 64;
		struct pl_prefix_slot *t = cm_calloc(cap, sizeof(*t));

		if (!t)
			return cm_err_set(e, -ENOMEM, "rule %u: out of memory", idx);
		cm_free(s->ptab);
		s->ptab = t;
		s->pcap = cap;
		for (uint32_t i = 0; i < idx; i++)
			chain(s, i);
	}
	chain(s, idx);
	s->nplain += plain;     /* counted once the rule is in */
	return 0;
}

/* The chains whose keys name has: heads in cur (deduplicated); returns
 * their count, or MAX_CHAINS + 1 when there are more. */
static size_t find_chains(const struct pl_spec *s, const char *name, size_t len,
			  uint32_t *cur)
{
	/* substring keys are at most maxl - 1 bytes long */
	size_t k = 0, maxl = s->mlens ? 64 - (size_t)__builtin_clzll(s->mlens) : 0;

	for (size_t i = 0; i == 0 || (i < len && maxl); i++) {
		int anch = i == 0;      /* at 0: the prefixes, then the substrings */

		for (int pass = anch; pass >= 0; pass--) {
			uint64_t h = pass ? FNV_BASIS : SUB_BASIS;
			size_t lim = pass ? PL_RULE_PREFIX : maxl;

			for (size_t l = !pass; l < lim && i + l <= len; l++) {
				const struct pl_prefix_slot *t;
				size_t j;

				if (l)
					h = (h ^ (unsigned char)name[i + l - 1]) * FNV_PRIME;
				if (!pass && !(s->mlens >> l & 1))
					continue;
				t = slot_of(s, h, name + i, l, pass);
				if (!t->used)
					continue;
				for (j = 0; j < k && cur[j] != t->head; j++)
					;
				if (j == k && k++ == MAX_CHAINS)
					return k;
				cur[j] = t->head;
			}
		}
	}
	return k;
}

static int rule_matches(const struct pl_rule *r, const char *name, size_t len)
{
	return (!r->mlen || memmem(name, len, r->must, r->mlen)) &&
	       !regexec(&r->re, name, 0, NULL, 0);
}

long pl_spec_match(const struct pl_spec *s, const char *name)
{
	uint64_t tries = UINT64_MAX;

	return pl_spec_match_tries(s, name, &tries);
}

long pl_spec_match_tries(const struct pl_spec *s, const char *name, uint64_t *tries)
{
	uint32_t cur[MAX_CHAINS + 1];
	size_t len = strlen(name), k;

	if (!s->pcap)   /* no rules, or a plan's copy of the spec (never matched) */
		return -1;
	k = find_chains(s, name, len, cur);
	if (k > MAX_CHAINS) {
		for (size_t i = 0; i < s->nrules; i++) {
			if (!(*tries)--)
				return PL_MATCH_OVER;
			if (rule_matches(&s->rules[i], name, len))
				return (long)i;
		}
		return -1;
	}
	while (k) {
		size_t m = 0;

		for (size_t i = 1; i < k; i++)
			if (cur[i] < cur[m])
				m = i;
		if (!(*tries)--)
			return PL_MATCH_OVER;
		if (rule_matches(&s->rules[cur[m]], name, len))
			return (long)cur[m];
		cur[m] = s->rules[cur[m]].next;
		if (cur[m] == UINT32_MAX)
			cur[m] = cur[--k];
	}
	return -1;
}
