/*
 * cli.h - the commands of tensorfs (fs/cli/ only): what their files share.
 *
 * Top-down (a file calls only files below it):
 *   main.c      the tensorfs command: which command runs
 *   mount.c     `tensorfs mount` (and mount.tensorfs, mount(8)): the daemon's life
 *   unmount.c   `tensorfs unmount`: unmounting, following the daemon's repack
 *   info.c      `tensorfs info`
 *   convert.c   `tensorfs convert`: a mount's model.gguf written to a file
 *   repack.c    `tensorfs repack`, and the repack a rw mount's daemon does at unmount
 *   session.c   a command's model session (codec's tfs_session), errors printed
 *   status.c    the status file a rw daemon reports its repack in, and reading it
 *   mounts.c    the mount table, the mount point's checks, who uses a mount
 *   progress.c  progress shown on a terminal or a log, and recorded in a status file
 *   options.c   parsing the -o options (the fuse_opt table made from optable.c), paths,
 *               remote options
 *   optable.c   every -o option once: name, kind, commands, help
 */
#ifndef TFSD_CLI_H
#define TFSD_CLI_H

#include "fs.h"

#include <limits.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

/* ==== the commands (each returns the exit status: 0, 1 runtime error, 2 usage) ==== */

/* by_mount8: called by mount(8), which passes "rw" unless told "ro": then only
 * -o writable makes the mount writable. */
int tfsd_mount_main(int argc, char **argv, bool by_mount8);
int tfsd_unmount_main(int argc, char **argv);
int tfsd_repack_main(int argc, char **argv);
int tfsd_info_main(int argc, char **argv);
int tfsd_convert_main(int argc, char **argv);

/* ==== convert.c ==== */

/* -o quantize= with rw needs an output= (the values themselves are checked by
 * tfsd_opts_parse).  0, or the exit status (2) after saying why not. */
int tfsd_quantize_check(const tfsd_opts *o, const char *prog);

/* ==== optable.c ==== */

enum { TFSD_FOR_MOUNT = 1, TFSD_FOR_REPACK = 2, TFSD_FOR_CONVERT = 4,
       /* not a command: the option is a computed view's (codec/views/registry.c;
	* tests/test_view_registry.c checks the two tables agree) */
       TFSD_VIEW_OPTION = 8 };
typedef enum { TFSD_OPT_FLAG, TFSD_OPT_STR, TFSD_OPT_INT } tfsd_opt_kind;

/* An -o option: a flag sets the int at offset to value; a string or a number (name=ARG)
 * fills the char * or int there; a computed view's (V) is kept in tfsd_opts' views
 * instead (offset unused), which fs/cli/session.c hands to codec by name. */
typedef struct {
	const char *name;
	tfsd_opt_kind kind;
	const char *arg;        /* what the value is, in the help ("DIR"); NULL: a flag */
	size_t offset;          /* its field in tfsd_opts */
	int value;              /* a flag's */
	unsigned commands;      /* TFSD_FOR_*: the commands it is for */
	const char *help;       /* one line */
} tfsd_option;

extern const tfsd_option tfsd_option_table[];
extern const size_t tfsd_n_options;
/* The options of command (a TFSD_FOR_* bit), one a line with its help, for a usage text. */
void tfsd_options_usage(FILE *f, unsigned command);
/* Their names with their values ("staging=DIR"), comma-separated, lines of 78 columns. */
void tfsd_options_list(FILE *f, unsigned command);
/* Their names on one line ("ro rw staging= ..."), for the bash completion. */
void tfsd_options_names(FILE *f, unsigned command);
/* "mount", "repack", "convert": its TFSD_FOR_* bit; 0 for another. */
unsigned tfsd_command_bit(const char *command);

/* A command's usage: head, its options from the table, tail. */
typedef struct {
	const char *head;
	unsigned command;       /* TFSD_FOR_* */
	const char *tail;       /* or NULL */
} tfsd_usage;
void tfsd_usage_print(FILE *f, const tfsd_usage *u);

/* ==== options.c ==== */

/* Parses the command line into o (fuse_opt_parse with the -o table: a view's option, V, into
 * o->views); usage is what -h prints (then exits 0) and what follows an unexpected argument.
 * Every value is checked (tfsd_view_values_check for the views'), an option neither the
 * table nor libfuse knows refused.  -1: a usage error, said in one line. */
int tfsd_opts_parse(struct fuse_args *args, tfsd_opts *o, const tfsd_usage *usage);
/* The views' values of o, each as its view's row checks it (codec: tfs_view_option_check),
 * none given empty: 0, or -1 after printing why after prog (a usage error). */
int tfsd_view_values_check(const tfsd_opts *o, const char *prog);
void tfsd_opts_free(tfsd_opts *o);
/* The daemon runs from /: every path is made absolute first; an Ollama model name stays
 * as it is.  -1: out of memory. */
int tfsd_absolute_paths(tfsd_opts *o);
/* The computed views' options (o->views): the value given to -o name (NULL: not given);
 * setting one (a copy of value, replacing one given before; -1: out of memory); the FILE
 * ones made absolute (tfsd_absolute_paths does it too; -1: out of memory); all of them into
 * oo (tfs_open_opts_set_view, values kept by pointer), -1 after printing why after prog. */
const char *tfsd_view_value(const tfsd_opts *o, const char *name);
int tfsd_view_value_set(tfsd_opts *o, const char *name, const char *value);
int tfsd_view_paths(tfsd_opts *o);
int tfsd_view_opts(const tfsd_opts *o, tfs_open_opts *oo, const char *prog);
/* mount(8), findmnt and df show the model as the mount's source.  -1: out of memory. */
int tfsd_add_fsname(const tfsd_opts *o, struct fuse_args *args);
/* Whether a SOURCE is read over the network (http://, https://, hf://). */
bool tfsd_is_remote(const char *source);
/* The remote options into oo; the token file's first line into *token (allocated).
 * Prints errors. */
int tfsd_remote_opts(const tfsd_opts *o, tfs_open_opts *oo, char **token, const char *prog);

/* ==== progress.c ==== */

/*
 * Progress shown on a stream: on a terminal one line rewritten in place (\r) at most five
 * times a second; otherwise a plain line per 10% (at most one a second) or every 5 s.
 * Every line has the percentage, the rate and the time left; the last one the time taken.
 */
typedef struct {
	FILE *out;
	bool tty;
	bool open;           /* tty: a line without its newline is on screen */
	double last;         /* elapsed seconds at the last line */
	uint64_t last_done;
} tfsd_progress_view;

void tfsd_view_init(tfsd_progress_view *v, FILE *out);
/* Ends a progress line left open on a terminal, before other output. */
void tfsd_view_break(tfsd_progress_view *v);
void tfsd_view_show(tfsd_progress_view *v, const char *what, uint64_t done, uint64_t total,
		    double elapsed);

/* Where a daemon or a command reports a long operation: the terminal (stderr) and, for
 * a daemon, its status file, which `tensorfs unmount` reads and shows the same way. */
typedef struct {
	tfsd_progress_view *view; /* stderr, or NULL */
	FILE *status;           /* the status file, or NULL */
	struct timespec start;
	double last_record;     /* elapsed seconds at the last record in the status file */
	char what[128];         /* the operation being timed (each blob verified is one) */
} tfsd_progress_sink;

void tfsd_sink_init(tfsd_progress_sink *s, tfsd_progress_view *view, FILE *status);
/* The progress callback of codec (tfs_progress_fn); ctx is a tfsd_progress_sink. */
void tfsd_progress_report(void *ctx, const char *what, uint64_t done, uint64_t total);
/* A line of the result, to stderr and the status file. */
__attribute__((format(printf, 2, 3)))
void tfsd_sink_printf(tfsd_progress_sink *s, const char *fmt, ...);

/* ==== mounts.c ==== */

typedef struct {
	unsigned maj, min;
	bool rw;                /* mounted read-write */
	char fstype[64];
	char source[PATH_MAX];
} tfsd_mount_entry;

/* Whether path (absolute, resolved) is a mount point; out gets the newest mount there. */
bool tfsd_find_mount(const char *path, tfsd_mount_entry *out);
/* Whether err (of a call on a FUSE mount) says its daemon is gone. */
bool tfsd_dead_errno(int err);
/* Whether the FUSE mount at mp has lost its daemon. */
bool tfsd_dead_mount(const char *mp);
/* Sets the mount's request size (the readahead of its device number). */
void tfsd_set_readahead(const char *mountpoint, int kb);
/* Refuses a mount point that is not an empty directory of its own, unless -o nonempty.
 * Prints why; -1. */
int tfsd_check_mountpoint(const tfsd_opts *o, const char *prog);
/* The absolute path of a mount point, resolved without a stat() of the mount point
 * itself.  Allocated. */
char *tfsd_mount_path(const char *arg);
/* "pid 123 (bash), pid 456 (sleep)": the processes using dir; "" when none is seen. */
void tfsd_list_users(const char *dir, char *buf, size_t cap);

/* ==== status.c ==== */

/* Whether a process still runs (an exited zombie counts as gone). */
bool tfsd_daemon_alive(pid_t pid);
/* Removes the status files of daemons that are gone (killed before they could). */
void tfsd_sweep_status_files(void);
/* Creates this process's status file; its path (allocated), or NULL. */
char *tfsd_create_status_file(void);
/* Whether path is daemon pid's status file, in a private directory of ours. */
bool tfsd_is_status_file_of(const char *path, pid_t pid);

/* Follows a daemon's status file: shows what it gains, and remembers the result. */
typedef struct {
	int fd;
	char buf[8192];
	size_t len;
	tfsd_progress_view view;
	bool started;  /* "tensorfs: repacking ..." */
	bool done;     /* "done: ..." */
	bool failed;   /* "error: ..." */
	char done_line[1024];  /* the "done: ..." line, shown once the daemon has exited */
	pid_t finisher; /* "finishing: PID": the daemon's child that closes the model */
} tfsd_status_reader;

/* Shows the complete lines the file gained (at the end: what is left too). */
void tfsd_status_read(tfsd_status_reader *r, bool final);

/* ==== session.c ==== */

/* Opens the model of fs->opts (and, for rw, the staging directory, replaying it) as *out;
 * fs->model and fs->staging are borrowed from it.  Prints errors; -1 (nothing is left
 * open then; a staging directory stays as it is). */
int tfsd_session_open(tfsd_fs *fs, tfs_session **out, const char *prog);
/* Releases the staging directory (tfs_session_release). */
void tfsd_session_release(tfsd_fs *fs, tfs_session *s);
/* Releases the staging directory, frees the model, the session and the imatrix. */
void tfsd_session_close(tfsd_fs *fs, tfs_session *s);

/* ==== repack.c ==== */

/* Repacks a writable session's changes, with progress and the result on stderr and in the
 * status file (which `tensorfs unmount` follows).  0, or 1 when the repack failed. */
int tfsd_repack_staged(tfsd_fs *fs, tfs_session *s);
/* Whether a rw mount's output= is a .gguf file: a repo's GGUF view (or a quantized view) is
 * then the model the mount edits and writes there. */
bool tfsd_gguf_output(const tfsd_opts *o);
/* p made absolute (symbolic links resolved when it exists), allocated; NULL: p was NULL, or
 * out of memory. */
char *tfsd_absolute(const char *p);
/* SIZE with an optional K, M, G or T (powers of 1024); false when it is not one. */
bool tfsd_parse_size(const char *s, uint64_t *out);

#endif
