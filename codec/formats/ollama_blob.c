/*
 * ollama_blob.c - a manifest layer's blob: opened once per digest (a file of the store, or a
 * registry's URL), its size checked, and its sha256 when due.
 */
#include "ollama_impl.h"
#include "remote.h"
#include "hex.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#define HASH_ALWAYS_BELOW (16ull << 20)   /* small non-weight layers hashed at every open */
#define PROGRESS_ABOVE (64ull << 20)      /* blobs that report progress when verified */
#define HASH_CHUNK (8ull << 20)

/* ==== blobs ==== */

/* Checks the sha256 of source si against the digest (hex at digest + 7). */
static int check_sha256(const tfs_model *m, int32_t si, const char *digest,
			const tfs_open_opts *o, const char *manifest, tfs_error *err)
{
	const tfs_source *s = &m->src[si];
	const char *blob = tfs_basename(s->path);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	bool report = o && o->progress && s->size > PROGRESS_ABOVE;

	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: cannot set up sha256", blob);
	}
	/* a remote blob's bytes come through the block cache, a chunk at a time */
	size_t cap = s->size < HASH_CHUNK ? (size_t)s->size : HASH_CHUNK;
	const bool mapped = tfs_source_data(s) != NULL;
	uint8_t *buf = !mapped ? malloc(cap ? cap : 1) : NULL;
	if (!mapped && !buf && s->size) {
		EVP_MD_CTX_free(ctx);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", blob);
	}
	for (uint64_t done = 0; done < s->size;) {
		uint64_t n = s->size - done < HASH_CHUNK ? s->size - done : HASH_CHUNK;
		int upd;
		if (!mapped) {
			int rc = tfs_source_pread(s, buf, n, done, err);
			if (rc) {
				free(buf);
				EVP_MD_CTX_free(ctx);
				return rc;
			}
			upd = EVP_DigestUpdate(ctx, buf, (size_t)n);
		} else {
			tfs_source_advise(m, si, done, n, MADV_WILLNEED);
			upd = EVP_DigestUpdate(ctx, s->map + done, (size_t)n);
			tfs_source_advise(m, si, done, n, MADV_DONTNEED);
		}
		if (upd != 1) {
			free(buf);
			EVP_MD_CTX_free(ctx);
			return tfs_error_set(err, TFS_E_IO, "%s: sha256 failed", blob);
		}
		done += n;
		if (report)
			o->progress(o->progress_ctx, blob, done, s->size);
	}
	free(buf);
	int ok = EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	if (ok != 1 || mdlen != 32)
		return tfs_error_set(err, TFS_E_IO, "%s: sha256 failed", blob);
	char hex[65];
	tfs_hex(hex, md, 32);
	if (strcasecmp(hex, digest + 7) != 0)
		return tfs_error_set(err, TFS_E_DIGEST,
				     "%s: blob %s is corrupt: its sha256 is %s, the manifest says %s; "
				     "refusing to open it", manifest, blob, hex, digest + 7);
	return 0;
}

static int check_blob(tfs_model *m, tfs_ollama_layout *lay, tfs_ollama_layer *l, bool always_hash,
		      const tfs_open_opts *o, const char *name, tfs_error *err);

/* Opens (once per digest) the blob of layer l, checks its size and, when due, its sha256. */
int tfs_ollama_open_blob(tfs_model *m, tfs_ollama_layout *lay, tfs_ollama_layer *l,
			 bool always_hash, const tfs_open_opts *o, tfs_error *err)
{
	char name[80];
	snprintf(name, sizeof(name), "sha256-%s", l->digest + 7);
	for (size_t i = 0; i < m->n_src; i++) {
		if (strcasecmp(m->src[i].label, l->digest) == 0) {
			l->src = (int32_t)i;
			break;
		}
	}
	if (l->src >= 0) {
		/* a blob named again: by another layer, which must not give it another size */
		const tfs_source *s = &m->src[l->src];
		if (s->size != l->size)
			return tfs_error_set(err, TFS_E_DIGEST,
					     "%s: blob %s is %llu bytes, the manifest says %llu; "
					     "refusing to open it", lay->manifest_path, name,
					     (unsigned long long)s->size, (unsigned long long)l->size);
		return 0;
	}
	int rc;
	if (lay->blob_base) { /* over HTTP(S): the registry's blob URL */
		char *url = NULL;
		if (asprintf(&url, "%s%s", lay->blob_base, l->digest) < 0)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory",
					     lay->manifest_path);
		rc = tfs_model_add_remote_source(m, url, o, &l->src, err);
		free(url);
		if (rc)
			return rc;
		return check_blob(m, lay, l, always_hash, o, l->digest, err);
	}
	char *path = tfs_ollama_join3(lay->root, "blobs", name);
	if (!path)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", lay->manifest_path);
	struct stat st;
	if (stat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT)
			rc = tfs_error_set(err, TFS_E_NOTFOUND, "%s: blob %s (layer %s) is missing: %s",
					   lay->manifest_path, name, l->media_type, path);
		else
			rc = tfs_error_sys(err, e, "%s: blob %s (layer %s): %s", lay->manifest_path,
					   name, l->media_type, path);
		free(path);
		return rc;
	}
	rc = tfs_model_add_source(m, path, l->digest, &l->src, err);
	free(path);
	if (rc)
		return rc;
	return check_blob(m, lay, l, always_hash, o, name, err);
}

/* An opened blob against its layer: its size, and when due its sha256. */
static int check_blob(tfs_model *m, tfs_ollama_layout *lay, tfs_ollama_layer *l, bool always_hash,
		      const tfs_open_opts *o, const char *name, tfs_error *err)
{
	const tfs_source *s = &m->src[l->src];
	if (s->size != l->size)
		return tfs_error_set(err, TFS_E_DIGEST,
				     "%s: blob %s is %llu bytes, the manifest says %llu; refusing to "
				     "open it", lay->manifest_path, name, (unsigned long long)s->size,
				     (unsigned long long)l->size);
	/* The small layers (template, params, license, config files...) are hashed at every
	 * open; weights (a GGUF model, tensor blobs, adapters, projectors) only with verify:
	 * a mount reads their headers, never all of their bytes. */
	bool weights = !strcmp(l->media_type, MT_MODEL) || !strcmp(l->media_type, MT_TENSOR) ||
		       !strcmp(l->media_type, MT_PREFIX "adapter") ||
		       !strcmp(l->media_type, MT_PREFIX "projector") ||
		       !strcmp(l->media_type, MT_PREFIX "draft");
	if (!always_hash && !(!weights && s->size < HASH_ALWAYS_BELOW) && !(o && o->verify))
		return 0;
	int rc = check_sha256(m, l->src, l->digest, o, lay->manifest_path, err);
	/* a remote blob's bytes came through the block cache: a bad copy there (a disk error,
	 * a file edited) is dropped and the blob fetched again, once, before it is blamed */
	if (rc == TFS_E_DIGEST && tfs_source_is_remote(s)) {
		if ((rc = tfs_source_forget(s, err)))
			return rc;
		rc = check_sha256(m, l->src, l->digest, o, lay->manifest_path, err);
	}
	return rc;
}
