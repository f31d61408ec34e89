/*
 * format_ops.h - what a model's format does for it: the table of operations each format
 * fills (codec-private; fs/ never sees it).
 *
 * A model points at its format's table (m->ops, set by tfs_model_new) and model/,
 * journal/ and open.c call through it: none of them asks which format a model is.  Each
 * format defines one const instance under codec/formats/ and the one table of them is
 * codec/formats/registry.c (formats/format.h): adding a format is a new file and a line
 * there.  The type is declared here, below the formats, because model/ calls through it;
 * it names the model types without their headers (model_impl.h includes this one).
 * Operations marked optional may be NULL.
 */
#ifndef TFS_FORMAT_OPS_H
#define TFS_FORMAT_OPS_H

#include "base.h"

#include <sys/stat.h>

typedef struct tfs_model tfs_model;   /* model.h */
typedef struct tfs_image tfs_image;   /* image.h */
struct tfs_commit;                    /* journal/commit.h */

/* How sure a format is that a local source is its own (tfs_format_ops.probe). */
enum {
	TFS_PROBE_NO = 0,      /* not mine */
	TFS_PROBE_GUESS,       /* no magic, no telling name: mine if nobody else's */
	TFS_PROBE_YES,         /* mine */
};

/* A local source as tfs_model_open found it. */
typedef struct {
	const char *source;    /* as given: a path, or a model name */
	const struct stat *st; /* its stat; NULL: no such path (ENOENT) */
	const char *head;      /* a regular file's first bytes, NUL-terminated ("" otherwise) */
	size_t n;              /* how many */
} tfs_probe;

typedef struct tfs_format_ops {
	const char *name;      /* "gguf", "safetensors", "ollama": index.json's "format" */
	int id;                /* what tfs_model_format() says: a tfs_format (model.h) */

	/* ==== opening (open.c) ==== */
	/* Whether p is this format's: a TFS_PROBE_*, or a negative tfs_code that ends the open
	 * (a source no format reads, said in its terms).  The table's first YES takes it, else
	 * its first GUESS. */
	int (*probe)(const tfs_probe *p, tfs_error *err);
	/* Fills m (new, of this format) from the source p probed as its. */
	int (*open)(tfs_model *m, const tfs_probe *p, const tfs_open_opts *o, tfs_error *err);
	/* Optional: a model of this format (self: this table) that url names before it is
	 * fetched as a file (an Ollama name with a scheme): 0 and *out, TFS_PASSTHROUGH when
	 * url is not one, or an error. */
	int (*open_url)(tfs_model **out, const struct tfs_format_ops *self, const char *url,
			const tfs_open_opts *o, tfs_error *err);
	/* Optional: after url, fetched as a file, was not found (TFS_E_NOTFOUND in err): says
	 * so in this format's terms when url has its form. */
	void (*url_not_found)(const char *url, tfs_error *err);
	/* Optional: frees m->priv, what the reader left for the writer. */
	void (*free_priv)(void *priv);

	/* ==== the whole model as one file (tfs_image_name, tfs_model_image) ==== */
	/* Optional: its name ("model.gguf"), or NULL when this model has no single-file form. */
	const char *(*image_name)(const tfs_model *m);
	/* Its layout (needed when image_name can say a name). */
	int (*image)(tfs_image **out, const tfs_model *m, tfs_error *err);
	/* Optional: its size without laying it out (NULL: the size of image's layout). */
	int (*image_size)(const tfs_model *m, uint64_t *size, tfs_error *err);
	/* Optional: "config.json" when the model file needs one beside it, else NULL; and its
	 * text (needed when config_name can say a name). */
	const char *(*config_name)(const tfs_model *m);
	int (*config_json)(tfs_buf *out, const tfs_model *m, tfs_error *err);

	/* ==== writing (tfs_model_write_prepare) ==== */
	/* Writes every file of m's new state to temporaries registered in c, fsynced and read
	 * back; renames nothing. */
	int (*write)(tfs_model *m, const tfs_write_opts *o, struct tfs_commit *c, tfs_error *err);

	/* ==== editing (edit.c) ==== */
	/* Whether m's keys and tensors are written as GGUF (names of at most 63 bytes, keys of
	 * any GGUF type) rather than as safetensors (UTF-8 names, string values). */
	bool (*gguf_encoded)(const tfs_model *m);
	/* Whether key may hold this (well-formed) value in m's format: 0 or TFS_E_INVALID. */
	int (*check_kv)(const tfs_model *m, const char *key, uint32_t type, const uint8_t *data,
			uint64_t len, tfs_error *err);
	bool extras;           /* its models hold extra files (layers/, shown even when empty) */
	int bytes_dtype;       /* the dtype of a new tensor of plain bytes (TFS_DT_U8 / _I8) */
	bool header_facts;     /* index.json's version, alignment and data_offset are those of
	                          the model's own file (shown by tensorfs info) */
	bool remote_writable;  /* a model read over HTTP(S) can be written (to a local file) */

	/* ==== the mount's staging directory ==== */
	/* Optional: the directory this format keeps a model's staging in by default
	 * (allocated; its parents may not exist), or NULL for the default place. */
	char *(*staging_home)(const tfs_model *m);
} tfs_format_ops;

#endif
