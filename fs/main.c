/*
 * main.c - the tensorfs command.
 *
 *   mount.tensorfs SOURCE MOUNTPOINT [-o opts]     (also: tensorfs SOURCE MOUNTPOINT,
 *   tensorfs mount SOURCE MOUNTPOINT [-o opts]      and mount -t fuse.tensorfs)
 *   tensorfs info SOURCE [--json]
 *   tensorfs unmount MOUNTPOINT
 *   tensorfs repack SOURCE [-o staging=DIR,output=PATH]
 */
#include "fs.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tensorfs mount SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n"
		"       tensorfs unmount MOUNTPOINT\n"
		"       tensorfs info SOURCE [--json]\n"
		"       tensorfs repack SOURCE [-o staging=DIR,output=PATH]\n"
		"       mount.tensorfs SOURCE MOUNTPOINT [-o OPTIONS]\n"
		"\n"
		"SOURCE: a .gguf file, a .safetensors file, a model.safetensors.index.json (or its\n"
		"directory), an Ollama manifest path, or an Ollama model name (llama3:8b).\n"
		"OPTIONS: ro (default), rw, staging=DIR, output=PATH, verify, threads=N,\n"
		"readahead_kb=N, and the usual FUSE options (allow_other, ...). See README.md.\n");
}

int main(int argc, char **argv)
{
	const char *prog = strrchr(argv[0], '/');
	prog = prog ? prog + 1 : argv[0];
	/* mount(8) runs /sbin/mount.fuse.tensorfs (or mount.fuse3 runs "tensorfs SRC MNT") */
	if (strcmp(prog, "mount.fuse.tensorfs") == 0)
		return tfs_mount_main(argc, argv, true);
	if (strncmp(prog, "mount.", 6) == 0)
		return tfs_mount_main(argc, argv, false);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "mount") == 0)
		return tfs_mount_main(argc - 1, argv + 1, false);
	if (strcmp(cmd, "unmount") == 0 || strcmp(cmd, "umount") == 0)
		return tfs_unmount_main(argc - 1, argv + 1);
	if (strcmp(cmd, "info") == 0)
		return tfs_info_main(argc - 1, argv + 1);
	if (strcmp(cmd, "repack") == 0)
		return tfs_repack_main(argc - 1, argv + 1);
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	/* mount(8)'s helpers call "tensorfs SOURCE MOUNTPOINT -o ..." */
	if (argc >= 3 && cmd[0] != '-')
		return tfs_mount_main(argc, argv, true);
	usage(stderr);
	return 2;
}
