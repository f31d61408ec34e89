/*
 * testutil.h - what the Criterion tests share (header only: each test is one file).
 */
#ifndef TFS_TESTUTIL_H
#define TFS_TESTUTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* The whole file at path in a new buffer of its *len bytes plus `extra` zero bytes (at least
 * one byte in all); NULL when it cannot be opened (an optional file). */
static inline void *test_read_file_extra(const char *path, size_t *len, size_t extra)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	cr_assert(fseek(f, 0, SEEK_END) == 0, "%s", path);
	long n = ftell(f);
	cr_assert(n >= 0, "%s", path);
	rewind(f);
	size_t size = (size_t)n + extra;
	char *buf = calloc(size ? size : 1, 1);
	cr_assert(buf);
	cr_assert(fread(buf, 1, (size_t)n, f) == (size_t)n, "short read of %s", path);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The whole file, NUL-terminated; NULL when it cannot be opened. */
static inline void *test_read_file(const char *path, size_t *len)
{
	return test_read_file_extra(path, len, 1);
}

/* test_read_file of a file that must be there. */
static inline void *test_slurp(const char *path, size_t *len)
{
	void *p = test_read_file(path, len);
	cr_assert(p, "cannot read %s", path);
	return p;
}

/* A file that must be there, in a buffer of exactly its size: ASan sees a read past it. */
static inline void *test_slurp_exact(const char *path, size_t *len)
{
	void *p = test_read_file_extra(path, len, 0);
	cr_assert(p, "cannot read %s", path);
	return p;
}

#endif
