/*
 * value.c - GGUF metadata values <-> the text served in metadata/<key>.
 *
 * Text forms: integers in decimal; floats as the shortest decimal that parses
 * back to the same bits, laid out as Python's repr (3.14159, -10.0, 1e-05,
 * 1.5e+16; inf, -inf, nan); bools true/false; strings as their raw bytes;
 * arrays as one JSON array (strings JSON-escaped, a byte that is not part of
 * valid UTF-8 as the lone surrogate \udcXX as Python's surrogateescape does,
 * non-finite floats as Infinity/-Infinity/NaN as Python's json module does).
 */
#include "value.h"
#include "cursor.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const type_names[TFS_GGUF_TYPE_COUNT] = {
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
	"string", "array", "uint64", "int64", "float64",
};
static const uint8_t type_size[TFS_GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

/* ==== formatting ==== */

/*
 * The shortest decimal that reads back to the same value (as a float when
 * is_float), laid out as Python's repr does: fixed notation for exponents -4..15
 * ("0.0001", "123.0", "-10.0"), else scientific ("1e-05", "1.5e+16").
 */
static int fmt_shortest(tfs_buf *out, double v, bool is_float, bool json)
{
	if (isnan(v))
		return tfs_buf_printf(out, "%s", json ? "NaN" : "nan");
	if (isinf(v))
		return tfs_buf_printf(out, "%s", v < 0 ? (json ? "-Infinity" : "-inf")
						       : (json ? "Infinity" : "inf"));
	char e[48];
	for (int p = 1; p <= 17; p++) {
		snprintf(e, sizeof(e), "%.*e", p - 1, v);
		if (is_float ? strtof(e, NULL) == (float)v : strtod(e, NULL) == v)
			break;
	}
	/* e is [-]d[.ddd]e(+|-)XX */
	bool neg = e[0] == '-';
	const char *q = e + neg;
	char digits[24];
	int nd = 0;
	for (; *q && *q != 'e' && nd < 20; q++)
		if (*q != '.')
			digits[nd++] = *q;
	int exp = atoi(q + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	char s[64];
	size_t k = 0;
	if (neg)
		s[k++] = '-';
	if (exp >= -4 && exp < 16) {
		if (exp < 0) {
			s[k++] = '0';
			s[k++] = '.';
			for (int z = 0; z < -exp - 1; z++)
				s[k++] = '0';
			for (int i = 0; i < nd; i++)
				s[k++] = digits[i];
		} else {
			for (int i = 0; i <= exp; i++)
				s[k++] = i < nd ? digits[i] : '0';
			s[k++] = '.';
			if (nd > exp + 1)
				for (int i = exp + 1; i < nd; i++)
					s[k++] = digits[i];
			else
				s[k++] = '0';
		}
		s[k] = '\0';
	} else {
		s[k++] = digits[0];
		if (nd > 1) {
			s[k++] = '.';
			for (int i = 1; i < nd; i++)
				s[k++] = digits[i];
		}
		snprintf(s + k, sizeof(s) - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	}
	return tfs_buf_append(out, s, strlen(s));
}

static int fmt_double(tfs_buf *out, double v, bool json)
{
	return fmt_shortest(out, v, false, json);
}

static int fmt_float(tfs_buf *out, float v, bool json)
{
	return fmt_shortest(out, v, true, json);
}

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
	else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
	else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
	else return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3F);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	return len;
}

static int fmt_json_string(tfs_buf *out, const uint8_t *s, uint64_t n)
{
	if (tfs_buf_reserve(out, n + 2))
		return TFS_E_NOMEM;
	out->data[out->len++] = '"';
	for (uint64_t i = 0; i < n;) {
		uint8_t c = s[i];
		int rc = 0;
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			rc = tfs_buf_append(out, e, 2);
			i++;
		} else if (c < 0x20) {
			switch (c) {
			case '\n': rc = tfs_buf_append(out, "\\n", 2); break;
			case '\t': rc = tfs_buf_append(out, "\\t", 2); break;
			case '\r': rc = tfs_buf_append(out, "\\r", 2); break;
			case '\b': rc = tfs_buf_append(out, "\\b", 2); break;
			case '\f': rc = tfs_buf_append(out, "\\f", 2); break;
			default: rc = tfs_buf_printf(out, "\\u%04x", c);
			}
			i++;
		} else {
			size_t l = utf8_len(s + i, n - i);
			if (l == 0) {
				rc = tfs_buf_printf(out, "\\udc%02x", c);
				i++;
			} else {
				rc = tfs_buf_append(out, s + i, l);
				i += l;
			}
		}
		if (rc)
			return rc;
	}
	return tfs_buf_append(out, "\"", 1);
}

/* Formats one scalar of type at p (enough bytes guaranteed by the caller). */
static int fmt_scalar(tfs_buf *out, uint32_t type, const uint8_t *p, bool json)
{
	switch (type) {
	case TFS_GGUF_UINT8: return tfs_buf_printf(out, "%u", p[0]);
	case TFS_GGUF_INT8: return tfs_buf_printf(out, "%d", (int8_t)p[0]);
	case TFS_GGUF_UINT16: return tfs_buf_printf(out, "%u", tfs_le16(p));
	case TFS_GGUF_INT16: return tfs_buf_printf(out, "%d", (int16_t)tfs_le16(p));
	case TFS_GGUF_UINT32: return tfs_buf_printf(out, "%u", tfs_le32(p));
	case TFS_GGUF_INT32: return tfs_buf_printf(out, "%d", (int32_t)tfs_le32(p));
	case TFS_GGUF_UINT64: return tfs_buf_printf(out, "%llu", (unsigned long long)tfs_le64(p));
	case TFS_GGUF_INT64: return tfs_buf_printf(out, "%lld", (long long)(int64_t)tfs_le64(p));
	case TFS_GGUF_BOOL: return tfs_buf_printf(out, "%s", p[0] ? "true" : "false");
	case TFS_GGUF_FLOAT32: {
		float f;
		memcpy(&f, p, 4);
		return fmt_float(out, f, json);
	}
	case TFS_GGUF_FLOAT64: {
		double d;
		memcpy(&d, p, 8);
		return fmt_double(out, d, json);
	}
	}
	return TFS_E_FORMAT;
}

static int too_large(tfs_cursor *c, uint64_t n)
{
	return tfs_error_set(c->err, TFS_E_UNSUPPORTED,
			     "array of %llu elements is too large to show as text (over %llu MiB)",
			     (unsigned long long)n, TFS_MAX_VALUE_TEXT >> 20);
}

/* Formats the value at the cursor; json: inside an array. */
static int fmt_value(tfs_buf *out, tfs_cursor *c, uint32_t type, bool json, int depth)
{
	const uint8_t *p;
	uint64_t n;
	int rc;
	if (type >= TFS_GGUF_TYPE_COUNT || depth > 16)
		return tfs_error_set(c->err, TFS_E_FORMAT, "invalid value type %u", type);
	if (type == TFS_GGUF_STRING) {
		if ((rc = tfs_cursor_str(c, &p, &n, TFS_MAX_STRING, "string")))
			return rc;
		return json ? fmt_json_string(out, p, n) : tfs_buf_append(out, p, n);
	}
	if (type != TFS_GGUF_ARRAY) {
		if ((rc = tfs_cursor_bytes(c, &p, type_size[type], "value")))
			return rc;
		return fmt_scalar(out, type, p, json);
	}
	uint32_t et;
	if ((rc = tfs_cursor_u32(c, &et, "array type")) || (rc = tfs_cursor_u64(c, &n, "array length")))
		return rc;
	if (et >= TFS_GGUF_TYPE_COUNT)
		return tfs_error_set(c->err, TFS_E_FORMAT, "invalid array element type %u", et);
	/* each element is at least one character and ", ": an array whose shortest text is
	 * over the cap is refused before formatting any of it (100 Mi bytes took seconds to
	 * fail) */
	if (n > (TFS_MAX_VALUE_TEXT + 1) / 3)
		return too_large(c, n);
	if ((rc = tfs_buf_append(out, "[", 1)))
		return rc;
	for (uint64_t i = 0; i < n; i++) {
		if (i && (rc = tfs_buf_append(out, ", ", 2)))
			return rc;
		if ((rc = fmt_value(out, c, et, true, depth + 1)))
			return rc;
		if (out->len > TFS_MAX_VALUE_TEXT)
			return too_large(c, n);
	}
	return tfs_buf_append(out, "]", 1);
}

int tfs_value_format(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len,
		     tfs_error *err)
{
	tfs_cursor c = { .base = data, .size = len, .file = "value", .err = err };
	int rc = fmt_value(out, &c, type, false, 0);
	if (rc == TFS_E_NOMEM)
		return tfs_error_set(err, rc, "out of memory formatting a value");
	return rc;
}

int tfs_value_check(uint32_t type, const uint8_t *data, uint64_t len, tfs_error *err)
{
	tfs_buf scratch = { 0 };
	tfs_cursor c = { .base = data, .size = len, .file = "value", .err = err };
	int rc = fmt_value(&scratch, &c, type, false, 0);
	tfs_buf_free(&scratch);
	if (!rc && c.pos != len)
		rc = tfs_error_set(err, TFS_E_FORMAT, "value has %llu trailing bytes",
				   (unsigned long long)(len - c.pos));
	return rc;
}

int tfs_value_type_name(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len)
{
	int depth = 0;
	uint64_t pos = 0;
	while (type == TFS_GGUF_ARRAY && depth < 17) {
		if (tfs_buf_append(out, "array[", 6))
			return TFS_E_NOMEM;
		depth++;
		if (len - pos < 12)
			return TFS_E_FORMAT;
		type = tfs_le32(data + pos);
		uint64_t n = tfs_le64(data + pos + 4);
		pos += 12;
		if (type == TFS_GGUF_ARRAY && n == 0) {
			/* element type of an empty nested array is unknowable: say array */
			break;
		}
	}
	if (type >= TFS_GGUF_TYPE_COUNT)
		return TFS_E_FORMAT;
	if (tfs_buf_printf(out, "%s", type_names[type]))
		return TFS_E_NOMEM;
	while (depth--)
		if (tfs_buf_append(out, "]", 1))
			return TFS_E_NOMEM;
	return 0;
}

/* ==== parsing ==== */

/* Parses "uint32" / "array[array[int8]]" into a list of types, outermost first. */
static int parse_type_name(const char *name, uint32_t *types, int *depth)
{
	*depth = 0;
	for (;;) {
		if (strncmp(name, "array[", 6) == 0) {
			if (*depth >= 16)
				return -1;
			types[(*depth)++] = TFS_GGUF_ARRAY;
			name += 6;
			continue;
		}
		size_t len = strcspn(name, "]");
		for (uint32_t t = 0; t < TFS_GGUF_TYPE_COUNT; t++) {
			if (t == TFS_GGUF_ARRAY || strlen(type_names[t]) != len ||
			    strncmp(name, type_names[t], len) != 0)
				continue;
			types[*depth] = t;
			int closes = 0;
			for (const char *p = name + len; *p; p++) {
				if (*p != ']')
					return -1;
				closes++;
			}
			return closes == *depth ? 0 : -1;
		}
		return -1;
	}
}

/* Appends the little-endian encoding of a scalar parsed from text. */
static int parse_scalar(tfs_buf *out, uint32_t type, const char *s, tfs_error *err)
{
	char *end;
	uint8_t b[8];
	errno = 0;
	switch (type) {
	case TFS_GGUF_BOOL:
		if (strcmp(s, "true") == 0)
			b[0] = 1;
		else if (strcmp(s, "false") == 0)
			b[0] = 0;
		else
			goto bad;
		return tfs_buf_append(out, b, 1);
	case TFS_GGUF_FLOAT32:
	case TFS_GGUF_FLOAT64: {
		const char *p = s;
		bool neg = *p == '-';
		if (neg || *p == '+')
			p++;
		double d;
		if (strcmp(p, "Infinity") == 0 || strcmp(p, "inf") == 0)
			d = neg ? -INFINITY : INFINITY;
		else if (strcmp(p, "NaN") == 0 || strcmp(p, "nan") == 0)
			d = neg ? -NAN : NAN;
		else {
			if (!*s)
				goto bad;
			d = strtod(s, &end);
			if (*end || (errno == ERANGE && isinf(d))) /* underflow to a subnormal is fine */
				goto bad;
		}
		if (type == TFS_GGUF_FLOAT64) {
			memcpy(b, &d, 8);
			return tfs_buf_append(out, b, 8);
		}
		float f;
		if (strcmp(p, "Infinity") && strcmp(p, "inf") && strcmp(p, "NaN") && strcmp(p, "nan")) {
			f = strtof(s, &end); /* correctly rounded from the text, not via double */
			if (*end || (errno == ERANGE && isinf(f)))
				goto bad;
		} else {
			f = (float)d;
		}
		memcpy(b, &f, 4);
		return tfs_buf_append(out, b, 4);
	}
	default:
		break;
	}
	/* integers */
	static const struct { int64_t lo; uint64_t hi; } range[TFS_GGUF_TYPE_COUNT] = {
		[TFS_GGUF_UINT8] = { 0, UINT8_MAX }, [TFS_GGUF_INT8] = { INT8_MIN, INT8_MAX },
		[TFS_GGUF_UINT16] = { 0, UINT16_MAX }, [TFS_GGUF_INT16] = { INT16_MIN, INT16_MAX },
		[TFS_GGUF_UINT32] = { 0, UINT32_MAX }, [TFS_GGUF_INT32] = { INT32_MIN, INT32_MAX },
		[TFS_GGUF_UINT64] = { 0, UINT64_MAX }, [TFS_GGUF_INT64] = { INT64_MIN, INT64_MAX },
	};
	if (!*s || !((*s >= '0' && *s <= '9') || *s == '-' || *s == '+'))
		goto bad;
	uint64_t u;
	if (*s == '-') {
		long long v = strtoll(s, &end, 10);
		if (*end || errno == ERANGE || v < range[type].lo)
			goto bad;
		u = (uint64_t)v;
	} else {
		unsigned long long v = strtoull(s, &end, 10);
		if (*end || errno == ERANGE || v > range[type].hi)
			goto bad;
		u = v;
	}
	memcpy(b, &u, 8); /* little-endian host: the low bytes come first */
	return tfs_buf_append(out, b, type_size[type]);
bad:
	return tfs_error_set(err, TFS_E_INVALID, "'%.64s' is not a valid %s", s, type_names[type]);
}

/*
 * jansson keeps integers as int64, so a uint64 above INT64_MAX does not load, and
 * it does not read Infinity / NaN.  For arrays of uint64 (big_ints) or of floats
 * (non_finite) such tokens outside strings are put in quotes before loading and
 * read back with the scalar parser in parse_json.  Returns a new text (caller
 * frees) or NULL when nothing needed quoting or on allocation failure.
 */
static char *quote_tokens(const char *text, size_t len, bool big_ints, bool non_finite,
			  size_t *out_len)
{
	tfs_buf b = { 0 };
	bool in_str = false, changed = false;
	for (size_t i = 0; i < len;) {
		char c = text[i];
		if (in_str) {
			if (c == '\\' && i + 1 < len) {
				if (tfs_buf_append(&b, text + i, 2))
					goto nomem;
				i += 2;
				continue;
			}
			in_str = c != '"';
		} else if (c == '"') {
			in_str = true;
		} else if (non_finite && (c == 'I' || c == 'N')) {
			/* Infinity and NaN, as Python's json writes them */
			/* text is not NUL-terminated: the length first */
			size_t w = len - i >= 8 && memcmp(text + i, "Infinity", 8) == 0 ? 8
				 : len - i >= 3 && memcmp(text + i, "NaN", 3) == 0 ? 3 : 0;
			if (w) {
				bool neg = b.len && b.data[b.len - 1] == '-';
				if (neg)
					b.len--;
				if (tfs_buf_append(&b, "\"", 1) || (neg && tfs_buf_append(&b, "-", 1)) ||
				    tfs_buf_append(&b, text + i, w) || tfs_buf_append(&b, "\"", 1))
					goto nomem;
				changed = true;
				i += w;
				continue;
			}
		} else if (big_ints && c >= '0' && c <= '9' &&
			   (i == 0 || !strchr("0123456789.eE+-", text[i - 1]))) {
			size_t j = i;
			while (j < len && text[j] >= '0' && text[j] <= '9')
				j++;
			if (j - i >= 19 && (j == len || !strchr(".eE", text[j]))) {
				if (tfs_buf_append(&b, "\"", 1) || tfs_buf_append(&b, text + i, j - i) ||
				    tfs_buf_append(&b, "\"", 1))
					goto nomem;
				changed = true;
				i = j;
				continue;
			}
			if (tfs_buf_append(&b, text + i, j - i))
				goto nomem;
			i = j;
			continue;
		}
		if (tfs_buf_append(&b, &c, 1))
			goto nomem;
		i++;
	}
	if (changed) {
		*out_len = b.len;
		return b.data;
	}
nomem:
	tfs_buf_free(&b);
	return NULL;
}

/* Decodes a JSON string (jansson gives UTF-8; \udcXX surrogate-escaped bytes are not
 * representable there, see docs/the-mount.md). */
static int parse_json(tfs_buf *out, const uint32_t *types, int depth, json_t *j, tfs_error *err)
{
	uint32_t type = types[0];
	char tmp[64];
	if (type == TFS_GGUF_ARRAY) {
		if (!json_is_array(j))
			return tfs_error_set(err, TFS_E_INVALID, "expected a JSON array");
		uint8_t hdr[12];
		uint32_t et = types[1];
		uint64_t n = json_array_size(j);
		memcpy(hdr, &et, 4);
		memcpy(hdr + 4, &n, 8);
		if (tfs_buf_append(out, hdr, 12))
			return TFS_E_NOMEM;
		for (size_t i = 0; i < n; i++) {
			int rc = parse_json(out, types + 1, depth - 1, json_array_get(j, i), err);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (type == TFS_GGUF_STRING) {
		if (!json_is_string(j))
			return tfs_error_set(err, TFS_E_INVALID, "expected a JSON string");
		uint64_t n = json_string_length(j);
		if (tfs_buf_append(out, &n, 8) || tfs_buf_append(out, json_string_value(j), n))
			return TFS_E_NOMEM;
		return 0;
	}
	if (type == TFS_GGUF_BOOL) {
		if (!json_is_boolean(j))
			return tfs_error_set(err, TFS_E_INVALID, "expected true or false");
		uint8_t b = json_is_true(j);
		return tfs_buf_append(out, &b, 1);
	}
	if (json_is_integer(j))
		snprintf(tmp, sizeof(tmp), "%lld", (long long)json_integer_value(j));
	else if (json_is_string(j) && json_string_length(j) < sizeof(tmp) &&
		 (type == TFS_GGUF_UINT64 || type == TFS_GGUF_FLOAT32 || type == TFS_GGUF_FLOAT64))
		snprintf(tmp, sizeof(tmp), "%s", json_string_value(j)); /* see quote_tokens */
	else if (json_is_real(j) && (type == TFS_GGUF_FLOAT32 || type == TFS_GGUF_FLOAT64))
		snprintf(tmp, sizeof(tmp), "%.17g", json_real_value(j));
	else
		return tfs_error_set(err, TFS_E_INVALID, "expected a number of type %s",
				     type_names[type]);
	if (type == TFS_GGUF_FLOAT32 && json_is_real(j)) {
		/* round from the decimal text once, not via double then float */
		float f = (float)json_real_value(j);
		return tfs_buf_append(out, &f, 4);
	}
	return parse_scalar(out, type, tmp, err);
}

int tfs_value_parse(uint8_t **data, uint64_t *len, uint32_t *type, const char *type_name,
		    const char *text, size_t text_len, tfs_error *err)
{
	uint32_t types[18];
	int depth;
	tfs_buf out = { 0 };
	int rc = 0;

	if (parse_type_name(type_name, types, &depth) < 0)
		return tfs_error_set(err, TFS_E_INVALID, "unknown value type '%s'", type_name);
	if (text_len && text[text_len - 1] == '\n')
		text_len--;
	*type = types[0];
	if (types[0] == TFS_GGUF_STRING) {
		uint64_t n = text_len;
		if (tfs_buf_append(&out, &n, 8) || tfs_buf_append(&out, text, text_len))
			rc = TFS_E_NOMEM;
	} else if (types[0] == TFS_GGUF_ARRAY) {
		json_error_t je;
		size_t qlen = 0;
		uint32_t leaf = types[depth];
		char *quoted = leaf == TFS_GGUF_UINT64 || leaf == TFS_GGUF_FLOAT32 || leaf == TFS_GGUF_FLOAT64
			? quote_tokens(text, text_len, leaf == TFS_GGUF_UINT64, leaf != TFS_GGUF_UINT64, &qlen)
			: NULL;
		json_t *j = json_loadb(quoted ? quoted : text, quoted ? qlen : text_len,
				       JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
		free(quoted);
		if (!j)
			rc = tfs_error_set(err, TFS_E_INVALID, "not a JSON array: %s (line %d, column %d)",
					   je.text, je.line, je.column);
		else
			rc = parse_json(&out, types, depth, j, err);
		json_decref(j);
	} else {
		char s[128];
		if (text_len >= sizeof(s))
			rc = tfs_error_set(err, TFS_E_INVALID, "'%.32s...' is not a valid %s", text,
					   type_names[types[0]]);
		else {
			memcpy(s, text, text_len);
			s[text_len] = '\0';
			rc = parse_scalar(&out, types[0], s, err);
		}
	}
	if (rc) {
		if (rc == TFS_E_NOMEM)
			tfs_error_set(err, rc, "out of memory parsing a value");
		tfs_buf_free(&out);
		return rc;
	}
	if (!out.data && tfs_buf_reserve(&out, 0)) /* an empty payload still needs a pointer */
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	*data = (uint8_t *)out.data;
	*len = out.len;
	return 0;
}
