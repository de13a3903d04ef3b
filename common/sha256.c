/*
 * sha256.c - the library's one SHA-256 (sha256.h), over OpenSSL's EVP:
 * its assembly is what makes hashing on the read path nearly free.
 */
#include <errno.h>

#include <openssl/evp.h>

#include "sha256.h"

/* The EVP context is the handle: nothing else to keep. */
struct cm_sha256 *cm_sha256_create(void)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	if (md && !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(md);
		md = NULL;
	}
	return (struct cm_sha256 *)md;
}

int cm_sha256_update(struct cm_sha256 *h, const void *p, size_t n)
{
	return n && !EVP_DigestUpdate((EVP_MD_CTX *)h, p, n) ? -ENOMEM : 0;
}

int cm_sha256_final(struct cm_sha256 *h, uint8_t out[32])
{
	EVP_MD_CTX *md = (EVP_MD_CTX *)h;
	unsigned n = 0;

	if (!EVP_DigestFinal_ex(md, out, &n) || n != 32 ||
	    !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		return -ENOMEM;
	return 0;
}

void cm_sha256_destroy(struct cm_sha256 *h)
{
	EVP_MD_CTX_free((EVP_MD_CTX *)h);
}
