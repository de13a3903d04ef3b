/*
 * sha256.h - the library's one SHA-256 (OpenSSL's EVP digest): the
 * loader's read-path hashing (exec/hash.c) and the public rl_sha256_*
 * (api/checksums.c) both use it.
 */
#ifndef COMMON_SHA256_H
#define COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct cm_sha256;

/* A fresh context, or NULL when out of memory. */
struct cm_sha256 *cm_sha256_create(void);
/* Adds n bytes: 0, or -ENOMEM (the digest failed). */
int cm_sha256_update(struct cm_sha256 *h, const void *p, size_t n);
/* The digest of everything added, into out; h starts afresh: 0 or -ENOMEM. */
int cm_sha256_final(struct cm_sha256 *h, uint8_t out[32]);
/* NULL is a no-op. */
void cm_sha256_destroy(struct cm_sha256 *h);

#endif
