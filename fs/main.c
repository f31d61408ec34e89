/*
 * main.c - the tensorfs command.
 *
 *   mount.tensorfs SOURCE MOUNTPOINT [-o opts]     (also: tensorfs SOURCE MOUNTPOINT,
 *   tensorfs mount SOURCE MOUNTPOINT [-o opts]      and mount -t fuse.tensorfs)
 *   tensorfs info SOURCE [--json | --markdown] [--no-tensors]
 *   tensorfs unmount MOUNTPOINT
 *   tensorfs repack SOURCE [-o staging=DIR,output=PATH]
 *   tensorfs --version | --help | help [COMMAND]
 *
 * Exit status: 0 success, 1 a runtime error (a model that cannot be read, a failed
 * repack), 2 a usage error (unknown command or option, missing argument).
 */
#include "fs.h"

#include <stdio.h>
#include <string.h>

#ifndef TFS_VERSION
#define TFS_VERSION "unknown"
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tensorfs mount SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n"
		"       tensorfs unmount MOUNTPOINT\n"
		"       tensorfs info SOURCE [--json | --markdown] [--no-tensors]\n"
		"       tensorfs repack SOURCE [-o staging=DIR,output=PATH]\n"
		"       tensorfs --version | --help | help [COMMAND]\n"
		"       mount.tensorfs SOURCE MOUNTPOINT [-o OPTIONS]\n"
		"\n"
		"SOURCE: a .gguf file, a .safetensors file, a model.safetensors.index.json (or its\n"
		"directory), an Ollama manifest path, or an Ollama model name (llama3:8b).\n"
		"OPTIONS: ro (default), rw, writable, staging=DIR, output=PATH, verify, threads=N,\n"
		"readahead_kb=N, and the usual FUSE options (allow_other, ...).\n"
		"See tensorfs(1) and mount.tensorfs(8).\n");
}

static bool is_help(const char *a)
{
	return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

/* `tensorfs help CMD` and `tensorfs CMD --help` for the commands whose parsers have no
 * help of their own. */
static int command_help(const char *cmd)
{
	if (strcmp(cmd, "unmount") == 0 || strcmp(cmd, "umount") == 0) {
		printf("usage: tensorfs unmount MOUNTPOINT\n"
		       "\n"
		       "Unmounts a tensorfs mount and waits for the daemon: a writable mount's\n"
		       "repack is followed, with progress on stderr; exits 1 if it failed.\n");
		return 0;
	}
	if (strcmp(cmd, "repack") == 0) {
		printf("usage: tensorfs repack SOURCE [-o staging=DIR,output=PATH]\n"
		       "\n"
		       "Repacks the changes staged for SOURCE (a writable mount whose repack was\n"
		       "interrupted) into a new file, as the unmount would have.\n");
		return 0;
	}
	if (strcmp(cmd, "mount") == 0) {
		printf("usage: tensorfs mount SOURCE MOUNTPOINT [-f] [-d] [-s] [-o OPTIONS]\n"
		       "options: ro (default), rw, writable, staging=DIR, output=PATH, verify,\n"
		       "         threads=N, readahead_kb=N, nonempty and FUSE options;\n"
		       "         -f (foreground), -d (debug), -s (single thread)\n");
		return 0;
	}
	if (strcmp(cmd, "info") == 0) {
		char a0[] = "info", a1[] = "--help";
		char *av[] = { a0, a1, NULL };
		return tfs_info_main(2, av);
	}
	fprintf(stderr, "tensorfs: unknown command '%s' (try 'tensorfs --help')\n", cmd);
	return 2;
}

int main(int argc, char **argv)
{
	const char *prog = strrchr(argv[0], '/');
	prog = prog ? prog + 1 : argv[0];
	/* mount(8) runs /sbin/mount.fuse.tensorfs (or mount.fuse3 runs "tensorfs SRC MNT") */
	if (strcmp(prog, "mount.fuse.tensorfs") == 0)
		return tfs_mount_main(argc, argv, true);
	if (strncmp(prog, "mount.", 6) == 0) {
		if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
			printf("tensorfs %s\n", TFS_VERSION);
			return 0;
		}
		return tfs_mount_main(argc, argv, false);
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("tensorfs %s\n", TFS_VERSION);
		return 0;
	}
	if (is_help(cmd) || strcmp(cmd, "help") == 0) {
		if (argc >= 3 && strcmp(cmd, "help") == 0)
			return command_help(argv[2]);
		usage(stdout);
		return 0;
	}
	bool cmd_help = argc >= 3 && is_help(argv[2]);
	if (strcmp(cmd, "mount") == 0)
		return tfs_mount_main(argc - 1, argv + 1, false);
	if (strcmp(cmd, "unmount") == 0 || strcmp(cmd, "umount") == 0)
		return cmd_help ? command_help(cmd) : tfs_unmount_main(argc - 1, argv + 1);
	if (strcmp(cmd, "info") == 0)
		return tfs_info_main(argc - 1, argv + 1);
	if (strcmp(cmd, "repack") == 0)
		return cmd_help ? command_help(cmd) : tfs_repack_main(argc - 1, argv + 1);
	/* mount(8)'s helpers call "tensorfs SOURCE MOUNTPOINT -o ..." */
	if (argc >= 3 && cmd[0] != '-')
		return tfs_mount_main(argc, argv, true);
	if (cmd[0] == '-')
		fprintf(stderr, "tensorfs: unknown option '%s' (try 'tensorfs --help')\n", cmd);
	else
		fprintf(stderr, "tensorfs: unknown command '%s' (try 'tensorfs --help')\n", cmd);
	return 2;
}
