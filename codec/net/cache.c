/* cache.c - the on-disk block cache of remote files: sparse data, a byte map, LRU. */
#include "cache.h"
#include "hex.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tfs_cache {
	char *dir;
	char *data_path, *map_path;
	int data_fd, map_fd;
	uint64_t size, n_blocks;
	uint8_t *map;            /* memory copy of the map file (may lag another mount's) */
	uint32_t *used;          /* per block: the clock tick of its last use (LRU) */
	uint32_t tick;
	uint64_t cap, usage;     /* bytes: the limit, and the directory's use as counted here */
};

/* ==== names ==== */

static char *entry_path(const char *dir, const char *key, const char *ext)
{
	char *p;
	return asprintf(&p, "%s/%s%s", dir, key, ext) < 0 ? NULL : p;
}

/* mkdir -p dir (mode 0700). */
static int make_dirs(const char *dir)
{
	char *d = strdup(dir);
	if (!d)
		return -1;
	for (char *p = d + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(d, 0700);
		*p = '/';
	}
	int rc = mkdir(d, 0700) == 0 || errno == EEXIST ? 0 : -1;
	free(d);
	return rc;
}

char *tfs_cache_default_dir(void)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *p;
	if (x && x[0] == '/')
		return asprintf(&p, "%s/tensorfs", x) < 0 ? NULL : p;
	return asprintf(&p, "%s/.cache/tensorfs", home && *home ? home : "/tmp") < 0 ? NULL : p;
}

/* ==== the URL's newest validator ==== */

static char *last_path(const char *dir, const char *url)
{
	char h[65];
	tfs_sha256_hex(h, url, strlen(url));
	return entry_path(dir, h, ".last");
}

int tfs_cache_last_get(const char *dir, const char *url, tfs_validator *v)
{
	char *p = last_path(dir, url), line[3][300];
	FILE *f = p ? fopen(p, "re") : NULL;
	int rc = -1;
	free(p);
	if (!f)
		return -1;
	memset(v, 0, sizeof(*v));
	if (fgets(line[0], sizeof(line[0]), f) && fgets(line[1], sizeof(line[1]), f) &&
	    fgets(line[2], sizeof(line[2]), f)) {
		line[0][strcspn(line[0], "\n")] = line[1][strcspn(line[1], "\n")] = '\0';
		snprintf(v->etag, sizeof(v->etag), "%.255s", line[0]);
		snprintf(v->last_modified, sizeof(v->last_modified), "%.63s", line[1]);
		v->size = strtoull(line[2], NULL, 10);
		rc = v->size ? 0 : -1;
	}
	fclose(f);
	return rc;
}

void tfs_cache_last_put(const char *dir, const char *url, const tfs_validator *v)
{
	char *p = last_path(dir, url), *tmp = NULL;
	if (!p || asprintf(&tmp, "%s.%d.tmp", p, (int)getpid()) < 0) {
		free(p);
		return;
	}
	FILE *f = fopen(tmp, "we");
	if (f) {
		fprintf(f, "%s\n%s\n%llu\n", v->etag, v->last_modified, (unsigned long long)v->size);
		if (fclose(f) == 0 && rename(tmp, p) == 0)
			tmp[0] = '\0';
	}
	if (tmp[0])
		unlink(tmp);
	free(tmp);
	free(p);
}

/* ==== an entry ==== */

/* Bytes the directory's data files take on disk. */
static uint64_t dir_usage(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	uint64_t sum = 0;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n > 5 && strcmp(e->d_name + n - 5, ".data") == 0 &&
		    fstatat(dirfd(d), e->d_name, &st, 0) == 0)
			sum += (uint64_t)st.st_blocks * 512;
	}
	if (d)
		closedir(d);
	return sum;
}

static int open_files(tfs_cache *c, tfs_error *err)
{
	struct stat st;
	c->data_fd = open(c->data_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	c->map_fd = open(c->map_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (c->data_fd < 0 || c->map_fd < 0 || fstat(c->map_fd, &st) < 0)
		return tfs_error_sys(err, errno, "cache %s", c->dir);
	/* a map of another length is not this entry's: start over */
	if ((uint64_t)st.st_size != c->n_blocks &&
	    (ftruncate(c->map_fd, 0) < 0 || ftruncate(c->map_fd, (off_t)c->n_blocks) < 0 ||
	     ftruncate(c->data_fd, 0) < 0))
		return tfs_error_sys(err, errno, "cache %s", c->map_path);
	if (ftruncate(c->data_fd, (off_t)c->size) < 0)
		return tfs_error_sys(err, errno, "cache %s", c->data_path);
	ssize_t r = c->n_blocks ? pread(c->map_fd, c->map, (size_t)c->n_blocks, 0) : 0;
	if (r < 0)
		return tfs_error_sys(err, errno, "cache %s", c->map_path);
	for (uint64_t b = 0; b < c->n_blocks; b++)
		c->map[b] = (uint64_t)r > b && c->map[b] == 1;
	futimens(c->map_fd, NULL); /* this entry was used now: the newest for eviction */
	return 0;
}

/* Removes the entries of url's other versions (names "<hash of url>-*" but not mine): a
 * mount still reading one keeps its open files; the map goes first, as in eviction. */
static void remove_other_versions(const tfs_cache *c, const char *url_hash)
{
	DIR *d = opendir(c->dir);
	struct dirent *e;
	const char *mine = strrchr(c->map_path, '/') + 1;
	size_t hl = strlen(url_hash), keep = strlen(mine) - 4; /* without ".map" */
	for (int pass = 0; d && pass < 2; pass++) { /* the maps, then the data files */
		const char *ext = pass ? ".data" : ".map";
		size_t el = strlen(ext);
		rewinddir(d);
		while ((e = readdir(d))) {
			size_t n = strlen(e->d_name);
			if (n > hl + 1 + el && strncmp(e->d_name, url_hash, hl) == 0 &&
			    e->d_name[hl] == '-' && strcmp(e->d_name + n - el, ext) == 0 &&
			    !(n - el == keep && strncmp(e->d_name, mine, keep) == 0))
				unlinkat(dirfd(d), e->d_name, 0);
		}
	}
	if (d)
		closedir(d);
}

int tfs_cache_open(tfs_cache **out, const char *dir, const char *url, const tfs_validator *v,
		   uint64_t cap, tfs_error *err)
{
	char *key_src = NULL, key[65 + 65], url_hash[65];
	tfs_cache *c = calloc(1, sizeof(*c));
	*out = NULL;
	if (!c || asprintf(&key_src, "%s\n%s\n%s\n%llu", url, v->etag, v->last_modified,
			   (unsigned long long)v->size) < 0) {
		free(c);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	tfs_sha256_hex(url_hash, url, strlen(url));
	memcpy(key, url_hash, 64); /* "<hash of url>-<hash of url and version>" */
	key[64] = '-';
	tfs_sha256_hex(key + 65, key_src, strlen(key_src));
	free(key_src);
	c->data_fd = c->map_fd = -1;
	c->size = v->size;
	c->n_blocks = (v->size + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK;
	c->cap = cap;
	if (!(c->dir = strdup(dir)) || !(c->data_path = entry_path(dir, key, ".data")) ||
	    !(c->map_path = entry_path(dir, key, ".map")) ||
	    !(c->map = calloc(c->n_blocks + 1, 1)) ||
	    !(c->used = calloc(c->n_blocks + 1, sizeof(*c->used)))) {
		tfs_cache_free(c);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	int rc = make_dirs(dir) ? tfs_error_sys(err, errno, "cache directory %s", dir)
				: open_files(c, err);
	if (rc) {
		tfs_cache_free(c);
		return rc;
	}
	remove_other_versions(c, url_hash);
	c->usage = dir_usage(dir);
	*out = c;
	return 0;
}

void tfs_cache_free(tfs_cache *c)
{
	if (!c)
		return;
	if (c->data_fd >= 0)
		close(c->data_fd);
	if (c->map_fd >= 0)
		close(c->map_fd);
	free(c->map);
	free(c->used);
	free(c->data_path);
	free(c->map_path);
	free(c->dir);
	free(c);
}

uint64_t tfs_cache_cap(const tfs_cache *c) { return c->cap; }

bool tfs_cache_has(tfs_cache *c, uint64_t b)
{
	if (b >= c->n_blocks)
		return false;
	if (!c->map[b]) { /* another mount may have fetched it */
		uint8_t v = 0;
		if (pread(c->map_fd, &v, 1, (off_t)b) == 1 && v == 1)
			c->map[b] = 1;
	}
	return c->map[b] == 1;
}

int tfs_cache_write(tfs_cache *c, uint64_t pos, const void *data, size_t n)
{
	const uint8_t *p = data;
	while (n) {
		ssize_t w = pwrite(c->data_fd, p, n, (off_t)pos);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		pos += (uint64_t)w;
		n -= (size_t)w;
	}
	return 0;
}

/* ==== eviction (least recently used first) ==== */

/* Removes the least recently used other entry of the directory; false: none left. */
static bool evict_other_entry(tfs_cache *c)
{
	DIR *d = opendir(c->dir);
	struct dirent *e;
	struct stat st;
	char best[300] = "";
	struct timespec oldest = { 0, 0 };
	const char *mine = strrchr(c->map_path, '/') + 1;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 5 || n > 250 || strcmp(e->d_name + n - 4, ".map") != 0 ||
		    strcmp(e->d_name, mine) == 0 || fstatat(dirfd(d), e->d_name, &st, 0) < 0)
			continue;
		if (!best[0] || st.st_mtim.tv_sec < oldest.tv_sec ||
		    (st.st_mtim.tv_sec == oldest.tv_sec && st.st_mtim.tv_nsec < oldest.tv_nsec)) {
			snprintf(best, sizeof(best), "%.*s", (int)(n - 4), e->d_name);
			oldest = st.st_mtim;
		}
	}
	if (d)
		closedir(d);
	if (!best[0])
		return false;
	char *mp = entry_path(c->dir, best, ".map"), *dp = entry_path(c->dir, best, ".data");
	if (dp && stat(dp, &st) == 0) {
		uint64_t freed = (uint64_t)st.st_blocks * 512;
		c->usage = c->usage > freed ? c->usage - freed : 0;
	}
	if (mp)
		unlink(mp); /* the map first: a mount still using the entry keeps its open files */
	if (dp)
		unlink(dp);
	free(mp);
	free(dp);
	return true;
}

/* Locks [off, off+len) of the data file through fd (an open file description of its own):
 * F_RDLCK for a reader that splices bytes out (tfs_cache_pin), F_WRLCK for a punch.  These
 * are OFD locks, so they hold between the threads of one mount as between mounts. */
static int range_lock(int fd, short type, uint64_t off, uint64_t len, bool wait)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)off,
			    .l_len = (off_t)len };
	int rc;
	while ((rc = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl)) < 0 && errno == EINTR)
		;
	return rc;
}

static bool skipped(const uint64_t *skip, int n, uint64_t b)
{
	for (int i = 0; i < n; i++)
		if (skip[i] == b)
			return true;
	return false;
}

/* Evicts this entry's least recently used present block that no reader has pinned (punching
 * a block a reader is splicing would zero the pages it holds: a large folio is zeroed in
 * place, not dropped); false: none. */
static bool evict_own_block(tfs_cache *c)
{
	uint64_t skip[16];
	int n_skip = 0;
	for (;;) {
		uint64_t best = UINT64_MAX;
		uint32_t age = 0;
		for (uint64_t b = 0; b < c->n_blocks; b++) {
			uint32_t a = c->tick - __atomic_load_n(&c->used[b], __ATOMIC_RELAXED);
			if (c->map[b] == 1 && (best == UINT64_MAX || a > age) &&
			    !(n_skip && skipped(skip, n_skip, b))) {
				best = b;
				age = a;
			}
		}
		if (best == UINT64_MAX)
			return false;
		uint64_t off = best * TFS_CACHE_BLOCK;
		if (range_lock(c->data_fd, F_WRLCK, off, TFS_CACHE_BLOCK, false) < 0) {
			if ((errno != EAGAIN && errno != EACCES) || n_skip == 16)
				return false;
			skip[n_skip++] = best; /* pinned by a reader: the next oldest */
			continue;
		}
		uint8_t zero = 0, now = 0;
		c->map[best] = 0;
		/* another mount may have evicted it already (this memory copy lags): then no
		 * writer holds it either (they pin what they write), and the hole is there */
		if (pread(c->map_fd, &now, 1, (off_t)best) == 1 && now == 1 &&
		    pwrite(c->map_fd, &zero, 1, (off_t)best) == 1)
			fallocate(c->data_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
				  TFS_CACHE_BLOCK);
		range_lock(c->data_fd, F_UNLCK, off, TFS_CACHE_BLOCK, false);
		c->usage = c->usage > TFS_CACHE_BLOCK ? c->usage - TFS_CACHE_BLOCK : 0;
		return true;
	}
}

/* Down to 90% of the cap: other entries first, then this one's oldest blocks. */
static void evict(tfs_cache *c)
{
	uint64_t goal = c->cap / 10 * 9;
	while (c->usage > goal && evict_other_entry(c))
		;
	while (c->usage > goal && evict_own_block(c))
		;
}

void tfs_cache_mark(tfs_cache *c, uint64_t b0, uint64_t b1)
{
	static const uint8_t ones[256] = { [0 ... 255] = 1 };
	if (b1 > c->n_blocks)
		b1 = c->n_blocks;
	c->tick++;
	for (uint64_t b = b0; b < b1; b += 256) {
		size_t k = b1 - b < 256 ? (size_t)(b1 - b) : 256;
		if (pwrite(c->map_fd, ones, k, (off_t)b) != (ssize_t)k)
			return; /* not marked: fetched again next time */
	}
	for (uint64_t b = b0; b < b1; b++) {
		if (!c->map[b])
			c->usage += TFS_CACHE_BLOCK;
		c->map[b] = 1;
		c->used[b] = c->tick;
	}
	if (c->cap && c->usage > c->cap)
		evict(c);
}

int tfs_cache_pin(tfs_cache *c, uint64_t off, uint64_t len)
{
	uint64_t b0 = off / TFS_CACHE_BLOCK, b1 = (off + len + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK;
	int fd = open(c->data_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (range_lock(fd, F_RDLCK, b0 * TFS_CACHE_BLOCK, (b1 - b0) * TFS_CACHE_BLOCK, true) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

bool tfs_cache_holds(tfs_cache *c, uint64_t off, uint64_t len)
{
	uint8_t check[256];
	uint64_t b0 = off / TFS_CACHE_BLOCK, b1 = (off + len + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK;
	uint32_t now = c->tick;
	for (uint64_t b = b0; b < b1; b += sizeof(check)) {
		size_t k = b1 - b < sizeof(check) ? (size_t)(b1 - b) : sizeof(check);
		if (pread(c->map_fd, check, k, (off_t)b) != (ssize_t)k)
			return false;
		for (size_t i = 0; i < k; i++) {
			if (check[i] != 1)
				return false;
			__atomic_store_n(&c->used[b + i], now, __ATOMIC_RELAXED);
		}
	}
	return true;
}

int tfs_cache_read(tfs_cache *c, void *buf, uint64_t off, uint64_t len, tfs_error *err)
{
	/* pinned, and present by the map file: nobody punches them until they are read (a
	 * check after the read alone would miss a block evicted and fetched again meanwhile) */
	int pin = tfs_cache_pin(c, off, len);
	if (pin >= 0 && !tfs_cache_holds(c, off, len)) {
		close(pin);
		return TFS_PASSTHROUGH;
	}
	uint8_t *p = buf;
	uint64_t pos = off, end = off + len;
	while (pos < end) {
		ssize_t r = pread(c->data_fd, p + (pos - off), (size_t)(end - pos), (off_t)pos);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			if (pin >= 0)
				close(pin);
			return tfs_error_sys(err, e, "cache %s", c->data_path);
		}
		pos += (uint64_t)r;
	}
	if (pin >= 0) {
		close(pin);
		return 0;
	}
	/* no pin (the entry's files were removed by a new version): not evicted while read */
	return tfs_cache_holds(c, off, len) ? 0 : 1;
}

int tfs_cache_forget(tfs_cache *c)
{
	if (range_lock(c->data_fd, F_WRLCK, 0, c->n_blocks * TFS_CACHE_BLOCK, false) < 0)
		return -1;
	/* the map first, emptied as open_files starts an entry over */
	if (ftruncate(c->map_fd, 0) < 0 || ftruncate(c->map_fd, (off_t)c->n_blocks) < 0) {
		range_lock(c->data_fd, F_UNLCK, 0, c->n_blocks * TFS_CACHE_BLOCK, false);
		return -1;
	}
	for (uint64_t b = 0; b < c->n_blocks; b++) {
		if (c->map[b] == 1)
			c->usage = c->usage > TFS_CACHE_BLOCK ? c->usage - TFS_CACHE_BLOCK : 0;
		c->map[b] = 0;
	}
	if (c->size)
		fallocate(c->data_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			  (off_t)c->size);
	range_lock(c->data_fd, F_UNLCK, 0, c->n_blocks * TFS_CACHE_BLOCK, false);
	return 0;
}

void tfs_cache_resync(tfs_cache *c, uint64_t off, uint64_t len)
{
	uint64_t b0 = off / TFS_CACHE_BLOCK, b1 = (off + len + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK;
	for (uint64_t b = b0; b < b1 && b < c->n_blocks; b++) {
		uint8_t v = 0;
		c->map[b] = pread(c->map_fd, &v, 1, (off_t)b) == 1 && v == 1;
	}
}
