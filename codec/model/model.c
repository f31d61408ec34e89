/* model.c - the format-neutral model: building, lookups, reading, changing. */
#include "model_impl.h"
#include "dtype.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== lookups ==== */

const char *tfs_kv_name(const void *ctx, uint32_t i, size_t *len)
{
	const tfs_model *m = ctx;
	*len = strlen(m->kv[i].name);
	return m->kv[i].name;
}

const char *tfs_t_name(const void *ctx, uint32_t i, size_t *len)
{
	const tfs_model *m = ctx;
	*len = strlen(m->t[i].name);
	return m->t[i].name;
}

const char *tfs_x_name(const void *ctx, uint32_t i, size_t *len)
{
	const tfs_model *m = ctx;
	*len = strlen(m->x[i].name);
	return m->x[i].name;
}

long tfs_model_find_kv(const tfs_model *m, const char *name)
{
	return tfs_strmap_get(&m->kv_map, name, strlen(name), tfs_kv_name, m);
}

long tfs_model_find_tensor(const tfs_model *m, const char *name)
{
	return tfs_strmap_get(&m->t_map, name, strlen(name), tfs_t_name, m);
}

long tfs_model_find_extra(const tfs_model *m, const char *name)
{
	return tfs_strmap_get(&m->x_map, name, strlen(name), tfs_x_name, m);
}

/* ==== construction ==== */

int tfs_model_new(tfs_model **out, const tfs_format_ops *ops, const char *path,
		  tfs_error *err)
{
	tfs_model *m = calloc(1, sizeof(*m));
	if (!m || !(m->path = strdup(path))) {
		free(m);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
	}
	m->ops = ops;
	m->alignment = 32;
	*out = m;
	return 0;
}

void tfs_model_quiesce(tfs_model *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_att; i++)
		if (m->att[i].obj && m->att[i].kind->quiesce)
			m->att[i].kind->quiesce(m->att[i].obj);
	if (m->owner_quiesce)
		m->owner_quiesce(m->owner);
	for (size_t i = 0; i < m->n_src; i++)
		tfs_source_quiesce(&m->src[i]);
}

void tfs_model_free(tfs_model *m)
{
	if (!m)
		return;
	/* first, the last attached first: they may read through m's sources (and through what
	 * was attached before them) */
	for (size_t i = m->n_att; i-- > 0;) {
		if (m->att[i].obj && m->att[i].kind->free)
			m->att[i].kind->free(m->att[i].obj);
		free(m->att[i].why);
	}
	free(m->att);
	if (m->priv && m->ops->free_priv)
		m->ops->free_priv(m->priv);
	for (size_t i = 0; i < m->n_kv; i++) {
		if (m->kv[i].name_owned)
			free(m->kv[i].name);
		if (m->kv[i].data_owned)
			free((void *)m->kv[i].data);
	}
	for (struct tfs_name_chunk *c = m->names, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	for (size_t i = 0; i < m->n_t; i++)
		free(m->t[i].name);
	for (size_t i = 0; i < m->n_x; i++) {
		free(m->x[i].name);
		free(m->x[i].media_type);
	}
	for (size_t i = 0; i < m->n_src; i++) {
		tfs_source_free(&m->src[i]);
	}
	if (m->owner_free)
		m->owner_free(m->owner);
	tfs_strmap_free(&m->kv_map);
	tfs_strmap_free(&m->t_map);
	tfs_strmap_free(&m->x_map);
	free(m->kv);
	free(m->t);
	free(m->x);
	free(m->src);
	free(m->path);
	free(m->abs_path);
	free(m);
}

/* Grows *arr (of elem bytes each) so that one more fits. */
static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	size_t bytes;
	if (tfs_mul_overflow(ncap, elem, &bytes))
		return TFS_E_NOMEM;
	void *p = realloc(*arr, bytes);
	if (!p)
		return TFS_E_NOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

int tfs_model_add_source(tfs_model *m, const char *path, const char *label, int32_t *idx,
			 tfs_error *err)
{
	if (grow((void **)&m->src, &m->cap_src, m->n_src, sizeof(*m->src)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
	tfs_source *s = &m->src[m->n_src];
	memset(s, 0, sizeof(*s));
	s->path = strdup(path);
	s->label = strdup(label ? label : tfs_basename(path));
	int rc = !s->path || !s->label ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path)
				       : tfs_source_open_file(s, path, err);
	if (rc) {
		free(s->path);
		free(s->label);
		return rc;
	}
	*idx = (int32_t)m->n_src++;
	return 0;
}

int tfs_model_add_mem_source(tfs_model *m, const char *name, const uint8_t *data, uint64_t size,
			     int32_t *idx, tfs_error *err)
{
	if (grow((void **)&m->src, &m->cap_src, m->n_src, sizeof(*m->src)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", name);
	tfs_source *s = &m->src[m->n_src];
	memset(s, 0, sizeof(*s));
	s->path = strdup(name);
	s->label = strdup(tfs_basename(name));
	if (!s->path || !s->label) {
		free(s->path);
		free(s->label);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", name);
	}
	tfs_source_init_memory(s, data, size);
	*idx = (int32_t)m->n_src++;
	return 0;
}

int tfs_model_add_remote_source(tfs_model *m, const char *url, const tfs_open_opts *o,
				int32_t *idx, tfs_error *err)
{
	if (grow((void **)&m->src, &m->cap_src, m->n_src, sizeof(*m->src)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", url);
	tfs_source *s = &m->src[m->n_src];
	memset(s, 0, sizeof(*s));
	int rc = tfs_source_open_remote(s, url, o, err);
	if (rc)
		return rc;
	s->path = strdup(url);
	s->label = strdup(tfs_basename(url));
	if (!s->path || !s->label) {
		tfs_source_free(s);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", url);
	}
	*idx = (int32_t)m->n_src++;
	return 0;
}

int tfs_model_add_computed_source(tfs_model *m, const char *label, const tfs_computed_ops *ops,
				  void *ctx, uint64_t size, int32_t *idx, tfs_error *err)
{
	tfs_source *s = NULL;
	if (!grow((void **)&m->src, &m->cap_src, m->n_src, sizeof(*m->src))) {
		s = &m->src[m->n_src];
		memset(s, 0, sizeof(*s));
		s->path = strdup(label);
		s->label = strdup(label);
	}
	if (!s || !s->path || !s->label) {
		if (s) {
			free(s->path);
			free(s->label);
		}
		if (ops->release)
			ops->release(ctx);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", label);
	}
	tfs_source_init_computed(s, ops, ctx, size);
	*idx = (int32_t)m->n_src++;
	return 0;
}

int tfs_model_add_view_tensor(tfs_model *m, const tfs_view_tensor *vt, tfs_error *err)
{
	int32_t src = vt->src;
	uint64_t offset = vt->offset;
	tfs_tensor *nt;
	int rc;
	if (vt->ops) {
		char label[300];
		snprintf(label, sizeof(label), "%s.%s", vt->name, vt->label);
		if ((rc = tfs_model_add_computed_source(m, label, vt->ops, vt->ctx, vt->nbytes, &src,
							err)))
			return rc;
		offset = 0;
	}
	if (vt->n_dims > TFS_MAX_DIMS)
		return tfs_error_set(err, TFS_E_INVALID, "%s: tensor '%s' has %u dimensions",
				     m->path, vt->name, vt->n_dims);
	if ((rc = tfs_model_push_tensor(m, vt->name, strlen(vt->name), &nt, err)))
		return rc;
	nt->dtype = vt->dtype;
	nt->n_dims = vt->n_dims;
	for (uint32_t d = 0; d < vt->n_dims; d++)
		nt->ne[d] = vt->ne[d];
	nt->nbytes = vt->nbytes;
	nt->src = src;
	nt->offset = offset;
	return 0;
}

static struct tfs_attached *attached(const tfs_model *m, const tfs_attach_kind *kind)
{
	for (size_t i = 0; i < m->n_att; i++)
		if (m->att[i].kind == kind)
			return &m->att[i];
	return NULL;
}

int tfs_model_attach(tfs_model *m, const tfs_attach_kind *kind, void *obj, const char *why,
		     tfs_error *err)
{
	struct tfs_attached *a = attached(m, kind);
	if (!a && !obj && !why)
		return 0;  /* (nothing, and nothing of kind before) */
	char *w = !obj && why ? strdup(why) : NULL;
	if (!a) {
		struct tfs_attached *more = realloc(m->att, (m->n_att + 1) * sizeof(*more));
		if (!more) {
			free(w);
			if (obj && kind->free)
				kind->free(obj);
			return tfs_error_set(err, TFS_E_NOMEM, "%s: %s: out of memory", m->path,
					     kind->name);
		}
		m->att = more;
		a = &m->att[m->n_att++];
		*a = (struct tfs_attached){ .kind = kind };
	}
	if (a->obj && kind->free)
		kind->free(a->obj);
	free(a->why);
	a->obj = obj;
	a->why = w;
	/* (out of memory for the reason: what was attached is gone all the same) */
	if (!obj && why && !w)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: %s: out of memory", m->path,
				     kind->name);
	return 0;
}

void *tfs_model_attached(const tfs_model *m, const tfs_attach_kind *kind)
{
	const struct tfs_attached *a = m ? attached(m, kind) : NULL;
	return a ? a->obj : NULL;
}

const char *tfs_model_attached_why(const tfs_model *m, const tfs_attach_kind *kind)
{
	const struct tfs_attached *a = m ? attached(m, kind) : NULL;
	return a ? a->why : NULL;
}

void *tfs_model_detach(tfs_model *m, const tfs_attach_kind *kind)
{
	struct tfs_attached *a = attached(m, kind);
	void *obj = a ? a->obj : NULL;
	if (a)
		a->obj = NULL;
	return obj;
}

static int check_name(const char *name, size_t len, const char *what, const char *file,
		      tfs_error *err)
{
	if (len == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: empty %s name", file, what);
	if (len > TFS_MAX_NAME)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s name of %zu bytes is too long",
				     file, what, len);
	if (memchr(name, '\0', len))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s name '%.*s' contains a NUL byte",
				     file, what, (int)strnlen(name, len), name);
	return 0;
}

static char *dup_name(const char *name, size_t len)
{
	char *s = malloc(len + 1);
	if (s) {
		memcpy(s, name, len);
		s[len] = '\0';
	}
	return s;
}

/* ==== the keys' name arena ==== */

#define NAME_CHUNK (64 * 1024)

/* A NUL-terminated copy of name in the model's arena (*owned false), or malloc'd when it is
 * long (*owned true); NULL when out of memory. */
static char *arena_name(tfs_model *m, const char *name, size_t len, bool *owned)
{
	*owned = len >= NAME_CHUNK / 16;
	if (*owned)
		return dup_name(name, len);
	if (!m->names || m->names_cap - m->names_used < len + 1) {
		struct tfs_name_chunk *c = malloc(sizeof(*c) + NAME_CHUNK);
		if (!c)
			return NULL;
		c->next = m->names;
		m->names = c;
		m->names_used = 0;
		m->names_cap = NAME_CHUNK;
	}
	char *s = m->names->text + m->names_used;
	memcpy(s, name, len);
	s[len] = '\0';
	m->names_used += len + 1;
	return s;
}

int tfs_model_push_kv(tfs_model *m, const char *name, size_t name_len, uint32_t type,
		      const uint8_t *data, uint64_t len, tfs_error *err)
{
	int rc = check_name(name, name_len, "key", m->path, err);
	if (rc)
		return rc;
	if (m->n_kv >= TFS_MAX_ITEMS)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: too many keys", m->path);
	if (tfs_strmap_get(&m->kv_map, name, name_len, tfs_kv_name, m) >= 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: duplicate key '%.*s'", m->path,
				     (int)name_len, name);
	if (grow((void **)&m->kv, &m->cap_kv, m->n_kv, sizeof(*m->kv)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	tfs_kv *kv = &m->kv[m->n_kv];
	memset(kv, 0, sizeof(*kv));
	if (!(kv->name = arena_name(m, name, name_len, &kv->name_owned)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	kv->type = type;
	kv->data = data;
	kv->len = len;
	if (tfs_strmap_put(&m->kv_map, name, name_len, (uint32_t)m->n_kv, tfs_kv_name, m)) {
		if (kv->name_owned)
			free(kv->name); /* (an arena copy stays, unused, until the model is freed) */
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	}
	m->n_kv++;
	return 0;
}

int tfs_model_push_tensor(tfs_model *m, const char *name, size_t name_len, tfs_tensor **out,
			  tfs_error *err)
{
	int rc = check_name(name, name_len, "tensor", m->path, err);
	if (rc)
		return rc;
	if (m->n_t >= TFS_MAX_ITEMS)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: too many tensors", m->path);
	if (tfs_strmap_get(&m->t_map, name, name_len, tfs_t_name, m) >= 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: duplicate tensor '%.*s'", m->path,
				     (int)name_len, name);
	if (grow((void **)&m->t, &m->cap_t, m->n_t, sizeof(*m->t)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	tfs_tensor *t = &m->t[m->n_t];
	memset(t, 0, sizeof(*t));
	if (!(t->name = dup_name(name, name_len)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	t->src = -1;
	t->q_scale = t->q_bias = t->q_gscale = -1;
	if (tfs_strmap_put(&m->t_map, name, name_len, (uint32_t)m->n_t, tfs_t_name, m)) {
		free(t->name);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	}
	m->n_t++;
	*out = t;
	return 0;
}

int tfs_model_push_extra(tfs_model *m, const char *name, const char *media_type, int32_t src,
			 uint64_t offset, uint64_t size, tfs_error *err)
{
	size_t len = strlen(name);
	int rc = check_name(name, len, "file", m->path, err);
	if (rc)
		return rc;
	if (tfs_strmap_get(&m->x_map, name, len, tfs_x_name, m) >= 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: duplicate file '%s'", m->path, name);
	if (grow((void **)&m->x, &m->cap_x, m->n_x, sizeof(*m->x)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	tfs_extra *x = &m->x[m->n_x];
	memset(x, 0, sizeof(*x));
	x->name = strdup(name);
	x->media_type = strdup(media_type ? media_type : "");
	if (!x->name || !x->media_type ||
	    tfs_strmap_put(&m->x_map, name, len, (uint32_t)m->n_x, tfs_x_name, m)) {
		free(x->name);
		free(x->media_type);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	}
	x->src = src;
	x->offset = offset;
	x->size = size;
	m->n_x++;
	return 0;
}

/* ==== getters ==== */

tfs_format tfs_model_format(const tfs_model *m) { return (tfs_format)m->ops->id; }
const char *tfs_model_path(const tfs_model *m) { return m->path; }
size_t tfs_model_n_kv(const tfs_model *m) { return m->n_kv; }
const tfs_kv *tfs_model_kv(const tfs_model *m, size_t i) { return i < m->n_kv ? &m->kv[i] : NULL; }
size_t tfs_model_n_tensors(const tfs_model *m) { return m->n_t; }
const tfs_tensor *tfs_model_tensor(const tfs_model *m, size_t i) { return i < m->n_t ? &m->t[i] : NULL; }
size_t tfs_model_n_extras(const tfs_model *m) { return m->n_x; }
const tfs_extra *tfs_model_extra(const tfs_model *m, size_t i) { return i < m->n_x ? &m->x[i] : NULL; }
size_t tfs_model_n_sources(const tfs_model *m) { return m->n_src; }
const tfs_source *tfs_model_source(const tfs_model *m, size_t i) { return i < m->n_src ? &m->src[i] : NULL; }

const char *tfs_model_format_name(const tfs_model *m) { return m->ops->name; }

/* ==== reading ==== */

int64_t tfs_tensor_read_raw(const tfs_model *m, size_t i, uint64_t off, uint64_t len, void *out,
			    tfs_error *err)
{
	if (i >= m->n_t)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no tensor %zu", m->path, i);
	const tfs_tensor *t = &m->t[i];
	if (off >= t->nbytes)
		return 0;
	if (len > t->nbytes - off)
		len = t->nbytes - off;
	if (t->src < 0 || (size_t)t->src >= m->n_src)
		return tfs_error_set(err, TFS_E_INVALID, "%s: no source %d", m->path, t->src);
	int rc = tfs_source_pread_in(&m->src[t->src], out, len, t->offset + off, t->offset,
				     t->offset + t->nbytes, err);
	return rc ? rc : (int64_t)len;
}

int tfs_tensor_read_exact(const tfs_model *m, size_t i, uint64_t off, uint64_t len, void *out,
			  tfs_error *err)
{
	int64_t got = tfs_tensor_read_raw(m, i, off, len, out, err);
	if (got < 0)
		return (int)got;
	if ((uint64_t)got != len)
		return tfs_error_set(err, TFS_E_IO, "%s: tensor '%s': short read at %llu", m->path,
				     m->t[i].name, (unsigned long long)(off + (uint64_t)got));
	return 0;
}

/* Product of ne[0..n) (already validated not to overflow at open). */
static uint64_t n_elems(const tfs_tensor *t)
{
	uint64_t n = 1;
	for (uint32_t d = 0; d < t->n_dims; d++)
		n *= (uint64_t)t->ne[d];
	return n;
}

bool tfs_tensor_has_f32(const tfs_model *m, size_t i, const char **why)
{
	if (i >= m->n_t) {
		if (why)
			*why = "no such tensor";
		return false;
	}
	const tfs_tensor *t = &m->t[i];
	if (t->q.mode != TFS_QMODE_NONE) {
		if (t->q_scale < 0 || t->n_dims == 0) {
			if (why)
				*why = "quantized tensor without its scales";
			return false;
		}
		return true;
	}
	const tfs_dtype_info *d = tfs_dtype(t->dtype);
	if (!d || !d->to_f32) {
		if (why)
			*why = "no float conversion for this dtype";
		return false;
	}
	return true;
}

uint64_t tfs_tensor_f32_count(const tfs_model *m, size_t i, const char **why)
{
	if (!tfs_tensor_has_f32(m, i, why))
		return 0;
	const tfs_tensor *t = &m->t[i];
	if (t->q.mode != TFS_QMODE_NONE)
		return n_elems(t) / (uint64_t)t->ne[0] * ((uint64_t)t->ne[0] * 32 / t->q.bits);
	return n_elems(t) * tfs_dtype(t->dtype)->f32_per_elem;
}

int tfs_tensor_f32_shape(const tfs_model *m, size_t i, uint32_t *n_dims,
			 int64_t ne[TFS_MAX_DIMS + 1])
{
	if (i >= m->n_t)
		return TFS_E_NOTFOUND;
	const tfs_tensor *t = &m->t[i];
	*n_dims = t->n_dims;
	memcpy(ne, t->ne, sizeof(t->ne));
	ne[TFS_MAX_DIMS] = 1;
	if (t->q.mode != TFS_QMODE_NONE && t->n_dims > 0) {
		ne[0] = t->ne[0] * 32 / t->q.bits;
	} else {
		const tfs_dtype_info *d = tfs_dtype(t->dtype);
		if (d && d->f32_per_elem == 2) {
			memmove(ne + 1, ne, sizeof(int64_t) * t->n_dims);
			ne[0] = 2;
			(*n_dims)++;
		}
	}
	return 0;
}

int tfs_tensor_read_f32(const tfs_model *m, size_t i, uint64_t first, uint64_t count, float *out,
			tfs_error *err)
{
	uint64_t total = tfs_tensor_f32_count(m, i, NULL);
	uint64_t end;
	if (tfs_add_overflow(first, count, &end) || end > total)
		return tfs_error_set(err, TFS_E_INVALID, "%s: f32 read [%llu, +%llu) past the end",
				     m->path, (unsigned long long)first, (unsigned long long)count);
	if (count == 0)
		return 0;
	const tfs_tensor *t = &m->t[i];
	if (t->q.mode != TFS_QMODE_NONE)
		return tfs_mlx_read_f32(m, t, first, count, out, err);

	const tfs_dtype_info *d = tfs_dtype(t->dtype);
	const tfs_source *s = &m->src[t->src];
	/* values per block in the f32 view */
	uint64_t bv = (uint64_t)d->block_elems * d->f32_per_elem;
	uint64_t b0 = first / bv, b1 = (end + bv - 1) / bv;
	uint64_t boff;
	if (tfs_mul_overflow(b1, (uint64_t)d->block_bytes, &boff) || t->offset + boff > s->size ||
	    boff > t->nbytes)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' extends past the file",
				     s->path, t->name);
	uint64_t span_off = t->offset + b0 * d->block_bytes, span_len = (b1 - b0) * d->block_bytes;
	/* a remote source has no mapping of its data: its blocks are read into a buffer */
	bool mapped = tfs_source_data(s) != NULL;
	uint8_t *copy = !mapped ? malloc(span_len ? (size_t)span_len : 1) : NULL;
	int rc = !mapped && !copy ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
	if (!rc && mapped)
		rc = tfs_source_present(s, span_off, span_len, err);
	if (!rc && copy)
		rc = tfs_source_pread_in(s, copy, span_len, span_off, t->offset,
					 t->offset + t->nbytes, err);
	if (rc) {
		free(copy);
		return rc;
	}
	const uint8_t *blk = copy ? copy : s->map + span_off; /* block b0 */
	tfs_source_advise(m, t->src, span_off, span_len, MADV_WILLNEED);

	/* partial first block */
	uint64_t skip = first - b0 * bv;
	float tmp[1024];
	if (skip) {
		uint64_t take = bv - skip < count ? bv - skip : count;
		if (bv > 1024) {
			free(copy);
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "block too large");
		}
		d->to_f32(blk, tmp, 1);
		memcpy(out, tmp + skip, take * sizeof(float));
		out += take;
		count -= take;
		blk += d->block_bytes;
	}
	/* whole blocks straight into out */
	uint64_t whole = count / bv;
	if (whole) {
		d->to_f32(blk, out, whole);
		out += whole * bv;
		count -= whole * bv;
		blk += whole * d->block_bytes;
	}
	/* partial last block */
	if (count) {
		if (bv > 1024) {
			free(copy);
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "block too large");
		}
		d->to_f32(blk, tmp, 1);
		memcpy(out, tmp, count * sizeof(float));
	}
	tfs_source_advise(m, t->src, span_off, span_len, MADV_DONTNEED);
	free(copy);
	return 0;
}

/* The output's final path: o->output or the source; a symlink is followed, so the link
 * keeps pointing at the (replaced) file. Allocated. */
char *tfs_output_path(const tfs_model *m, const tfs_write_opts *o)
{
	const char *out = o && o->output ? o->output : m->path;
	struct stat st;
	if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode)) {
		char *r = realpath(out, NULL);
		if (r)
			return r;
	}
	return strdup(out);
}

int tfs_model_copy(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t si,
		   uint64_t off, uint64_t len, uint32_t blk, const tfs_io_progress *p,
		   tfs_error *err)
{
	uint64_t end;
	if (si < 0 || (size_t)si >= m->n_src)
		return tfs_error_set(err, TFS_E_INVALID, "%s: no source %d", m->path, si);
	const tfs_source *s = &m->src[si];
	if (tfs_add_overflow(off, len, &end) || end > s->size)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: bytes [%llu, +%llu) lie past its end (%llu bytes): did it "
				     "change after it was opened?", s->path,
				     (unsigned long long)off, (unsigned long long)len,
				     (unsigned long long)s->size);
	return tfs_source_copy(fd, path, pos, s, off, len, blk, p, err);
}
