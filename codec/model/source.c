/*
 * source.c - a source's bytes, whatever holds them: one operations table per kind (a local
 * file, bytes in memory, a remote file, bytes computed by callbacks), and the functions
 * every reader calls.
 */
#include "source_impl.h"
#include "cursor.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== a local file: a descriptor and a read-only mapping ==== */

/* The error of a read of [off, +len) that a file no longer has: it shrank (was truncated or
 * rewritten) under the mount.  Reads must fail then, never come back short: a short read
 * is the end of the file to the reader (cp would copy a short file and exit 0). */
static int shrank(const tfs_source *s, uint64_t off, uint64_t len, tfs_error *err)
{
	struct stat st;
	unsigned long long now = fstat(s->fd, &st) == 0 ? (unsigned long long)st.st_size : 0;
	return tfs_error_sys(err, EIO, "%s: the file shrank under the mount (it was %llu bytes "
			     "when opened, it is now %llu): the bytes at [%llu, +%llu) are gone; "
			     "remount to read the file as it is now", s->path,
			     (unsigned long long)s->size, now, (unsigned long long)off,
			     (unsigned long long)len);
}

static int64_t file_read(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			 uint64_t lo, uint64_t hi, tfs_error *err)
{
	/* pread, not the mapping: no page faults one page at a time (the mapping is
	 * MADV_RANDOM) and nothing added to the daemon's RSS */
	(void)lo, (void)hi;
	uint8_t *p = buf;
	uint64_t got = 0;
	while (got < len) {
		uint64_t k = len - got > (1u << 30) ? 1u << 30 : len - got;
		ssize_t n = pread(s->fd, p + got, (size_t)k, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return tfs_error_sys(err, errno, "%s: read at offset %llu", s->path,
					     (unsigned long long)(off + got));
		if (n == 0) /* (within the size it had when opened: checked by the caller) */
			return shrank(s, off + got, len - got, err);
		got += (uint64_t)n;
	}
	return (int64_t)got;
}

static int file_splice_fd(tfs_source_fd *out, const tfs_source *s, uint64_t off, uint64_t len,
			  uint64_t lo, uint64_t hi, tfs_error *err)
{
	(void)lo, (void)hi;
	/* a splice of bytes the file no longer has would give a short reply, which a reader
	 * takes for the end of the file */
	int rc = tfs_source_present(s, off, len, err);
	if (rc)
		return rc;
	out->fd = s->fd;
	out->pinned = false;
	return 0;
}

static int file_fd(const tfs_source *s) { return s->fd; }

static int file_hold(tfs_source *copy, const tfs_source *s, tfs_error *err)
{
	copy->fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0);
	copy->map = NULL; /* read with pread */
	return copy->fd < 0 ? tfs_error_sys(err, errno, "%s", s->path) : 0;
}

static void file_release(tfs_source *s)
{
	if (s->map)
		munmap((void *)(uintptr_t)s->map, (size_t)s->size);
	if (s->fd >= 0)
		close(s->fd);
}

static const tfs_source_ops file_ops = {
	.kind = "file", .bytes = TFS_BYTES_MAPPED, .read = file_read,
	.splice_fd = file_splice_fd, .file_fd = file_fd, .hold = file_hold,
	.release = file_release,
};

int tfs_source_open_file(tfs_source *s, const char *path, tfs_error *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tfs_error_sys(err, errno, "%s", path);
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return tfs_error_sys(err, e, "%s", path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not a regular file", path);
	}
	/* while headers are parsed, no readahead around them (the device's window can be
	 * megabytes per file); tfs_model_open turns it back on once the model is open */
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	const uint8_t *map = NULL;
	if (st.st_size > 0) {
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			int e = errno;
			close(fd);
			return tfs_error_sys(err, e, "%s: mmap", path);
		}
		/* no blind readahead on faults: readers say what they need (tfs_source_madvise),
		 * so parsing a header reads the header, not megabytes around it */
		madvise((void *)(uintptr_t)map, (size_t)st.st_size, MADV_RANDOM);
	}
	s->ops = &file_ops;
	s->fd = fd;
	s->ctx = NULL;
	s->size = (uint64_t)st.st_size;
	s->map = map;
	s->mtime_sec = st.st_mtim.tv_sec;
	s->mtime_nsec = st.st_mtim.tv_nsec;
	return 0;
}

void tfs_source_advise_normal(const tfs_source *s)
{
	if (s->ops->file_fd && s->ops->file_fd(s) >= 0)
		posix_fadvise(s->ops->file_fd(s), 0, 0, POSIX_FADV_NORMAL);
}

/* ==== bytes in memory (tfs_model_open_mem's, a manifest fetched whole), borrowed ==== */

static int64_t memory_read(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			   uint64_t lo, uint64_t hi, tfs_error *err)
{
	(void)lo, (void)hi, (void)err;
	if (len)
		memcpy(buf, s->map + off, (size_t)len);
	return (int64_t)len;
}

static void nothing_to_release(tfs_source *s) { (void)s; }

static const tfs_source_ops memory_ops = {
	.kind = "memory", .bytes = TFS_BYTES_MEMORY, .read = memory_read,
	.release = nothing_to_release,
};

void tfs_source_init_memory(tfs_source *s, const uint8_t *data, uint64_t size)
{
	s->ops = &memory_ops;
	s->fd = -1;
	s->ctx = NULL;
	s->size = size;
	s->map = size ? data : NULL;
}

/* ==== closed: a staged source no tensor or file refers to any more ==== */

static int64_t closed_read(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			   uint64_t lo, uint64_t hi, tfs_error *err)
{
	(void)s, (void)buf, (void)len, (void)off, (void)lo, (void)hi, (void)err;
	return 0; /* (size 0: only empty reads get here) */
}

static const tfs_source_ops closed_ops = {
	.kind = "closed", .bytes = TFS_BYTES_NONE, .read = closed_read,
	.release = nothing_to_release,
};

/* ==== a remote file: its header in memory, its data through the block cache ==== */

static int64_t remote_read(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			   uint64_t lo, uint64_t hi, tfs_error *err)
{
	int rc = tfs_remote_pread_in(s->ctx, buf, len, off, lo, hi, err);
	return rc ? rc : (int64_t)len;
}

static int remote_splice_fd(tfs_source_fd *out, const tfs_source *s, uint64_t off,
			    uint64_t len, uint64_t lo, uint64_t hi, tfs_error *err)
{
	out->pinned = true;
	return tfs_remote_ready(s->ctx, off, len, lo, hi, &out->fd, err);
}

static int remote_head(const tfs_source *s, uint64_t end, tfs_error *err)
{
	return tfs_remote_head(s->ctx, end, err);
}

static int remote_forget(const tfs_source *s, tfs_error *err)
{
	return tfs_remote_forget(s->ctx, err);
}

static const tfs_source_ops remote_borrowed_ops;

static int remote_hold(tfs_source *copy, const tfs_source *s, tfs_error *err)
{
	(void)s, (void)err;
	copy->ops = &remote_borrowed_ops; /* the model's remote file, which outlives its images */
	return 0;
}

static void remote_release(tfs_source *s) { tfs_remote_free(s->ctx); }

static void remote_quiesce(const tfs_source *s) { tfs_remote_quiesce(s->ctx); }

static const tfs_source_ops remote_ops = {
	.kind = "remote", .bytes = TFS_BYTES_HEAD, .remote = true, .read = remote_read,
	.splice_fd = remote_splice_fd, .head = remote_head, .forget = remote_forget,
	.hold = remote_hold, .release = remote_release, .quiesce = remote_quiesce,
};

static const tfs_source_ops remote_borrowed_ops = {
	.kind = "remote", .bytes = TFS_BYTES_HEAD, .remote = true, .read = remote_read,
	.splice_fd = remote_splice_fd, .head = remote_head, .forget = remote_forget,
	.release = nothing_to_release, .quiesce = remote_quiesce,
};

void tfs_source_init_remote(tfs_source *s, struct tfs_remote *r)
{
	s->ops = &remote_ops;
	s->fd = -1;
	s->ctx = r;
	s->size = tfs_remote_size(r);
	s->map = tfs_remote_map(r);
	s->mtime_sec = tfs_remote_mtime(r);
	s->mtime_nsec = 0;
}

int tfs_source_open_remote(tfs_source *s, const char *url, const tfs_open_opts *o,
			   tfs_error *err)
{
	tfs_remote *r = NULL;
	int rc = tfs_remote_open(&r, url, o, err);
	if (!rc)
		tfs_source_init_remote(s, r);
	return rc;
}

/* ==== computed: bytes made by callbacks (a view's tensors) ==== */

static int64_t computed_read(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			     uint64_t lo, uint64_t hi, tfs_error *err)
{
	(void)lo, (void)hi;
	return s->computed->read(s->ctx, buf, len, off, err);
}

static int computed_splice_fd(tfs_source_fd *out, const tfs_source *s, uint64_t off,
			      uint64_t len, uint64_t lo, uint64_t hi, tfs_error *err)
{
	(void)lo, (void)hi;
	if (!s->computed->splice_fd)
		return TFS_PASSTHROUGH;
	int rc = s->computed->splice_fd(s->ctx, off, len, out, err);
	if (!rc && (out->fd < 0 || out->len == 0 || out->len > len)) {
		tfs_source_fd_done(out);
		return TFS_PASSTHROUGH;
	}
	return rc;
}

static const tfs_source_ops computed_borrowed_ops;

static int computed_hold(tfs_source *copy, const tfs_source *s, tfs_error *err)
{
	(void)err;
	if (s->computed->hold)
		copy->ctx = s->computed->hold(s->ctx);
	else
		copy->ops = &computed_borrowed_ops;
	return 0;
}

static void computed_release(tfs_source *s)
{
	if (s->computed->release)
		s->computed->release(s->ctx);
}

static const tfs_source_ops computed_ops = {
	.kind = "computed", .bytes = TFS_BYTES_NONE, .read = computed_read,
	.splice_fd = computed_splice_fd, .hold = computed_hold, .release = computed_release,
};

static const tfs_source_ops computed_borrowed_ops = {
	.kind = "computed", .bytes = TFS_BYTES_NONE, .read = computed_read,
	.splice_fd = computed_splice_fd, .release = nothing_to_release,
};

void tfs_source_init_computed(tfs_source *s, const tfs_computed_ops *ops, void *ctx,
			      uint64_t size)
{
	s->ops = &computed_ops;
	s->computed = ops;
	s->fd = -1;
	s->ctx = ctx;
	s->size = size;
	s->map = NULL;
}

/* ==== any source ==== */

void tfs_source_close(tfs_source *s)
{
	if (s->ops)
		s->ops->release(s);
	s->ops = &closed_ops;
	s->fd = -1;
	s->ctx = NULL;
	s->map = NULL;
	s->size = 0;
}

void tfs_source_free(tfs_source *s)
{
	tfs_source_close(s);
	free(s->path);
	free(s->label);
	s->path = s->label = NULL;
}

void tfs_source_quiesce(const tfs_source *s)
{
	if (s->ops && s->ops->quiesce)
		s->ops->quiesce(s);
}

int tfs_source_hold(tfs_source *copy, const tfs_source *s, tfs_error *err)
{
	*copy = *s;
	copy->path = strdup(s->path);
	copy->label = strdup(s->label);
	copy->ops = &closed_ops; /* until held */
	if (!copy->path || !copy->label) {
		tfs_source_free(copy);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	copy->ops = s->ops;
	int rc = s->ops->hold ? s->ops->hold(copy, s, err) : 0;
	if (rc) {
		copy->ops = &closed_ops;
		tfs_source_free(copy);
	}
	return rc;
}

int tfs_source_held_new(tfs_source **out, const tfs_source *s, tfs_error *err)
{
	tfs_source *c = malloc(sizeof(*c));
	if (!c)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	int rc = tfs_source_hold(c, s, err);
	if (rc) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void tfs_source_held_free(tfs_source *held)
{
	if (held) {
		tfs_source_free(held);
		free(held);
	}
}

int tfs_source_copy_out(int fd, const char *path, const tfs_source *s, uint64_t off,
			uint64_t len, tfs_error *err)
{
	return tfs_source_copy(fd, path, 0, s, off, len, 0, NULL, err);
}

const char *tfs_source_label(const tfs_source *s) { return s->label; }
const char *tfs_source_path(const tfs_source *s) { return s->path; }
uint64_t tfs_source_size(const tfs_source *s) { return s->size; }
bool tfs_source_is_remote(const tfs_source *s) { return s->ops->remote; }

const char *tfs_source_etag(const tfs_source *s)
{
	return s->ops->remote && s->ctx ? tfs_remote_etag(s->ctx) : NULL;
}

struct timespec tfs_source_mtime(const tfs_source *s)
{
	return (struct timespec){ .tv_sec = (time_t)s->mtime_sec, .tv_nsec = (long)s->mtime_nsec };
}

const uint8_t *tfs_source_data(const tfs_source *s)
{
	tfs_source_bytes b = s->ops->bytes;
	return b == TFS_BYTES_MAPPED || b == TFS_BYTES_MEMORY ? s->map : NULL;
}

const uint8_t *tfs_source_memory(const tfs_source *s)
{
	return s->ops->bytes == TFS_BYTES_MEMORY ? s->map : NULL;
}

int tfs_source_present(const tfs_source *s, uint64_t off, uint64_t len, tfs_error *err)
{
	struct stat st;
	uint64_t end;
	if (s->ops != &file_ops || s->fd < 0 || tfs_add_overflow(off, len, &end))
		return 0;
	if (fstat(s->fd, &st) == 0 && (uint64_t)st.st_size >= end)
		return 0;
	return shrank(s, off, len, err);
}

const uint8_t *tfs_source_mapping(const tfs_source *s)
{
	return s->ops->bytes == TFS_BYTES_MAPPED ? s->map : NULL;
}

void tfs_source_madvise(const tfs_source *s, uint64_t off, uint64_t len, int advice)
{
	const uint8_t *map = tfs_source_mapping(s);
	uint64_t pg = 4096, a = off & ~(pg - 1), b = off + len;
	if (!map || !len)
		return;
	if (b > s->size)
		b = s->size;
	if (b > a)
		madvise((void *)(uintptr_t)(map + a), (size_t)(b - a), advice);
}

int tfs_source_dup_fd(const tfs_source *s)
{
	int fd = s->ops->file_fd ? s->ops->file_fd(s) : -1;
	if (fd < 0) {
		errno = EBADF;
		return -1;
	}
	return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

int tfs_source_head(const tfs_source *s, uint64_t end, tfs_error *err)
{
	return s->ops->head ? s->ops->head(s, end, err) : 0;
}

int tfs_source_forget(const tfs_source *s, tfs_error *err)
{
	return s->ops->forget ? s->ops->forget(s, err) : 0;
}

int tfs_source_splice_fd(tfs_source_fd *out, const tfs_source *s, uint64_t off, uint64_t len,
			 uint64_t lo, uint64_t hi, tfs_error *err)
{
	out->fd = -1;
	out->pinned = false;
	out->owned = false;
	out->at = off;
	out->len = len;
	return s->ops->splice_fd ? s->ops->splice_fd(out, s, off, len, lo, hi, err)
				 : TFS_PASSTHROUGH;
}

void tfs_source_fd_done(tfs_source_fd *f)
{
	if ((f->pinned || f->owned) && f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/* ==== reading ==== */

static int past_end(const tfs_source *s, uint64_t off, uint64_t len, tfs_error *err)
{
	uint64_t end;
	if (!tfs_add_overflow(off, len, &end) && end <= s->size)
		return 0;
	return tfs_error_set(err, TFS_E_FORMAT,
			     "%s: read [%llu, +%llu) past its end (%llu bytes): the file changed "
			     "after it was opened?", s->path, (unsigned long long)off,
			     (unsigned long long)len, (unsigned long long)s->size);
}

int64_t tfs_source_read(const tfs_source *s, void *buf, uint64_t len, uint64_t off, uint64_t lo,
			uint64_t hi, tfs_error *err)
{
	int rc = past_end(s, off, len, err);
	return rc ? rc : s->ops->read(s, buf, len, off, lo, hi, err);
}

int tfs_source_pread_in(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			uint64_t lo, uint64_t hi, tfs_error *err)
{
	int64_t got = tfs_source_read(s, buf, len, off, lo, hi, err);
	if (got < 0)
		return (int)got;
	if ((uint64_t)got < len)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: ends early at offset %llu", s->path,
				     (unsigned long long)(off + (uint64_t)got));
	return 0;
}

int tfs_source_pread(const tfs_source *s, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	return tfs_source_pread_in(s, buf, len, off, 0, s->size, err);
}

int tfs_source_samples_differ(bool *differ, const tfs_source *sa, uint64_t off,
			      const uint8_t *pb, uint64_t n, tfs_error *err)
{
	uint8_t buf[4096];
	*differ = false;
	uint64_t at[3] = { 0, n / 2, n > sizeof(buf) ? n - sizeof(buf) : 0 };
	for (int i = 0; i < 3 && n; i++) {
		uint64_t k = n - at[i] < sizeof(buf) ? n - at[i] : sizeof(buf);
		int rc = tfs_source_pread(sa, buf, k, off + at[i], err);
		if (rc)
			return rc;
		if (memcmp(buf, pb + at[i], (size_t)k) != 0) {
			*differ = true;
			return 0;
		}
	}
	return 0;
}

int tfs_read_small_file(const char *path, uint64_t cap, uint8_t **out, uint64_t *len,
			tfs_error *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	if (fd < 0)
		return tfs_error_sys(err, errno, "%s", path);
	if (fstat(fd, &st) < 0)
		rc = tfs_error_sys(err, errno, "%s", path);
	else if (!S_ISREG(st.st_mode))
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: not a regular file", path);
	else if ((uint64_t)st.st_size > cap)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: file too large (%llu bytes, at most "
				   "%llu)", path, (unsigned long long)st.st_size,
				   (unsigned long long)cap);
	size_t n = rc ? 0 : (size_t)st.st_size;
	uint8_t *buf = rc ? NULL : malloc(n + 1);
	if (!rc && !buf)
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
	size_t got = 0;
	while (!rc && got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = tfs_error_sys(err, errno, "%s", path);
		else if (r == 0)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: shorter than expected", path);
		else
			got += (size_t)r;
	}
	close(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/* ==== copying into new files ==== */

static int read_through(const void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	return tfs_source_pread(ctx, buf, len, off, err);
}

uint32_t tfs_source_clone_block(int fd, const tfs_source *s)
{
	int from = s->ops->file_fd ? s->ops->file_fd(s) : -1;
	return from >= 0 ? tfs_io_clone_block(fd, from, s->size) : 0;
}

static int copy_plain(int fd, const char *path, uint64_t pos, const tfs_source *s, uint64_t off,
		      uint64_t len, const tfs_io_progress *p, tfs_error *err)
{
	int from = s->ops->file_fd ? s->ops->file_fd(s) : -1;
	tfs_io_from f = { .fd = from, .path = s->path, .map = from >= 0 ? s->map : NULL,
			  .read = from >= 0 ? NULL : read_through, .ctx = s };
	return tfs_io_copy(fd, path, pos, &f, off, len, p, err);
}

int tfs_source_copy(int fd, const char *path, uint64_t pos, const tfs_source *s, uint64_t off,
		    uint64_t len, uint32_t blk, const tfs_io_progress *p, tfs_error *err)
{
	int from = s->ops->file_fd ? s->ops->file_fd(s) : -1;
	uint64_t lead = blk ? (blk - pos % blk) % blk : 0, cloned;
	if (!blk || from < 0 || (pos - off) % blk || len < lead + blk)
		return copy_plain(fd, path, pos, s, off, len, p, err);
	uint64_t mid = (len - lead) / blk * blk;
	int rc = copy_plain(fd, path, pos, s, off, lead, p, err);
	if (rc)
		return rc;
	tfs_io_clone(&cloned, fd, pos + lead, from, off + lead, mid, p);
	lead += cloned;
	return copy_plain(fd, path, pos + lead, s, off + lead, len - lead, p, err);
}
