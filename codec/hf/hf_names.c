/*
 * hf_names.c - a Hugging Face tensor name as gguf-py's TensorNameMap maps it for a row
 * (hf_names.h).
 */
#include "hf_names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tfs_hf_index_of(const char *name, const char *prefix, unsigned long *n, const char **rest)
{
	size_t pl = strlen(prefix);
	if (strncmp(name, prefix, pl))
		return false;
	const char *p = name + pl;
	char *end;
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
		return false;
	errno = 0;
	unsigned long v = strtoul(p, &end, 10);
	if (errno || *end != '.')
		return false;
	*n = v;
	*rest = end + 1;
	return true;
}

/* Maps a HF tensor name to its GGUF name (gguf_out) as TensorNameMap does for the row's
 * architecture; *m gets the table entry, *bid the block (-1 for a global tensor).
 * false when the converter has no name for it. */
bool tfs_hf_map_name(char *gguf_out, size_t cap, const char *name, const tfs_hf_arch *row,
		     int64_t n_layer, const tfs_hf_name **m, long *bid)
{
	const char *suffix = NULL;
	size_t n = strlen(name);
	if (n > 7 && strcmp(name + n - 7, ".weight") == 0)
		suffix = ".weight";
	else if (n > 5 && strcmp(name + n - 5, ".bias") == 0)
		suffix = ".bias";
	else
		suffix = "";   /* a parameter: Gemma 4's router scales, Qwen3.5's A_log */
	size_t base = n - strlen(suffix);
	*bid = -1;
	for (size_t i = 0; i < row->n_globals; i++) {
		const tfs_hf_name *g = &row->globals[i];
		if (strlen(g->hf) == base && !strncmp(name, g->hf, base)) {
			*m = g;
			snprintf(gguf_out, cap, "%s%s", g->gguf, suffix);
			return true;
		}
	}
	unsigned long b;
	const char *rest;
	if (!tfs_hf_index_of(name, "model.layers.", &b, &rest) || n_layer < 0 ||
	    b >= (uint64_t)n_layer)
		return false;
	size_t rlen = (size_t)(name + base - rest);
	for (size_t i = 0; i < row->n_blocks; i++) {
		const tfs_hf_name *k = &row->blocks[i];
		if (strlen(k->hf) == rlen && !strncmp(rest, k->hf, rlen)) {
			*m = k;
			*bid = (long)b;
			snprintf(gguf_out, cap, "blk.%lu.%s%s", b, k->gguf, suffix);
			return true;
		}
	}
	return false;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);
	return n >= k && strcmp(s + n - k, tail) == 0;
}

bool tfs_hf_named_as_weight(const tfs_hf_arch *row, const char *name)
{
	if (!(row->flags & TFS_HF_ARCH_SCALAR_WEIGHT))
		return false;
	/* (the experts' quantization scales of a pre-quantized checkpoint are not) */
	return ends_with(name, "layer_scalar") ||
	       (strstr(name, ".experts.") && !ends_with(name, ".weight") &&
		!ends_with(name, ".weight_scale") && !ends_with(name, ".weight_scale_2") &&
		!ends_with(name, ".input_scale"));
}

void tfs_hf_replace(char *out, size_t cap, const char *s, const char *from, const char *to)
{
	size_t k = 0, nf = strlen(from), nt = strlen(to);
	if (!cap)
		return;
	while (*s && k + 1 < cap) {
		if (nf && !strncmp(s, from, nf) && k + nt < cap) {
			memcpy(out + k, to, nt);
			k += nt, s += nf;
			continue;
		}
		out[k++] = *s++;
	}
	out[k] = 0;
}

bool tfs_hf_prepend(char *name, size_t cap, const char *prefix)
{
	size_t n = strlen(name), np = strlen(prefix);
	if (n + np + 1 > cap)
		return false;
	for (size_t k = n + 1; k-- > 0;)   /* a loop: gcc -O2 with sanitizers warns on memmove */
		name[k + np] = name[k];
	memcpy(name, prefix, np);
	return true;
}
