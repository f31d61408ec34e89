/* opts.c - the options by name of tfs_open_opts (base.h): kept, never read, by base. */
#include "base.h"

#include <string.h>

const char *tfs_open_opt(const tfs_open_opts *o, const char *name)
{
	for (size_t i = 0; o && name && i < o->n_named; i++)
		if (!strcmp(o->named[i].name, name))
			return o->named[i].value;
	return NULL;
}

int tfs_open_opt_set(tfs_open_opts *o, const char *name, const char *value)
{
	size_t i = 0;
	while (i < o->n_named && strcmp(o->named[i].name, name))
		i++;
	if (i < o->n_named && !value) {
		memmove(&o->named[i], &o->named[i + 1], (o->n_named - i - 1) * sizeof(o->named[0]));
		o->n_named--;
		return 0;
	}
	if (!value)
		return 0;
	if (i == TFS_NAMED_OPTS_MAX)
		return TFS_E_INVALID;
	o->named[i] = (tfs_named_opt){ name, value };
	if (i == o->n_named)
		o->n_named++;
	return 0;
}
