/* hex.c - bytes as hex digits; SHA-256 as hex digits (hex.h). */
#include "hex.h"

#include <openssl/evp.h>

void tfs_hex(char *out, const void *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

int tfs_sha256_hex(char out[65], const void *p, size_t n)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	out[0] = '\0';
	if (EVP_Digest(p, n, md, &len, EVP_sha256(), NULL) != 1 || len != 32)
		return -1;
	tfs_hex(out, md, 32);
	return 0;
}
