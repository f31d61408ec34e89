/*
 * qplan.c - llama-quantize's plan of a model: every tensor's type (the rules are
 * qplan_rules.c) in llama.cpp's order, sizes and offsets, the checks that make
 * llama_model_quantize fail (an importance matrix missing, requantizing) and the keys it
 * changes (qplan.h says what the output file is).
 */
#include "qplan_impl.h"
#include "edit.h"
#include "quant.h"
#include "value.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QNT_VERSION 2           /* GGML_QNT_VERSION */
#define MAX_STR 127             /* llama_model_kv_override.val_str holds 127 bytes + NUL */

struct tfs_qplan {
	int ftype;
	uint32_t alignment;
	tfs_qtensor *t;
	size_t n_t;
	tfs_qkv *kv;
	size_t n_kv;
	uint64_t data_size;
};

int tfs_qplan_ftype(const tfs_qplan *p) { return p->ftype; }
size_t tfs_qplan_n_tensors(const tfs_qplan *p) { return p->n_t; }
uint64_t tfs_qplan_data_size(const tfs_qplan *p) { return p->data_size; }
uint32_t tfs_qplan_alignment(const tfs_qplan *p) { return p->alignment; }
size_t tfs_qplan_n_kv(const tfs_qplan *p) { return p->n_kv; }

const tfs_qtensor *tfs_qplan_tensor(const tfs_qplan *p, size_t i)
{
	return i < p->n_t ? &p->t[i] : NULL;
}

const tfs_qkv *tfs_qplan_kv(const tfs_qplan *p, size_t i)
{
	return i < p->n_kv ? &p->kv[i] : NULL;
}

void tfs_qplan_free(tfs_qplan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_kv; i++) {
		free((void *)p->kv[i].key);
		free((void *)p->kv[i].data);
	}
	free(p->kv);
	free(p->t);
	free(p);
}

/* ==== tensor order ==== */

/* llama_model_loader's weight_name_comparer: by the layer of a "blk.N." prefix (-1 without
 * one), then by name */
static int layer_key(const char *name)
{
	int l = -1;
	sscanf(name, "blk.%d.", &l);
	return l;
}

typedef struct {
	size_t i;
	int layer;
	const char *name;
} order_key;

static int by_layer_name(const void *a, const void *b)
{
	const order_key *x = a, *y = b;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* ==== keys ==== */

static int push_kv(tfs_qplan *p, tfs_qkv_op op, const char *key, uint32_t type,
		   const void *data, uint64_t len, tfs_error *err)
{
	tfs_qkv *kv = realloc(p->kv, (p->n_kv + 1) * sizeof(*kv));
	if (!kv)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	p->kv = kv;
	kv = &p->kv[p->n_kv];
	memset(kv, 0, sizeof(*kv));
	kv->op = op;
	kv->key = strdup(key);
	if (len) {
		uint8_t *d = malloc(len);
		if (d)
			memcpy(d, data, len);
		kv->data = d;
	}
	if (!kv->key || (len && !kv->data)) {
		free((void *)kv->key);
		free((void *)kv->data);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	kv->type = type;
	kv->len = len;
	p->n_kv++;
	return 0;
}

static int push_u32(tfs_qplan *p, const char *key, uint32_t v, tfs_error *err)
{
	return push_kv(p, TFS_QPLAN_KV_APPEND, key, TFS_GGUF_UINT32, &v, 4, err);
}

/* a string value as llama_model_kv_override holds it: 127 bytes at most, up to a NUL */
static int push_str(tfs_qplan *p, const char *key, const char *v, tfs_error *err)
{
	uint8_t buf[8 + MAX_STR];
	uint64_t n = strnlen(v, MAX_STR);
	memcpy(buf, &n, 8);
	memcpy(buf + 8, v, n);
	return push_kv(p, TFS_QPLAN_KV_APPEND, key, TFS_GGUF_STRING, buf, 8 + n, err);
}

/* the key changes of llama_model_quantize_impl (and llama-quantize's overrides) */
static int plan_keys(tfs_qplan *p, const tfs_model *m, const tfs_qplan_opts *o, int ftype,
		     tfs_error *err)
{
	int rc;
	if ((rc = push_u32(p, "general.quantization_version", QNT_VERSION, err)) ||
	    (rc = push_u32(p, "general.file_type", (uint32_t)ftype, err)))
		return rc;
	static const char *const split[] = { "split.no", "split.count", "split.tensors.count" };
	for (size_t k = 0; k < 3; k++)
		if (tfs_model_find_kv(m, split[k]) >= 0 &&
		    (rc = push_kv(p, TFS_QPLAN_KV_REMOVE, split[k], 0, NULL, 0, err)))
			return rc;
	if (!o->imatrix_file)
		return 0;
	/* llama-quantize's overrides: integers are written as u32 |value| */
	if ((rc = push_str(p, "quantize.imatrix.file", o->imatrix_file, err)))
		return rc;
	if (o->imatrix_dataset &&
	    (rc = push_str(p, "quantize.imatrix.dataset", o->imatrix_dataset, err)))
		return rc;
	int64_t e = o->imatrix_entries < 0 ? -o->imatrix_entries : o->imatrix_entries;
	if ((rc = push_u32(p, "quantize.imatrix.entries_count", (uint32_t)e, err)))
		return rc;
	if (o->imatrix_chunks > 0 &&
	    (rc = push_u32(p, "quantize.imatrix.chunks_count", (uint32_t)o->imatrix_chunks, err)))
		return rc;
	return 0;
}

int tfs_qplan_apply_kv(const tfs_qplan *p, tfs_model *m, tfs_error *err)
{
	for (size_t i = 0; i < p->n_kv; i++) {
		const tfs_qkv *kv = &p->kv[i];
		int rc = 0;
		if (tfs_model_find_kv(m, kv->key) >= 0)
			rc = tfs_model_del_kv(m, kv->key, err);
		if (!rc && kv->op == TFS_QPLAN_KV_APPEND) {
			uint8_t *d = malloc(kv->len ? kv->len : 1);
			if (!d)
				return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
			memcpy(d, kv->data, kv->len);
			rc = tfs_model_set_kv(m, kv->key, kv->type, d, kv->len, err);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ==== the plan ==== */

/* The checks llama_model_quantize makes before it converts tensor q (its main loop), and
 * those tensorfs adds for what it cannot do. */
static int check_convert(tfs_qstate *s, tfs_qtensor *q, const tfs_tensor *t, bool needs_imatrix)
{
	tfs_error *err = s->err;
	const tfs_imatrix *im = s->o->imatrix;
	if (im) {
		const uint64_t want = (uint64_t)t->ne[0] * (uint64_t)t->ne[2];
		const int64_t nval = tfs_imatrix_values(im, q->name);
		if (nval >= 0 && (uint64_t)nval != want && !tfs_qrule_is_token_embd(q->name))
			return tfs_error_set(err, TFS_E_INVALID, "the importance matrix has %" PRId64
					     " values for tensor '%s', which needs %" PRIu64
					     " (llama.cpp refuses it)", nval, q->name, want);
		const bool used = nval >= 0 && (uint64_t)nval == want;
		if (!used && needs_imatrix)
			return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': %s needs an "
					     "importance matrix, and the one given has no entry for "
					     "it", q->name, tfs_qdname(q->dtype));
	}
	if (q->src_dtype != TFS_DT_F32 && q->src_dtype != TFS_DT_F16 &&
	    q->src_dtype != TFS_DT_BF16 && !tfs_qis_quantized(q->src_dtype))
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': llama.cpp cannot convert "
				     "%s tensors", q->name, tfs_qdname(q->src_dtype));
	if (tfs_qis_quantized(q->src_dtype) && !s->o->allow_requantize)
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s' is already quantized (%s): "
				     "requantizing it to %s is not allowed (llama-quantize "
				     "--allow-requantize)", q->name, tfs_qdname(q->src_dtype),
				     tfs_qdname(q->dtype));
	if (!tfs_quantize_supported(q->dtype))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': tensorfs cannot "
				     "quantize to %s", q->name, tfs_qdname(q->dtype));
	if (t->n_dims > 4 || (t->n_dims == 4 && t->ne[3] > 1))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': llama.cpp quantizes "
				     "tensors of 3 dimensions at most", q->name);
	if (!tfs_tensor_has_f32(s->m, q->tensor, NULL))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': its %s values cannot "
				     "be read as float32", q->name, tfs_qdname(q->src_dtype));
	return 0;
}


/* The checks of the arguments llama_model_quantize makes before it reads a tensor. */
static int check_args(const tfs_qplan_opts *o, int ftype, tfs_error *err)
{
	const int default_type = tfs_ftype_name(ftype) ? tfs_ftype_base_dtype(ftype) : -1;
	if (default_type < 0) {
		tfs_buf names = { 0 };
		tfs_ftype_list(&names);
		int rc = tfs_error_set(err, TFS_E_INVALID, "%d is not a file type llama-quantize "
				       "knows (%s)", ftype, names.data ? names.data : "");
		tfs_buf_free(&names);
		return rc;
	}
	for (int k = 0; k < 2; k++) {
		const bool set = k ? o->set_output_type : o->set_token_embd_type;
		const int d = k ? o->output_type : o->token_embd_type;
		if (set && (d < 0 || d >= TFS_DT_GGML_COUNT || !tfs_dtype(d) || !tfs_qblck(d)))
			return tfs_error_set(err, TFS_E_INVALID, "%d is not a ggml type", d);
	}
	return 0;
}

/* The live tensors in llama.cpp's order (keys, *n of them), their roles (cats) and the
 * counters of init_quantize_state_counters. */
static int order_tensors(tfs_qstate *s, order_key *keys, tfs_qcat *cats, size_t *n,
			 tfs_error *err)
{
	const tfs_model *m = s->m;
	size_t nt = tfs_model_n_tensors(m);
	*n = 0;
	for (size_t i = 0; i < nt; i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (t->deleted)
			continue;
		if (t->n_dims > 4)
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s' has %u dimensions: "
					     "ggml has 4 at most", t->name, t->n_dims);
		keys[(*n)++] = (order_key){ .i = i, .layer = layer_key(t->name), .name = t->name };
	}
	qsort(keys, *n, sizeof(*keys), by_layer_name);
	for (size_t k = 0; k < *n; k++) {
		cats[k] = tfs_qrule_category(keys[k].name);
		if (tfs_qrule_is_attn_v(cats[k]))
			s->n_attention_wv++;
		if (cats[k] == TFS_QCAT_OUTPUT)
			s->has_tied_embeddings = false;
	}
	s->n_ffn_down = s->n_ffn_gate = s->n_ffn_up = (int)s->n_layer;
	return 0;
}

/* llama_model_quantize's preliminary loop: every target type, and the imatrix a type
 * requires (needs[k]). */
static int choose_types(tfs_qstate *s, tfs_qplan *p, const order_key *keys,
			const tfs_qcat *cats, bool *needs, int default_type)
{
	for (size_t k = 0; k < p->n_t; k++) {
		const tfs_tensor *t = tfs_model_tensor(s->m, keys[k].i);
		tfs_qtensor *q = &p->t[k];
		q->tensor = keys[k].i;
		q->name = t->name;
		q->src_dtype = t->dtype;
		q->n_dims = tfs_qrule_ggml_dims(t);
		for (uint32_t d = 0; d < 4; d++)
			q->ne[d] = d < t->n_dims ? t->ne[d] : 1;
		bool allows = t->dtype < TFS_DT_GGML_COUNT &&
			      tfs_qrule_allows_quantization(s, t->name, q->n_dims);
		q->dtype = allows ? tfs_qrule_get_type(s, t, cats[k], default_type, &q->fallback)
				  : t->dtype;
		if (q->dtype < 0)
			return s->rc;
		needs[k] = tfs_qrule_requires_imatrix(t->name, q->dtype, s->ftype);
		if (allows && needs[k] && !s->has_imatrix)
			return tfs_error_set(s->err, TFS_E_INVALID, "%s needs an importance matrix: "
					     "tensor '%s' would be %s (llama-quantize --imatrix; "
					     "tensorfs -o imatrix=FILE)", tfs_ftype_name(s->ftype),
					     t->name, tfs_qdname(q->dtype));
	}
	return 0;
}

/* The main loop: sizes and offsets, and what would make llama.cpp fail. */
static int lay_out(tfs_qstate *s, tfs_qplan *p, const bool *needs)
{
	uint64_t off = 0;
	int rc = 0;
	for (size_t k = 0; k < p->n_t && !rc; k++) {
		tfs_qtensor *q = &p->t[k];
		const tfs_tensor *t = tfs_model_tensor(s->m, q->tensor);
		const tfs_dtype_info *d = q->dtype < TFS_DT_GGML_COUNT ? tfs_dtype(q->dtype) : NULL;
		q->convert = q->dtype != q->src_dtype;
		if (!d || !d->block_elems)
			return tfs_error_set(s->err, TFS_E_UNSUPPORTED, "tensor '%s': its type "
					     "cannot be stored in GGUF", q->name);
		if (q->convert && (rc = check_convert(s, q, t, needs[k])))
			return rc;
		uint64_t nel = 1;
		for (uint32_t dd = 0; dd < 4; dd++)
			nel *= (uint64_t)q->ne[dd];
		if ((rc = tfs_dtype_nbytes(&q->nbytes, q->dtype, nel, s->err)))
			return rc;
		q->offset = off;
		off += (q->nbytes + p->alignment - 1) / p->alignment * p->alignment;
	}
	p->data_size = off;
	return 0;
}

int tfs_qplan_new(tfs_qplan **out, const tfs_model *m, int ftype, const tfs_qplan_opts *o,
		  tfs_error *err)
{
	static const tfs_qplan_opts defaults = { 0 };
	tfs_qstate s = { .m = m, .o = o ? o : &defaults, .ftype = ftype, .err = err,
			 .has_tied_embeddings = true };
	size_t nt = tfs_model_n_tensors(m), n = 0;
	order_key *keys = NULL;
	tfs_qcat *cats = NULL;
	bool *needs = NULL;
	tfs_qplan *p = NULL;
	uint32_t a;
	int rc;

	*out = NULL;
	if ((rc = check_args(s.o, ftype, err)) || (rc = tfs_qrule_read_hparams(&s)))
		return rc;
	s.has_imatrix = s.o->imatrix != NULL;
	keys = calloc(nt ? nt : 1, sizeof(*keys));
	cats = calloc(nt ? nt : 1, sizeof(*cats));
	needs = calloc(nt ? nt : 1, sizeof(*needs));
	p = calloc(1, sizeof(*p));
	if (p)
		p->t = calloc(nt ? nt : 1, sizeof(*p->t));
	if (!keys || !cats || !needs || !p || !p->t) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		goto done;
	}
	p->ftype = ftype;
	/* llama.cpp pads to 32 whatever general.alignment says (a file ggml then refuses when
	 * the key says otherwise); tensorfs' writer pads as the key says */
	p->alignment = tfs_qrule_key_uint(m, "general.alignment", &a) && a && !(a & (a - 1))
		       ? a : TFS_QPLAN_ALIGN;
	if ((rc = order_tensors(&s, keys, cats, &n, err)))
		goto done;
	p->n_t = n;
	if ((rc = choose_types(&s, p, keys, cats, needs, tfs_ftype_base_dtype(ftype))) ||
	    (rc = lay_out(&s, p, needs)) || (rc = plan_keys(p, m, s.o, ftype, err)))
		goto done;
	*out = p;
	p = NULL;
done:
	free(keys);
	free(cats);
	free(needs);
	tfs_qplan_free(p);
	return rc;
}
