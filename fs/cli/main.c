/*
 * main.c - the tensorfs command.
 *
 *   mount.tensorfs SOURCE MOUNTPOINT [-o opts]     (also: tensorfs SOURCE MOUNTPOINT,
 *   tensorfs mount SOURCE MOUNTPOINT [-o opts]      and mount -t fuse.tensorfs)
 *   tensorfs info SOURCE [--json | --markdown] [--no-tensors]
 *   tensorfs unmount [-l] MOUNTPOINT
 *   tensorfs repack SOURCE [-o staging=DIR,output=PATH]
 *   tensorfs convert SOURCE OUTPUT [-o quantize=TYPE,imatrix=FILE,cache=DIR,...]
 *   tensorfs --version | --help | help [COMMAND]
 *
 * Exit status: 0 success, 1 a runtime error (a model that cannot be read, a failed
 * repack), 2 a usage error (unknown command or option, missing argument).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#ifndef TFS_VERSION
#define TFS_VERSION "unknown"
#endif

static void usage(FILE *f)
{
	fputs(
		"usage: tensorfs mount SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n"
		"       tensorfs unmount [-l] MOUNTPOINT\n"
		"       tensorfs info SOURCE [--json | --markdown] [--no-tensors] [--gguf]\n"
		"                     [--quantize=TYPE [--imatrix=FILE]] [--outtype=TYPE]\n"
		"       tensorfs repack SOURCE [-o staging=DIR,output=PATH]\n"
		"       tensorfs convert SOURCE OUTPUT [-o quantize=TYPE,imatrix=FILE,...]\n"
		"       tensorfs --version | --help | help [COMMAND]\n"
		"       mount.tensorfs SOURCE MOUNTPOINT [-o OPTIONS]\n"
		"\n"
		"SOURCE: a .gguf file, a .safetensors file, a model.safetensors.index.json (or its\n"
		"directory), an Ollama manifest path, an Ollama model name (llama3:8b), the\n"
		"http(s):// URL of a GGUF or safetensors file or of an Ollama registry's\n"
		"manifest (https://HOST/v2/NS/MODEL/manifests/TAG, or https://HOST/NS/MODEL:TAG\n"
		"when the local store lacks it), hf://ORG/REPO[/PATH][@REV], or s3://BUCKET/KEY.\n"
		"OPTIONS of mount (-o a,b,c; `tensorfs help mount` says what each does):\n", f);
	tfsd_options_list(f, TFSD_FOR_MOUNT);
	fputs("and the usual FUSE options (allow_other, ...).\n"
	      "See tensorfs(1) and mount.tensorfs(8).\n", f);
}

static bool is_help(const char *a)
{
	return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

/* `tensorfs help CMD`: what `tensorfs CMD --help` prints (each command's own usage). */
static int command_help(const char *cmd)
{
	char a1[] = "--help";
	char a0[16];
	char *av[] = { a0, a1, NULL };
	snprintf(a0, sizeof(a0), "%s", cmd);
	if (strcmp(cmd, "unmount") == 0 || strcmp(cmd, "umount") == 0)
		return tfsd_unmount_main(2, av);
	if (strcmp(cmd, "repack") == 0)
		return tfsd_repack_main(2, av);
	if (strcmp(cmd, "mount") == 0)
		return tfsd_mount_main(2, av, false);
	if (strcmp(cmd, "info") == 0)
		return tfsd_info_main(2, av);
	if (strcmp(cmd, "convert") == 0)
		return tfsd_convert_main(2, av);
	fprintf(stderr, "tensorfs: unknown command '%s' (try 'tensorfs --help')\n", cmd);
	return 2;
}

int main(int argc, char **argv)
{
	const char *prog = strrchr(argv[0], '/');
	prog = prog ? prog + 1 : argv[0];
	/* mount(8) runs /sbin/mount.fuse.tensorfs (or mount.fuse3 runs "tensorfs SRC MNT") */
	if (strcmp(prog, "mount.fuse.tensorfs") == 0)
		return tfsd_mount_main(argc, argv, true);
	if (strncmp(prog, "mount.", 6) == 0) {
		if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
			printf("tensorfs %s\n", TFS_VERSION);
			return 0;
		}
		return tfsd_mount_main(argc, argv, false);
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
	/* (for the build, which writes them into the bash completion, and the tests) */
	if (strcmp(cmd, "__options") == 0 && argc == 3 && tfsd_command_bit(argv[2])) {
		tfsd_options_names(stdout, tfsd_command_bit(argv[2]));
		return 0;
	}
	if (strcmp(cmd, "__hf_classes") == 0 && argc == 2) {   /* (for the tests) */
		for (size_t i = 0; tfs_hf_view_class(i); i++)
			printf("%s\n", tfs_hf_view_class(i));
		return 0;
	}
	if (strcmp(cmd, "mount") == 0)
		return tfsd_mount_main(argc - 1, argv + 1, false);
	if (strcmp(cmd, "unmount") == 0 || strcmp(cmd, "umount") == 0)
		return tfsd_unmount_main(argc - 1, argv + 1);
	if (strcmp(cmd, "info") == 0)
		return tfsd_info_main(argc - 1, argv + 1);
	if (strcmp(cmd, "repack") == 0)
		return tfsd_repack_main(argc - 1, argv + 1);
	if (strcmp(cmd, "convert") == 0)
		return tfsd_convert_main(argc - 1, argv + 1);
	/* mount(8)'s helpers call "tensorfs SOURCE MOUNTPOINT -o ..." */
	if (argc >= 3 && cmd[0] != '-')
		return tfsd_mount_main(argc, argv, true);
	if (cmd[0] == '-')
		fprintf(stderr, "tensorfs: unknown option '%s' (try 'tensorfs --help')\n", cmd);
	else
		fprintf(stderr, "tensorfs: unknown command '%s' (try 'tensorfs --help')\n", cmd);
	return 2;
}
