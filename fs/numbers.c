/*
 * numbers.c - f32/ and npy/ of a writable mount: a tensor edited as numbers.
 *
 * A writer's bytes (float32 values, or a whole .npy file) are staged in a data file like a
 * tensors/ write; a partial write starts from a copy of the view.  At close the file is
 * checked (its size; an npy header must say the tensor's dtype and shape) and turned into
 * the tensor's new stored bytes by codec (tfs_tensor_requantize: blocks not edited keep
 * their bytes, the others are quantized to the tensor's own dtype); those are journaled as
 * a tensors/ write would be, so the repack and crash recovery need nothing more.  An MLX
 * weight (tfs_mlx_requantize) changes with its scale and bias companions: three staged
 * files in one journal op, so a crash never leaves new codes with old scales.  An npy/
 * file of a dtype numpy has (F16, F32, I8...) holds the stored bytes themselves: copied.
 */
#include "fs.h"
#include "tree.h"
#include "write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEP (1u << 20)   /* bytes per copy step */

static const char *view_dir(const tfsd_node *n)
{
	return n->kind == N_F32 ? "f32" : "npy";
}

/* The message of a refused change, naming the file, logged; returns its -errno. */
static int refuse_view(tfsd_fs *fs, const tfsd_node *n, int code, const char *why)
{
	tfs_error err;

	tfs_error_set(&err, code, "%s/%.200s: %.700s", view_dir(n), n->fname, why);
	return tfsd_fail(fs, &err);
}

/* Whether node n's payload is the stored bytes (an npy/ file of a numpy dtype). */
static bool payload_raw(tfsd_fs *fs, tfsd_node *n, tfs_buf *head, tfs_error *err)
{
	bool raw = false;

	if (n->kind == N_NPY && tfs_npy_header(head, &raw, fs->model, (size_t)n->item, err))
		return false;
	return raw;
}

int tfsd_numbers_start(tfsd_fs *fs, tfsd_handle *h)
{
	tfsd_node *n = h->node;
	tfs_buf head = { 0 };
	tfs_error err = { 0 };
	const char *why = NULL;

	pthread_rwlock_rdlock(&fs->lock);
	bool ok = n->deleted || n->item < 0 || payload_raw(fs, n, &head, &err) ||
		  tfs_tensor_numbers_writable(fs->model, (size_t)n->item, fs->imatrix, &why);
	pthread_rwlock_unlock(&fs->lock);
	tfs_buf_free(&head);
	return ok ? 0 : refuse_view(fs, n, TFS_E_UNSUPPORTED, why ? why : err.msg);
}

/* Copies the view's payload (stored bytes or float32 values) to fd from offset at. */
static int copy_payload(tfsd_fs *fs, size_t item, bool raw, int fd, uint64_t at, uint64_t *len)
{
	const uint64_t total = raw ? tfs_model_tensor(fs->model, item)->nbytes
				   : tfs_tensor_f32_count(fs->model, item, NULL) * 4;
	char *buf = malloc(STEP);
	tfs_error err;
	int rc = buf ? 0 : -ENOMEM;

	for (uint64_t off = 0; !rc && off < total; off += STEP) {
		uint64_t n = total - off < STEP ? total - off : STEP;

		if (raw && tfs_tensor_read_raw(fs->model, item, off, n, buf, &err) != (int64_t)n)
			rc = -EIO;
		else if (!raw && tfs_tensor_read_f32(fs->model, item, off / 4, n / 4, (float *)(void *)buf,
						     &err))
			rc = tfsd_errno(&err);
		if (!rc)
			rc = tfsd_pwrite(fd, "the staged file", at + off, buf, n);
	}
	free(buf);
	*len = total;
	return rc;
}

int tfsd_numbers_copy(tfsd_fs *fs, tfsd_handle *h)
{
	tfsd_node *n = h->node;
	tfs_buf head = { 0 };
	tfs_error err;
	uint64_t len = 0;
	int rc = 0;

	pthread_rwlock_rdlock(&fs->lock);
	if (!n->deleted && n->item >= 0) {
		bool raw = payload_raw(fs, n, &head, &err);

		if (n->kind == N_NPY && !head.data)
			rc = tfsd_errno(&err);
		if (!rc && head.len)
			rc = tfsd_pwrite(h->data_fd, h->data_path, 0, head.data, head.len);
		if (!rc)
			rc = copy_payload(fs, (size_t)n->item, raw, h->data_fd, head.len, &len);
	}
	pthread_rwlock_unlock(&fs->lock);
	h->data_size = head.len + len;
	tfs_buf_free(&head);
	return rc;
}

/* One tensor a commit changes, as it was when the file was checked, and its new bytes. */
typedef struct {
	size_t item;
	char *name;
	int dtype;
	uint32_t n_dims;
	int64_t ne[TFS_MAX_DIMS];
	char *path;
} part;

/* What a commit turns into: the tensor (p[0]) and, for an MLX weight, its scale and bias
 * companions, which change with it in one journal op. */
typedef struct {
	part p[3];
	size_t n;
	bool raw, mlx;
	uint64_t data_off, payload;
} target;

static int add_part(tfsd_fs *fs, target *tg, size_t item)
{
	const tfs_tensor *t = tfs_model_tensor(fs->model, item);
	part *p = &tg->p[tg->n++];

	p->item = item;
	p->name = strdup(t->name);
	p->dtype = t->dtype;
	p->n_dims = t->n_dims;
	memcpy(p->ne, t->ne, sizeof(p->ne));
	return p->name ? 0 : -ENOMEM;
}

/* The tensors a commit of tensor item changes: itself, and an MLX weight's companions
 * (its global scale is kept). */
static int add_parts(tfsd_fs *fs, target *tg, size_t item)
{
	const tfs_tensor *t = tfs_model_tensor(fs->model, item);
	int rc = add_part(fs, tg, item);

	tg->mlx = t->q.mode != TFS_QMODE_NONE;
	if (!rc && tg->mlx)
		rc = add_part(fs, tg, (size_t)t->q_scale);
	if (!rc && tg->mlx && t->q.mode == TFS_QMODE_AFFINE)
		rc = add_part(fs, tg, (size_t)t->q_bias);
	return rc;
}

/* Checks the staged file of h against its tensor; fills tg.  0 or a negative errno. */
static int check_staged(tfsd_fs *fs, tfsd_handle *h, target *tg)
{
	tfsd_node *n = h->node;
	const size_t item = (size_t)n->item;
	const tfs_tensor *t = tfs_model_tensor(fs->model, item);
	tfs_buf head = { 0 };
	tfs_error err = { 0 };
	char msg[512];

	tg->raw = payload_raw(fs, n, &head, &err);
	tg->payload = tg->raw ? t->nbytes : tfs_tensor_f32_count(fs->model, item, NULL) * 4;
	tg->data_off = 0;
	tfs_buf_free(&head);
	if (n->kind == N_NPY) {
		uint8_t *p = malloc(STEP);
		size_t want = h->data_size < STEP ? (size_t)h->data_size : STEP;
		ssize_t got = p ? pread(h->data_fd, p, want, 0) : -1;
		int rc = got < 0 ? -EIO
			 : tfs_npy_check(&tg->data_off, fs->model, item, p, (size_t)got, &err);

		free(p);
		if (rc)
			return refuse_view(fs, n, rc < 0 && err.msg[0] ? err.code : TFS_E_IO,
					    err.msg[0] ? err.msg : "cannot read the staged file");
	}
	if (h->data_size != tg->data_off + tg->payload) {
		snprintf(msg, sizeof(msg), "%llu bytes of values written, the tensor has %llu",
			 (unsigned long long)(h->data_size - (h->data_size < tg->data_off ? h->data_size
											 : tg->data_off)),
			 (unsigned long long)tg->payload);
		return refuse_view(fs, n, TFS_E_INVALID, msg);
	}
	return add_parts(fs, tg, item);
}

/* Fills the staged files of tg's parts (open in fd) from h's values. */
static int fill_bytes(tfsd_fs *fs, tfsd_handle *h, const target *tg, const int *fd)
{
	tfs_error err = { 0 };
	int rc;

	if (tg->raw)
		return tfsd_copy_range(fd[0], h->data_fd, tg->data_off, tg->payload);
	pthread_rwlock_rdlock(&fs->lock);
	if (tg->mlx)
		rc = tfs_mlx_requantize(fs->model, tg->p[0].item, h->data_fd, tg->data_off, fd[0],
					fd[1], tg->n > 2 ? fd[2] : -1, NULL, &err);
	else
		rc = tfs_tensor_requantize(fs->model, tg->p[0].item, fs->imatrix, h->data_fd,
					   tg->data_off, fd[0], NULL, &err);
	pthread_rwlock_unlock(&fs->lock);
	return rc ? refuse_view(fs, h->node, rc, err.msg) : 0;
}

/* The stored bytes of tg's parts into new staged files (their path). */
static int make_bytes(tfsd_fs *fs, tfsd_handle *h, target *tg)
{
	tfs_error err = { 0 };
	int fd[3] = { -1, -1, -1 }, rc = 0;

	for (size_t k = 0; !rc && k < tg->n; k++) {
		pthread_rwlock_wrlock(&fs->lock);
		rc = tfs_staging_new_data(fs->staging, &tg->p[k].path, &err);
		pthread_rwlock_unlock(&fs->lock);
		if (rc)
			rc = tfsd_fail(fs, &err);
		else if ((fd[k] = open(tg->p[k].path, O_RDWR | O_CLOEXEC)) < 0)
			rc = -errno;
	}
	if (!rc)
		rc = fill_bytes(fs, h, tg, fd);
	for (size_t k = 0; k < tg->n; k++) {
		if (fd[k] >= 0 && !rc && fsync(fd[k]) < 0)
			rc = -errno;
		if (fd[k] >= 0)
			close(fd[k]);
	}
	for (size_t k = 0; rc && k < tg->n; k++) {
		if (tg->p[k].path)
			unlink(tg->p[k].path);
		free(tg->p[k].path);
		tg->p[k].path = NULL;
	}
	return rc;
}

/* Whether every part of tg is still the tensor it was (not renamed or deleted meanwhile). */
static bool parts_current(tfsd_fs *fs, const tfsd_node *n, const target *tg)
{
	if (n->deleted || n->item != (long)tg->p[0].item)
		return false;
	for (size_t k = 0; k < tg->n; k++) {
		const tfs_tensor *t = tfs_model_tensor(fs->model, tg->p[k].item);

		if (!t || t->deleted || strcmp(t->name, tg->p[k].name) != 0)
			return false;
	}
	return true;
}

/* Stages tg's files: one set_tensor op, or one set_tensors op for an MLX triple. */
/* A change of tensor i's bytes: node caches, and tensors/<t>'s inode (tfsd_node_ino). */
static void bump(tfsd_fs *fs, size_t i)
{
	tfsd_node *raw = tfsd_item_node(fs, D_TENSORS, (long)i);
	fs->gen++;
	if (raw)
		raw->ver++;
}

/* Whether every part's new stored bytes are the bytes it has (the values written back as
 * they were: np.save of what np.load gave); fs->lock held. */
static bool parts_unchanged(tfsd_fs *fs, const target *tg)
{
	bool same = true;
	for (size_t k = 0; same && k < tg->n; k++) {
		const tfs_tensor *t = tfs_model_tensor(fs->model, tg->p[k].item);
		int fd = open(tg->p[k].path, O_RDONLY | O_CLOEXEC);
		struct stat st;
		same = fd >= 0 && fstat(fd, &st) == 0 && t->src >= 0 && t->dtype == tg->p[k].dtype &&
		       t->n_dims == tg->p[k].n_dims &&
		       !memcmp(t->ne, tg->p[k].ne, sizeof(t->ne[0]) * t->n_dims) &&
		       tfsd_same_bytes(fd, (uint64_t)st.st_size,
				      tfs_model_source(fs->model, (size_t)t->src), t->offset, t->nbytes);
		if (fd >= 0)
			close(fd);
	}
	return same;
}

static int stage_parts(tfsd_fs *fs, tfsd_node *n, const target *tg, tfs_error *err)
{
	tfs_tensor_file f[3];
	int rc = 0;
	bool staged = false;

	pthread_rwlock_wrlock(&fs->lock);
	if (!parts_current(fs, n, tg) || parts_unchanged(fs, tg)) {
		/* renamed or deleted meanwhile: the values were the old tensor's, dropped; or
		 * the same bytes again: nothing to journal */
		for (size_t k = 0; k < tg->n; k++)
			unlink(tg->p[k].path);
	} else {
		for (size_t k = 0; k < tg->n; k++)
			f[k] = (tfs_tensor_file){ tg->p[k].name, tg->p[k].dtype, tg->p[k].n_dims,
						  tg->p[k].ne, tg->p[k].path };
		rc = tg->n == 1 ? tfs_staging_set_tensor(fs->staging, fs->model, f[0].name,
							 f[0].dtype, f[0].n_dims, f[0].ne,
							 f[0].path, err)
				: tfs_staging_set_tensors(fs->staging, fs->model, f, tg->n, err);
		staged = true;
	}
	for (size_t k = 0; staged && !rc && k < tg->n; k++) {
		long i = tfs_model_find_tensor(fs->model, tg->p[k].name);
		if (i >= 0)
			bump(fs, (size_t)i);
	}
	pthread_rwlock_unlock(&fs->lock);
	return rc;
}

int tfsd_numbers_commit(tfsd_fs *fs, tfsd_handle *h)
{
	tfsd_node *n = h->node;
	target tg = { 0 };
	tfs_error err = { 0 };
	int rc;

	if (h->data_fd < 0)
		return 0;
	pthread_rwlock_rdlock(&fs->lock);
	bool gone = n->deleted || n->item < 0; /* the values were a removed tensor's: dropped */
	rc = gone ? 0 : check_staged(fs, h, &tg);
	pthread_rwlock_unlock(&fs->lock);
	if (!rc && !gone)
		rc = make_bytes(fs, h, &tg);
	if (!rc && !gone && (rc = stage_parts(fs, n, &tg, &err)))
		rc = tfsd_fail(fs, &err);
	for (size_t k = 0; k < tg.n; k++) {
		free(tg.p[k].path);
		free(tg.p[k].name);
	}
	tfsd_handle_drop_data(h);   /* the values are the tensor's bytes now (or refused) */
	if (rc) {
		/* refused for good: a later flush of this handle (numpy's tofile closes a dup
		 * first, and drops that error) must report it too */
		h->failed = true;
		h->error = rc;
	}
	return rc;
}
