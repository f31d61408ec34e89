/*
 * info.c - `tensorfs info SOURCE [--json | --markdown] [--no-tensors]`: what a mount of
 * SOURCE would show, without mounting.
 *
 * The text form is for people: a summary (format, GGUF version, alignment, data offset,
 * counts, parameters, tensor bytes), the keys with their types and a preview of each value
 * (arrays as [type × length] and their first elements, long strings cut with their length),
 * and a table of tensors.  --markdown prints the same as Markdown tables; --json prints
 * every key's full value and every tensor (tfs_model_info_json).
 */
#include "cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_COL_MAX 48    /* wider names overflow their column */
#define PREVIEW_COLS 64    /* a value's preview is cut near this many characters */
#define PREVIEW_ELEMS 8    /* at most this many array elements are shown */

typedef enum { OUT_TEXT, OUT_JSON, OUT_MARKDOWN } out_mode;

static void info_usage(FILE *f)
{
	fprintf(f,
		"usage: tensorfs info SOURCE [--json | --markdown] [--no-tensors] [--gguf | --mmproj]\n"
		"                     [--outtype=TYPE] [--fp8_as_q8] [--quantize=TYPE "
		"[--imatrix=FILE]]\n"
		"\n"
		"Shows what a mount of SOURCE would show, without mounting: the format, the\n"
		"metadata keys and their values, and the tensors (name, dtype, shape, bytes).\n"
		"\n"
		"  --json        one JSON document: every key with its full value, every tensor\n"
		"                (name, dtype, shape, offset, nbytes), the parameter count\n"
		"  --markdown    the summary, keys and tensors as Markdown tables\n"
		"  --no-tensors  leave out the tensor list\n"
		"  --gguf        a Hugging Face repo's GGUF view (its model.gguf) instead: the keys\n"
		"                and tensors llama.cpp's convert_hf_to_gguf.py would write\n"
		"  --mmproj      a multimodal repo's projector (its mmproj.gguf) instead: what\n"
		"                convert_hf_to_gguf.py --mmproj would write\n"
		"  --outtype=TYPE  those views' type: auto (default), f32, f16, bf16, q8_0\n"
		"  --fp8_as_q8   the GGUF view's FP8 weights as Q8_0 (convert_hf_to_gguf.py's\n"
		"                --fp8-as-q8)\n"
		"  --quantize=TYPE  the model quantized as llama-quantize writes it (Q4_K_M, ...),\n"
		"                as a mount with -o quantize=TYPE shows it (nothing is quantized)\n"
		"  --imatrix=FILE  the importance matrix that quantization uses\n"
		"  -h, --help    show this help\n");
}

/* ==== small text helpers ==== */

/* Characters on screen of UTF-8 text (continuation bytes take no column). */
static size_t columns(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

/* The byte length of the longest prefix of s (n bytes) that fits in cols columns and
 * does not end inside a UTF-8 sequence. */
static size_t prefix_for_columns(const char *s, size_t n, size_t cols)
{
	size_t c = 0, i = 0;
	while (i < n) {
		size_t j = i + 1;
		while (j < n && ((unsigned char)s[j] & 0xC0) == 0x80)
			j++;
		if (++c > cols)
			break;
		i = j;
	}
	return i;
}

/* 1234567 -> "1,234,567" */
static void with_commas(char *out, size_t cap, uint64_t v)
{
	char d[32];
	int n = snprintf(d, sizeof(d), "%llu", (unsigned long long)v);
	size_t k = 0;
	for (int i = 0; i < n && k + 2 < cap; i++) {
		if (i && (n - i) % 3 == 0)
			out[k++] = ',';
		out[k++] = d[i];
	}
	out[k] = '\0';
}

/* Three significant digits and a unit: 7241732096 -> "7.24 B", 1100000 -> "1.1 M";
 * base 1024 with byte units ("4.2 MiB"). */
static void scaled(char *out, size_t cap, uint64_t v, bool bytes)
{
	static const char *const count_units[] = { "", "K", "M", "B", "T", "P", "E" };
	static const char *const byte_units[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	const double base = bytes ? 1024.0 : 1000.0;
	double x = (double)v;
	int u = 0;
	while (u < 6 && x >= base * 0.9995) {
		x /= base;
		u++;
	}
	if (u == 0)
		snprintf(out, cap, "%llu%s", (unsigned long long)v, bytes ? " bytes" : "");
	else
		snprintf(out, cap, "%.3g %s", x, bytes ? byte_units[u] : count_units[u]);
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* ==== value previews ==== */

static const uint8_t scalar_size[TFS_GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

/* The encoded size of one value of type at p (n bytes left); false when it runs past n. */
static bool value_size(uint32_t type, const uint8_t *p, uint64_t n, uint64_t *size, int depth)
{
	uint64_t len;
	if (type >= TFS_GGUF_TYPE_COUNT || depth > 16)
		return false;
	if (type == TFS_GGUF_STRING) {
		if (n < 8)
			return false;
		memcpy(&len, p, 8);
		if (len > n - 8)
			return false;
		*size = 8 + len;
		return true;
	}
	if (type != TFS_GGUF_ARRAY) {
		*size = scalar_size[type];
		return *size <= n;
	}
	uint32_t et;
	if (n < 12)
		return false;
	memcpy(&et, p, 4);
	memcpy(&len, p + 4, 8);
	uint64_t at = 12;
	for (uint64_t i = 0; i < len; i++) {
		uint64_t s;
		if (!value_size(et, p + at, n - at, &s, depth + 1))
			return false;
		at += s;
	}
	*size = at;
	return true;
}

/* "uint32", "string", "[string × 32000]", "[array[int32] × 3]" */
static void type_text(tfs_buf *out, const tfs_kv *kv)
{
	tfs_buf tn = { 0 };
	tfs_value_type_name(&tn, kv->type, kv->data, kv->len);
	const char *t = tn.data ? tn.data : "?";
	uint64_t n = 0;
	if (kv->type == TFS_GGUF_ARRAY && kv->len >= 12 && strncmp(t, "array[", 6) == 0) {
		memcpy(&n, kv->data + 4, 8);
		tfs_buf_printf(out, "[%.*s \u00d7 %llu]", (int)(strlen(t) - 7), t + 6,
			       (unsigned long long)n);
	} else {
		tfs_buf_printf(out, "%s", t);
	}
	tfs_buf_free(&tn);
}

/* A string shown on one line: control characters and backslashes escaped as in C. */
static void escape_line(tfs_buf *out, const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (c == '\n')
			tfs_buf_append(out, "\\n", 2);
		else if (c == '\t')
			tfs_buf_append(out, "\\t", 2);
		else if (c == '\r')
			tfs_buf_append(out, "\\r", 2);
		else if (c == '\\')
			tfs_buf_append(out, "\\\\", 2);
		else if (c < 0x20 || c == 0x7f)
			tfs_buf_printf(out, "\\x%02x", c);
		else
			tfs_buf_append(out, &c, 1);
	}
}

/* A value in at most about PREVIEW_COLS columns: scalars as metadata/ shows them, a long
 * string cut and followed by its length, an array's first elements as JSON. */
static void preview(tfs_buf *out, const tfs_kv *kv)
{
	tfs_error err;
	if (kv->type == TFS_GGUF_STRING && kv->len >= 8) {
		uint64_t n;
		memcpy(&n, kv->data, 8);
		tfs_buf e = { 0 };
		escape_line(&e, kv->data + 8, (size_t)(n < kv->len - 8 ? n : kv->len - 8));
		if (e.data && columns(e.data, e.len) > PREVIEW_COLS) {
			size_t cut = prefix_for_columns(e.data, e.len, PREVIEW_COLS - 16);
			tfs_buf_append(out, e.data, cut);
			tfs_buf_printf(out, "\u2026 (%llu bytes)", (unsigned long long)n);
		} else if (e.data) {
			tfs_buf_append(out, e.data, e.len);
		}
		tfs_buf_free(&e);
		return;
	}
	if (kv->type != TFS_GGUF_ARRAY) {
		if (tfs_value_format(out, kv->type, kv->data, kv->len, &err))
			tfs_buf_printf(out, "(%s)", err.msg);
		return;
	}
	uint32_t et;
	uint64_t n, at = 12, shown = 0;
	if (kv->len < 12)
		return;
	memcpy(&et, kv->data, 4);
	memcpy(&n, kv->data + 4, 8);
	tfs_buf_append(out, "[", 1);
	tfs_buf one = { 0 };
	for (; shown < n && shown < PREVIEW_ELEMS; shown++) {
		uint64_t s;
		if (!value_size(et, kv->data + at, kv->len - at, &s, 1))
			break;
		one.len = 0;
		if (tfs_value_format_json(&one, et, kv->data + at, s, &err))
			break;
		size_t used = columns(out->data, out->len);
		size_t room = PREVIEW_COLS > used + 2 ? PREVIEW_COLS - used - 2 : 0;
		if (shown && columns(one.data, one.len) > room)
			break;
		if (shown)
			tfs_buf_append(out, ", ", 2);
		if (columns(one.data, one.len) > PREVIEW_COLS) {
			/* one element longer than the whole preview (a long string): its start */
			tfs_buf_append(out, one.data, prefix_for_columns(one.data, one.len, PREVIEW_COLS - 8));
			tfs_buf_append(out, "\u2026", strlen("\u2026"));
			shown++;
			break;
		}
		tfs_buf_append(out, one.data, one.len);
		at += s;
	}
	tfs_buf_free(&one);
	if (shown < n)
		tfs_buf_printf(out, "%s\u2026", shown ? ", " : "");
	tfs_buf_append(out, "]", 1);
}

/* ==== tensors ==== */

/* numpy order, "[32000, 2048]" ("[]" for a scalar). */
static void shape_text(tfs_buf *out, const tfs_tensor *t)
{
	tfs_buf_append(out, "[", 1);
	for (uint32_t k = t->n_dims; k-- > 0;)
		tfs_buf_printf(out, "%lld%s", (long long)t->ne[k], k ? ", " : "");
	tfs_buf_append(out, "]", 1);
}

/* "affine 4-bit, group 64" for an MLX-quantized weight; empty otherwise. */
static void quant_text(tfs_buf *out, const tfs_tensor *t)
{
	if (t->q.mode != TFS_QMODE_NONE)
		tfs_buf_printf(out, "%s %u-bit, group %u", tfs_qmode_name(t->q.mode), t->q.bits,
			       t->q.group);
}

/* ==== one table, text or Markdown ==== */

typedef struct {
	size_t ncol;
	const char *head[5];
	bool right[5];        /* right-aligned column (numbers) */
	size_t nrow;
	char **cell;          /* nrow * ncol strings, owned */
} table;

static void table_add(table *t, char **row)
{
	char **c = realloc(t->cell, (t->nrow + 1) * t->ncol * sizeof(char *));
	if (!c) {
		for (size_t k = 0; k < t->ncol; k++)
			free(row[k]);
		return;
	}
	t->cell = c;
	memcpy(t->cell + t->nrow * t->ncol, row, t->ncol * sizeof(char *));
	t->nrow++;
}

/* Takes the buffer's text (the buffer is left empty). */
static char *take(tfs_buf *b)
{
	char *s = b->data ? b->data : strdup("");
	*b = (tfs_buf){ 0 };
	return s;
}

static void md_cell(const char *s)
{
	for (; *s; s++) {
		if (strchr("\\|`*<>", *s))
			putchar('\\');
		putchar(*s);
	}
}

static void table_print(const table *t, out_mode mode)
{
	if (mode == OUT_MARKDOWN) {
		for (size_t k = 0; k < t->ncol; k++)
			printf("| %s ", t->head[k]);
		printf("|\n");
		for (size_t k = 0; k < t->ncol; k++)
			printf("|%s", t->right[k] ? "---:" : "---");
		printf("|\n");
		for (size_t r = 0; r < t->nrow; r++) {
			for (size_t k = 0; k < t->ncol; k++) {
				printf("| ");
				md_cell(t->cell[r * t->ncol + k]);
				putchar(' ');
			}
			printf("|\n");
		}
		return;
	}
	size_t w[5] = { 0 };
	for (size_t k = 0; k < t->ncol; k++) {
		w[k] = t->head[k] ? strlen(t->head[k]) : 0;
		for (size_t r = 0; r < t->nrow; r++) {
			const char *c = t->cell[r * t->ncol + k];
			size_t cw = columns(c, strlen(c));
			if (cw > w[k] && (k != 0 || cw <= NAME_COL_MAX))
				w[k] = cw;
		}
	}
	tfs_buf line = { 0 };
	for (size_t r = 0; r <= t->nrow; r++) {
		line.len = 0;
		tfs_buf_append(&line, "  ", 2);
		for (size_t k = 0; k < t->ncol; k++) {
			const char *c = r == 0 ? t->head[k] : t->cell[(r - 1) * t->ncol + k];
			size_t cw = columns(c, strlen(c));
			if (t->right[k])
				for (size_t pad = cw; pad < w[k]; pad++)
					tfs_buf_append(&line, " ", 1);
			tfs_buf_append(&line, c, strlen(c));
			if (!t->right[k])
				for (size_t pad = cw; pad < w[k]; pad++)
					tfs_buf_append(&line, " ", 1);
			if (k + 1 < t->ncol)
				tfs_buf_append(&line, "  ", 2);
		}
		while (line.len && line.data[line.len - 1] == ' ')
			line.len--;
		fwrite(line.data, 1, line.len, stdout);
		putchar('\n');
	}
	tfs_buf_free(&line);
}

static void table_free(table *t)
{
	for (size_t i = 0; i < t->nrow * t->ncol; i++)
		free(t->cell[i]);
	free(t->cell);
}

/* ==== the summary ==== */

static void summary_line(out_mode mode, const char *label, const char *value)
{
	if (mode == OUT_MARKDOWN) {
		printf("| %s | ", label);
		md_cell(value);
		printf(" |\n");
	} else {
		printf("%-12s %s\n", label, value);
	}
}

/* Live keys, tensors and layers of m, the tensors' bytes, and whether any is MLX-quantized. */
typedef struct {
	size_t nk, nt, nx;
	uint64_t bytes;
	bool quantized;
} counts;

static counts count(const tfs_model *m)
{
	counts c = { 0 };
	for (size_t i = 0; i < tfs_model_n_kv(m); i++)
		c.nk += !tfs_model_kv(m, i)->deleted;
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (t->deleted)
			continue;
		c.nt++;
		c.bytes += t->nbytes;
		c.quantized |= t->q.mode != TFS_QMODE_NONE;
	}
	for (size_t i = 0; i < tfs_model_n_extras(m); i++)
		c.nx += !tfs_model_extra(m, i)->deleted;
	return c;
}

/* "12,345 (12.3 K)"-style: the scaled number, and the exact one when it differs. */
static void amount(char *line, size_t cap, uint64_t v, bool bytes)
{
	char a[64], b[64];
	scaled(a, sizeof(a), v, bytes);
	with_commas(b, sizeof(b), v);
	if (v >= (bytes ? 1024u : 1000u))
		snprintf(line, cap, bytes ? "%s (%s bytes)" : "%s (%s)", a, b);
	else
		snprintf(line, cap, "%s", a);
}

/* A computed view's summary line, label: its file (name), the file's size and tail, or why
 * there is none; nothing when neither. */
static void view_line(out_mode mode, const char *label, const tfs_model *v, const char *why,
		      const char *name, const char *tail)
{
	char line[TFS_ERRMSG_MAX + 320], size[64];
	uint64_t n;
	if (v && tfs_model_image_size(&n, v, NULL) == 0) {
		amount(size, sizeof(size), n, true);
		snprintf(line, sizeof(line), "%s, %s%s", name, size, tail);
	} else if (why) {
		snprintf(line, sizeof(line), "none: %s", why);
	} else {
		return;
	}
	summary_line(mode, label, line);
}

/* A Hugging Face repo's GGUF view and projector, and a GGUF model's Hugging Face form (hf/
 * of a read-only mount): their files, or why there are none. */
static void view_lines(const tfs_model *m, out_mode mode)
{
	const tfs_model *g = tfs_model_gguf_view(m);
	char files[256];
	const char *tok = tfs_hf_repo_tok_why(m);
	view_line(mode, "GGUF view", g, tfs_model_gguf_view_why(m), g ? tfs_image_name(g) : NULL,
		  " (tensorfs info --gguf)");
	view_line(mode, "projector", tfs_model_mmproj(m), tfs_model_mmproj_why(m), "mmproj.gguf",
		  " (tensorfs info --mmproj)");
	snprintf(files, sizeof(files), ", and %zu files%s%s", tfs_hf_repo_n_files(m),
		 tok ? "; " : "", tok ? tok : "");
	view_line(mode, "HF view", tfs_hf_repo_model(m), tfs_hf_repo_why(m),
		  "hf/model.safetensors", files);
}

/* view: what m is when it is a computed view shown in place of the source's model (--gguf:
 * "the GGUF view"), NULL when m is the source's own: then the source is the one named on the
 * command line (a repo), not a file of it. */
static void print_summary(const tfs_model *m, const char *src, const char *view, out_mode mode,
			  const counts *c)
{
	char line[256];
	/* index.json holds the GGUF header facts the public interface does not expose */
	json_int_t version = 0, alignment = 0, data_offset = 0;
	tfs_buf ix = { 0 };
	tfs_error err;
	if (tfs_model_header_facts(m) && tfs_model_index_json(&ix, m, &err) == 0) {
		json_t *j = json_loads(ix.data, 0, NULL);
		version = json_integer_value(json_object_get(j, "version"));
		alignment = json_integer_value(json_object_get(j, "alignment"));
		data_offset = json_integer_value(json_object_get(j, "data_offset"));
		json_decref(j);
	}
	tfs_buf_free(&ix);

	if (mode == OUT_MARKDOWN) {
		printf("# ");
		md_cell(src);
		printf("\n\n| property | value |\n|---|---|\n");
	}
	if (view) {
		char *abs = tfs_is_remote(src) ? NULL : realpath(src, NULL);
		summary_line(mode, "source", abs ? abs : src);
		free(abs);
		const char *file = !strcmp(view, "the projector") ? "mmproj.gguf"   /* (a view too) */
				 : tfs_image_name(m) ? tfs_image_name(m) : "model.gguf";
		snprintf(line, sizeof(line), "%s (%s: %s)", tfs_model_format_name(m), view, file);
		summary_line(mode, "format", line);
	} else {
		summary_line(mode, "source", tfs_model_path(m));
		summary_line(mode, "format", tfs_model_format_name(m));
		view_lines(m, mode);
	}
	if (version > 0) {
		snprintf(line, sizeof(line), "%lld", (long long)version);
		summary_line(mode, "version", line);
		snprintf(line, sizeof(line), "%lld", (long long)alignment);
		summary_line(mode, "alignment", line);
		snprintf(line, sizeof(line), "%lld", (long long)data_offset);
		summary_line(mode, "data offset", line);
	}
	int o = snprintf(line, sizeof(line), "%zu %s, %zu %s", c->nk, plural(c->nk, "key", "keys"),
			 c->nt, plural(c->nt, "tensor", "tensors"));
	if (c->nx)
		snprintf(line + o, sizeof(line) - (size_t)o, ", %zu %s", c->nx,
			 plural(c->nx, "layer", "layers"));
	summary_line(mode, "contents", line);
	amount(line, sizeof(line), tfs_model_param_count(m), false);
	summary_line(mode, "parameters", line);
	amount(line, sizeof(line), c->bytes, true);
	summary_line(mode, "tensor data", line);
}

/* A section's heading ("## Keys (3)" or "3 keys") and its table (when it has rows). */
static void print_section(table *t, out_mode mode, size_t n, const char *title,
			  const char *one, const char *many)
{
	if (mode == OUT_MARKDOWN)
		printf("\n## %s (%zu)\n\n", title, n);
	else
		printf("\n%zu %s\n", n, plural(n, one, many));
	if (n)
		table_print(t, mode);
	table_free(t);
}

static void print_keys(const tfs_model *m, out_mode mode, size_t nk)
{
	table keys = { .ncol = 3, .head = { "key", "type", "value" } };
	for (size_t i = 0; i < tfs_model_n_kv(m); i++) {
		const tfs_kv *kv = tfs_model_kv(m, i);
		if (kv->deleted)
			continue;
		tfs_buf t = { 0 }, v = { 0 };
		type_text(&t, kv);
		preview(&v, kv);
		char *row[3] = { strdup(kv->name), take(&t), take(&v) };
		table_add(&keys, row);
	}
	print_section(&keys, mode, nk, "Keys", "key", "keys");
}

static void print_tensors(const tfs_model *m, out_mode mode, const counts *c)
{
	table ts = { .ncol = c->quantized ? 5 : 4,
		     .head = { "tensor", "dtype", "shape", "bytes", "quantization" },
		     .right = { false, false, false, true, false } };
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (t->deleted)
			continue;
		const tfs_dtype_info *d = tfs_dtype(t->dtype);
		tfs_buf s = { 0 }, q = { 0 }, n = { 0 };
		shape_text(&s, t);
		quant_text(&q, t);
		tfs_buf_printf(&n, "%llu", (unsigned long long)t->nbytes);
		char *row[5] = { strdup(t->name), strdup(d ? d->name : "?"), take(&s), take(&n),
				 take(&q) };
		if (!c->quantized)
			free(row[4]);
		table_add(&ts, row);
	}
	print_section(&ts, mode, c->nt, "Tensors", "tensor", "tensors");
}

/* A stacked expert tensor's experts by shard: "0-5 in A @ 123, 6-7 in B @ 0"; false for a
 * tensor of one source range. */
static bool stack_text(tfs_buf *out, const tfs_source *s)
{
	size_t n = s ? tfs_source_n_pieces(s) : 0;
	for (size_t k = 0; k < n;) {
		const char *label, *next;
		uint64_t off, len, o2, l2;
		tfs_source_piece(s, k, &label, &off, &len);
		size_t j = k + 1;
		while (j < n && tfs_source_piece(s, j, &next, &o2, &l2) && strcmp(next, label) == 0)
			j++;
		tfs_buf_printf(out, "%s%zu", k ? ", " : "", k);
		if (j - k > 1)
			tfs_buf_printf(out, "-%zu", j - 1);
		tfs_buf_printf(out, " in %s @ %llu", label, (unsigned long long)off);
		k = j;
	}
	return n > 0;
}

/* MoE: each stacked expert tensor's experts, by shard and offset (index.json: every one). */
static void print_stacked(const tfs_model *m, out_mode mode)
{
	table st = { .ncol = 2, .head = { "stacked tensor", "experts: shard @ offset" } };
	size_t n = 0;
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		tfs_buf b = { 0 };
		if (t->deleted || t->src < 0 ||
		    !stack_text(&b, tfs_model_source(m, (size_t)t->src))) {
			tfs_buf_free(&b);
			continue;
		}
		char *row[2] = { strdup(t->name), take(&b) };
		table_add(&st, row);
		n++;
	}
	if (n)
		print_section(&st, mode, n, "Stacked tensors", "stacked tensor", "stacked tensors");
	else
		table_free(&st);
}

static void print_layers(const tfs_model *m, out_mode mode, size_t nx)
{
	table ls = { .ncol = 3, .head = { "layer", "media type", "bytes" },
		     .right = { false, false, true } };
	for (size_t i = 0; i < tfs_model_n_extras(m); i++) {
		const tfs_extra *x = tfs_model_extra(m, i);
		if (x->deleted)
			continue;
		tfs_buf n = { 0 };
		tfs_buf_printf(&n, "%llu", (unsigned long long)x->size);
		char *row[3] = { strdup(x->name), strdup(x->media_type), take(&n) };
		table_add(&ls, row);
	}
	print_section(&ls, mode, nx, "Layers", "layer", "layers");
}

static void print_info(const tfs_model *m, const char *src, const char *view, out_mode mode,
		       bool with_tensors)
{
	counts c = count(m);
	print_summary(m, src, view, mode, &c);
	print_keys(m, mode, c.nk);
	if (with_tensors) {
		print_tensors(m, mode, &c);
		print_stacked(m, mode);
	}
	if (c.nx)
		print_layers(m, mode, c.nx);
}

/* ==== the command ==== */

typedef struct {
	out_mode mode;
	bool with_tensors;
	bool gguf;              /* --gguf: a Hugging Face repo's GGUF view */
	bool mmproj;            /* --mmproj: its projector */
	const char *src;
	tfs_open_opts oo;       /* the views' options, set from views */
	tfsd_opts views;        /* --NAME=VALUE of a view's -o option that takes a name or a
	                         * file (--outtype=, --quantize=, --imatrix=: made absolute as
	                         * a mount makes it) */
} info_args;

/* --NAME=VALUE where NAME is a view's -o option of a value (not a number: how, not what,
 * is made) into a->views; false when s is none. */
static bool view_flag(info_args *a, const char *s, int *rc)
{
	for (size_t i = 0; i < tfsd_n_options; i++) {
		const tfsd_option *o = &tfsd_option_table[i];
		size_t n = strlen(o->name);
		bool flag = o->kind == TFSD_OPT_FLAG;   /* --NAME of a view's flag: "1" */
		if (!(o->commands & TFSD_VIEW_OPTION) || (o->kind != TFSD_OPT_STR && !flag) ||
		    strncmp(s + 2, o->name, n) != 0 || s[2 + n] != (flag ? '\0' : '='))
			continue;
		if (tfsd_view_value_set(&a->views, o->name, flag ? "1" : s + 3 + n)) {
			fprintf(stderr, "tensorfs info: out of memory\n");
			*rc = 2;
		}
		return true;
	}
	return false;
}

/* The command line into a; -1: exit 0 (help shown), 0: go on, 2: a usage error (said). */
static int parse_args(info_args *a, int argc, char **argv)
{
	bool options = true;
	int rc = 0;
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		if (!options || s[0] != '-' || !s[1]) {
			if (a->src) {
				fprintf(stderr, "tensorfs info: unexpected argument '%s'\n", s);
				info_usage(stderr);
				return 2;
			}
			a->src = s;
		} else if (strcmp(s, "--") == 0) {
			options = false;
		} else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
			info_usage(stdout);
			return -1;
		} else if (strcmp(s, "--json") == 0 && a->mode != OUT_MARKDOWN) {
			a->mode = OUT_JSON;
		} else if (strcmp(s, "--markdown") == 0 && a->mode != OUT_JSON) {
			a->mode = OUT_MARKDOWN;
		} else if (strcmp(s, "--no-tensors") == 0) {
			a->with_tensors = false;
		} else if (strcmp(s, "--gguf") == 0 && !a->mmproj) {
			a->gguf = true;
		} else if (strcmp(s, "--mmproj") == 0 && !a->gguf) {
			a->mmproj = true;
		} else if (strncmp(s, "--", 2) == 0 && view_flag(a, s, &rc)) {
			if (rc)
				return rc;
		} else {
			if (strcmp(s, "--json") == 0 || strcmp(s, "--markdown") == 0)
				fprintf(stderr, "tensorfs info: --json and --markdown exclude each other\n");
			else if (strcmp(s, "--gguf") == 0 || strcmp(s, "--mmproj") == 0)
				fprintf(stderr, "tensorfs info: --gguf and --mmproj exclude each other\n");
			else
				fprintf(stderr, "tensorfs info: unknown option '%s'\n", s);
			info_usage(stderr);
			return 2;
		}
	}
	if (!a->src) {
		fprintf(stderr, "tensorfs info: no SOURCE given\n");
		info_usage(stderr);
		return 2;
	}
	if (tfsd_view_values_check(&a->views, "tensorfs info"))
		return 2;
	if (tfsd_view_paths(&a->views)) {
		fprintf(stderr, "tensorfs info: out of memory\n");
		return 2;
	}
	if (tfsd_view_opts(&a->views, &a->oo, "tensorfs info"))
		return 2;
	return tfsd_quantize_check(&a->views, "tensorfs info");
}

/* The model shown: m, or with --gguf its GGUF view, with --mmproj its projector (NULL after
 * saying why there is none). */
static const tfs_model *shown_model(const tfs_model *m, const info_args *a)
{
	if (a->mmproj) {
		const tfs_model *p = tfs_model_mmproj(m);
		const char *why = tfs_model_mmproj_why(m);
		if (!p)
			fprintf(stderr, "tensorfs: %s: no mmproj.gguf: %s\n", a->src,
				why ? why : "not a multimodal Hugging Face repo (a class with a "
				"projector and its vision_config)");
		return p;
	}
	if (!a->gguf || tfs_open_opt(&a->oo, "quantize")) /* (a quantized view is a GGUF already) */
		return m;
	const tfs_model *v = tfs_model_gguf_view(m);
	if (!v) {
		const char *why = tfs_model_gguf_view_why(m);
		fprintf(stderr, "tensorfs: %s: no GGUF view: %s\n", a->src,
			why ? why : "not a Hugging Face repo (a directory or hf://ORG/REPO with "
			"config.json and safetensors weights)");
	}
	return v;
}

int tfsd_info_main(int argc, char **argv)
{
	info_args a = { .mode = OUT_TEXT, .with_tensors = true };
	int rc = parse_args(&a, argc, argv);
	if (rc) {
		tfsd_opts_free(&a.views);
		return rc < 0 ? 0 : rc;
	}
	tfs_model *m;
	tfs_error err;
	tfs_error_clear(&err);
	rc = tfs_view_open(&m, a.src, &a.oo, &err);
	if (rc) {
		fprintf(stderr, "tensorfs: %s\n", err.msg);
		tfsd_opts_free(&a.views);
		return 1;
	}
	const tfs_model *shown = shown_model(m, &a);
	if (!shown)
		rc = 1;
	else if (a.mode == OUT_JSON) {
		tfs_buf b = { 0 };
		rc = tfs_model_info_json(&b, shown, a.with_tensors, &err);
		if (rc)
			fprintf(stderr, "tensorfs: %s\n", err.msg);
		else
			fwrite(b.data, 1, b.len, stdout);
		tfs_buf_free(&b);
	} else {
		print_info(shown, a.src, shown == m ? NULL : a.mmproj ? "the projector"
			   : "the GGUF view", a.mode, a.with_tensors);
	}
	tfs_model_free(m);
	tfsd_opts_free(&a.views);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "tensorfs info: cannot write the output\n");
		return 1;
	}
	return rc ? 1 : 0;
}
