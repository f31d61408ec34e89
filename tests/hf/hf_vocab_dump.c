/*
 * hf_vocab_dump.c - writes the tokenizer keys tfs_hf_vocab_keys makes for a Hugging Face
 * model directory as a GGUF file without tensors, for the tests in tests/hf/ to compare with
 * the converter's output and to load into llama.cpp (vocab_only).
 *
 *   hf_vocab_dump [-a GGUF_ARCH] DIR HF_ARCH OUT.gguf
 *   hf_vocab_dump --pre DIR        prints tokenizer.json's pre-tokenizer name and chkhsh
 *   hf_vocab_dump --chktxt         prints the converter's check text
 * -a adds general.architecture = GGUF_ARCH and the few hyperparameters llama.cpp reads
 * before the vocabulary, first.  HF_ARCH defaults to config.json's architectures[0] when "-".
 * Exit 0, or 1 with the error on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_vocab.h"

static int put(FILE *f, const void *p, size_t n)
{
	return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static int put_u64(FILE *f, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return put(f, b, 8);
}

static int put_u32(FILE *f, uint32_t v)
{
	uint8_t b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return put(f, b, 4);
}

static int add_arch(tfs_hf_kvs *kv, const char *arch, tfs_error *err)
{
	char k[128];
	static const struct {
		const char *suffix;
		uint32_t v;
	} u[] = { { "context_length", 2048 }, { "embedding_length", 64 }, { "block_count", 1 },
		  { "feed_forward_length", 128 }, { "attention.head_count", 2 },
		  { "attention.head_count_kv", 2 } };
	int rc = tfs_hf_kvs_add_str(kv, "general.architecture", arch, err);
	for (size_t i = 0; !rc && i < sizeof u / sizeof *u; i++) {
		snprintf(k, sizeof k, "%s.%s", arch, u[i].suffix);
		rc = tfs_hf_kvs_add_u32(kv, k, u[i].v, err);
	}
	snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
	return rc ? rc : tfs_hf_kvs_add_f32(kv, k, 1e-5f, err);
}

static json_t *load(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return json_load_file(path, 0, NULL);
}

static int pre_only(const char *dir)
{
	json_t *cfg = load(dir, "tokenizer_config.json");
	tfs_hf_files files;
	tfs_hf_tok *tok = NULL;
	const char *name;
	char hash[65] = "";
	tfs_error err = { 0 };
	tfs_hf_files_dir(&files, dir);
	int rc = tfs_hf_tok_read(&tok, &files, &err);
	if (!rc && !tok)
		rc = tfs_error_set(&err, TFS_E_NOTFOUND, "%s: no tokenizer.json", dir);
	if (!rc)
		rc = tfs_hf_bpe_pre(&name, hash, tok, cfg, "tokenizer.json", &err);
	if (rc)
		fprintf(stderr, "hf_vocab_dump: %s (chkhsh %s)\n", err.msg, hash);
	else
		printf("%s %s\n", name, hash[0] ? hash : "-");
	tfs_hf_tok_close(tok);
	json_decref(cfg);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *garch = NULL;
	if (argc == 2 && strcmp(argv[1], "--chktxt") == 0)
		return fputs(tfs_hf_chktxt, stdout) < 0;
	if (argc == 3 && strcmp(argv[1], "--pre") == 0)
		return pre_only(argv[2]);
	if (argc > 2 && strcmp(argv[1], "-a") == 0) {
		garch = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: hf_vocab_dump [-a GGUF_ARCH] DIR HF_ARCH OUT.gguf\n");
		return 2;
	}
	tfs_error err = { 0 };
	tfs_hf_files files;
	tfs_hf_files_dir(&files, argv[1]);
	uint8_t *text;
	uint64_t len;
	json_t *config = NULL;
	int rc = files.read(files.ctx, "config.json", &text, &len, &err);
	if (rc == TFS_E_NOTFOUND) {
		config = json_object();
		rc = 0;
	} else if (!rc) {
		config = json_loadb((const char *)text, (size_t)len, 0, NULL);
		free(text);
		if (!config)
			rc = tfs_error_set(&err, TFS_E_FORMAT, "config.json: not JSON");
	}
	const char *arch = argv[2];
	if (!rc && strcmp(arch, "-") == 0)
		arch = json_string_value(json_array_get(json_object_get(config, "architectures"), 0));
	tfs_hf_kvs kv = { 0 };
	if (!rc && garch)
		rc = add_arch(&kv, garch, &err);
	if (!rc)
		rc = tfs_hf_vocab_keys(&kv, &files, arch ? arch : "(none)", config, &err);
	if (rc) {
		fprintf(stderr, "hf_vocab_dump: %s\n", err.msg);
		tfs_hf_kvs_free(&kv);
		json_decref(config);
		return 1;
	}
	FILE *f = fopen(argv[3], "wb");
	int e = !f;
	if (f) {
		e |= put(f, "GGUF", 4) | put_u32(f, 3) | put_u64(f, 0) | put_u64(f, kv.n);
		for (size_t i = 0; i < kv.n; i++)
			e |= put_u64(f, strlen(kv.kv[i].name)) |
			     put(f, kv.kv[i].name, strlen(kv.kv[i].name)) |
			     put_u32(f, kv.kv[i].type) | put(f, kv.kv[i].data, (size_t)kv.kv[i].len);
		long pos = ftell(f);
		static const uint8_t zeros[32];
		if (pos > 0 && pos % 32)
			e |= put(f, zeros, (size_t)(32 - pos % 32));
		e |= fclose(f);
	}
	tfs_hf_kvs_free(&kv);
	json_decref(config);
	if (e) {
		perror(argv[3]);
		return 1;
	}
	return 0;
}
