/* source.c - reading a source's bytes, whatever holds them: a file, memory, a remote file. */
#include "model_impl.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

int tfs_source_pread(const tfs_source *s, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	return tfs_source_pread_in(s, buf, len, off, 0, s->size, err);
}

int tfs_source_pread_in(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			uint64_t lo, uint64_t hi, tfs_error *err)
{
	uint64_t end;
	if (tfs_add_overflow(off, len, &end) || end > s->size)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: read [%llu, +%llu) past its end (%llu bytes): the file "
				     "changed after it was opened?",
				     s->path, (unsigned long long)off, (unsigned long long)len,
				     (unsigned long long)s->size);
	if (s->remote)
		return tfs_remote_pread_in(s->remote, buf, len, off, lo, hi, err);
	if (s->fd < 0 && s->map) { /* tfs_model_open_mem */
		memcpy(buf, s->map + off, (size_t)len);
		return 0;
	}
	/* pread, not the mapping: no page faults one page at a time (the mapping is
	 * MADV_RANDOM) and nothing added to the daemon's RSS */
	uint8_t *p = buf;
	while (len) {
		ssize_t n = pread(s->fd, p, len > (1u << 30) ? 1u << 30 : (size_t)len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return tfs_error_sys(err, errno, "%s: read at offset %llu", s->path,
					     (unsigned long long)off);
		if (n == 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: ends early at offset %llu", s->path,
					     (unsigned long long)off);
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int tfs_source_cache_ready(const tfs_source *s, uint64_t off, uint64_t len, uint64_t lo,
			   uint64_t hi, int *fd, tfs_error *err)
{
	if (!s->remote)
		return tfs_error_set(err, TFS_E_INVALID, "%s: not a remote source", s->path);
	return tfs_remote_ready(s->remote, off, len, lo, hi, fd, err);
}

int tfs_source_head(const tfs_source *s, uint64_t end, tfs_error *err)
{
	return s->remote ? tfs_remote_head(s->remote, end, err) : 0;
}

void tfs_source_release_remote(tfs_source *s)
{
	tfs_remote_free(s->remote);
	s->remote = NULL;
	s->map = NULL;
}

int tfs_source_samples_differ(const tfs_source *sa, uint64_t off, const uint8_t *pb, uint64_t n,
			      tfs_error *err)
{
	uint8_t buf[4096];
	uint64_t at[3] = { 0, n / 2, n > sizeof(buf) ? n - sizeof(buf) : 0 };
	for (int i = 0; i < 3 && n; i++) {
		uint64_t k = n - at[i] < sizeof(buf) ? n - at[i] : sizeof(buf);
		int rc = tfs_source_pread(sa, buf, k, off + at[i], err);
		if (rc)
			return rc;
		if (memcmp(buf, pb + at[i], (size_t)k) != 0)
			return 1;
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
	size_t n = rc ? 0 : (size_t)st.st_size, got = 0;
	uint8_t *buf = rc ? NULL : malloc(n + 1);
	if (!rc && !buf)
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
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
