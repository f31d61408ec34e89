/*
 * optable.c - every -o option, once: its name, kind, the commands that take it and its help
 * line.  options.c builds the fuse_opt table from it; the usage texts (`tensorfs help
 * COMMAND`), `tensorfs __options COMMAND` (which the build writes into the bash completion)
 * and the tests that check the man pages all read it.  A new option is a row here and its
 * field in tfsd_opts (fs.h); an option of a computed view (VSTR, VINT) is a row here and its
 * row's in the view table, codec/views/registry.c, and nothing else: its value goes into
 * tfsd_opts' views and, by name, to codec (tfs_open_opts_set_view); a view's flag (VFLAG)
 * goes there as "1".
 */
#include "cli.h"

#include <stddef.h>
#include <string.h>

#define M TFSD_FOR_MOUNT
#define R TFSD_FOR_REPACK
#define C TFSD_FOR_CONVERT
#define V TFSD_VIEW_OPTION
#define FLAG(n, f, v, cmds, h) { n, TFSD_OPT_FLAG, NULL, offsetof(tfsd_opts, f), v, cmds, h }
#define STR(n, f, a, cmds, h) { n, TFSD_OPT_STR, a, offsetof(tfsd_opts, f), 0, cmds, h }
#define INT(n, f, a, cmds, h) { n, TFSD_OPT_INT, a, offsetof(tfsd_opts, f), 0, cmds, h }
#define VSTR(n, a, cmds, h) { n, TFSD_OPT_STR, a, 0, 0, (cmds) | V, h }
#define VINT(n, a, cmds, h) { n, TFSD_OPT_INT, a, 0, 0, (cmds) | V, h }
#define VFLAG(n, cmds, h) { n, TFSD_OPT_FLAG, NULL, 0, 1, (cmds) | V, h }

const tfsd_option tfsd_option_table[] = {
	FLAG("ro", rw, 0, M, "read-only (the default)"),
	FLAG("rw", rw, 1, M, "writable: changes staged, repacked at unmount"),
	FLAG("writable", writable, 1, M, "rw, also under mount(8) (which always passes rw)"),
	STR("staging", staging, "DIR", M | R, "a rw mount's staging directory"),
	STR("output", output, "PATH", M | R, "where the repack writes (default: the source)"),
	FLAG("verify", verify, 1, M, "Ollama: check every blob's sha256 at mount"),
	INT("threads", threads, "N", M, "FUSE worker threads (default 4)"),
	INT("readahead_kb", readahead_kb, "N", M, "the kernel's request size (default 512)"),
	FLAG("nonempty", nonempty, 1, M, "mount over a non-empty directory or another mount"),
	VSTR("outtype", "TYPE", M | R | C, "a HF repo's model.gguf: auto, f32, f16, bf16, q8_0"),
	VFLAG("fp8_as_q8", M | R | C, "a HF repo's model.gguf: its FP8 weights as Q8_0"),
	FLAG("mmproj", mmproj, 1, C, "a multimodal HF repo's mmproj.gguf instead"),
	VSTR("quantize", "TYPE", M | R | C, "as llama-quantize writes it (Q4_K_M, ...)"),
	VINT("quantize_threads", "N", M | C, "quantizing threads (default: CPUs, at most 8)"),
	VSTR("imatrix", "FILE", M | R | C, "llama.cpp's importance matrix, used as ggml uses it"),
	VSTR("hf_dtype", "TYPE", M, "a GGUF's hf/ (Hugging Face repo): bf16, f16, f32"),
	STR("cache", cache, "DIR", M | R | C,
	    "remote blocks, quantized tensors (~/.cache/...)"),
	STR("cache_size", cache_size, "SIZE", M | R | C,
	    "bound of each part of the cache (bytes, K, M, G, T)"),
	INT("connections", connections, "N", M | R | C, "remote: connections per file (default 4)"),
	STR("token_file", token_file, "FILE", M | R | C, "remote: a bearer token, its first line"),
	STR("cafile", cafile, "FILE", M | R | C, "remote: the CA certificates TLS trusts"),
	INT("timeout", timeout, "SECS", M | R | C, "remote: seconds before a stalled try is retried"),
	STR("endpoint", endpoint, "URL", M | R | C, "s3://: the S3 endpoint (else AWS_ENDPOINT_URL)"),
	STR("s3_addressing", s3_addressing, "path|virtual", M | R | C,
	    "s3://: bucket in the path or the host name"),
};

const size_t tfsd_n_options = sizeof(tfsd_option_table) / sizeof(tfsd_option_table[0]);

/* "name=ARG" or "name" into buf. */
static const char *spelled(const tfsd_option *o, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s%s", o->name, o->arg ? "=" : "", o->arg ? o->arg : "");
	return buf;
}

void tfsd_options_usage(FILE *f, unsigned command)
{
	char buf[64];
	fputs("options (-o a,b,c):\n", f);
	for (size_t i = 0; i < tfsd_n_options; i++) {
		const tfsd_option *o = &tfsd_option_table[i];
		if (o->commands & command)
			fprintf(f, "  %-26s %s\n", spelled(o, buf, sizeof(buf)), o->help);
	}
}

void tfsd_options_names(FILE *f, unsigned command)
{
	const char *sep = "";
	for (size_t i = 0; i < tfsd_n_options; i++) {
		const tfsd_option *o = &tfsd_option_table[i];
		if (o->commands & command) {
			fprintf(f, "%s%s%s", sep, o->name, o->arg ? "=" : "");
			sep = " ";
		}
	}
	fputc('\n', f);
}

void tfsd_options_list(FILE *f, unsigned command)
{
	char buf[64];
	size_t col = 0;
	for (size_t i = 0; i < tfsd_n_options; i++) {
		const tfsd_option *o = &tfsd_option_table[i];
		if (!(o->commands & command))
			continue;
		size_t n = strlen(spelled(o, buf, sizeof(buf)));
		if (col && col + 2 + n > 78) {
			fputs(",\n", f);
			col = 0;
		} else if (col) {
			fputs(", ", f);
			col += 2;
		}
		fputs(buf, f);
		col += n;
	}
	fputs(col ? "\n" : "", f);
}

void tfsd_usage_print(FILE *f, const tfsd_usage *u)
{
	fputs(u->head, f);
	tfsd_options_usage(f, u->command);
	if (u->tail)
		fputs(u->tail, f);
}

unsigned tfsd_command_bit(const char *command)
{
	return !strcmp(command, "mount") ? TFSD_FOR_MOUNT : !strcmp(command, "repack")
	       ? TFSD_FOR_REPACK : !strcmp(command, "convert") ? TFSD_FOR_CONVERT : 0;
}
