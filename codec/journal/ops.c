/*
 * ops.c - the journal's ops as one table: each kind's name, its members (how it is
 * encoded in journal.json, in order) and how it is applied to a model.
 *
 * An op is a tfs_op in memory and a JSON object in the journal:
 *   {"op": "<name>", <members...>}
 * Members: "key", "name", "to" (the item's name), "from" (the name it had), "type" (a
 * value's type), "dtype" and "ne" (a tensor's type and shape), "data" ("data/<n>", the
 * staged bytes), "replace" (true, or absent), "items" (set_tensors: one {name, dtype, ne,
 * data} per tensor).  A name that is not valid UTF-8 is stored as "<member>_hex".
 * Recording (staging.c) encodes a tfs_op and applies it; replay decodes it and applies it
 * the same way.  Adding an op = one row of the table and its apply function.
 */
#include "staging_impl.h"
#include "hex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== names ==== */

int tfs_journal_put_name(json_t *o, const char *field, const char *name)
{
	size_t n = strlen(name);
	if (tfs_utf8_valid(name, n))
		return json_object_set_new(o, field, json_string(name));
	char *hex = malloc(2 * n + 1), key[64];
	if (!hex)
		return -1;
	tfs_hex(hex, name, n);
	snprintf(key, sizeof(key), "%s_hex", field);
	int rc = json_object_set_new(o, key, json_string(hex));
	free(hex);
	return rc;
}

char *tfs_journal_get_name(const json_t *o, const char *field)
{
	const char *s = json_string_value(json_object_get(o, field));
	if (s)
		return strdup(s);
	char key[64];
	snprintf(key, sizeof(key), "%s_hex", field);
	const char *h = json_string_value(json_object_get(o, key));
	size_t n = h ? strlen(h) : 1;
	if (!h || n % 2)
		return NULL;
	char *out = malloc(n / 2 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1 || v == 0) {
			free(out);
			return NULL;
		}
		out[i] = (char)v;
	}
	out[n / 2] = '\0';
	return out;
}

/* ==== applying ==== */

/* A rename op applied to the model: with replace, the target goes first. */
static int rename_apply(tfs_model *m, bool kv, const char *from, const char *to, bool replace,
			tfs_error *err)
{
	int rc = 0;
	if (replace && (kv ? tfs_model_find_kv(m, to) : tfs_model_find_tensor(m, to)) >= 0)
		rc = kv ? tfs_model_del_kv(m, to, err) : tfs_model_del_tensor(m, to, err);
	if (!rc)
		rc = kv ? tfs_model_rename_kv(m, from, to, err) : tfs_model_rename_tensor(m, from, to, err);
	return rc;
}

/* set_kv (from NULL) or replace_kv: key takes the value, from (if any) goes. */
static int kv_apply(tfs_model *m, const char *from, const char *key, uint32_t type, uint8_t *data,
		    uint64_t len, tfs_error *err)
{
	if (from && (tfs_model_find_kv(m, from) < 0 || tfs_model_find_kv(m, key) < 0)) {
		free(data);
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no key '%s'", m->path,
				     tfs_model_find_kv(m, from) < 0 ? from : key);
	}
	int rc = tfs_model_set_kv(m, key, type, data, len, err);
	if (!rc && from && strcmp(from, key))
		rc = tfs_model_del_kv(m, from, err); /* cannot fail: from exists */
	return rc;
}

static int apply_kv(tfs_model *m, tfs_op *op, tfs_error *err)
{
	uint8_t *buf = op->value;
	uint64_t len = op->len;
	op->value = NULL;
	if (!buf) {
		int rc = tfs_read_small_file(op->data, TFS_MAX_KV_PAYLOAD, &buf, &len, err);
		if (rc)
			return rc;
	}
	return kv_apply(m, op->from, op->name, op->type, buf, len, err);
}

static int apply_del_kv(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return tfs_model_del_kv(m, op->name, err);
}

static int apply_rename_kv(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return rename_apply(m, true, op->from, op->name, op->replace, err);
}

static int apply_set_tensor(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return tfs_model_set_tensor_file(m, op->name, op->dtype, op->n_dims, op->ne, op->data, err);
}

static int apply_set_tensors(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return tfs_model_set_tensor_files(m, op->files, op->n_files, err);
}

static int apply_replace_tensor(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return tfs_model_replace_tensor(m, op->from, op->name, op->dtype, op->n_dims, op->ne, err);
}

static int apply_del_tensor(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return tfs_model_del_tensor(m, op->name, err);
}

static int apply_rename_tensor(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return rename_apply(m, false, op->from, op->name, op->replace, err);
}

static int apply_set_extra(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return tfs_model_set_extra_file(m, op->name, op->data, err);
}

static int apply_replace_extra(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return tfs_model_replace_extra(m, op->from, op->name, err);
}

static int apply_del_extra(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return tfs_model_del_extra(m, op->name, err);
}

/* ==== the table ==== */

typedef enum {
	M_END, M_KEY, M_NAME, M_TO, M_FROM, M_TYPE, M_DTYPE, M_NE, M_DATA, M_REPLACE, M_ITEMS,
	M_COUNT
} member;

static const char *const member_names[M_COUNT] = {
	[M_KEY] = "key", [M_NAME] = "name", [M_TO] = "to", [M_FROM] = "from", [M_TYPE] = "type",
	[M_DTYPE] = "dtype", [M_NE] = "ne", [M_DATA] = "data", [M_REPLACE] = "replace",
	[M_ITEMS] = "items",
};

typedef struct {
	const char *name;        /* the journal's "op" */
	member members[5];       /* after "op", in this order (M_END-terminated) */
	bool moves_names;        /* a rename, replace or delete (see tfs_op_moves_names) */
	int (*apply)(tfs_model *m, tfs_op *op, tfs_error *err);
} op_type;

static const op_type op_types[] = {
	[TFS_OP_SET_KV] =         { "set_kv", { M_KEY, M_TYPE, M_DATA }, false, apply_kv },
	[TFS_OP_REPLACE_KV] =     { "replace_kv", { M_FROM, M_TO, M_TYPE, M_DATA }, true,
				    apply_kv },
	[TFS_OP_DEL_KV] =         { "del_kv", { M_NAME }, true, apply_del_kv },
	[TFS_OP_RENAME_KV] =      { "rename_kv", { M_FROM, M_TO, M_REPLACE }, true,
				    apply_rename_kv },
	[TFS_OP_SET_TENSOR] =     { "set_tensor", { M_NAME, M_DTYPE, M_NE, M_DATA }, false,
				    apply_set_tensor },
	[TFS_OP_SET_TENSORS] =    { "set_tensors", { M_ITEMS }, false, apply_set_tensors },
	[TFS_OP_REPLACE_TENSOR] = { "replace_tensor", { M_FROM, M_TO, M_NE, M_DTYPE }, true,
				    apply_replace_tensor },
	[TFS_OP_DEL_TENSOR] =     { "del_tensor", { M_NAME }, true, apply_del_tensor },
	[TFS_OP_RENAME_TENSOR] =  { "rename_tensor", { M_FROM, M_TO, M_REPLACE }, true,
				    apply_rename_tensor },
	[TFS_OP_SET_EXTRA] =      { "set_extra", { M_NAME, M_DATA }, false, apply_set_extra },
	[TFS_OP_REPLACE_EXTRA] =  { "replace_extra", { M_FROM, M_TO }, true, apply_replace_extra },
	[TFS_OP_DEL_EXTRA] =      { "del_extra", { M_NAME }, true, apply_del_extra },
};
_Static_assert(sizeof(op_types) / sizeof(op_types[0]) == TFS_OP_COUNT, "one row per op kind");

/* The members of each of set_tensors' items. */
static const member item_members[] = { M_NAME, M_DTYPE, M_NE, M_DATA, M_END };

tfs_op_kind tfs_op_kind_of(const char *name)
{
	for (int k = 0; k < TFS_OP_COUNT; k++)
		if (!strcmp(op_types[k].name, name))
			return (tfs_op_kind)k;
	return TFS_OP_COUNT;
}

bool tfs_op_moves_names(tfs_op_kind kind) { return op_types[kind].moves_names; }

const char *tfs_op_name_member(tfs_op_kind kind)
{
	return member_names[op_types[kind].members[0]];
}

int tfs_op_apply(tfs_model *m, tfs_op *op, tfs_error *err)
{
	return op_types[op->kind].apply(m, op, err);
}

/* ==== encoding ==== */

/* A JSON array of the first n_dims of ne, or NULL. */
static json_t *ne_array(uint32_t n_dims, const int64_t *ne)
{
	json_t *jne = json_array();
	for (uint32_t k = 0; jne && k < n_dims; k++)
		if (json_array_append_new(jne, json_integer(ne[k]))) {
			json_decref(jne);
			return NULL;
		}
	return jne;
}

static int encode_items(json_t *o, const tfs_staging *s, const tfs_op *op);

/* Adds member m of op to o; it (the op's own, or one of set_tensors' items) holds the
 * item's name, dtype, shape and data.  Nonzero: out of memory. */
static int encode_member(json_t *o, member m, const tfs_staging *s, const tfs_op *op,
			 const tfs_tensor_file *it)
{
	switch (m) {
	case M_KEY: case M_NAME: case M_TO:
		return tfs_journal_put_name(o, member_names[m], it->name);
	case M_FROM:
		return tfs_journal_put_name(o, "from", op->from);
	case M_TYPE:
		return json_object_set_new(o, "type", json_integer(op->type));
	case M_DTYPE:
		return json_object_set_new(o, "dtype", json_integer(it->dtype));
	case M_NE:
		return json_object_set_new(o, "ne", ne_array(it->n_dims, it->ne));
	case M_DATA:
		return json_object_set_new(o, "data", json_string(tfs_data_rel(s, it->path)));
	case M_REPLACE:
		return op->replace ? json_object_set_new(o, "replace", json_true()) : 0;
	case M_ITEMS:
		return encode_items(o, s, op);
	default:
		return -1;
	}
}

static int encode_members(json_t *o, const member *ms, const tfs_staging *s, const tfs_op *op,
			  const tfs_tensor_file *it)
{
	for (; *ms != M_END; ms++)
		if (encode_member(o, *ms, s, op, it))
			return -1;
	return 0;
}

static int encode_items(json_t *o, const tfs_staging *s, const tfs_op *op)
{
	json_t *items = json_array();
	if (!items || json_object_set_new(o, "items", items))
		return -1;
	for (size_t k = 0; k < op->n_files; k++) {
		json_t *it = json_object();
		if (!it || json_array_append_new(items, it) ||
		    encode_members(it, item_members, s, op, &op->files[k]))
			return -1;
	}
	return 0;
}

json_t *tfs_op_encode(const tfs_staging *s, const tfs_op *op)
{
	const tfs_tensor_file own = { op->name, op->dtype, op->n_dims, op->ne, op->data };
	json_t *o = json_pack("{s:s}", "op", op_types[op->kind].name);
	if (o && encode_members(o, op_types[op->kind].members, s, op, &own)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* ==== replay ==== */

/* An op read back from the journal, and the memory its members point to. */
typedef struct {
	tfs_op op;
	char *from;
	char *names[TFS_MAX_TENSOR_FILES], *paths[TFS_MAX_TENSOR_FILES];
	int64_t ne[TFS_MAX_TENSOR_FILES][TFS_MAX_DIMS];
	tfs_tensor_file files[TFS_MAX_TENSOR_FILES];
} decoded_op;

static int decode_items(decoded_op *d, const tfs_staging *s, const json_t *o);

/* Reads member m of o (the op, or its item k) into d; -1: missing or damaged. */
static int decode_member(decoded_op *d, member m, const tfs_staging *s, const json_t *o,
			 size_t k)
{
	const json_t *v = json_object_get(o, member_names[m]);
	switch (m) {
	case M_KEY: case M_NAME: case M_TO:
		return (d->names[k] = tfs_journal_get_name(o, member_names[m])) ? 0 : -1;
	case M_FROM:
		return (d->from = tfs_journal_get_name(o, "from")) ? 0 : -1;
	case M_TYPE:
		d->op.type = (uint32_t)json_integer_value(v);
		return 0;
	case M_DTYPE:
		d->files[k].dtype = (int)json_integer_value(v);
		return 0;
	case M_NE:
		if (json_array_size(v) > TFS_MAX_DIMS)
			return -1;
		d->files[k].n_dims = (uint32_t)json_array_size(v);
		for (size_t i = 0; i < json_array_size(v); i++)
			d->ne[k][i] = json_integer_value(json_array_get(v, i));
		return 0;
	case M_DATA:
		return (d->paths[k] = tfs_data_path(s, o)) ? 0 : -1;
	case M_REPLACE:
		d->op.replace = json_is_true(v);
		return 0;
	case M_ITEMS:
		return decode_items(d, s, o);
	default:
		return -1;
	}
}

static int decode_members(decoded_op *d, const member *ms, const tfs_staging *s,
			  const json_t *o, size_t k)
{
	for (; *ms != M_END; ms++)
		if (decode_member(d, *ms, s, o, k))
			return -1;
	d->files[k].name = d->names[k];
	d->files[k].ne = d->ne[k];
	d->files[k].path = d->paths[k];
	return 0;
}

static int decode_items(decoded_op *d, const tfs_staging *s, const json_t *o)
{
	const json_t *items = json_object_get(o, "items");
	size_t n = json_array_size(items);
	if (n == 0 || n > TFS_MAX_TENSOR_FILES)
		return -1;
	for (size_t k = 0; k < n; k++)
		if (decode_members(d, item_members, s, json_array_get(items, k), k))
			return -1;
	d->op.files = d->files;
	d->op.n_files = n;
	return 0;
}

/* Decodes journal entry o of kind into d (its op refers to d's memory); -1: damaged. */
static int decode(decoded_op *d, tfs_op_kind kind, const tfs_staging *s, const json_t *o)
{
	memset(d, 0, sizeof(*d));
	d->op.kind = kind;
	if (decode_members(d, op_types[kind].members, s, o, 0))
		return -1;
	d->op.name = d->names[0];
	d->op.from = d->from;
	d->op.dtype = d->files[0].dtype;
	d->op.n_dims = d->files[0].n_dims;
	d->op.ne = d->ne[0];
	d->op.data = d->paths[0];
	return 0;
}

static void decoded_free(decoded_op *d)
{
	free(d->from);
	for (size_t k = 0; k < TFS_MAX_TENSOR_FILES; k++) {
		free(d->names[k]);
		free(d->paths[k]);
	}
}

static int replay_op(tfs_staging *s, tfs_model *m, const json_t *o, tfs_error *err)
{
	const char *name = json_string_value(json_object_get(o, "op"));
	if (!name)
		return tfs_error_set(err, TFS_E_FORMAT, "op without a kind");
	tfs_op_kind kind = tfs_op_kind_of(name);
	if (kind == TFS_OP_COUNT)
		return tfs_error_set(err, TFS_E_FORMAT, "unknown op '%s'", name);
	decoded_op d;
	int rc = decode(&d, kind, s, o) ? tfs_error_set(err, TFS_E_FORMAT, "damaged %s op", name)
					: tfs_op_apply(m, &d.op, err);
	decoded_free(&d);
	return rc;
}

int tfs_staging_replay(tfs_staging *s, tfs_model *m, tfs_error *err)
{
	bool rolled;
	int rc = tfs_recover(s, &rolled, err);
	if (rc)
		return rc;
	if (rolled)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: an interrupted repack was finished; open the model again",
				     s->dir);
	json_t *o = tfs_journal_ops(s);
	for (size_t i = 0; i < json_array_size(o); i++) {
		tfs_error e = { 0 };
		if ((rc = replay_op(s, m, json_array_get(o, i), &e)))
			return tfs_error_set(err, rc, "%s: replaying staged change %zu: %s", s->dir,
					     i + 1, e.msg);
	}
	return 0;
}
