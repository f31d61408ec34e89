/*
 * quantize_key.c - where a quantized view keeps its tensors: the cache directory, and each
 * tensor's name there (the sha256 of everything that makes its bytes).
 */
#include "quantize_impl.h"
#include "cache.h"
#include "hex.h"
#include "../num/quant.h"
#include "requant.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bumped when the quantizers' bytes change for the same input: old files are not used. */
#define KEY_VERSION "tensorfs quantized tensor 1"

static void put(EVP_MD_CTX *h, const char *what, const void *p, size_t n)
{
	uint64_t len = n;
	EVP_DigestUpdate(h, what, strlen(what) + 1);
	EVP_DigestUpdate(h, &len, sizeof(len));
	EVP_DigestUpdate(h, p, n);
}

static void put_str(EVP_MD_CTX *h, const char *what, const char *s)
{
	put(h, what, s ? s : "", s ? strlen(s) : 0);
}

static void put_u64(EVP_MD_CTX *h, const char *what, uint64_t v)
{
	put(h, what, &v, sizeof(v));
}

/* The owner's files: what they are and which version. */
static void put_sources(EVP_MD_CTX *h, const tfs_model *m)
{
	put_str(h, "model", tfs_model_path(m));
	for (size_t i = 0; i < tfs_model_n_sources(m); i++) {
		const tfs_source *s = tfs_model_source(m, i);
		struct timespec ts = tfs_source_mtime(s);
		put_str(h, "source", tfs_source_path(s));
		put_u64(h, "size", tfs_source_size(s));
		put_u64(h, "mtime", (uint64_t)ts.tv_sec);
		put_u64(h, "mtime_ns", (uint64_t)ts.tv_nsec);
		put_str(h, "etag", tfs_source_etag(s));
	}
}

/* The importance matrix the tensor is weighed with, when it is. */
static void put_imatrix(EVP_MD_CTX *h, const tfs_qview *v, const tfs_qtensor *q)
{
	struct stat st;
	if (!v->im || !tfs_quantize_takes_imatrix(q->dtype) || !tfs_imatrix_has(v->im, q->name) ||
	    stat(tfs_imatrix_path(v->im), &st) < 0)
		return;
	put_str(h, "imatrix", tfs_imatrix_path(v->im));
	put_u64(h, "imatrix_size", (uint64_t)st.st_size);
	put_u64(h, "imatrix_mtime", (uint64_t)st.st_mtim.tv_sec);
	put_u64(h, "imatrix_mtime_ns", (uint64_t)st.st_mtim.tv_nsec);
}

int tfs_qt_key(tfs_qt *t, const tfs_qview *v, const tfs_quant_opts *o, tfs_error *err)
{
	const tfs_tensor *bt = tfs_model_tensor(v->base, t->q->tensor);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	if (!h || !EVP_DigestInit_ex(h, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(h);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	put_str(h, "version", KEY_VERSION);
	put_sources(h, v->owner);
	put_str(h, "salt", o->salt);
	put_str(h, "tensor", bt->name);
	put_u64(h, "dtype", (uint64_t)bt->dtype);
	put(h, "ne", bt->ne, sizeof(bt->ne[0]) * bt->n_dims);
	put_u64(h, "src", (uint64_t)(int64_t)bt->src);
	put_u64(h, "offset", bt->offset);
	put_u64(h, "nbytes", bt->nbytes);
	put_u64(h, "to", (uint64_t)t->q->dtype);
	put_imatrix(h, v, t->q);
	EVP_DigestFinal_ex(h, md, &n);
	EVP_MD_CTX_free(h);
	tfs_hex(t->key, md, n < 32 ? n : 32);
	return 0;
}

bool tfs_qview_sources_unchanged(const tfs_qview *v)
{
	for (size_t i = 0; i < tfs_model_n_sources(v->owner); i++) {
		const tfs_source *s = tfs_model_source(v->owner, i);
		struct timespec ts = tfs_source_mtime(s);
		struct stat st;
		if (tfs_source_is_remote(s) || !tfs_source_mapping(s))
			continue;  /* (a remote file's changes fail its reads) */
		if (stat(tfs_source_path(s), &st) < 0 || (uint64_t)st.st_size != tfs_source_size(s) ||
		    st.st_mtim.tv_sec != ts.tv_sec || st.st_mtim.tv_nsec != ts.tv_nsec)
			return false;
	}
	return true;
}

/* mkdir -p, mode 0700 for what it makes. */
static int make_dirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int rc = mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
		*p = '/';
		if (rc)
			return -1;
	}
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* Named temporaries (.tmp-PID-XXXXXX) of processes that are gone. */
static void remove_stale(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int pid;
	while (d && (e = readdir(d)))
		if (sscanf(e->d_name, ".tmp-%d-", &pid) == 1 && pid > 0 &&
		    kill(pid, 0) < 0 && errno == ESRCH)
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
}

char *tfs_qview_cache_dir(tfs_qview *v, const tfs_quant_opts *o)
{
	char *base = o->cache_dir ? strdup(o->cache_dir) : tfs_cache_default_dir(), *dir = NULL;
	const char *why = "out of memory";
	if (base && asprintf(&dir, "%s/quantized", base) < 0)
		dir = NULL;
	if (dir && make_dirs(dir) < 0) {
		why = strerror(errno);
	} else if (dir) {
		/* writable? (a read-only directory, a full disk, a file system without room) */
		int fd = tfs_io_tmpfile_open(dir, 0644);
		char probe[PATH_MAX];
		if (fd < 0 && snprintf(probe, sizeof(probe), "%s/.tmp-%d-probe", dir,
				       (int)getpid()) < (int)sizeof(probe) &&
		    (fd = open(probe, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600)) >= 0)
			unlink(probe);
		if (fd >= 0) {
			close(fd);
			remove_stale(dir);
			free(base);
			return dir;
		}
		why = strerror(errno);
	}
	if (asprintf(&v->note, "cache %s: %s: quantized tensors are computed on each read",
		     dir ? dir : base ? base : "?", why) < 0)
		v->note = NULL;
	free(base);
	free(dir);
	return NULL;
}
