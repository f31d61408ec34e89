/*
 * hf_mmproj_parts.c - the splits the projector rows share (hf_mmproj.h): a fused qkv in
 * three row ranges, each a gather of the source's rows, nothing copied.
 */
#include "hf_mmproj.h"

#include <string.h>

int tfs_hf_mm_split_qkv(tfs_hf_mm_part *parts, size_t *n, const char *name,
			const tfs_tensor *t, const tfs_hf_mm *mm, const char *from,
			const char *const to[3], tfs_error *err)
{
	uint32_t d = t->n_dims;
	int64_t c3 = d ? t->ne[d - 1] : 0;
	*n = 0;
	if (d < 1 || d > 2 || c3 % 3)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: '%s' is not 3 equal parts (the "
				     "converter asserts it)", mm->where, name);
	for (int k = 0; k < 3; k++) {
		tfs_hf_mm_part *p = &parts[k];
		memset(p, 0, sizeof *p);
		tfs_hf_replace(p->name, sizeof p->name, name, from, to[k]);
		p->n_dims = d;
		memcpy(p->ne, t->ne, sizeof p->ne);
		p->ne[d - 1] = c3 / 3;
		p->gather = (tfs_hf_gather){ TFS_HF_GATHER_SEGS, (uint64_t)(k * (c3 / 3)), 1,
					     (uint64_t)c3, 0, { (uint64_t)(c3 / 3), 0, 0 } };
	}
	*n = 3;
	return 0;
}
