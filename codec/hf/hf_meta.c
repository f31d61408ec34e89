/*
 * hf_meta.c - general.* keys as gguf-py's Metadata derives them (metadata.py, utility.py).
 *
 * Sources, first found wins per field:
 *  1. README.md's YAML front matter (the model card): name, author, license, tags,
 *     base_model, datasets, language, pipeline_tag, ... (llama.cpp's own names, their model_*
 *     forms, then model_creator and model_type);
 *  2. config.json's _name_or_path when it is an id ("org/name", at most one '/'), split by
 *     get_model_id_components into name, organization, basename, finetune, version, size;
 *  3. the directory's name, split the same way.
 * Then general.name falls back to the directory's name, general.size_label to the parameter
 * count ("1.2M").
 *
 * Before them, general.sampling.* from generation_config.json (hf_card.c).
 *
 * The model card is read with a small YAML reader: a top-level mapping whose values are plain,
 * quoted or block scalars, flow ([a, b]) or block ("- a") sequences of scalars; nested
 * mappings are skipped (and a sequence item that is one counts as an entry with nothing
 * the converter uses).  Scalars resolve as YAML 1.1 does (null, booleans, numbers are not
 * strings: the converter cannot write those, so they are left out).  Words are title-cased
 * and classified by ASCII rules (Python's by Unicode: names with non-ASCII letters may differ).
 */
#include "hf_meta.h"
#include "hf_card.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== small strings ==== */

static bool is_alpha(char c) { return isalpha((unsigned char)c); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* ==== names: get_model_id_components, id_to_title ==== */

enum { T_BASENAME = 1, T_SIZE = 2, T_FINETUNE = 4, T_VERSION = 8, T_TYPE = 16 };

typedef struct {
	char *full;        /* model_full_name_component */
	char *org;         /* org_component */
	char *basename, *finetune, *version, *size_label;
} id_parts;

static void id_parts_free(id_parts *p)
{
	free(p->full);
	free(p->org);
	free(p->basename);
	free(p->finetune);
	free(p->version);
	free(p->size_label);
	memset(p, 0, sizeof *p);
}

static bool ieq(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;
}

/* (v|iter)?\d+([.]\d+)* , case-insensitive */
static bool is_version(const char *s)
{
	if (!strncasecmp(s, "iter", 4))
		s += 4;
	else if (*s == 'v' || *s == 'V')
		s++;
	if (!is_digit(*s))
		return false;
	while (*s) {
		if (!is_digit(*s))
			return false;
		while (is_digit(*s))
			s++;
		if (*s == '.') {
			s++;
			if (!is_digit(*s))
				return false;
		}
	}
	return true;
}

/* i?q\d(_\w)*|b?fp?(16|32) , case-insensitive */
static bool is_quant_type(const char *s)
{
	const char *p = s;
	if (*p == 'i' || *p == 'I')
		p++;
	if ((*p == 'q' || *p == 'Q') && is_digit(p[1])) {
		p += 2;
		while (*p == '_' && (isalnum((unsigned char)p[1]) || p[1] == '_'))
			p += 2;
		if (!*p)
			return true;
	}
	p = s;
	if (*p == 'b' || *p == 'B')
		p++;
	if (*p != 'f' && *p != 'F')
		return false;
	p++;
	if (*p == 'p' || *p == 'P')
		p++;
	return !strcmp(p, "16") || !strcmp(p, "32");
}

/* (([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl) , case-insensitive */
static bool is_size(const char *s)
{
	static const char *const words[] = { "small", "mini", "medium", "large", "xl", "xxl" };
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		if (ieq(s, words[i]))
			return true;
	/* the regex backtracks: try the optional prefix both ways */
	for (int pre = 0; pre < 3; pre++) {
		const char *p = s;
		if (pre == 1) {
			if (*p != 'a' && *p != 'A')
				continue;
			p++;
		} else if (pre == 2) {
			if (!is_digit(*p))
				continue;
			while (is_digit(*p))
				p++;
			if (*p != 'x' && *p != 'X')
				continue;
			p++;
		}
		if (!is_digit(*p))
			continue;
		/* \d+([._]\d+)? then [KMBT] then \d? : scan digits greedily, with backtracking on
		 * the optional fraction handled by trying with and without it */
		while (is_digit(*p))
			p++;
		const char *q = p;
		if ((*q == '.' || *q == '_') && is_digit(q[1])) {
			q++;
			while (is_digit(*q))
				q++;
		}
		for (int frac = 1; frac >= 0; frac--) {
			const char *r = frac ? q : p;
			if (!strchr("kmbtKMBT", *r) || !*r)
				continue;
			r++;
			if (is_digit(*r))
				r++;
			if (!*r)
				return true;
		}
	}
	return false;
}

static bool is_finetune_word(const char *s)
{
	return ieq(s, "chat") || ieq(s, "instruct") || ieq(s, "vision") || ieq(s, "lora");
}

static bool all_alpha(const char *s)
{
	for (; *s; s++)
		if (!is_alpha(*s))
			return false;
	return true;
}

/* Joins the parts whose types include `want` (and exclude `not`) with '-'; NULL if none. */
static char *join_parts(char **parts, const int *types, size_t n, int want, int not, bool dedup)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		if ((types[i] & want) && !(types[i] & not))
			len += strlen(parts[i]) + 1;
	if (!len)
		return NULL;
	char *out = malloc(len + 1);
	if (!out)
		return NULL;
	out[0] = 0;
	bool first = true;
	for (size_t i = 0; i < n; i++) {
		if (!(types[i] & want) || (types[i] & not))
			continue;
		bool dup = false;
		for (size_t j = 0; dedup && j < i; j++)
			if ((types[j] & want) && !(types[j] & not) && !strcmp(parts[j], parts[i]))
				dup = true;
		if (dup)
			continue;
		if (!first)
			strcat(out, "-");
		strcat(out, parts[i]);
		first = false;
	}
	return out;
}

/* Metadata.get_model_id_components.  -1 on out of memory. */
/* A size part ("7b", "1_5B", "7b1") normalized as get_model_id_components does
 * (parts[i] may be replaced); its type: T_SIZE, or T_FINETUNE for a size far from the
 * parameter count, or 0.  -1: out of memory. */
static int size_part(char **parts, size_t i, int64_t total_params)
{
	char *part = parts[i];
	int type = 0;
	for (char *c = part; *c; c++)
		if (*c == '_')
			*c = '.';
	size_t len = strlen(part);
	if (is_digit(part[len - 1]) && len >= 2) {
		/* bloom-7b1: "7b1" -> "7.1b" (part[:-2] + "." + part[-1] + part[-2]) */
		char *np = malloc(len + 2);
		if (!np)
			return -1;
		memcpy(np, part, len - 2);
		np[len - 2] = '.';
		np[len - 1] = part[len - 1];
		np[len] = part[len - 2];
		np[len + 1] = 0;
		free(part);
		parts[i] = part = np;
		len++;
	}
	if (len > 1 && is_digit(part[len - 2]) && strchr("kmbt", part[len - 1]))
		part[len - 1] = (char)toupper((unsigned char)part[len - 1]);
	if (total_params != 0) {
		/* float(part[:-1]) * 1000 ** " KMBT".find(part[-1]) */
		char *num = tfs_hf_dupn(part, len - 1), *end;
		if (!num)
			return -1;
		bool ok = num[0] && (is_digit(num[0]) || num[0] == '.');
		for (char *c = num; ok && *c; c++)
			ok = is_digit(*c) || *c == '.';
		double v = ok ? strtod(num, &end) : 0;
		ok = ok && !*end;
		free(num);
		if (ok) {
			const char *units = " KMBT";
			const char *u = strchr(units, part[len - 1]);
			double label = v * pow(1000, u ? (double)(u - units) : -1.0);
			double t = (double)total_params;
			if ((total_params < 0 && label < (double)(-total_params / 8)) ||
			    (total_params > 0 && fabs(label - t) > (double)(7 * total_params / 8))) {
				type |= T_FINETUNE;
				part[len - 1] = (char)tolower((unsigned char)part[len - 1]);
			}
		}
	}
	return type ? type : T_SIZE;
}

/* The type of each of the n parts (types[i], zeroed): version, quant type, size,
 * finetune word. */
static int classify_parts(char **parts, int *types, size_t n, int64_t total_params)
{
	for (size_t i = 0; i < n; i++) {
		char *part = parts[i];
		if (is_version(part)) {
			types[i] |= T_VERSION;
		} else if (is_quant_type(part)) {
			types[i] |= T_TYPE;
			for (char *c = part; *c; c++)
				*c = (char)toupper((unsigned char)*c);
		} else if (i > 0 && is_size(part)) {
			int t = size_part(parts, i, total_params);
			if (t < 0)
				return -1;
			types[i] |= t;
		} else if (i > 0 && is_finetune_word(part)) {
			if (total_params < 0 && ieq(part, "lora"))
				types[i] |= T_TYPE;
			else
				types[i] |= T_FINETUNE;
		}
	}
	return 0;
}

/* Word sizes go when a numeric one is there; the basename is the leading untyped (or
 * version) parts, the other untyped ones finetune; trailing basename parts with another
 * type lose it. */
static void settle_types(char **parts, int *types, size_t n)
{
	bool numeric = false;
	for (size_t i = 0; i < n; i++)
		if (types[i] & T_SIZE)
			for (const char *c = parts[i]; *c; c++)
				numeric |= is_digit(*c);
	if (numeric)
		for (size_t i = 0; i < n; i++)
			if ((types[i] & T_SIZE) && all_alpha(parts[i]))
				types[i] &= ~T_SIZE;
	bool at_start = true;
	for (size_t i = 0; i < n; i++) {
		if (at_start && ((!types[i] && is_alpha(parts[i][0])) || (types[i] & T_VERSION))) {
			types[i] |= T_BASENAME;
		} else {
			at_start = false;
			if (!types[i])
				types[i] |= T_FINETUNE;
		}
	}
	for (size_t i = n; i-- > 0;) {
		if ((types[i] & T_BASENAME) && types[i] != T_BASENAME)
			types[i] &= ~T_BASENAME;
		else
			break;
	}
}

/* full split on '-', empty parts dropped: parts (allocated strings), *n of them. */
static int split_parts(char **parts, size_t *n, const char *full)
{
	for (const char *p = full; *p;) {
		const char *e = strchr(p, '-');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len && !(parts[(*n)++] = tfs_hf_dupn(p, len)))
			return -1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

static int id_components(id_parts *o, const char *model_id, int64_t total_params)
{
	memset(o, 0, sizeof *o);
	if (strchr(model_id, ' '))
		return (o->full = strdup(model_id)) ? 0 : -1;
	const char *slash = strchr(model_id, '/');
	const char *full = model_id;
	if (slash) {
		if (slash > model_id && model_id[0] != '.' &&
		    !(o->org = tfs_hf_dupn(model_id, (size_t)(slash - model_id))))
			return -1;
		full = slash + 1;
	}
	if (!(o->full = strdup(full)))
		return -1;
	size_t cap = strlen(full) / 2 + 2, n = 0;
	char **parts = calloc(cap, sizeof *parts);
	int *types = calloc(cap, sizeof *types);
	int rc = -1;
	if (parts && types && !split_parts(parts, &n, full) &&
	    !classify_parts(parts, types, n, total_params)) {
		settle_types(parts, types, n);
		o->basename = join_parts(parts, types, n, T_BASENAME, 0, false);
		o->size_label = join_parts(parts, types, n, T_SIZE, 0, true);
		o->finetune = join_parts(parts, types, n, T_FINETUNE, 0, false);
		o->version = join_parts(parts, types, n, T_VERSION, T_BASENAME, false);
		if (!o->size_label && !o->finetune && !o->version) {
			free(o->basename);
			o->basename = NULL;
		}
		rc = 0;
	}
	for (size_t i = 0; parts && i < n; i++)
		free(parts[i]);
	free(parts);
	free(types);
	return rc;
}

/* ^(v\d+(?:\.\d+)*|\d.*)$ */
static bool title_exempt(const char *w)
{
	if (is_digit(*w))
		return true;
	if (*w != 'v' || !is_digit(w[1]))
		return false;
	return is_version(w);
}

/* str.islower(): a cased character, none of them upper case. */
static bool is_lower(const char *w)
{
	bool cased = false;
	for (; *w; w++) {
		if (isupper((unsigned char)*w))
			return false;
		cased |= islower((unsigned char)*w) != 0;
	}
	return cased;
}

/* Metadata.id_to_title: words (split on '-' and white space) title-cased unless they have
 * an upper-case letter, are a version or start with a digit; joined with ' '. */
static char *id_to_title(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(n + 1), *w = malloc(n + 1);
	size_t k = 0;
	if (!out || !w) {
		free(out);
		free(w);
		return NULL;
	}
	const char *p = s;
	for (;;) {
		while (*p && (*p == '-' || isspace((unsigned char)*p)))
			p++;
		if (!*p)
			break;
		size_t wl = 0;
		while (*p && *p != '-' && !isspace((unsigned char)*p))
			w[wl++] = *p++;
		w[wl] = 0;
		if (is_lower(w) && !title_exempt(w)) {
			bool prev_letter = false;
			for (size_t i = 0; i < wl; i++) {
				if (is_alpha(w[i])) {
					w[i] = (char)(prev_letter ? tolower((unsigned char)w[i])
						      : toupper((unsigned char)w[i]));
					prev_letter = true;
				} else {
					prev_letter = false;
				}
			}
		}
		if (k)
			out[k++] = ' ';
		memcpy(out + k, w, wl);
		k += wl;
	}
	out[k] = 0;
	free(w);
	return out;
}

/* ==== size label ==== */

void tfs_hf_size_label(char out[32], uint64_t total_params)
{
	double x = (double)total_params, scaled;
	char unit;
	if (x > 1e12) {
		scaled = x * 1e-12;
		unit = 'T';
	} else if (x > 1e9) {
		scaled = x * 1e-9;
		unit = 'B';
	} else if (x > 1e6) {
		scaled = x * 1e-6;
		unit = 'M';
	} else {
		scaled = x * 1e-3;
		unit = 'K';
	}
	/* fix = max(2 - len(str(round(scaled)).lstrip('0')), 0) */
	char digits[32];
	snprintf(digits, sizeof digits, "%.0f", nearbyint(scaled));
	const char *d = digits;
	while (*d == '0')
		d++;
	int fix = 2 - (int)strlen(d);
	snprintf(out, 32, "%.*f%c", fix < 0 ? 0 : fix, scaled, unit);
}

/* ==== the fields ==== */

enum field {
	F_NAME, F_AUTHOR, F_VERSION, F_ORGANIZATION, F_FINETUNE, F_BASENAME, F_DESCRIPTION,
	F_QUANTIZED_BY, F_SIZE_LABEL, F_LICENSE, F_LICENSE_NAME, F_LICENSE_LINK, F_URL, F_DOI,
	F_UUID, F_REPO_URL, F_SOURCE_URL, F_SOURCE_DOI, F_SOURCE_UUID, F_SOURCE_REPO_URL, F_COUNT
};

static const char *const field_keys[F_COUNT] = {
	"general.name", "general.author", "general.version", "general.organization",
	"general.finetune", "general.basename", "general.description", "general.quantized_by",
	"general.size_label", "general.license", "general.license.name", "general.license.link",
	"general.url", "general.doi", "general.uuid", "general.repo_url", "general.source.url",
	"general.source.doi", "general.source.uuid", "general.source.repo_url",
};

/* A base model's or dataset's entry: name, author, version, organization, description,
 * url, doi, uuid, repo_url (NULL when absent). */
enum { E_NAME, E_AUTHOR, E_VERSION, E_ORGANIZATION, E_DESCRIPTION, E_URL, E_DOI, E_UUID,
       E_REPO_URL, E_COUNT };
static const char *const entry_keys[E_COUNT] = { "name", "author", "version", "organization",
	"description", "url", "doi", "uuid", "repo_url" };

typedef struct {
	char *f[E_COUNT];
} entry;

typedef struct {
	char *f[F_COUNT];
	bool set[F_COUNT];      /* the model card named it (even as null or a non-string) */
	entry *base;            /* NULL when the card has no base model key */
	size_t nbase;
	bool has_base;
	entry *ds;
	size_t nds;
	bool has_ds;
	char **tags, **langs;
	size_t ntags, nlangs;
	bool has_tags, has_langs;
} meta;

static void meta_free(meta *m)
{
	for (int i = 0; i < F_COUNT; i++)
		free(m->f[i]);
	for (size_t i = 0; i < m->nbase; i++)
		for (int k = 0; k < E_COUNT; k++)
			free(m->base[i].f[k]);
	for (size_t i = 0; i < m->nds; i++)
		for (int k = 0; k < E_COUNT; k++)
			free(m->ds[i].f[k]);
	free(m->base);
	free(m->ds);
	for (size_t i = 0; i < m->ntags; i++)
		free(m->tags[i]);
	for (size_t i = 0; i < m->nlangs; i++)
		free(m->langs[i]);
	free(m->tags);
	free(m->langs);
}

/* use_model_card_metadata: the field takes the card's value when still unset (None). */
static int card_field(meta *m, enum field f, const ycard *c, const char *key)
{
	const yval *v = tfs_hf_card_get(c, key);
	if (!v || m->f[f] || m->set[f])
		return 0;
	if (v->kind == Y_STR)
		return (m->f[f] = strdup(v->s)) ? 0 : -1;
	if (v->kind == Y_LIST && f == F_LICENSE) {
		/* a list of licenses: ",".join */
		size_t len = 1;
		for (size_t i = 0; i < v->n; i++)
			len += (v->items[i].kind == Y_STR ? strlen(v->items[i].s) : 0) + 1;
		char *s = malloc(len);
		if (!s)
			return -1;
		s[0] = 0;
		for (size_t i = 0; i < v->n; i++) {
			if (i)
				strcat(s, ",");
			if (v->items[i].kind == Y_STR)
				strcat(s, v->items[i].s);
		}
		m->f[f] = s;
		return 0;
	}
	/* null leaves it None; another type: the converter could not write it (left out) */
	m->set[f] = v->kind != Y_NULL;
	return 0;
}

static int append_str(char ***arr, size_t *n, const char *s)
{
	char **a = realloc(*arr, (*n + 1) * sizeof *a);
	if (!a)
		return -1;
	*arr = a;
	return (a[(*n)++] = strdup(s)) ? 0 : -1;
}

/* use_array_model_card_metadata: tags/languages gain a string or a list's strings. */
static int card_array(char ***arr, size_t *n, bool *has, const ycard *c, const char *key)
{
	const yval *v = tfs_hf_card_get(c, key);
	if (!v || v->kind == Y_NULL)
		return 0;
	*has = true;
	if (v->kind == Y_STR)
		return append_str(arr, n, v->s);
	if (v->kind == Y_LIST)
		for (size_t i = 0; i < v->n; i++)
			if (v->items[i].kind == Y_STR && append_str(arr, n, v->items[i].s))
				return -1;
	return 0;
}

/* A base model or dataset id ("org/name", or a URL) as the converter describes it. */
static int card_entry(entry *e, const char *id, int64_t total_params)
{
	id_parts ip;
	memset(e, 0, sizeof *e);
	bool url = !strncmp(id, "http://", 7) || !strncmp(id, "https://", 8) ||
		   !strncmp(id, "ssh://", 6);
	const char *comp = id;
	char *hfid = NULL;
	if (url) {
		if (!(e->f[E_REPO_URL] = strdup(id)))
			return -1;
		/* https?://huggingface.co/([^/]+/[^/]+)$ */
		if (!strstr(id, "huggingface.co"))
			return 0;
		const char *p = !strncmp(id, "https://huggingface.co/", 23) ? id + 23
			      : !strncmp(id, "http://huggingface.co/", 22) ? id + 22 : NULL;
		const char *slash = p ? strchr(p, '/') : NULL;
		if (!p || !slash || slash == p || !slash[1] || strchr(slash + 1, '/') ||
		    strchr(p, '\n'))
			return 0;
		comp = hfid = strdup(p);
		if (!hfid)
			return -1;
	}
	if (id_components(&ip, comp, total_params)) {
		free(hfid);
		return -1;
	}
	int rc = 0;
	if (ip.full && !(e->f[E_NAME] = id_to_title(ip.full)))
		rc = -1;
	if (!rc && ip.org && !(e->f[E_ORGANIZATION] = id_to_title(ip.org)))
		rc = -1;
	if (!rc && ip.version && !(e->f[E_VERSION] = strdup(ip.version)))
		rc = -1;
	if (!rc && !url && ip.org && ip.full) {
		size_t len = strlen(ip.org) + strlen(ip.full) + 32;
		if (!(e->f[E_REPO_URL] = malloc(len)))
			rc = -1;
		else
			snprintf(e->f[E_REPO_URL], len, "https://huggingface.co/%s/%s", ip.org,
				 ip.full);
	}
	id_parts_free(&ip);
	free(hfid);
	return rc;
}

/* base_model / datasets: a string or a list of strings (a list's mappings are entries with
 * nothing the converter writes but their count). */
static int card_entries(entry **out, size_t *n, bool *has, const ycard *c,
			const char *const *keys, int64_t total_params)
{
	const yval *v = NULL;
	bool any = false;
	for (const char *const *k = keys; *k; k++)
		any |= tfs_hf_card_get(c, *k) != NULL;
	if (!any)
		return 0;
	*has = true;
	/* model_card.get(k0, model_card.get(k1, model_card.get(k2))) */
	for (const char *const *k = keys; *k && !v; k++)
		v = tfs_hf_card_get(c, *k);
	if (!v || (v->kind != Y_STR && v->kind != Y_LIST))
		return 0;
	size_t cnt = v->kind == Y_STR ? 1 : v->n;
	if (!cnt)
		return 0;
	*out = calloc(cnt, sizeof **out);
	if (!*out)
		return -1;
	for (size_t i = 0; i < cnt; i++) {
		const yval *it = v->kind == Y_STR ? v : &v->items[i];
		(*n)++;
		if (it->kind == Y_STR && card_entry(&(*out)[i], it->s, total_params))
			return -1;
	}
	return 0;
}

/* Fills fields still unset from an id's components (the _name_or_path and directory steps). */
static int from_id(meta *m, const char *id, int64_t total_params)
{
	id_parts ip;
	if (id_components(&ip, id, total_params))
		return -1;
	int rc = 0;
	struct { enum field f; char *v; bool title; } set[] = {
		{ F_NAME, ip.full, true }, { F_ORGANIZATION, ip.org, true },
		{ F_BASENAME, ip.basename, false }, { F_FINETUNE, ip.finetune, false },
		{ F_VERSION, ip.version, false }, { F_SIZE_LABEL, ip.size_label, false },
	};
	for (size_t i = 0; !rc && i < sizeof set / sizeof set[0]; i++) {
		if (m->f[set[i].f] || m->set[set[i].f] || !set[i].v)
			continue;
		m->f[set[i].f] = set[i].title ? id_to_title(set[i].v) : strdup(set[i].v);
		if (!m->f[set[i].f])
			rc = -1;
	}
	id_parts_free(&ip);
	return rc;
}

static int add_entries(tfs_hf_kvs *out, const char *what, const entry *e, size_t n,
		       tfs_error *err)
{
	char key[96];
	snprintf(key, sizeof key, "general.%s.count", what);
	int rc = tfs_hf_kvs_add_u32(out, key, (uint32_t)n, err);
	for (size_t i = 0; !rc && i < n; i++)
		for (int k = 0; !rc && k < E_COUNT; k++) {
			if (!e[i].f[k] || !*e[i].f[k])
				continue;
			snprintf(key, sizeof key, "general.%s.%zu.%s", what, i, entry_keys[k]);
			rc = tfs_hf_kvs_add_str(out, key, e[i].f[k], err);
		}
	return rc;
}

/* The model card's fields (llama.cpp's names, their model_* forms, model_creator,
 * model_type), base models, datasets, license, tags and languages: nonzero when out of
 * memory. */
static int card_fields(meta *m, const ycard *c, int64_t total_params)
{
	int bad = 0;
	static const struct { enum field f; const char *key; } card[] = {
		{ F_NAME, "name" }, { F_AUTHOR, "author" }, { F_VERSION, "version" },
		{ F_ORGANIZATION, "organization" }, { F_DESCRIPTION, "description" },
		{ F_FINETUNE, "finetune" }, { F_BASENAME, "basename" },
		{ F_SIZE_LABEL, "size_label" }, { F_SOURCE_URL, "url" }, { F_SOURCE_DOI, "doi" },
		{ F_SOURCE_UUID, "uuid" }, { F_SOURCE_REPO_URL, "repo_url" },
		{ F_NAME, "model_name" }, { F_AUTHOR, "model_author" },
		{ F_VERSION, "model_version" }, { F_ORGANIZATION, "model_organization" },
		{ F_DESCRIPTION, "model_description" }, { F_FINETUNE, "model_finetune" },
		{ F_BASENAME, "model_basename" }, { F_SIZE_LABEL, "model_size_label" },
		{ F_SOURCE_URL, "model_url" }, { F_SOURCE_DOI, "model_doi" },
		{ F_SOURCE_UUID, "model_uuid" }, { F_SOURCE_REPO_URL, "model_repo_url" },
		{ F_NAME, "model_name" }, { F_AUTHOR, "model_creator" },
		{ F_BASENAME, "model_type" },
	};
	for (size_t i = 0; !bad && i < sizeof card / sizeof card[0]; i++)
		bad = card_field(m, card[i].f, c, card[i].key);
	static const char *const base_keys[] = { "base_model", "base_models",
						  "base_model_sources", NULL };
	static const char *const ds_keys[] = { "datasets", "dataset", "dataset_sources", NULL };
	bad = bad || card_entries(&m->base, &m->nbase, &m->has_base, c, base_keys, total_params) ||
	      card_entries(&m->ds, &m->nds, &m->has_ds, c, ds_keys, total_params) ||
	      card_field(m, F_LICENSE, c, "license") ||
	      card_field(m, F_LICENSE_NAME, c, "license_name") ||
	      card_field(m, F_LICENSE_LINK, c, "license_link") ||
	      card_array(&m->tags, &m->ntags, &m->has_tags, c, "tags") ||
	      card_array(&m->tags, &m->ntags, &m->has_tags, c, "pipeline_tag") ||
	      card_array(&m->langs, &m->nlangs, &m->has_langs, c, "languages") ||
	      card_array(&m->langs, &m->nlangs, &m->has_langs, c, "language");
	return bad;
}

int tfs_hf_meta_keys(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *config,
		     const char *dir_name, int64_t total_params, tfs_error *err)
{
	char label[32];
	tfs_hf_size_label(label, total_params > 0 ? (uint64_t)total_params : 0);
	return tfs_hf_meta_keys_label(out, files, config, dir_name, total_params, label, err);
}

int tfs_hf_meta_keys_label(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *config,
			   const char *dir_name, int64_t total_params, const char *size_label,
			   tfs_error *err)
{
	ycard c = { 0 };
	meta m = { 0 };
	int rc = tfs_hf_card_load(&c, files, err), bad = 0;
	if (rc)
		return rc;
	bad = card_fields(&m, &c, total_params);

	/* config.json's _name_or_path, when an id rather than a path */
	const char *nop = json_string_value(json_object_get(config, "_name_or_path"));
	if (!bad && nop) {
		size_t slashes = 0;
		for (const char *p = nop; *p; p++)
			slashes += *p == '/';
		if (slashes <= 1)
			bad = from_id(&m, nop, total_params);
	}
	if (!bad)
		bad = from_id(&m, dir_name, total_params);
	if (!bad && !m.f[F_NAME])
		bad = !(m.f[F_NAME] = strdup(dir_name));
	if (!bad && !m.f[F_SIZE_LABEL] && !m.set[F_SIZE_LABEL] && total_params > 0)
		bad = !(m.f[F_SIZE_LABEL] = strdup(size_label));
	if (bad) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "general.* keys: out of memory");
		goto out;
	}

	/* set_gguf_meta_model: the sampling keys, then the fields; add_string leaves empty
	 * strings out */
	rc = tfs_hf_sampling_keys(out, files, err);
	for (int f = 0; !rc && f < F_COUNT; f++)
		if (m.f[f] && *m.f[f])
			rc = tfs_hf_kvs_add_str(out, field_keys[f], m.f[f], err);
	if (!rc && m.has_base)
		rc = add_entries(out, "base_model", m.base, m.nbase, err);
	if (!rc && m.has_ds)
		rc = add_entries(out, "dataset", m.ds, m.nds, err);
	if (!rc && m.ntags)
		rc = tfs_hf_kvs_add_arr_str(out, "general.tags", (const char *const *)m.tags, NULL,
					    m.ntags, err);
	if (!rc && m.nlangs)
		rc = tfs_hf_kvs_add_arr_str(out, "general.languages", (const char *const *)m.langs,
					    NULL, m.nlangs, err);
out:
	meta_free(&m);
	tfs_hf_card_free(&c);
	return rc;
}
