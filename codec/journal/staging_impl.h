/*
 * staging_impl.h - the staging journal's internals (private to codec/journal/).
 *
 * The files of the journal, bottom-up (each calls only those above it in this list):
 *   data.c      the staging directory's files: data/<n> (staged bytes), small file helpers
 *   journal.c   journal.json (load, write, empty), the lock, the source it is bound to,
 *               appending an op
 *   recovery.c  the crash protocol: a repack's records, and recovery after a crash
 *   view_record.c  the view the changes apply to (quantize=, imatrix=, outtype=, a repo's
 *               GGUF view): recorded with the first change, checked or taken later
 *   ops.c       the ops as a table {name, members, apply}: encoding, replay
 *   gc.c        earlier ops a new one made dead (their data files go)
 *   staging.c   the public tfs_staging_* functions: open, and every change (record, apply)
 *   session.c   recover -> open -> staging -> replay -> repack -> close, in one handle
 */
#ifndef TFS_STAGING_IMPL_H
#define TFS_STAGING_IMPL_H

#include "model_impl.h"
#include "commit.h"
#include "staging.h"

#include <jansson.h>

#define TFS_JOURNAL "journal.json"
#define TFS_JOURNAL_TMP "journal.json.tmp"
#define TFS_JOURNAL_VERSION 1
/* The largest value a set_kv may stage. */
#define TFS_MAX_KV_PAYLOAD (1ull << 32)

struct tfs_staging {
	char *dir;
	char *data_dir;
	int lock_fd;
	json_t *j;            /* the journal document */
	uint64_t next_data;   /* next data/<n> */
	/* the source the journal applies to */
	char *src_path;
	uint64_t src_size;
	int64_t src_mtime_sec, src_mtime_nsec;
	char *output;
	json_t *view;         /* the session's view, recorded with the first change (or NULL) */
};

/* ==== data.c: files ==== */

/* "a/b" (allocated), or NULL. */
char *tfs_path_join(const char *a, const char *b);
int tfs_nomem(tfs_error *err);
/* Writes the whole file at path (created or truncated) and fsyncs it. */
int tfs_write_whole_file(const char *path, const void *p, size_t n, tfs_error *err);
/* Highest n of data/<n> + 1, into s->next_data. */
int tfs_data_scan(tfs_staging *s, tfs_error *err);
/* Removes every file under data/ (after the journal no longer names them). */
int tfs_data_clear(tfs_staging *s, tfs_error *err);
/* "data/<n>" for a path tfs_staging_new_data returned (borrowed from path), or NULL. */
const char *tfs_data_rel(const tfs_staging *s, const char *path);
/* The absolute path of an op's "data" member, which must name a file under data/; NULL
 * when it does not (or out of memory). */
char *tfs_data_path(const tfs_staging *s, const json_t *op);
/* Makes a staged data file durable: its bytes and its directory entry. */
int tfs_data_sync(tfs_staging *s, const char *path, tfs_error *err);

/* ==== journal.c: journal.json and its directory ==== */

/* The journal's "ops" array (borrowed). */
json_t *tfs_journal_ops(const tfs_staging *s);
/* The integer member k of o, as unsigned. */
uint64_t tfs_journal_num(const json_t *o, const char *k);
/* Replaces journal.json with s->j (temporary, fsync, rename, fsync of the directory). */
int tfs_journal_write(tfs_staging *s, tfs_error *err);
/* Empties the staging directory: the journal goes first (that is the commit), then data/. */
int tfs_journal_clear(tfs_staging *s, tfs_error *err);
/* Creates and locks the directory and loads its journal (without looking at any source). */
int tfs_journal_lock(tfs_staging **out, const char *dir, tfs_error *err);
/* Ties s to the model m was opened from: the journal's source must be that file, unchanged,
 * when it holds changes; output (NULL: the journal's, else m's path) is where a repack
 * writes. */
int tfs_journal_bind(tfs_staging *s, const tfs_model *m, const char *output, tfs_error *err);
/* Appends op (stolen; NULL: out of memory) to the journal and writes it out. */
int tfs_journal_record(tfs_staging *s, json_t *op, tfs_error *err);
/* After the model refused the op just recorded: takes it out of the journal again.
 * Returns rc. */
int tfs_journal_unrecord(tfs_staging *s, int rc, tfs_error *err);

/* ==== recovery.c: the crash protocol ==== */

/* Finishes or undoes a repack the journal records (see recovery.c); *rolled says whether
 * files were renamed here (a model opened before is stale then). */
int tfs_recover(tfs_staging *s, bool *rolled, tfs_error *err);
/* The staging directory of a session was found from the model *m opened from source (its
 * default one): when dir exists, an interrupted repack there is finished or undone, then
 * *m opened again with oo (*m NULL if that fails). */
int tfs_recovery_reopen(tfs_model **m, const char *dir, const char *source,
			const tfs_open_opts *oo, tfs_error *err);
/* Locks dir and finishes or undoes an interrupted repack there (tfs_staging_open without the
 * binding to a model); an error when that renamed files (a model opened before is stale). */
int tfs_staging_lock_recovered(tfs_staging **out, const char *dir, tfs_error *err);

/* ==== view_record.c: the view the changes apply to ==== */

/* What a session opened its model with, and how it takes a recorded view. */
typedef struct {
	const tfs_open_opts *oo;    /* the options it opened the model with (NULL: none) */
	const char *source;         /* the source as given (tfs_view_open's) */
	bool output_given;          /* output= was given: oo->gguf_model is meant, not the
				     * journal's */
	bool adopt;                 /* tensorfs repack: a view option not given is the journal's */
	const char *staging;        /* for messages: staging=, or NULL (the default directory) */
} tfs_view_match;

/* The view the changes are replayed onto, into *want (the options the view table records:
 * quantize, imatrix, outtype and gguf_model; the rest zero): what q->oo asks for (those options that make a difference
 * for the source), with what the journal records where q->adopt and an option was not
 * given.  A view that contradicts the journal's record, or a recorded imatrix file that
 * changed, is refused with a message naming both (TFS_E_INVALID; nothing changed); a
 * journal without changes or without a record takes any.  *reopen: *want is not what
 * q->oo opened (open the model again with it).  Strings of *want are borrowed from q->oo
 * and the journal (until s is freed). */
int tfs_view_record_match(tfs_staging *s, const tfs_view_match *q, tfs_open_opts *want,
			  bool *reopen, tfs_error *err);
/* The view v (as tfs_view_record_match gives it) kept in s, and written with the first
 * change (a file's identity, the imatrix's, taken now). */
int tfs_view_record_set(tfs_staging *s, const tfs_open_opts *v, tfs_error *err);
/* o's view options (those a journal records) set to want's, the others kept. */
void tfs_view_record_apply(tfs_open_opts *o, const tfs_open_opts *want);

/* ==== ops.c: the table of ops ==== */

typedef enum {
	TFS_OP_SET_KV, TFS_OP_REPLACE_KV, TFS_OP_DEL_KV, TFS_OP_RENAME_KV,
	TFS_OP_SET_TENSOR, TFS_OP_SET_TENSORS, TFS_OP_REPLACE_TENSOR, TFS_OP_DEL_TENSOR,
	TFS_OP_RENAME_TENSOR,
	TFS_OP_SET_EXTRA, TFS_OP_REPLACE_EXTRA, TFS_OP_DEL_EXTRA,
	TFS_OP_COUNT
} tfs_op_kind;

/* One change: what the journal records and the model applies.  A kind uses only some of
 * the members (see the table in ops.c). */
typedef struct {
	tfs_op_kind kind;
	const char *name;      /* the item set, deleted, or renamed to ("key", "name", "to") */
	const char *from;      /* rename_*, replace_*: the item renamed */
	bool replace;          /* rename_*: an item named `name` is deleted first */
	uint32_t type;         /* set_kv, replace_kv: the value's type */
	uint8_t *value;        /* and its payload (apply takes it); NULL: read from data */
	uint64_t len;
	int dtype;             /* set_tensor, replace_tensor */
	uint32_t n_dims;
	const int64_t *ne;
	const char *data;      /* the staged bytes: an absolute path under data/ */
	const tfs_tensor_file *files; /* set_tensors */
	size_t n_files;
} tfs_op;

/* The op's journal entry (the data paths made relative), or NULL: out of memory. */
json_t *tfs_op_encode(const tfs_staging *s, const tfs_op *op);
/* Applies op to m (op->value is taken, also on failure). */
int tfs_op_apply(tfs_model *m, tfs_op *op, tfs_error *err);
/* The kind of a journal entry's "op" string; TFS_OP_COUNT when it names none. */
tfs_op_kind tfs_op_kind_of(const char *name);
/* Whether ops of this kind change which item a name means (rename, replace, delete): an
 * earlier op is never superseded across one. */
bool tfs_op_moves_names(tfs_op_kind kind);
/* The member holding a set_* op's item name ("key" or "name"). */
const char *tfs_op_name_member(tfs_op_kind kind);
/* A name as a JSON member: "<field>" when it is UTF-8, "<field>_hex" otherwise. */
int tfs_journal_put_name(json_t *o, const char *field, const char *name);
/* The name tfs_journal_put_name stored (allocated), or NULL. */
char *tfs_journal_get_name(const json_t *o, const char *field);

/* ==== gc.c: superseded ops ==== */

/* After a set of names (the op of this kind just recorded and applied): earlier sets of the
 * same names are dropped, with their data files.  Best effort. */
void tfs_journal_drop_superseded(tfs_staging *s, tfs_op_kind kind, const char *const *names,
				 size_t n_names);

#endif
