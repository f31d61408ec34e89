/* error.c - the error record, growable buffers, the cursor, the string map. */
#include "cursor.h"
#include "strmap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* ==== errors ==== */

static int error_vset(tfs_error *e, int code, int sys_errno, const char *fmt, va_list ap)
{
	if (!e)
		return code;
	e->code = code;
	e->sys_errno = sys_errno;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	return code;
}

int tfs_error_set(tfs_error *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	error_vset(e, code, 0, fmt, ap);
	va_end(ap);
	return code;
}

int tfs_error_sys(tfs_error *e, int sys_errno, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	error_vset(e, TFS_E_IO, sys_errno, fmt, ap);
	va_end(ap);
	if (e) {
		size_t n = strlen(e->msg);
		snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(sys_errno));
	}
	return TFS_E_IO;
}

void tfs_error_clear(tfs_error *e)
{
	if (e) {
		e->code = TFS_OK;
		e->sys_errno = 0;
		e->msg[0] = '\0';
	}
}

const char *tfs_basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* ==== buffers ==== */

int tfs_buf_reserve(tfs_buf *b, size_t extra)
{
	size_t need;
	if (tfs_add_overflow(b->len, extra + 1, &need))
		return TFS_E_NOMEM;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			return TFS_E_NOMEM;
		cap *= 2;
	}
	char *p = realloc(b->data, cap);
	if (!p)
		return TFS_E_NOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int tfs_buf_append(tfs_buf *b, const void *p, size_t n)
{
	if (tfs_buf_reserve(b, n))
		return TFS_E_NOMEM;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int tfs_buf_printf(tfs_buf *b, const char *fmt, ...)
{
	va_list ap;
	char small[256];
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return TFS_E_NOMEM;
	if ((size_t)n < sizeof(small))
		return tfs_buf_append(b, small, (size_t)n);
	if (tfs_buf_reserve(b, (size_t)n))
		return TFS_E_NOMEM;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void tfs_buf_free(tfs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

/* ==== cursor ==== */

static int cursor_short(tfs_cursor *c, uint64_t n, const char *what)
{
	return tfs_error_set(c->err, TFS_E_FORMAT,
			     "%s: truncated at offset %llu: %s needs %llu bytes, %llu left",
			     c->file, (unsigned long long)(c->origin + c->pos), what,
			     (unsigned long long)n, (unsigned long long)tfs_cursor_left(c));
}

int tfs_cursor_bytes(tfs_cursor *c, const uint8_t **p, uint64_t n, const char *what)
{
	if (n > tfs_cursor_left(c))
		return cursor_short(c, n, what);
	if (c->fill && c->pos + n > c->have) { /* a remote header: fetch more of it */
		uint64_t want = c->expect > c->pos + n ? c->expect : c->pos + n;
		want = want < c->size ? want : c->size;
		int rc = c->fill(c->fill_ctx, c->origin + want, c->err);
		if (rc)
			return rc;
		c->have = want;
	}
	if (c->prefetch && c->pos + n > c->ra_end) {
		uint64_t step = c->ra_step ? c->ra_step : 64u << 10;
		uint64_t want = (c->pos + n + step + 4095) & ~(uint64_t)4095;
		want = want > c->size ? c->size : want;
		/* base is page aligned and ra_end a multiple of the page size */
		madvise((void *)(uintptr_t)(c->base + c->ra_end), (size_t)(want - c->ra_end),
			MADV_WILLNEED);
		c->ra_end = (want + 4095) & ~(uint64_t)4095;
		c->ra_step = step < (4u << 20) ? step * 2 : step;
	}
	*p = c->base + c->pos;
	c->pos += n;
	return 0;
}

#define CURSOR_SCALAR(fn, type)                                              \
	int fn(tfs_cursor *c, type *v, const char *what)                     \
	{                                                                    \
		const uint8_t *p = NULL;                                     \
		int rc = tfs_cursor_bytes(c, &p, sizeof(type), what);       \
		if (rc)                                                      \
			return rc;                                           \
		memcpy(v, p, sizeof(type));                                  \
		return 0;                                                    \
	}
CURSOR_SCALAR(tfs_cursor_u8, uint8_t)
CURSOR_SCALAR(tfs_cursor_u16, uint16_t)
CURSOR_SCALAR(tfs_cursor_u32, uint32_t)
CURSOR_SCALAR(tfs_cursor_u64, uint64_t)

int tfs_cursor_str(tfs_cursor *c, const uint8_t **p, uint64_t *len, uint64_t cap,
		   const char *what)
{
	uint64_t at = c->origin + c->pos;
	int rc = tfs_cursor_u64(c, len, what);
	if (rc)
		return rc;
	if (*len > cap)
		return tfs_error_set(c->err, TFS_E_FORMAT,
				     "%s: %s at offset %llu has length %llu, over the limit of %llu",
				     c->file, what, (unsigned long long)at,
				     (unsigned long long)*len, (unsigned long long)cap);
	return tfs_cursor_bytes(c, p, *len, what);
}

/* ==== string map (open addressing, FNV-1a) ==== */

static uint64_t str_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static size_t strmap_find_slot(const tfs_strmap *s, const char *name, size_t len,
			       tfs_strmap_name_fn fn, const void *ctx, bool *found)
{
	size_t mask = s->cap - 1;
	size_t i = (size_t)str_hash(name, len) & mask;
	for (;;) {
		uint32_t v = s->slots[i];
		if (v == 0) {
			*found = false;
			return i;
		}
		if (v != UINT32_MAX) {
			size_t l;
			const char *n = fn(ctx, v - 1, &l);
			if (l == len && memcmp(n, name, len) == 0) {
				*found = true;
				return i;
			}
		}
		i = (i + 1) & mask;
	}
}

long tfs_strmap_get(const tfs_strmap *s, const char *name, size_t len, tfs_strmap_name_fn fn,
		    const void *ctx)
{
	bool found;
	if (!s->cap)
		return -1;
	size_t i = strmap_find_slot(s, name, len, fn, ctx, &found);
	return found ? (long)s->slots[i] - 1 : -1;
}

static int strmap_grow(tfs_strmap *s, tfs_strmap_name_fn fn, const void *ctx)
{
	size_t ncap = s->cap ? s->cap * 2 : 64;
	tfs_strmap n = { calloc(ncap, sizeof(uint32_t)), ncap, 0 };
	if (!n.slots)
		return TFS_E_NOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		uint32_t v = s->slots[i];
		if (v == 0 || v == UINT32_MAX)
			continue;
		size_t l;
		bool found;
		const char *name = fn(ctx, v - 1, &l);
		size_t j = strmap_find_slot(&n, name, l, fn, ctx, &found);
		n.slots[j] = v;
		n.count++;
	}
	free(s->slots);
	*s = n;
	return 0;
}

int tfs_strmap_put(tfs_strmap *s, const char *name, size_t len, uint32_t idx,
		   tfs_strmap_name_fn fn, const void *ctx)
{
	bool found;
	/* tombstones count toward the load, so a rebuild also clears them */
	if ((s->count + 1) * 2 > s->cap && strmap_grow(s, fn, ctx))
		return TFS_E_NOMEM;
	size_t i = strmap_find_slot(s, name, len, fn, ctx, &found);
	if (!found)
		s->count++;
	s->slots[i] = idx + 1;
	return 0;
}

void tfs_strmap_del(tfs_strmap *s, const char *name, size_t len, tfs_strmap_name_fn fn,
		    const void *ctx)
{
	bool found;
	if (!s->cap)
		return;
	size_t i = strmap_find_slot(s, name, len, fn, ctx, &found);
	if (found)
		s->slots[i] = UINT32_MAX; /* tombstone; still counted */
}

void tfs_strmap_free(tfs_strmap *s)
{
	free(s->slots);
	s->slots = NULL;
	s->cap = s->count = 0;
}
