/*
 * hf_mmproj.c - the projector's plan: what `convert_hf_to_gguf.py --mmproj` (llama.cpp
 * de3ff81, MmprojModel) writes for a multimodal repo; the class's own steps are its row's
 * (hf_mmproj.h; the rows: tfs_hf_mmprojs[], hf_mmproj_registry.c), the keys hf_mmproj_keys.c's.
 *
 * The converter (MmprojModel.__init__, ModelBase.prepare_tensors, prepare_metadata):
 *  1. the class by architectures[0] (vision_config's when it names one);
 *  2. n_embd_text: {**hparams, **text_config}'s hidden_size; hparams_vision: vision_config as
 *     AutoConfig's to_dict() has it; the preprocessor config: preprocessor_config.json, then
 *     processor_config.json (its image_processor merged to the top) over it;
 *  3. --outtype auto: as the text model's, over the tensors the class keeps;
 *  4. tensors in the text model's reading order (shards by name, then names), those the
 *     class's filter_tensors keeps ("language_model." ones never), BF16 widened, the class's
 *     transforms (a split into parts: each a gather of the source's elements), the name mapped by
 *     gguf-py's TensorNameMap for MODEL_ARCH.MMPROJ with the tower's block count (or the
 *     class's) and the class's extra suffixes (a name it cannot map stops the converter);
 *  5. the type: the class's tensor_force_quant, then MmprojModel's (patch_embd F16 at f16,
 *     else F32), 1-D and *_norm.weight F32, position embeddings and non-weights F32, else
 *     the file type's (Q8_0 rows that are not whole blocks: F16);
 *  6. keys: general.architecture "clip", general.type "mmproj", general.* of the card (the
 *     projector's parameter count), general.file_type and MmprojModel's keys, the class's,
 *     general.quantization_version.
 */
#include "hf_mmproj.h"
#include "hf_plan_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_meta.h"

/* ==== the configs ==== */

/* MmprojModel.n_block_keys */
static const char *const K_BLOCK[] = { "n_layers", "num_hidden_layers", "n_layer", "num_layers",
	"depth", "layers", "encoder_layers", "vt_num_hidden_layers", NULL };

typedef struct {
	char where[1024], pre_where[1024];
	json_t *file;              /* config.json */
	const char *cls;
	const tfs_hf_mmproj_class *row;
	int64_t n_embd_text;
	int64_t n_block;           /* the tower's block count (TensorNameMap's) */
	tfs_hf_mm mm;
} mm_ctx;

static int read_json(json_t **out, const tfs_hf_files *files, const char *name,
		     const char *where, tfs_error *err)
{
	uint8_t *text = NULL;
	uint64_t len = 0;
	*out = NULL;
	int rc = files->read(files->ctx, name, &text, &len, err);
	if (rc)
		return rc;
	json_error_t je;
	*out = json_loadb((const char *)text, (size_t)len, JSON_DECODE_ANY, &je);
	free(text);
	if (!*out)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not JSON: %s (line %d, column %d)",
				     where, je.text, je.line, je.column);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not a JSON object", where);
	}
	return 0;
}

/* The class: architectures[0], or vision_config's when it names one. */
static const char *mm_class(const json_t *file)
{
	json_t *av = json_object_get(json_object_get(file, "vision_config"), "architectures");
	if (!json_is_array(av))
		av = json_object_get(file, "architectures");
	return json_string_value(json_array_get(av, 0));
}

/* *out: config.json's sub-config cfg (an empty object when it is absent or null) with the
 * config class's defaults where it has no value, as the class's __init__ makes one. */
static int sub_config(json_t **out, const mm_ctx *c, const json_t *cfg,
		      const tfs_hf_default *defaults, tfs_error *err)
{
	*out = json_is_object(cfg) ? json_deep_copy(cfg) : json_object();
	if (!*out)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", c->where);
	for (const tfs_hf_default *d = defaults; d && d->key; d++) {
		if (json_object_get(*out, d->key))
			continue;
		json_t *v = d->kind == TFS_HF_DEF_INT ? json_integer((json_int_t)d->v)
			  : d->kind == TFS_HF_DEF_BOOL ? json_boolean(d->v != 0)
			  : d->kind == TFS_HF_DEF_NULL ? json_null() : json_real(d->v);
		if (json_object_set_new(*out, d->key, v))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", c->where);
	}
	return 0;
}

/* hparams_vision; hparams_audio (get_audio_config: whisper_config when config.json has one,
 * else audio_config) when the class has an audio encoder and it is an object (a non-empty
 * dict once its config class is made: AutoConfig's to_dict()). */
static int tower_configs(mm_ctx *c, tfs_error *err)
{
	int rc = sub_config(&c->mm.vision, c, json_object_get(c->file, "vision_config"),
			    c->row->vision_defaults, err);
	json_t *ac = json_object_get(c->file, "whisper_config");
	if (!ac)
		ac = json_object_get(c->file, "audio_config");
	if (rc || !c->row->audio_defaults || !json_is_object(ac))
		return rc;
	return sub_config(&c->mm.audio, c, ac, c->row->audio_defaults, err);
}

/* n_embd_text: {**hparams, **hparams["text_config"]}'s hidden_size (or n_embd), hparams being
 * the text model's as the converter completes them when the text class has a row. */
static int text_width(mm_ctx *c, tfs_error *err)
{
	hparams h = { .where = c->where };
	/* load_hparams' rename: InternVL's llm_config is its text_config */
	json_t *file = json_copy(c->file);
	json_t *llm = json_object_get(c->file, "llm_config");
	if (!file || (llm && json_object_set(file, "text_config", llm))) {
		json_decref(file);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", c->where);
	}
	const json_t *root = file;
	json_t *tc = json_object_get(file, "text_config");
	const char *tcls = json_string_value(json_array_get(json_object_get(tc, "architectures"),
							    0));
	h.arch = tfs_hf_arch_find(tcls ? tcls : c->cls);
	if (h.arch && (h.file = json_incref(file)) && tfs_hf_read_hparams(&h, err) == 0)
		root = h.root;
	static const char *const keys[] = { "hidden_size", "n_embd", NULL };
	json_t *v = tfs_hf_find(root, keys, NULL);
	if (root == file && json_is_object(tc) && tfs_hf_find(tc, keys, NULL))
		v = tfs_hf_find(tc, keys, NULL);
	c->n_embd_text = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
	tfs_hf_hparams_free(&h);
	json_decref(file);
	if (c->n_embd_text <= 0)   /* the converter's assert */
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no text hidden_size (the projector's "
				     "width into the text model)", c->where);
	return 0;
}

/* preprocessor_config.json (media_proc_cfg merged to its top), then processor_config.json
 * (image_processor merged to its top) over it; neither: an empty object. */
static int preprocessor(mm_ctx *c, const tfs_hf_files *files, tfs_error *err)
{
	static const char *const names[2][2] = { { "preprocessor_config.json", "media_proc_cfg" },
						 { "processor_config.json", "image_processor" } };
	if (!(c->mm.pre = json_object()))
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	for (int i = 0; i < 2; i++) {
		char where[1024];
		json_t *cfg;
		snprintf(where, sizeof where, "%s%s%s", files->where ? files->where : "",
			 files->where ? "/" : "", names[i][0]);
		int rc = read_json(&cfg, files, names[i][0], where, err);
		if (rc == TFS_E_NOTFOUND)
			continue;
		if (rc)
			return rc;
		json_t *sub = json_object_get(cfg, names[i][1]);
		int bad = json_object_update(c->mm.pre, cfg) ||
			  (json_is_object(sub) && json_object_update(c->mm.pre, sub));
		json_decref(cfg);
		if (bad)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
		if (i == 0 || !c->pre_where[0])
			snprintf(c->pre_where, sizeof c->pre_where, "%s", where);
	}
	if (!c->pre_where[0])
		snprintf(c->pre_where, sizeof c->pre_where, "%s%spreprocessor_config.json",
			 files->where ? files->where : "", files->where ? "/" : "");
	return 0;
}

/* config.json, the class's row, the configs.  TFS_PASSTHROUGH: no projector to show. */
static int load(mm_ctx *c, const tfs_hf_files *files, tfs_error *err)
{
	snprintf(c->where, sizeof c->where, "%s%sconfig.json", files->where ? files->where : "",
		 files->where ? "/" : "");
	int rc = read_json(&c->file, files, "config.json", c->where, err);
	if (rc)   /* (the text model's view says what is wrong with it) */
		return TFS_PASSTHROUGH;
	c->cls = mm_class(c->file);
	c->row = tfs_hf_mmproj_find(c->cls);
	if (!c->row) {
		char list[512];
		json_t *vc = json_object_get(c->file, "vision_config");
		json_t *ac = json_object_get(c->file, "audio_config");
		if (!json_is_object(vc) && !json_is_object(ac))
			return TFS_PASSTHROUGH;   /* a text model */
		tfs_hf_mmproj_list(list, sizeof list);
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: %s has no projector in the GGUF "
				     "view (classes with one: %s)", c->where,
				     c->cls ? c->cls : "(no class)", list);
	}
	c->mm.where = c->where;
	c->mm.pre_where = c->pre_where;
	c->mm.file = c->file;
	c->mm.files = files;
	if ((rc = tower_configs(c, err)) || (rc = text_width(c, err)) ||
	    (rc = preprocessor(c, files, err)))
		return rc;
	/* the tower's block count is MmprojModel.__init__'s, before the class's own changes */
	json_t *nb = tfs_hf_find(c->mm.vision, K_BLOCK, NULL);
	if (!json_is_integer(nb) || json_integer_value(nb) < 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config has no block count "
				     "(num_hidden_layers)", c->where);
	c->n_block = c->row->block_count ? c->row->block_count : (int64_t)json_integer_value(nb);
	return c->row->prepare ? c->row->prepare(&c->mm, err) : 0;
}

static void ctx_free(mm_ctx *c)
{
	json_decref(c->file);
	json_decref(c->mm.vision);
	json_decref(c->mm.audio);
	json_decref(c->mm.pre);
}

/* ==== the tensors ==== */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* name (without its suffix, base bytes) against pattern p ("{bid}": a block number below
 * n_block, written into *bid). */
static bool match(const char *name, size_t base, const char *p, int64_t n_block, long *bid)
{
	const char *at = strstr(p, "{bid}");
	if (!at)
		return strlen(p) == base && !strncmp(name, p, base);
	size_t pre = (size_t)(at - p), post = strlen(at + 5);
	if (base < pre + 1 + post || strncmp(name, p, pre) ||
	    strncmp(name + base - post, at + 5, post))
		return false;
	const char *d = name + pre, *end = name + base - post;
	if (*d == '0' && end - d > 1)
		return false;
	long b = 0;
	for (; d < end; d++) {
		if (*d < '0' || *d > '9' || b > 1000000)
			return false;
		b = b * 10 + (*d - '0');
	}
	*bid = b;
	return b < n_block;
}

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for a SigLIP vision model's own
 * names (after the class's prefix, tfs_hf_mmproj_class.siglip): Gemma 3's, SmolVLM's and
 * LFM2-VL's towers */
static const tfs_hf_mm_name siglip_names[] = {
	{ "embeddings.patch_embedding", "v.patch_embd" },
	{ "embeddings.position_embedding", "v.position_embd" },
	{ "encoder.layers.{bid}.self_attn.q_proj", "v.blk.{bid}.attn_q" },
	{ "encoder.layers.{bid}.self_attn.k_proj", "v.blk.{bid}.attn_k" },
	{ "encoder.layers.{bid}.self_attn.v_proj", "v.blk.{bid}.attn_v" },
	{ "encoder.layers.{bid}.self_attn.out_proj", "v.blk.{bid}.attn_out" },
	{ "encoder.layers.{bid}.layer_norm1", "v.blk.{bid}.ln1" },
	{ "encoder.layers.{bid}.layer_norm2", "v.blk.{bid}.ln2" },
	{ "encoder.layers.{bid}.mlp.fc1", "v.blk.{bid}.ffn_up" },
	{ "encoder.layers.{bid}.mlp.fc2", "v.blk.{bid}.ffn_down" },
	{ "post_layernorm", "v.post_ln" },
};

/* The GGUF name (cap bytes) of name (base bytes without suffix) by the n entries of names,
 * or false. */
static bool map_by(char *gguf, size_t cap, const char *name, size_t base, const char *suffix,
		   const tfs_hf_mm_name *names, size_t n_names, int64_t n_block)
{
	for (size_t i = 0; i < n_names; i++) {
		long bid = -1;
		const tfs_hf_mm_name *m = &names[i];
		if (!match(name, base, m->hf, n_block, &bid))
			continue;
		const char *at = strstr(m->gguf, "{bid}");
		int n = at ? snprintf(gguf, cap, "%.*s%ld%s%s", (int)(at - m->gguf), m->gguf, bid,
				      at + 5, suffix)
			   : snprintf(gguf, cap, "%s%s", m->gguf, suffix);
		return n >= 0 && (size_t)n < cap;
	}
	return false;
}

/* TensorNameMap.get_name(name, try_suffixes=(".weight", ".bias", the class's)): the name
 * itself first, then without each suffix it ends with; gguf (cap bytes), or false. */
static bool map_name(char *gguf, size_t cap, const char *name, const mm_ctx *c)
{
	static const char *const own[] = { "", ".weight", ".bias" };
	const char *const *more = c->row->suffixes;
	const char *tower = c->row->siglip;
	size_t tn = tower ? strlen(tower) : 0;
	for (size_t s = 0; s < 3 || (more && more[s - 3]); s++) {
		const char *suffix = s < 3 ? own[s] : more[s - 3];
		if (!ends_with(name, suffix))
			continue;
		size_t base = strlen(name) - strlen(suffix);
		if (map_by(gguf, cap, name, base, suffix, c->row->names, c->row->n_names,
			   c->n_block))
			return true;
		if (tower && base > tn && !strncmp(name, tower, tn) &&
		    map_by(gguf, cap, name + tn, base - tn, suffix, siglip_names,
			   sizeof siglip_names / sizeof siglip_names[0], c->n_block))
			return true;
	}
	return false;
}

/* The class's filter after MmprojModel's ("language_model." tensors skipped). */
static bool keep(char *out, size_t cap, const char *name, const mm_ctx *c)
{
	return !strstr(name, "language_model.") && c->row->filter(out, cap, name);
}

/* The converter's type for tensor name (filtered) of GGUF name gguf (prepare_tensors). */
static int mm_dtype(const mm_ctx *c, const char *name, const char *gguf, uint32_t n_dims,
		    int64_t ne0, uint32_t ftype)
{
	int dt = c->row->force ? c->row->force(name, gguf, ftype) : -1;
	if (dt < 0 && (strstr(gguf, ".patch_embd.weight") || strstr(gguf, ".patch_merger.weight")))
		dt = ftype == FTYPE_MOSTLY_F16 ? TFS_DT_F16 : TFS_DT_F32;
	if (n_dims <= 1 || ends_with(gguf, "_norm.weight"))
		return TFS_DT_F32;
	if (dt >= 0)
		return dt;
	if (!strcmp(gguf, "v.position_embd.weight") || !strcmp(gguf, "a.position_embd.weight") ||
	    !ends_with(gguf, ".weight"))
		return TFS_DT_F32;
	dt = ftype == FTYPE_ALL_F32 ? TFS_DT_F32 : ftype == FTYPE_MOSTLY_F16 ? TFS_DT_F16
	   : ftype == FTYPE_MOSTLY_Q8_0 ? TFS_DT_Q8_0 : TFS_DT_BF16;
	return dt == TFS_DT_Q8_0 && ne0 % 32 ? TFS_DT_F16 : dt;   /* QuantError: F16 */
}

static int push_tensor(tfs_hf_plan *p, size_t *cap, tfs_hf_tensor **t, tfs_error *err)
{
	if (p->nt == *cap) {
		size_t n = *cap ? 2 * *cap : 32;
		tfs_hf_tensor *nt = realloc(p->t, n * sizeof *nt);
		if (nt)
			p->t = nt;
		uint8_t **ng = realloc(p->gen, n * sizeof *ng);
		if (ng)
			p->gen = ng;
		if (!nt || !ng)
			return tfs_error_set(err, TFS_E_NOMEM, "mmproj: out of memory");
		*cap = n;
	}
	*t = &p->t[p->nt];
	memset(*t, 0, sizeof **t);
	p->gen[p->nt++] = NULL;
	return 0;
}

/* One output tensor of source tensor r (t): GGUF name gguf, the shape and gather of part (NULL:
 * the source's own), name the filtered source name. */
static int add_output(tfs_hf_plan *p, size_t *cap, const mm_ctx *c, const tfs_hf_src_ref *r,
		      const char *name, const char *gguf, const tfs_hf_mm_part *part,
		      tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(p->st, r->idx);
	uint32_t n_dims = part ? part->n_dims : t->n_dims;
	if (t->dtype != TFS_DT_F32 && t->dtype != TFS_DT_F16 && t->dtype != TFS_DT_BF16)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is %s; the projector "
				     "converts F32, F16 and BF16 weights only", r->path, t->name,
				     tfs_dtype(t->dtype) ? tfs_dtype(t->dtype)->name : "unknown");
	if (n_dims > 4)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' has %u dimensions; "
				     "GGUF has at most 4", r->path, t->name, n_dims);
	for (size_t j = 0; j < p->nt; j++)
		if (!strcmp(p->t[j].name, gguf))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is a second '%s'",
					     r->path, t->name, gguf);
	tfs_hf_tensor *o = NULL;
	int rc = push_tensor(p, cap, &o, err);
	if (rc)
		return rc;
	if (!(o->name = strdup(gguf)))
		return tfs_error_set(err, TFS_E_NOMEM, "mmproj: out of memory");
	o->src = (long)r->idx;
	o->n_dims = n_dims;
	memcpy(o->ne, part ? part->ne : t->ne, sizeof o->ne);
	if (part) {
		o->gather = part->gather;
		o->perm_heads = part->perm_heads;
	}
	o->src_dtype = t->dtype;
	o->dtype = mm_dtype(c, name, gguf, o->n_dims, o->ne[0], p->ftype);
	o->plus_one = c->row->plus_one && c->row->plus_one(name);
	o->softplus = part && part->softplus;
	o->recipe = o->dtype == o->src_dtype && !o->plus_one && !o->softplus ? TFS_HF_COPY
										: TFS_HF_CONVERT;
	o->quiet_nans = o->recipe == TFS_HF_COPY && o->dtype == TFS_DT_BF16;
	o->raw = o->recipe == TFS_HF_COPY && !o->gather.kind && !o->perm_heads;
	uint64_t nel = 1;
	for (uint32_t d = 0; d < o->n_dims; d++)
		nel *= (uint64_t)o->ne[d];
	return tfs_dtype_nbytes(&o->nbytes, o->dtype, nel, err);
}

/* Source tensor r as the converter writes it into the projector (modify_tensors: the class's
 * split into parts, or the tensor under its mapped name). */
static int add_source(tfs_hf_plan *p, size_t *cap, const mm_ctx *c, const tfs_hf_src_ref *r,
		      tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(p->st, r->idx);
	char name[512], gguf[256];
	tfs_hf_mm_part parts[TFS_HF_MM_MAX_PARTS];
	size_t n = 0;
	if (!keep(name, sizeof name, t->name, c) || ends_with(name, ".attention.masked_bias") ||
	    ends_with(name, ".attention.bias") || ends_with(name, ".rotary_emb.inv_freq"))
		return 0;
	int rc = c->row->split ? c->row->split(parts, &n, name, t, &c->mm, err) : 0;
	for (size_t k = 0; !rc && k < n; k++) {
		if (parts[k].gguf)
			snprintf(gguf, sizeof gguf, "%.255s", parts[k].name);
		else if (!map_name(gguf, sizeof gguf, parts[k].name, c))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' (as '%s') has no "
					     "GGUF name in the projector of %s (the converter cannot "
					     "map it)", r->path, t->name, parts[k].name, c->cls);
		rc = add_output(p, cap, c, r, name, gguf, &parts[k], err);
	}
	if (rc || n)
		return rc;
	if (!map_name(gguf, sizeof gguf, name, c))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name in the "
				     "projector of %s (the converter cannot map it)", r->path,
				     t->name, c->cls);
	return add_output(p, cap, c, r, name, gguf, NULL, err);
}

/* --outtype auto over the tensors the class keeps (the text model's rule). */
static uint32_t auto_ftype(const tfs_model *st, const mm_ctx *c, const tfs_hf_src_ref *refs, size_t n)
{
	char name[512];
	for (size_t k = 0; k < n; k++) {
		const tfs_tensor *t = tfs_model_tensor(st, refs[k].idx);
		if (t->n_dims < 2 || !keep(name, sizeof name, t->name, c))
			continue;
		if (t->dtype == TFS_DT_BF16)
			return FTYPE_MOSTLY_BF16;
		if (t->dtype == TFS_DT_F16)
			return FTYPE_MOSTLY_F16;
	}
	return FTYPE_MOSTLY_F16;
}

static int mm_tensors(tfs_hf_plan *p, const mm_ctx *c, uint32_t ftype, tfs_error *err)
{
	tfs_hf_src_ref *refs = NULL;
	size_t n = 0, cap = 0;
	int rc = tfs_hf_read_order(&refs, &n, p->st, NULL, err);
	p->ftype = ftype != UINT32_MAX ? ftype : auto_ftype(p->st, c, refs, n);
	for (size_t k = 0; !rc && k < n; k++)
		rc = add_source(p, &cap, c, &refs[k], err);
	if (!rc && p->nt == 0)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: no tensor of the projector of %s",
				   tfs_model_path(p->st), c->cls);
	free(refs);
	return rc;
}

/* ==== the keys ==== */

/* MmprojModel.set_gguf_parameters' audio encoder keys (after the vision encoder's). */
static int audio_keys(tfs_hf_kvs *l, const mm_ctx *c, tfs_error *err)
{
	static const char *const k_embd[] = { "hidden_size", NULL };
	static const char *const k_ff[] = { "intermediate_size", NULL };
	static const char *const k_head[] = { "num_attention_heads", NULL };
	const tfs_hf_mm *mm = &c->mm;
	int rc;
	if ((rc = tfs_hf_kvs_add_bool(l, "clip.has_audio_encoder", true, err)) ||
	    (rc = tfs_hf_kvs_add_u32(l, "clip.audio.projection_dim", (uint32_t)c->n_embd_text,
				     err)) ||
	    (rc = tfs_hf_mm_aparam(l, mm, "audio.embedding_length", k_embd, err)) ||
	    (rc = tfs_hf_mm_aparam(l, mm, "audio.feed_forward_length", k_ff, err)) ||
	    (rc = tfs_hf_mm_aparam(l, mm, "audio.block_count", K_BLOCK, err)))
		return rc;
	return tfs_hf_mm_aparam(l, mm, "audio.attention.head_count", k_head, err);
}

/* MmprojModel.set_gguf_parameters (every row's class has a vision encoder). */
static int base_keys(tfs_hf_kvs *l, const mm_ctx *c, tfs_error *err)
{
	static const char *const k_size[] = { "image_size", NULL };
	static const char *const k_patch[] = { "patch_size", NULL };
	static const char *const k_embd[] = { "hidden_size", "width", "vt_hidden_size", NULL };
	static const char *const k_ff[] = { "intermediate_size", "vt_intermediate_size", NULL };
	static const char *const k_head[] = { "num_attention_heads", "num_heads", "heads",
		"vt_num_attention_heads", NULL };
	const tfs_hf_mm *mm = &c->mm;
	int rc;
	if ((rc = tfs_hf_kvs_add_u32(l, "general.file_type", mm->ftype, err)) ||
	    (rc = tfs_hf_kvs_add_bool(l, "clip.has_vision_encoder", true, err)) ||
	    (rc = tfs_hf_kvs_add_u32(l, "clip.vision.projection_dim", (uint32_t)c->n_embd_text,
				     err)) ||
	    (rc = tfs_hf_mm_vparam(l, mm, "vision.image_size", k_size, err)) ||
	    (rc = tfs_hf_mm_vparam(l, mm, "vision.patch_size", k_patch, err)) ||
	    (rc = tfs_hf_mm_vparam(l, mm, "vision.embedding_length", k_embd, err)) ||
	    (rc = tfs_hf_mm_vparam(l, mm, "vision.feed_forward_length", k_ff, err)) ||
	    (rc = tfs_hf_mm_vparam(l, mm, "vision.block_count", K_BLOCK, err)) ||
	    (rc = tfs_hf_mm_vparam(l, mm, "vision.attention.head_count", k_head, err)))
		return rc;
	if ((rc = tfs_hf_mm_numbers(l, mm, "clip.vision.image_mean",
				    json_object_get(mm->pre, "image_mean"), "image_mean", err)))
		return rc;
	if ((rc = tfs_hf_mm_numbers(l, mm, "clip.vision.image_std",
				    json_object_get(mm->pre, "image_std"), "image_std", err)))
		return rc;
	return mm->audio ? audio_keys(l, c, err) : 0;
}

static int mm_keys(tfs_hf_plan *p, const mm_ctx *c, const tfs_hf_files *files,
		   const tfs_hf_opts *o, tfs_error *err)
{
	tfs_hf_kvs *l = &p->kvs;
	char label[32];
	uint64_t np = tfs_hf_plan_n_params(p);
	tfs_hf_size_label(label, np);
	int rc;
	if ((rc = tfs_hf_kvs_add_str(l, "general.architecture", "clip", err)) ||
	    (rc = tfs_hf_kvs_add_str(l, "general.type", "mmproj", err)) ||
	    (rc = tfs_hf_meta_keys_label(l, files, c->file, o->dir_name ? o->dir_name : "model",
					 (int64_t)np, label, err)) ||
	    (rc = base_keys(l, c, err)) || (rc = c->row->keys(l, &c->mm, err)))
		return rc;
	return tfs_hf_kvs_add_u32(l, "general.quantization_version", GGML_QUANT_VERSION, err);
}

int tfs_hf_mmproj_open(tfs_hf_plan **out, const tfs_hf_files *files, const tfs_model *st,
		       const tfs_hf_opts *o, tfs_error *err)
{
	static const tfs_hf_opts defaults = { 0 };
	mm_ctx c;
	memset(&c, 0, sizeof c);
	tfs_hf_plan *p = NULL;
	*out = NULL;
	if (!o)
		o = &defaults;
	int rc = load(&c, files, err);
	if (!rc && !(p = calloc(1, sizeof *p)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "mmproj: out of memory");
	if (!rc) {
		p->st = p->base = st;
		p->arch = "clip";
		rc = mm_tensors(p, &c, tfs_hf_outtype_ftype(o->outtype), err);
		c.mm.ftype = p->ftype;
	}
	if (!rc && !(rc = mm_keys(p, &c, files, o, err))) {
		tfs_hf_plan_layout(p);
		*out = p;   /* the caller's from here */
		p = NULL;
	}
	ctx_free(&c);
	tfs_hf_plan_free(p);
	return rc;
}
