/*
 * fuzz.h - what the libFuzzer harnesses share (tests/fuzz/fuzz_*.c).
 *
 * Inputs reach codec through real paths, as in a mount, but without writing a
 * file per exec: fz_memfd_path() keeps one memfd per name for the life of the
 * process and a symlink <tmpdir>/<name> -> /proc/self/fd/<n> to it, so an exec
 * costs an ftruncate and a pwrite and the path keeps its telling suffix
 * (".gguf", ".safetensors", "model.safetensors.index.json").
 *
 * A finding is a sanitizer report, or a broken invariant of an opened model
 * (fz_fail: an abort with a message).
 */
#ifndef TFS_FUZZ_H
#define TFS_FUZZ_H

#include "tensorfs.h"
#include "model/source_impl.h" /* struct tfs_source: the tests read its fields */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The process's scratch directory (created once, removed at exit), on /dev/shm when it exists. */
const char *fz_tmpdir(void);
/* "<tmpdir>/<rel>", allocated once per call site by the caller (free it). */
char *fz_path(const char *rel);
/* Sets the content of the memfd behind <tmpdir>/<name> (made on first use) and returns the
 * path (owned by the harness, valid for the process). */
const char *fz_memfd_path(const char *name, const uint8_t *data, size_t size);
/* Writes a whole file (created or truncated); aborts on failure (the harness's own setup). */
void fz_write_file(const char *path, const void *data, size_t size);
/* Copies a file of tests/data (relative to TFS_TESTDATA) to path. */
void fz_copy_testdata(const char *rel, const char *path);
/* mkdir -p under the scratch directory. */
void fz_mkdirs(const char *path);

/* One named file in memory, served by fz_read_one_file (a tfs_hf_files reader: ctx is an
 * fz_one_file; any other name is TFS_E_NOTFOUND; the bytes are copied, NUL-terminated). */
typedef struct {
	const char *name;
	const uint8_t *data;
	size_t size;
} fz_one_file;
int fz_read_one_file(void *ctx, const char *name, uint8_t **data, uint64_t *len, tfs_error *err);

/* Aborts with a message: a broken invariant is a finding. */
void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/*
 * The read side a mount serves, on a model that opened: every key's text and type name,
 * every file name's encoding, every tensor's raw bytes and f32 view (whole, and at odd
 * offsets, compared with the whole), npy headers, the extras' ranges, index.json (which must
 * be valid JSON).
 */
void fz_exercise(const tfs_model *m);

#endif
