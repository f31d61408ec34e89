/*
 * value.h - GGUF metadata values: types, text and JSON forms, parsing (public).
 */
#ifndef TFS_VALUE_H
#define TFS_VALUE_H

#include "../base/base.h"

/* ==== GGUF metadata values ==== */

typedef enum {
	TFS_GGUF_UINT8 = 0, TFS_GGUF_INT8 = 1, TFS_GGUF_UINT16 = 2, TFS_GGUF_INT16 = 3,
	TFS_GGUF_UINT32 = 4, TFS_GGUF_INT32 = 5, TFS_GGUF_FLOAT32 = 6, TFS_GGUF_BOOL = 7,
	TFS_GGUF_STRING = 8, TFS_GGUF_ARRAY = 9, TFS_GGUF_UINT64 = 10, TFS_GGUF_INT64 = 11,
	TFS_GGUF_FLOAT64 = 12, TFS_GGUF_TYPE_COUNT = 13
} tfs_gguf_type;

/*
 * A metadata value is kept in its GGUF payload encoding, whatever the source
 * format: scalars as little-endian bytes, a string as u64 length + bytes, an
 * array as u32 element type + u64 count + elements.  The payload usually
 * points into the source's mapping (no copy, no per-element allocation).
 */

/* Text form served by metadata/<key>, without the trailing newline: decimal
 * integers, shortest round-trip floats, true/false, raw string bytes, arrays as
 * one JSON array.  Appends to out. */
int tfs_value_format(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len,
		     tfs_error *err);
/* A value as JSON: integers exact (uint64 too), floats as in tfs_value_format but
 * non-finite ones as NaN / Infinity / -Infinity (as Python's json writes them), bools,
 * strings JSON-escaped (bytes that are not UTF-8 as \udcXX), arrays in full.  Appends. */
int tfs_value_format_json(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len,
			  tfs_error *err);
/* Type name for the user.tensorfs.type xattr: "uint32", "string",
 * "array[string]", "array[array[int8]]" ... */
int tfs_value_type_name(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len);
/*
 * Parses text (one trailing newline is dropped) as a value of type type_name
 * (a name as returned by tfs_value_type_name) into a newly allocated payload
 * (*data, owned by the caller, free()).  TFS_E_INVALID with a message when the
 * text is not a value of that type.
 */
int tfs_value_parse(uint8_t **data, uint64_t *len, uint32_t *type, const char *type_name,
		    const char *text, size_t text_len, tfs_error *err);
/* Validates a payload of `type` whose encoding is exactly len bytes. */
int tfs_value_check(uint32_t type, const uint8_t *data, uint64_t len, tfs_error *err);

#endif
