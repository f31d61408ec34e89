/*
 * hf_export_kv.c - the GGUF keys of the model a Hugging Face export reads (hf_export.h's
 * tfs_hf_xkv_*): found by name, scalars as numbers, strings and arrays as their bytes.  Its
 * own file so that the export's tensors (hf_export.c) and its JSON files (hf_export_json.c)
 * both use it without calling each other.
 */
#include "hf_export.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ==== the model's keys ==== */

static const tfs_kv *find_kv(const tfs_hf_export *x, const char *name)
{
	char full[256];
	if (name[0] == '.') {
		snprintf(full, sizeof full, "%s%s", x->arch, name);
		name = full;
	}
	long i = tfs_model_find_kv(x->m, name);
	return i < 0 ? NULL : tfs_model_kv(x->m, (size_t)i);
}

static bool scalar_num(uint32_t type, const uint8_t *d, uint64_t len, double *v)
{
	static const uint8_t size[TFS_GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
	if (type >= TFS_GGUF_TYPE_COUNT || !size[type] || len < size[type])
		return false;
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
		float f; uint64_t u64; int64_t i64; double g; } u;
	memcpy(&u, d, size[type]);
	switch (type) {
	case TFS_GGUF_UINT8: *v = u.u8; break;
	case TFS_GGUF_INT8: *v = u.i8; break;
	case TFS_GGUF_UINT16: *v = u.u16; break;
	case TFS_GGUF_INT16: *v = u.i16; break;
	case TFS_GGUF_UINT32: *v = u.u32; break;
	case TFS_GGUF_INT32: *v = u.i32; break;
	case TFS_GGUF_FLOAT32: *v = u.f; break;
	case TFS_GGUF_BOOL: *v = u.u8 != 0; break;
	case TFS_GGUF_UINT64: *v = (double)u.u64; break;
	case TFS_GGUF_INT64: *v = (double)u.i64; break;
	default: *v = u.g; break;
	}
	return true;
}

bool tfs_hf_xkv_num(const tfs_hf_export *x, const char *name, double *v)
{
	const tfs_kv *kv = find_kv(x, name);
	return kv && !kv->deleted && scalar_num(kv->type, kv->data, kv->len, v);
}

bool tfs_hf_xkv_f32(const tfs_hf_export *x, const char *name, float *v)
{
	const tfs_kv *kv = find_kv(x, name);
	if (!kv || kv->deleted || kv->type != TFS_GGUF_FLOAT32 || kv->len < 4)
		return false;
	memcpy(v, kv->data, 4);
	return true;
}

const char *tfs_hf_xkv_str(const tfs_hf_export *x, const char *name, size_t *len)
{
	const tfs_kv *kv = find_kv(x, name);
	uint64_t n;
	if (!kv || kv->deleted || kv->type != TFS_GGUF_STRING || kv->len < 8)
		return NULL;
	memcpy(&n, kv->data, 8);
	if (n > kv->len - 8)
		return NULL;
	*len = (size_t)n;
	return (const char *)kv->data + 8;
}

bool tfs_hf_xkv_arr(const tfs_hf_export *x, const char *name, uint32_t *type, uint64_t *n,
		    const uint8_t **data, uint64_t *len)
{
	const tfs_kv *kv = find_kv(x, name);
	if (!kv || kv->deleted || kv->type != TFS_GGUF_ARRAY || kv->len < 12)
		return false;
	memcpy(type, kv->data, 4);
	memcpy(n, kv->data + 4, 8);
	*data = kv->data + 12;
	*len = kv->len - 12;
	return true;
}
