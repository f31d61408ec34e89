/*
 * gc.c - dropping ops that a later one made dead, with their data files: rewriting a big
 * tensor again and again does not pile copies up in the staging directory.
 */
#include "staging_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether name is one of names[0..n). */
static bool name_in(const char *name, const char *const *names, size_t n)
{
	for (size_t k = 0; name && k < n; k++)
		if (!strcmp(name, names[k]))
			return true;
	return false;
}

/* Whether op (of kind k), an earlier op than a set of names (of kind), can no longer be
 * seen: a set of one of them, or (tensors) a set_tensors all of whose tensors are among
 * them. */
static bool op_superseded(const json_t *op, tfs_op_kind k, tfs_op_kind kind,
			  const char *const *names, size_t n_names)
{
	bool hit = false;

	if (k == kind) {
		char *nm = tfs_journal_get_name(op, tfs_op_name_member(kind));
		hit = name_in(nm, names, n_names);
		free(nm);
	} else if (k == TFS_OP_SET_TENSORS && kind == TFS_OP_SET_TENSOR) {
		const json_t *items = json_object_get(op, "items");
		hit = json_array_size(items) > 0;
		for (size_t j = 0; hit && j < json_array_size(items); j++) {
			char *nm = tfs_journal_get_name(json_array_get(items, j), "name");
			hit = name_in(nm, names, n_names);
			free(nm);
		}
	}
	return hit;
}

/* Removes the data files of a dead op (every item's, for set_tensors). */
static void unlink_data(tfs_staging *s, const json_t *op)
{
	const json_t *items = json_object_get(op, "items");
	char *path = tfs_data_path(s, op);

	if (path)
		unlink(path);
	free(path);
	for (size_t j = 0; j < json_array_size(items); j++) {
		path = tfs_data_path(s, json_array_get(items, j));
		if (path)
			unlink(path);
		free(path);
	}
}

/* Marks the earlier ops a set of names of kind made dead (back to the last op that moves
 * names); returns how many. */
static size_t mark_dead(const json_t *all, bool *dead, tfs_op_kind kind,
			const char *const *names, size_t n_names)
{
	size_t n = json_array_size(all), n_dead = 0;
	for (size_t i = n - 1; i-- > 0;) {
		const json_t *op = json_array_get(all, i);
		const char *name = json_string_value(json_object_get(op, "op"));
		tfs_op_kind k = name ? tfs_op_kind_of(name) : TFS_OP_COUNT;
		if (k == TFS_OP_COUNT || tfs_op_moves_names(k))
			break;
		if (op_superseded(op, k, kind, names, n_names)) {
			dead[i] = true;
			n_dead++;
		}
	}
	return n_dead;
}

/*
 * Earlier sets of the same names with no rename or delete in between are dead (their bytes
 * can no longer be seen).  They leave the journal, durably, and then their data files are
 * removed.  Best effort: on any failure the journal stays as it was, still valid.
 */
void tfs_journal_drop_superseded(tfs_staging *s, tfs_op_kind kind, const char *const *names,
				 size_t n_names)
{
	json_t *all = tfs_journal_ops(s);
	size_t n = json_array_size(all);
	bool *dead = n > 1 ? calloc(n, sizeof(bool)) : NULL;
	if (!dead)
		return;
	json_t *keep = mark_dead(all, dead, kind, names, n_names) ? json_array() : NULL;
	for (size_t i = 0; keep && i < n; i++)
		if (!dead[i] && json_array_append(keep, json_array_get(all, i))) {
			json_decref(keep);
			keep = NULL;
		}
	if (!keep) {
		free(dead);
		return;
	}
	json_incref(all);
	tfs_error e;
	if (json_object_set_new(s->j, "ops", keep) || tfs_journal_write(s, &e)) {
		json_object_set_new(s->j, "ops", all); /* as it was (the file never changed) */
		free(dead);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (dead[i])
			unlink_data(s, json_array_get(all, i));
	json_decref(all);
	free(dead);
}
