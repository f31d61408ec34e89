/*
 * ollama_write.c - writing an Ollama model back into its store.
 *
 * Blobs are immutable and named by their sha256, so a change never rewrites a blob: the
 * layers whose content changes get new blobs, every other layer keeps its blob, and a new
 * manifest names them.
 *  1. The GGUF model layer (classic models): when its keys or tensors differ from the
 *     blob's, the whole GGUF is written again (gguf_write.c) into a new blob.
 *  2. A tensor layer (per-tensor models): a safetensors blob whose tensors were deleted,
 *     renamed or given new bytes is written again (safetensors_write.c) with the blob's
 *     own "__metadata__" kept; a blob with no tensors left loses its layer; a new tensor
 *     becomes a layer of its own, named after it.
 *  3. Files under layers/ (template, system, params, config.json...): a changed one is
 *     copied into a new blob; a deleted one loses its layer; a new one gets a layer.
 * A new blob is written to a temporary in blobs/, fsynced, validated, hashed, and renamed to
 * blobs/sha256-<hex> (if that blob exists already, it is reused).  An unreferenced blob is
 * harmless (Ollama prunes them), so blobs go in place before the manifest; the manifest,
 * compact JSON + "\n" as Ollama's Go encoder writes it, is the commit: written beside its
 * final name and renamed over it by the caller.  o->output "model[:tag]" (or
 * "ns/model:tag", "host/ns/model:tag") writes a new manifest under that name instead and
 * leaves the source manifest as it is; an absolute path names the manifest file itself.
 */
#ifndef _GNU_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#endif
#include "format.h"
#include "commit.h"
#include "hex.h"
#include "dtype.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>



#define MT_JSON "application/vnd.ollama.image.json"
#define MT_TENSOR "application/vnd.ollama.image.tensor"
#define HASH_CHUNK (8u << 20)

typedef struct {
	tfs_model *m;
	const tfs_ollama_layout *lay;
	const tfs_write_opts *o;
	char *blobs;          /* <root>/blobs */
	char **created;       /* blobs this write put in place (removed again on failure) */
	size_t n_created;
	tfs_error *err;
} ctx;

/* ==== blobs ==== */

static char *path2(const char *a, const char *b)
{
	char *s;
	return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

static int nomem(tfs_error *err) { return tfs_error_set(err, TFS_E_NOMEM, "out of memory"); }

/* sha256 of the file open as fd (size bytes), as 64 hex digits. */
static int sha256_fd(int fd, uint64_t size, const char *path, char hex[65], tfs_error *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	const uint8_t *map = NULL;
	int rc = 0;
	if (size) {
		map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED)
			return tfs_error_sys(err, errno, "%s: mmap", path);
		madvise((void *)map, (size_t)size, MADV_SEQUENTIAL);
	}
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	if (!h || EVP_DigestInit_ex(h, EVP_sha256(), NULL) != 1) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: cannot set up sha256", path);
		goto out;
	}
	for (uint64_t done = 0; done < size;) {
		size_t n = size - done < HASH_CHUNK ? (size_t)(size - done) : HASH_CHUNK;
		if (EVP_DigestUpdate(h, map + done, n) != 1) {
			rc = tfs_error_set(err, TFS_E_IO, "%s: sha256 failed", path);
			goto out;
		}
		done += n;
	}
	if (EVP_DigestFinal_ex(h, md, &mdlen) != 1 || mdlen != 32) {
		rc = tfs_error_set(err, TFS_E_IO, "%s: sha256 failed", path);
		goto out;
	}
	tfs_hex(hex, md, 32);
out:
	EVP_MD_CTX_free(h);
	if (map)
		munmap((void *)map, (size_t)size);
	return rc;
}

/* A new blob is an unnamed O_TMPFILE in blobs/ until it is complete (blob_finish names it),
 * so a write killed half-way leaves nothing in the store; without O_TMPFILE, a named
 * temporary.  *tmp ends in XXXXXX while unnamed. */
static int blob_begin(ctx *x, int *fd, char **tmp)
{
	if (asprintf(tmp, "%s/.tensorfs-tmp.XXXXXX", x->blobs) < 0)
		return nomem(x->err);
	*fd = tfs_io_tmpfile_open(x->blobs, 0644);
	if (*fd >= 0)
		return 0;
	*fd = mkostemp(*tmp, O_CLOEXEC);
	if (*fd < 0) {
		int rc = tfs_error_sys(x->err, errno, "%s: cannot create a temporary blob", *tmp);
		free(*tmp);
		*tmp = NULL;
		return rc;
	}
	if (fchmod(*fd, 0644) < 0) {
		int rc = tfs_error_sys(x->err, errno, "%s: chmod", *tmp);
		close(*fd);
		unlink(*tmp);
		free(*tmp);
		*tmp = NULL;
		return rc;
	}
	return 0;
}

static bool blob_unnamed(const char *tmp)
{
	size_t n = strlen(tmp);
	return n >= 6 && strcmp(tmp + n - 6, "XXXXXX") == 0;
}

/* A path that opens the temporary blob (also while it has no name): for reading it back. */
static const char *blob_path(int fd, const char *tmp, char buf[64])
{
	if (!blob_unnamed(tmp))
		return tmp;
	snprintf(buf, 64, "/proc/self/fd/%d", fd);
	return buf;
}

static void blob_discard(int fd, char *tmp)
{
	if (fd >= 0)
		close(fd);
	if (tmp) {
		if (!blob_unnamed(tmp))
			unlink(tmp);
		free(tmp);
	}
}

/* fsyncs, hashes and renames a written temporary blob to blobs/sha256-<hex>; closes fd and
 * frees tmp in every case.  digest gets "sha256:<hex>". */
static int blob_finish(ctx *x, int fd, char *tmp, char digest[72], uint64_t *size)
{
	struct stat st;
	char hex[65], name[80];
	int rc = 0;
	if (fsync(fd) < 0 || fstat(fd, &st) < 0) {
		rc = tfs_error_sys(x->err, errno, "%s: fsync", tmp);
		goto fail;
	}
	if ((rc = sha256_fd(fd, (uint64_t)st.st_size, tmp, hex, x->err)))
		goto fail;
	snprintf(name, sizeof(name), "sha256-%s", hex);
	snprintf(digest, 72, "sha256:%s", hex);
	*size = (uint64_t)st.st_size;
	char *final = path2(x->blobs, name);
	char **grown = realloc(x->created, (x->n_created + 1) * sizeof(*grown));
	if (!final || !grown) {
		free(final);
		if (grown)
			x->created = grown;
		rc = nomem(x->err);
		goto fail;
	}
	x->created = grown;
	struct stat ex;
	if (stat(final, &ex) == 0 && (uint64_t)ex.st_size == *size) {
		/* the same bytes are in the store already */
		free(final);
		goto fail; /* rc 0: just drop the temporary */
	}
	if (blob_unnamed(tmp)) {
		/* complete and durable: it takes its content-addressed name at once (no
		 * temporary name a crash could leave behind) */
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		if (linkat(AT_FDCWD, proc, AT_FDCWD, final, AT_SYMLINK_FOLLOW) < 0) {
			/* EEXIST: another writer put the same bytes in the store meanwhile */
			rc = errno == EEXIST ? 0 : tfs_error_sys(x->err, errno, "%s: cannot name "
								 "the new blob", final);
			free(final);
			goto fail;
		}
	} else if (rename(tmp, final) < 0) {
		rc = tfs_error_sys(x->err, errno, "renaming %s to %s", tmp, final);
		free(final);
		goto fail;
	}
	close(fd);
	fd = -1;
	x->created[x->n_created++] = final;
	free(tmp);
	return tfs_io_fsync_dir(final, x->err);
fail:
	blob_discard(fd, tmp);
	return rc;
}

static json_t *descriptor(const char *media_type, const char *digest, uint64_t size,
			  const char *from, const char *name)
{
	json_t *d = json_pack("{s:s, s:s, s:I}", "mediaType", media_type, "digest", digest, "size",
			      (json_int_t)size);
	if (d && from && json_object_set_new(d, "from", json_string(from)))
		goto fail;
	if (d && name && json_object_set_new(d, "name", json_string(name)))
		goto fail;
	return d;
fail:
	json_decref(d);
	return NULL;
}

static json_t *same_descriptor(const tfs_ollama_layer *l)
{
	return descriptor(l->media_type, l->digest, l->size, l->from, l->name);
}

/* ==== the GGUF model layer ==== */

/* Whether m's keys and tensors are exactly those of the blob of layer l. */
static bool gguf_unchanged(const tfs_model *m, const tfs_ollama_layer *l)
{
	tfs_model *w = NULL;
	int32_t si;
	bool same = false;
	const tfs_source *s = &m->src[l->src];
	if (tfs_model_new(&w, &tfs_gguf_format, s->path, NULL) ||
	    tfs_model_add_source(w, s->path, NULL, &si, NULL) || tfs_gguf_read(w, si, NULL))
		goto out;
	size_t j = 0;
	for (size_t i = 0; i < m->n_kv; i++) {
		const tfs_kv *a = &m->kv[i];
		if (a->deleted)
			continue;
		if (j >= w->n_kv)
			goto out;
		const tfs_kv *b = &w->kv[j++];
		if (strcmp(a->name, b->name) || a->type != b->type || a->len != b->len ||
		    memcmp(a->data, b->data, (size_t)a->len))
			goto out;
	}
	if (j != w->n_kv)
		goto out;
	j = 0;
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *a = &m->t[i];
		if (a->deleted)
			continue;
		if (j >= w->n_t)
			goto out;
		const tfs_tensor *b = &w->t[j++];
		if (strcmp(a->name, b->name) || a->src != l->src || a->offset != b->offset ||
		    a->dtype != b->dtype || a->n_dims != b->n_dims ||
		    memcmp(a->ne, b->ne, sizeof(a->ne)))
			goto out;
	}
	same = j == w->n_t;
out:
	tfs_model_free(w);
	return same;
}

static int write_gguf_layer(ctx *x, const tfs_ollama_layer *l, json_t **desc)
{
	char digest[72], *tmp = NULL, pbuf[64];
	uint64_t size;
	int fd = -1, rc;
	if (gguf_unchanged(x->m, l)) {
		*desc = same_descriptor(l);
		return *desc ? 0 : nomem(x->err);
	}
	if ((rc = blob_begin(x, &fd, &tmp)))
		return rc;
	tfs_error e = { 0 };
	if ((rc = tfs_gguf_write(x->m, fd, tmp, x->o, x->err)) || fsync(fd) < 0 ||
	    (rc = tfs_gguf_validate(x->m, blob_path(fd, tmp, pbuf), &e))) {
		if (!rc)
			rc = tfs_error_sys(x->err, errno, "%s: fsync", tmp);
		else if (e.code)
			tfs_error_set(x->err, rc, "the new model blob does not read back as written "
				      "(%s); nothing was replaced", e.msg);
		blob_discard(fd, tmp);
		return rc;
	}
	if ((rc = blob_finish(x, fd, tmp, digest, &size)))
		return rc;
	*desc = descriptor(l->media_type, digest, size, NULL, l->name);
	return *desc ? 0 : nomem(x->err);
}

/* ==== tensor layers ==== */

/* Writes tensors ts (slots of m) as one safetensors blob with metadata meta. */
static int write_st_blob(ctx *x, const uint32_t *ts, size_t nt, const json_t *meta,
			 char digest[72], uint64_t *size)
{
	char *tmp = NULL, pbuf[64];
	int fd = -1, rc;
	if ((rc = blob_begin(x, &fd, &tmp)))
		return rc;
	if ((rc = tfs_safetensors_write_file(x->m, ts, nt, NULL, 0, meta, fd, tmp, x->o, x->err)) ||
	    (rc = tfs_safetensors_check_file(x->m, ts, nt, NULL, 0, meta, blob_path(fd, tmp, pbuf),
					     x->err))) {
		blob_discard(fd, tmp);
		return rc;
	}
	return blob_finish(x, fd, tmp, digest, size);
}

/* Layer l's tensors as they are now, compared with its blob. */
static int write_tensor_layer(ctx *x, const tfs_ollama_layer *l, json_t **desc)
{
	tfs_model *m = x->m;
	tfs_model *w = NULL;
	json_t *meta = NULL;
	uint32_t *ts = calloc(l->n_tensors ? l->n_tensors : 1, sizeof(*ts));
	size_t nt = 0;
	int32_t si;
	uint64_t hl;
	char *name = NULL;
	int rc;
	*desc = NULL;
	if (!ts)
		return nomem(x->err);
	/* the blob as it is: its tensors' names and its metadata */
	const tfs_source *s = &m->src[l->src];
	if ((rc = tfs_model_new(&w, &tfs_safetensors_format, s->path, x->err)) ||
	    (rc = tfs_model_add_source(w, s->path, NULL, &si, x->err)) ||
	    (rc = tfs_safetensors_parse(w, si, &hl, &meta, x->err)))
		goto out;
	bool same = w->n_t == l->n_tensors;
	for (uint32_t k = 0; k < l->n_tensors; k++) {
		const tfs_tensor *t = &m->t[l->first_tensor + k];
		if (t->deleted) {
			same = false;
			continue;
		}
		ts[nt++] = l->first_tensor + k;
		if (k < w->n_t && l->name && !name && strcmp(l->name, w->t[k].name) == 0 &&
		    strcmp(t->name, l->name) != 0 && !(name = strdup(t->name))) {
			rc = nomem(x->err);
			goto out;
		}
		if (t->src != l->src || k >= w->n_t || strcmp(t->name, w->t[k].name) ||
		    t->offset != w->t[k].offset)
			same = false;
	}
	if (same) {
		*desc = same_descriptor(l);
	} else if (nt) {
		char digest[72];
		uint64_t size;
		if ((rc = write_st_blob(x, ts, nt, meta, digest, &size)))
			goto out;
		*desc = descriptor(l->media_type, digest, size, NULL, name ? name : l->name);
	} else {
		goto out; /* nothing left: the layer goes */
	}
	if (!*desc)
		rc = nomem(x->err);
out:
	free(name);
	free(ts);
	json_decref(meta);
	tfs_model_free(w);
	return rc;
}

/* ==== files under layers/ ==== */

static int write_extra_blob(ctx *x, const tfs_extra *e, char digest[72], uint64_t *size)
{
	char *tmp = NULL;
	int fd = -1, rc;
	if ((rc = blob_begin(x, &fd, &tmp)))
		return rc;
	if ((rc = tfs_model_copy(fd, tmp, 0, x->m, e->src, e->offset, e->size, 0, NULL, x->err))) {
		blob_discard(fd, tmp);
		return rc;
	}
	return blob_finish(x, fd, tmp, digest, size);
}

/* The layer for extra i as it is now (NULL *desc: deleted). */
static int write_extra_layer(ctx *x, const tfs_ollama_layer *l, int32_t i, json_t **desc)
{
	const tfs_extra *e = &x->m->x[i];
	char digest[72];
	uint64_t size;
	int rc;
	*desc = NULL;
	if (e->deleted)
		return 0;
	if (l && e->src == l->src && e->offset == 0 && e->size == l->size) {
		*desc = same_descriptor(l);
		return *desc ? 0 : nomem(x->err);
	}
	if ((rc = write_extra_blob(x, e, digest, &size)))
		return rc;
	char *json_name = NULL;
	const char *name = l ? l->name : NULL;
	if (!l && strcmp(e->media_type, MT_JSON) == 0) {
		if (!(json_name = tfs_ollama_json_name(e->name)))
			return tfs_error_set(x->err, TFS_E_INVALID, "%s: '%s' is not a valid name",
					     x->m->path, e->name);
		name = json_name;
	}
	*desc = descriptor(l ? l->media_type : e->media_type, digest, size, NULL, name);
	free(json_name);
	return *desc ? 0 : nomem(x->err);
}

/* ==== the manifest ==== */

static bool part_ok(const char *s, size_t n)
{
	if (n == 0 || n > 350 || (n == 2 && s[0] == '.' && s[1] == '.') || (n == 1 && s[0] == '.'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.' || (c == ':' && i + 1 < n)))
			return false;
	}
	return true;
}

/* The manifest file to write: the source's, an absolute path, or the file of a model name. */
static int manifest_path(const tfs_model *m, const tfs_ollama_layout *lay, const char *out,
			 char **path, tfs_error *err)
{
	if (!out) {
		*path = strdup(lay->manifest_path);
		return *path ? 0 : nomem(err);
	}
	if (out[0] == '/') {
		*path = strdup(out);
		return *path ? 0 : nomem(err);
	}
	/* [host/][ns/]model[:tag] */
	const char *parts[3] = { NULL, NULL, NULL };
	size_t lens[3] = { 0 }, np = 0;
	const char *slash = strrchr(out, '/'), *colon = strrchr(out, ':');
	const char *tag = colon && (!slash || colon > slash) ? colon + 1 : "latest";
	size_t tl = colon && (!slash || colon > slash) ? strlen(tag) : 6;
	const char *end = colon && (!slash || colon > slash) ? colon : out + strlen(out);
	for (const char *p = out; p < end && np < 3;) {
		const char *e = memchr(p, '/', (size_t)(end - p));
		if (!e)
			e = end;
		parts[np] = p, lens[np] = (size_t)(e - p), np++;
		p = e < end ? e + 1 : end;
	}
	const char *host = "registry.ollama.ai", *ns = "library";
	size_t hl = strlen(host), nl = strlen(ns), ml;
	const char *model;
	if (np == 3)
		host = parts[0], hl = lens[0], ns = parts[1], nl = lens[1], model = parts[2],
		ml = lens[2];
	else if (np == 2)
		ns = parts[0], nl = lens[0], model = parts[1], ml = lens[1];
	else
		model = parts[0], ml = lens[0];
	if (np == 0 || np > 3 || (end < out + strlen(out) && strchr(end + 1, '/')) ||
	    !part_ok(host, hl) || !part_ok(ns, nl) || !part_ok(model, ml) || !part_ok(tag, tl) ||
	    memchr(ns, ':', nl) || memchr(model, ':', ml))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: not an Ollama model name ([host/][namespace/]model[:tag])",
				     out);
	if (asprintf(path, "%s/manifests/%.*s/%.*s/%.*s/%.*s", lay->root, (int)hl, host, (int)nl,
		     ns, (int)ml, model, (int)tl, tag) < 0)
		return nomem(err);
	/* the directories of a new name */
	for (char *p = *path + strlen(lay->root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		int r = mkdir(*path, 0755);
		int e = errno;
		*p = '/';
		if (r < 0 && e != EEXIST)
			return tfs_error_sys(err, e, "%s: mkdir", *path);
	}
	(void)m;
	return 0;
}

/* Appends desc (stolen) to layers. */
static int add_desc(ctx *x, json_t *layers, json_t *desc)
{
	return desc && json_array_append_new(layers, desc) ? nomem(x->err) : 0;
}

/* Every layer's descriptor, blobs written for the changed ones: the manifest's layers in
 * their order, then a layer per new tensor (per-tensor models), then new files. */
static int write_layers(ctx *x, bool *referenced, json_t *layers)
{
	tfs_model *m = x->m;
	const tfs_ollama_layout *lay = x->lay;
	uint32_t n_orig_t = 0;
	int rc = 0;
	for (size_t i = 0; !rc && i < lay->n_layers; i++) {
		const tfs_ollama_layer *l = &lay->layers[i];
		json_t *desc = NULL;
		if (l->role == TFS_OLLAMA_MODEL) {
			rc = write_gguf_layer(x, l, &desc);
			n_orig_t = (uint32_t)m->n_t; /* new tensors live in the GGUF */
		} else if (l->role == TFS_OLLAMA_TENSOR) {
			rc = write_tensor_layer(x, l, &desc);
			if (l->first_tensor + l->n_tensors > n_orig_t)
				n_orig_t = l->first_tensor + l->n_tensors;
		} else if (l->extra < 0 || (size_t)l->extra >= m->n_x) {
			rc = tfs_error_set(x->err, TFS_E_INVALID, "%s: bad layer", m->path);
		} else {
			referenced[l->extra] = true;
			rc = write_extra_layer(x, l, l->extra, &desc);
		}
		if (!rc)
			rc = add_desc(x, layers, desc);
	}
	for (size_t i = n_orig_t; !rc && i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		char digest[72];
		uint64_t size;
		uint32_t slot = (uint32_t)i;
		if (t->deleted)
			continue;
		if (m->gguf_version)
			return tfs_error_set(x->err, TFS_E_INVALID,
					     "%s: internal: tensor outside the GGUF", m->path);
		if (!(rc = write_st_blob(x, &slot, 1, NULL, digest, &size))) {
			json_t *desc = descriptor(MT_TENSOR, digest, size, NULL, t->name);
			rc = desc ? add_desc(x, layers, desc) : nomem(x->err);
		}
	}
	for (size_t i = 0; !rc && i < m->n_x; i++) {
		json_t *desc = NULL;
		if (referenced[i])
			continue;
		if (!(rc = write_extra_layer(x, NULL, (int32_t)i, &desc)))
			rc = add_desc(x, layers, desc);
	}
	return rc;
}

/* The written manifest read back (by the reader, as tfs_model_open reads a manifest): every
 * blob, key, tensor and file as the model has them. */
static int check_manifest(ctx *x, const char *tmp, long mi, tfs_error *e)
{
	tfs_model *m = x->m, *w = NULL;
	tfs_open_opts oo = { .ollama_models = x->lay->root };
	int rc = tfs_model_new(&w, &tfs_ollama_format, tmp, e);
	if (!rc && !(rc = tfs_ollama_open(w, tmp, &oo, e))) {
		w->changed = false;
		for (size_t i = 0; i < w->n_src; i++)
			posix_fadvise(w->src[i].fd, 0, 0, POSIX_FADV_NORMAL);
	}
	if (!rc)
		rc = tfs_write_validate(m, w, e);
	for (size_t i = 0; !rc && i < m->n_x; i++) {
		const tfs_extra *a = &m->x[i];
		if (a->deleted || (long)i == mi)
			continue;
		long j = tfs_model_find_extra(w, a->name);
		const tfs_extra *b = j >= 0 ? &w->x[j] : NULL;
		if (!b || a->size != b->size ||
		    (a->size && memcmp(m->src[a->src].map + a->offset,
				       w->src[b->src].map + b->offset, (size_t)a->size)))
			rc = tfs_error_set(e, TFS_E_FORMAT, "file '%s' reads back differently",
					   a->name);
	}
	tfs_model_free(w);
	return rc;
}

/* The manifest (its other members as they were, then config and layers, both stolen),
 * written through the commit and read back. */
static int write_manifest(ctx *x, tfs_commit *c, json_t *config, json_t *layers, long mi)
{
	json_error_t je;
	char *text = NULL, *final = NULL;
	const char *tmp;
	int fd, rc;
	json_t *root = json_loads(x->lay->manifest_rest ? x->lay->manifest_rest : "{}", 0, &je);
	/* (json_object_set_new steals its value, also when it fails) */
	int bad = !root || json_object_set_new(root, "config", config);
	bad |= !root || json_object_set_new(root, "layers", layers);
	if (!root) {
		json_decref(config);
		json_decref(layers);
	}
	if (bad || !(text = json_dumps(root, JSON_COMPACT))) {
		json_decref(root);
		return nomem(x->err);
	}
	json_decref(root);
	size_t n = strlen(text);
	text[n] = '\n';
	if (!(rc = manifest_path(x->m, x->lay, x->o ? x->o->output : NULL, &final, x->err)) &&
	    !(rc = tfs_commit_add(c, final, &fd, &tmp, x->err)) &&
	    !(rc = tfs_io_pwrite(fd, tmp, 0, text, n + 1, x->err)) &&
	    !(rc = tfs_commit_seal(c, x->err))) {
		tfs_error e = { 0 };
		if ((rc = check_manifest(x, tmp, mi, &e)))
			rc = tfs_error_set(x->err, TFS_E_FORMAT,
					   "%s: the new manifest does not read back as written (%s); "
					   "nothing was replaced", final, e.msg);
	}
	free(final);
	free(text);
	return rc;
}

int tfs_ollama_write(tfs_model *m, const tfs_write_opts *o, tfs_commit *c, tfs_error *err)
{
	const tfs_ollama_layout *lay = m->priv;
	ctx x = { .m = m, .lay = lay, .o = o, .err = err };
	json_t *layers = json_array(), *config = NULL;
	bool *referenced = calloc(m->n_x ? m->n_x : 1, sizeof(bool));
	long mi = tfs_model_find_extra(m, "manifest.json");
	int rc;
	if (!lay || !lay->root)
		rc = tfs_error_set(err, TFS_E_INVALID, "%s: no Ollama store layout", m->path);
	else if (!layers || !referenced || !(x.blobs = path2(lay->root, "blobs")))
		rc = nomem(err);
	else if (mi < 0 || m->x[mi].src != lay->manifest_src)
		rc = tfs_error_set(err, TFS_E_UNSUPPORTED,
				   "%s: manifest.json is written by tensorfs; change the layers "
				   "instead", m->path);
	else if (lay->config.extra < 0 || (size_t)lay->config.extra >= m->n_x)
		rc = tfs_error_set(err, TFS_E_INVALID, "%s: no config layer", m->path);
	else
		rc = write_extra_layer(&x, &lay->config, lay->config.extra, &config);
	if (!rc && !config)
		rc = tfs_error_set(err, TFS_E_UNSUPPORTED,
				   "%s: config.json was deleted; an Ollama model needs one", m->path);
	if (!rc) {
		referenced[mi] = true;
		referenced[lay->config.extra] = true;
		rc = write_layers(&x, referenced, layers);
	}
	if (!rc) {
		rc = write_manifest(&x, c, config, layers, mi);
		config = layers = NULL; /* stolen */
	}
	if (rc) {
		for (size_t i = 0; i < x.n_created; i++)
			unlink(x.created[i]);
	}
	for (size_t i = 0; i < x.n_created; i++)
		free(x.created[i]);
	free(x.created);
	free(x.blobs);
	free(referenced);
	json_decref(config);
	json_decref(layers);
	return rc;
}

/* ==== the format ==== */

/* A classic model's keys and tensors are its GGUF layer's (tfs_gguf_read set its version);
 * a per-tensor model's are safetensors blobs'. */
static bool ollama_gguf_encoded(const tfs_model *m)
{
	return m->gguf_version != 0;
}

static int ollama_check_kv(const tfs_model *m, const char *key, uint32_t type,
			   const uint8_t *data, uint64_t len, tfs_error *err)
{
	if (ollama_gguf_encoded(m))
		return tfs_gguf_check_kv(m, key, type, data, len, err);
	/* A per-tensor model's keys would have no place to go: its blobs keep their own
	 * "__metadata__", and its settings are the config.json layer. */
	return tfs_error_set(err, TFS_E_INVALID,
			     "%s: key '%s': a per-tensor Ollama model holds no metadata keys (its "
			     "settings are in layers/config.json)", m->path, key);
}

/* A classic model is its GGUF layer; a per-tensor one mlx-lm's safetensors, when it has
 * that form (tfs_mlx_exportable). */
static const char *ollama_image_name(const tfs_model *m)
{
	if (ollama_gguf_encoded(m))
		return "model.gguf";
	return tfs_mlx_exportable(m) ? "model.safetensors" : NULL;
}

static int ollama_image(tfs_image **out, const tfs_model *m, tfs_error *err)
{
	return ollama_gguf_encoded(m) ? tfs_gguf_image(out, m, err) : tfs_mlx_image(out, m, err);
}

static int ollama_image_size(const tfs_model *m, uint64_t *size, tfs_error *err)
{
	return ollama_gguf_encoded(m) ? tfs_gguf_image_size(m, size, err) : TFS_PASSTHROUGH;
}

/* The table sits with the writer: it names the reader's operations (ollama*.c) and the
 * writer's. */
const tfs_format_ops tfs_ollama_format = {
	.name = "ollama",
	.id = TFS_FMT_OLLAMA,
	.probe = tfs_ollama_probe,
	.open = tfs_ollama_open_probed,
	.open_url = tfs_ollama_open_url,
	.url_not_found = tfs_ollama_url_not_found,
	.free_priv = tfs_ollama_layout_free,
	.image_name = ollama_image_name,
	.image = ollama_image,
	.image_size = ollama_image_size,
	.config_name = tfs_mlx_config_name,
	.config_json = tfs_mlx_config_json,
	.write = tfs_ollama_write,
	.gguf_encoded = ollama_gguf_encoded,
	.check_kv = ollama_check_kv,
	.extras = true,
	.bytes_dtype = TFS_DT_I8,
	.staging_home = tfs_ollama_staging_home,
};
