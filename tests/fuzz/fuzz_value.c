/*
 * fuzz_value.c - libFuzzer harness: tfs_value_parse, the parser of metadata text written
 * through a rw mount.  The first input byte picks the type name, the rest is the text.
 * A value that parses must be a valid payload whose text (as metadata/<key> serves it: one
 * newline after it) parses back to the same text.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const type_names[] = {
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string",
	"uint64", "int64", "float64",
	"array[uint8]", "array[int8]", "array[uint16]", "array[int16]", "array[uint32]",
	"array[int32]", "array[float32]", "array[bool]", "array[string]", "array[uint64]",
	"array[int64]", "array[float64]",
	"array[array[int32]]", "array[array[string]]", "array[array[float64]]",
	"array[array[array[uint8]]]", "array[array[bool]]",
	/* names that are not types */
	"array", "array[]", "array[array]", "float16", "",
};
#define N_TYPES (sizeof(type_names) / sizeof(type_names[0]))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const char *tn = type_names[data[0] % N_TYPES];
	const char *text = (const char *)data + 1;
	size_t len = size - 1;
	uint8_t *payload = NULL, *again = NULL;
	uint64_t plen = 0, alen = 0;
	uint32_t type = 0, atype = 0;
	tfs_error e = { 0 };
	if (tfs_value_parse(&payload, &plen, &type, tn, text, len, &e)) {
		if (!e.msg[0])
			fz_fail("'%s': a failed parse without a message", tn);
		free(payload);
		return 0;
	}
	if (tfs_value_check(type, payload, plen, &e))
		fz_fail("'%s': the parsed payload is not valid: %s", tn, e.msg);
	tfs_buf t1 = { 0 }, t2 = { 0 }, name = { 0 };
	if (tfs_value_format(&t1, type, payload, plen, &e))
		fz_fail("'%s': the parsed value cannot be formatted: %s", tn, e.msg);
	if (tfs_value_type_name(&name, type, payload, plen))
		fz_fail("'%s': no type name", tn);
	if (!strchr(tn, '[') && strcmp(name.data, tn))
		fz_fail("'%s' parsed into a value of type %s", tn, name.data);
	/* what a mount serves is the text and one newline; writing that back is no change */
	if (tfs_buf_append(&t1, "\n", 1))
		fz_fail("out of memory");
	if (tfs_value_parse(&again, &alen, &atype, tn, t1.data, t1.len, &e))
		fz_fail("'%s': its own text '%.200s' does not parse: %s", tn, t1.data, e.msg);
	t1.len--;
	if (tfs_value_format(&t2, atype, again, alen, &e) || t1.len != t2.len ||
	    memcmp(t1.data, t2.data, t1.len))
		fz_fail("'%s': '%.200s' reads back as '%.200s'", tn, t1.data, t2.data);
	tfs_buf_free(&t1);
	tfs_buf_free(&t2);
	tfs_buf_free(&name);
	free(payload);
	free(again);
	return 0;
}
