#!/usr/bin/env bash
# check-structure.sh [BUILDDIR]: the structure rules of issue 23, measured on codec/ and fs/,
# and the folder READMEs (issue 32) of codec/, fs/, tests/ and scripts/.
#   1. format dispatch: places TFS_FMT_* is compared (== / !=) or switched on (a switch with
#      a `case TFS_FMT_...`), the enum's own declaration excluded: at most 2 in codec/, none
#      in fs/;
#   2. no file over 800 lines, except the numeric kernels and their lookup tables
#      (codec/num/dequant*.c, codec/num/quant*.c);
#   3. no function over 80 lines (its body, from the opening to the closing brace, both
#      counted; a brace-matching scan of the C text, comments and strings blanked);
#   4. no include circle between codec modules: the graph of which file includes which
#      header, a module being a .c file with its own .h and its _impl.h (model.c, model.h,
#      model_impl.h); a cycle through two or more modules is reported;
#   5. the folder READMEs stay true: each source file (.c .h .py .js .sh) under codec/, fs/,
#      tests/ and scripts/ is named by the README.md of its folder, or of the nearest folder
#      above it that has one (tests/README.md for tests/mount/test_rw.py: "mount/test_rw.py"
#      or "test_rw.py"); files with no README.md above them (within those four) are not
#      checked.  Named means: its name, its path from the README's folder, or a pattern
#      matching either (`hf_*.c`, `test_*.py`, `quantize{,_cache}.c`), in the README's text;
#      a C module counts as one name (model.c, model.h, model_impl.h: any one of them);
#   6. one place each (issue 40): base.h's tfs_open_opts has no field of a view or of a
#      remote scheme (their options are kept by name, tfs_open_opt, and read by their rows:
#      a field named like a view option of codec/views/ or like s3_*, *endpoint*); the schemes are rows of one table
#      (codec/net/scheme.c):
#      formats/open.c and views/hf.c name no scheme (no tfs_is_url/hf/s3, tfs_hf_url or
#      tfs_s3_* call, no "s3://"-like prefix literal, no s3.h), and tfs_target has no
#      member of one scheme (its auth is opaque); llama-quantize's plan is not in
#      codec/formats/ (no qplan* file there: it is views/', beside its only user); codec/model/
#      names no view (gguf_view, hf_repo, mmproj, nor an index.json member or file a view's
#      attach kind declares, in its code and strings: what a view attaches the model keeps by
#      the view's tfs_attach_kind, model_impl.h); and each
#      shared helper has no
#      second copy: the shape of its body found anywhere in codec/ or fs/ but its own file
#      (HELPERS below: hex digits, the one-shot SHA-256 as hex, Python's truth value of a
#      JSON value, an optional repo file, the search of sorted offsets, a tensor's byte range
#      read whole, the importance matrix's lookup by name);
#   7. with BUILDDIR (an up-to-date build directory): circles of references between codec
#      files (a call, or a function's or a row's address in a table), from the symbols each
#      object file defines and uses (nm).  A circle among the files of codec/hf breaks the
#      rule (issue 36: the rows of tfs_hf_archs[] use the helpers, never the other way);
#      circles elsewhere are printed for information.  The `structure` test passes its
#      build directory.
# Prints each measure and what breaks a rule; exits 1 when one of rules 1-7 is broken.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'EOF'
import fnmatch, os, re, subprocess, sys

FILE_MAX, FUNC_MAX, FMT_CODEC_MAX = 800, 80, 2
ROOTS = ['codec', 'fs']
broken = []


def sources(roots, exts=('.c', '.h')):
    for root in roots:
        for dp, dns, fns in os.walk(root):
            dns.sort()
            for f in sorted(fns):
                if f.endswith(exts):
                    yield os.path.join(dp, f)


def blank(s):
    """Comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(s)
    while i < n:
        if s.startswith('/*', i):
            j = s.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', s[i:j]))
            i = j
        elif s.startswith('//', i):
            j = s.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif s[i] in '"\'':
            q, j = s[i], i + 1
            while j < n and s[j] != q and s[j] != '\n':
                j += 2 if s[j] == '\\' else 1
            out.append(q + re.sub(r'[^\n]', ' ', s[i + 1:j]) + q)
            i = j + 1
        else:
            out.append(s[i])
            i += 1
    return ''.join(out)


def no_preprocessor(s):
    lines, cont = s.split('\n'), False
    for k, line in enumerate(lines):
        if cont or line.lstrip().startswith('#'):
            cont = line.rstrip().endswith('\\')
            lines[k] = ' ' * len(line)
        else:
            cont = False
    return '\n'.join(lines)


text = {p: open(p, errors='replace').read() for p in sources(ROOTS)}
code = {p: blank(s) for p, s in text.items()}

# ---- 1. format dispatch ----
print('== 1. TFS_FMT_ compared or switched on (rule: codec <= %d, fs 0)' % FMT_CODEC_MAX)
sites = {'codec': [], 'fs': []}
for p, s in code.items():
    s = re.sub(r'typedef\s+enum\s*\{[^}]*\}\s*tfs_format\s*;',
               lambda m: re.sub(r'[^\n]', ' ', m.group(0)), s)   # the declaration
    line_of = lambda pos: s.count('\n', 0, pos) + 1
    for m in re.finditer(r'(==|!=)\s*TFS_FMT_\w+|TFS_FMT_\w+\s*(==|!=)', s):
        sites[p.split('/')[0]].append('%s:%d: %s' % (p, line_of(m.start()),
                                                     ' '.join(m.group(0).split())))
    for m in re.finditer(r'\bswitch\s*\(', s):
        depth, j = 0, s.find('{', m.end())     # the switch's body
        if j < 0:
            continue
        k = j
        while k < len(s):
            depth += {'{': 1, '}': -1}.get(s[k], 0)
            if depth == 0:
                break
            k += 1
        if re.search(r'\bcase\s+TFS_FMT_\w+', s[j:k]):
            sites[p.split('/')[0]].append('%s:%d: switch' % (p, line_of(m.start())))
for where in ('codec', 'fs'):
    print('%s: %d' % (where, len(sites[where])))
    for x in sites[where]:
        print('  ' + x)
if len(sites['codec']) > FMT_CODEC_MAX:
    broken.append('format dispatch: %d places in codec/' % len(sites['codec']))
if sites['fs']:
    broken.append('format dispatch: %d places in fs/' % len(sites['fs']))

# ---- 2. file sizes ----
print('\n== 2. files over %d lines (codec/num/dequant*.c, quant*.c excepted)' % FILE_MAX)
exempt = re.compile(r'^codec/num/(dequant|quant)[^/]*\.c$')
big = sorted(((s.count('\n'), p) for p, s in text.items()), reverse=True)
over = [(n, p) for n, p in big if n > FILE_MAX and not exempt.match(p)]
for n, p in over:
    print('  %5d %s' % (n, p))
for n, p in big:
    if n > FILE_MAX and exempt.match(p):
        print('  %5d %s (excepted)' % (n, p))
print('largest within the rule: ' + ', '.join(
    '%s %d' % (p, n) for n, p in [x for x in big if x[0] <= FILE_MAX and not exempt.match(x[1])][:3]))
if over:
    broken.append('%d file(s) over %d lines' % (len(over), FILE_MAX))


# ---- 3. function sizes ----
def functions(s):
    """(name, line of `{`, line of `}`) of each function definition: a top-level `{` right
    after a `)`."""
    s = no_preprocessor(s)
    res, depth, start = [], 0, None
    for i, c in enumerate(s):
        if c == '{':
            if depth == 0:
                k = i - 1
                while k >= 0 and s[k].isspace():
                    k -= 1
                if k >= 0 and s[k] == ')':
                    d, j = 0, k
                    while j >= 0:
                        d += {')': 1, '(': -1}.get(s[j], 0)
                        if d == 0:
                            break
                        j -= 1
                    # the word before the `(` (a backward scan: a regex over s[:j] for
                    # each function was most of this script's time)
                    e = j
                    while e > 0 and s[e - 1].isspace():
                        e -= 1
                    b = e
                    while b > 0 and (s[b - 1].isalnum() or s[b - 1] == '_'):
                        b -= 1
                    name = s[b:e]
                    if name and name not in ('if', 'for', 'while', 'switch', 'sizeof'):
                        start = (name, s.count('\n', 0, i) + 1)
            depth += 1
        elif c == '}':
            depth -= 1
            if depth == 0 and start:
                res.append((start[0], start[1], s.count('\n', 0, i) + 1))
                start = None
    return res


print('\n== 3. functions over %d lines' % FUNC_MAX)
funcs = []
for p, s in code.items():
    if p.endswith('.c') or 'static inline' in s:
        for name, a, b in functions(s):
            funcs.append((b - a + 1, p, a, name))
funcs.sort(reverse=True)
long = [f for f in funcs if f[0] > FUNC_MAX]
for n, p, a, name in long:
    print('  %4d %s:%d %s' % (n, p, a, name))
print('longest within the rule: ' + ', '.join(
    '%s (%s) %d' % (name, p, n) for n, p, a, name in [f for f in funcs if f[0] <= FUNC_MAX][:3]))
if long:
    broken.append('%d function(s) over %d lines' % (len(long), FUNC_MAX))


# ---- 4. include circles between codec modules ----
def module(path):
    d, f = os.path.split(path)
    base = re.sub(r'(_impl)?\.[ch]$', '', f)
    return os.path.join(d, base)


headers = {p for p in text if p.startswith('codec/') and p.endswith('.h')}
by_name = {}
for h in sorted(headers):
    by_name.setdefault(os.path.basename(h), []).append(h)
layer_order = ['base', 'num', 'net', 'model', 'formats', 'hf', 'views', 'journal']


def resolve(src, inc):
    here = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if here in headers:
        return here
    top = os.path.normpath(os.path.join('codec', inc))
    if top in headers:
        return top
    cands = by_name.get(os.path.basename(inc), [])
    return cands[0] if len(cands) == 1 else None


def cycles(edges):
    """Strongly connected components of two or more nodes (Tarjan), each with one cycle."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def one_cycle(comp, edges):
    comp = set(comp)
    start = comp and min(comp)
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in edges.get(path[-1], ()) if w in comp)
        back = [w for w in nxt if w == start]
        if back and len(path) > 1:
            return path + [start]
        fresh = [w for w in nxt if w not in seen]
        if not fresh:
            return path + [nxt[0]] if nxt else path
        path.append(fresh[0])
        seen.add(fresh[0])


print('\n== 4. include circles between codec modules')
inc_edges, why = {}, {}
for p, s in text.items():
    if not p.startswith('codec/'):
        continue
    for i, line in enumerate(s.split('\n'), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not m:
            continue
        h = resolve(p, m.group(1))
        if h and module(h) != module(p):
            inc_edges.setdefault(module(p), set()).add(module(h))
            why.setdefault((module(p), module(h)), '%s:%d' % (p, i))
inc_cycles = cycles(inc_edges)
for comp in inc_cycles:
    cyc = one_cycle(comp, inc_edges)
    print('  ' + ' -> '.join(cyc))
    for a, b in zip(cyc, cyc[1:]):
        print('      %s includes %s' % (why.get((a, b), '?'), b))
print('  %d circle(s)' % len(inc_cycles))
if inc_cycles:
    broken.append('%d include circle(s)' % len(inc_cycles))



# ---- 5. the folder READMEs name their source files ----
README_ROOTS, README_EXTS = ['codec', 'fs', 'tests', 'scripts'], ('.c', '.h', '.py', '.js', '.sh')


def governing_readme(path):
    """The README.md of path's folder, or of the nearest folder above it within its root."""
    d, root = os.path.dirname(path), path.split('/')[0]
    while d:
        if os.path.isfile(os.path.join(d, 'README.md')):
            return os.path.join(d, 'README.md')
        if d == root:
            return None
        d = os.path.dirname(d)
    return None


def expand_braces(w):
    m = re.search(r'\{([^{}]*)\}', w)
    if not m:
        return [w]
    return [x for alt in m.group(1).split(',')
            for x in expand_braces(w[:m.start()] + alt + w[m.end():])]


def readme_names(path):
    """The names (a set) and the patterns (a list) a README's text holds: each word made of
    name characters, '/', '*' and braces."""
    names, pats = set(), []
    for w in set(re.findall(r'[\w.*{},/-]+', open(path, errors='replace').read())):
        for e in expand_braces(w.strip('.,/')):
            e = e.strip('.,/')
            (pats.append(e) if '*' in e else names.add(e))
    return names, pats


def named(rel, names, pats):
    """Is the file at rel (from the README's folder) named, by itself or by its module?"""
    cands = {rel, os.path.basename(rel)}
    for c in list(cands):
        if c.endswith(('.c', '.h')):
            stem = re.sub(r'(_impl)?\.[ch]$', '', c)
            cands |= {stem + '.c', stem + '.h', stem + '_impl.h'}
    return bool(cands & names) or any(fnmatch.fnmatchcase(c, q) for c in cands for q in pats)


print('\n== 5. source files their folder\'s README.md does not name')
unnamed, readmes = {}, {}
for root in README_ROOTS:
    for dp, dns, fns in os.walk(root):
        dns[:] = sorted(d for d in dns if not d.startswith(('.', '__pycache__')))
        for f in sorted(fns):
            p = os.path.join(dp, f)
            r = governing_readme(p) if f.endswith(README_EXTS) else None
            if not r:
                continue
            if r not in readmes:
                readmes[r] = readme_names(r)
            rel = os.path.relpath(p, os.path.dirname(r))
            if not named(rel, *readmes[r]):
                unnamed.setdefault(r, []).append(rel)
for r in sorted(unnamed):
    print('  %s does not name %s' % (r, ', '.join(unnamed[r])))
print('  %d file(s) unnamed, %d README.md file(s) checked' %
      (sum(len(v) for v in unnamed.values()), len(readmes)))
if unnamed:
    broken.append('%d source file(s) not named by their folder\'s README.md (%s)' % (
        sum(len(v) for v in unnamed.values()), ', '.join(sorted(unnamed))))

# ---- 6. one place each ----
# (what, its one home, a regular expression for its shape, matched in the code with comments
# blanked and strings kept: a copy elsewhere is a second copy)
HELPERS = [
    ('bytes as hex digits', 'codec/base/hex.c',
     r'"0123456789abcdef"|\+\s*2\s*\*\s*\w+\s*,[^;]*"%02[xX]"'),
    ('SHA-256 of bytes as hex (one-shot EVP_Digest)', 'codec/base/hex.c', r'\bEVP_Digest\s*\('),
    ("Python's truth value of a JSON value", 'codec/hf/hf_tokjson.c',
     r'json_is_true\([^()]*\)\s*\|\|\s*\(?\s*json_is_number|case\s+JSON_ARRAY\s*:\s*return\s+json_array_size'),
    ('an optional repo file (TFS_E_NOTFOUND cleared as absent)', 'codec/hf/hf_keys.c',
     r'==\s*TFS_E_NOTFOUND\s*\)\s*\{\s*tfs_error_clear\s*\(\s*err\s*\)\s*;\s*(return\s+0|rc\s*=\s*0)\s*;\s*\}'
     r'|!=\s*TFS_E_NOTFOUND\s*\)\s*return\s+rc\s*;\s*tfs_error_clear'),
    ('the search of sorted offsets (last at most)', 'codec/base/sorted.h',
     r'while\s*\(\s*hi\s*-\s*lo\s*>\s*1\s*\)\s*\{\s*size_t\s+mid'),
    ("a tensor's byte range read whole (or an error naming where it ran out)",
     'codec/model/model.c', r'"[^"]*short read at'),
    ("the importance matrix's lookup by name", 'codec/formats/imatrix.c',
     r'strcmp\s*\(\s*tfs_imatrix_entry\s*\(|\bbsearch\s*\([^;]*by_name'),
]


def keep_strings(s):
    """Comments blanked, strings kept (newlines kept)."""
    return re.sub(r'/\*.*?\*/|//[^\n]*', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), s,
                  flags=re.S)


print('\n== 6. one place each')
m = re.search(r'typedef\s+struct\s*\{(.*?)\}\s*tfs_open_opts\s*;', code.get('codec/base/base.h', ''), re.S)
fields = re.findall(r'(\w+)\s*(?:\[[^]]*\])?\s*;', m.group(1)) if m else []
scheme_fields = [f for f in fields if re.match(r'(s3|hf|gs|az|http)_|.*(endpoint|addressing)', f)]
view_names = set()
for p, s in text.items():
    if p.startswith('codec/views/'):
        for arr in re.findall(r'tfs_view_opt\s+\w+\[\]\s*=\s*\{(.*?)\n\};', s, re.S):
            view_names |= set(re.findall(r'\.name\s*=\s*"(\w+)"', arr))
print('  base.h tfs_open_opts fields of a remote scheme: %s' % (', '.join(scheme_fields) or 'none'))
view_fields = [f for f in fields if f in view_names]
print('  base.h tfs_open_opts fields of a view: %s (view options known: %d)' %
      (', '.join(view_fields) or 'none', len(view_names)))
if view_fields:
    broken.append('base.h: tfs_open_opts has fields of a view (%s): a view reads its '
                  'options by name, tfs_open_opt (codec/views/README.md)' % ', '.join(view_fields))
if not view_names:
    broken.append('no view option found in codec/views/ (update rule 6)')
if not fields:
    broken.append('base.h: no tfs_open_opts found (update rule 6)')
if scheme_fields:
    broken.append('base.h: tfs_open_opts has fields of a remote scheme (%s): name them, '
                  'tfs_open_opt' % ', '.join(scheme_fields))
SCHEME_FREE = ['codec/formats/open.c', 'codec/views/hf.c']
NAMES_A_SCHEME = (r'\btfs_(is_url|is_hf|is_s3|hf_url|s3_\w+)\b|"(s3|hf|gs|az|https?)://"'
                  r'|#\s*include\s+"s3\.h"|\btfs_scheme_s3\b')
for p in SCHEME_FREE:
    s = keep_strings(text.get(p, ''))
    hits = ['%s:%d: %s' % (p, s.count('\n', 0, m.start()) + 1, m.group(0))
            for m in re.finditer(NAMES_A_SCHEME, s)]
    print('  %s names a scheme: %d place(s)%s' % (p, len(hits), ''.join('\n      ' + h for h in hits)))
    if hits:
        broken.append('%s names a scheme (%d place(s)): ask the scheme table' % (p, len(hits)))
m = re.search(r'typedef\s+struct\s*\{(.*?)\}\s*tfs_target\s*;',
              keep_strings(text.get('codec/net/scheme_impl.h', '')), re.S)
own = re.findall(r'\b(s3|hf|gs|az)\b', m.group(1)) if m else ['(no tfs_target found)']
print('  tfs_target members of one scheme: %s' % (', '.join(own) or 'none'))
if own:
    broken.append('tfs_target has a member of one scheme (%s)' % ', '.join(own))
qplans = sorted(f for f in os.listdir('codec/formats') if f.startswith('qplan'))
print('  codec/formats/ qplan files: %d%s' % (len(qplans), (' (' + ', '.join(qplans) + ')') if qplans else ''))
if qplans:
    broken.append('llama-quantize\'s plan in codec/formats/ (%s)' % ', '.join(qplans))
kept = {p: keep_strings(s) for p, s in text.items()}
# the model names no view: what a view attaches is kept by the view's kind (model_impl.h:
# tfs_model_attach), never in a slot, setter or index.json member of its own
VIEW_WORDS = {'gguf_view', 'hf_repo', 'mmproj'}
for p, s in text.items():
    if p.startswith('codec/views/'):
        for body in re.findall(r'tfs_attach_kind\s+\w+\s*=\s*\{(.*?)\};', s, re.S):
            VIEW_WORDS |= set(re.findall(r'\.index_member\s*=\s*"(\w+)"', body))
            VIEW_WORDS |= set(re.findall(r'\.index_file\s*=\s*"(\w+)', body))
view_rx = re.compile('|'.join(sorted(map(re.escape, VIEW_WORDS))), re.I)
model_hits = ['%s:%d: %s' % (p, s.count('\n', 0, m.start()) + 1, m.group(0))
              for p, s in sorted(kept.items()) if p.startswith('codec/model/')
              for m in view_rx.finditer(s)]
print('  codec/model/ names a view (%s): %d place(s)%s' % (
    ', '.join(sorted(VIEW_WORDS)), len(model_hits), ''.join('\n      ' + h for h in model_hits)))
if 'codec/model/model_impl.h' not in kept or 'tfs_attach_kind' not in kept['codec/model/model_impl.h']:
    broken.append('codec/model/model_impl.h: no tfs_attach_kind (update rule 6)')
if model_hits:
    broken.append('codec/model/ names a view (%d place(s)): attach it by its kind, '
                  'tfs_model_attach (model_impl.h)' % len(model_hits))
for what, home, rx in HELPERS:
    at = [(p, s.count('\n', 0, m.start()) + 1) for p, s in sorted(kept.items())
          for m in re.finditer(rx, s)]
    mine = [x for x in at if x[0] == home]
    copies = [x for x in at if x[0] != home]
    print('  %s: %d in %s, %d elsewhere%s' % (what, len(mine), home, len(copies), ''.join(
        '\n      %s:%d' % x for x in copies)))
    if not mine:
        broken.append('%s: not found in %s (moved? update HELPERS)' % (what, home))
    if copies:
        broken.append('%s: %d copy(ies) outside %s' % (what, len(copies), home))

# ---- 7. call circles between codec files (with a build directory) ----
RULE_DIRS = ('codec/hf/',)   # a circle within one of these breaks the rule
if len(sys.argv) > 1:
    bdir = sys.argv[1]
    print('\n== 7. reference circles between codec files (objects of %s; a rule in %s)' % (
        bdir, ', '.join(RULE_DIRS)))
    defs, uses, objs = {}, {}, {}
    for dp, dns, fns in os.walk(os.path.join(bdir, 'codec')):
        for f in sorted(fns):
            if not f.endswith('.c.o') or '_check' in dp:
                continue
            m = re.search(r'codec/(\w+)/libtfs_\w+\.a\.p$', dp)
            if m:
                objs[os.path.join(dp, f)] = 'codec/%s/%s' % (m.group(1), f[:-2])
    # one nm for all (each nm loads its plugins: one per object took 12 s of CPU); -A puts
    # the object's path before each symbol
    out = subprocess.run(['nm', '-A'] + sorted(objs), capture_output=True,
                         text=True).stdout if objs else ''
    for line in out.splitlines():
        path, _, rest = line.partition(':')
        src, parts = objs.get(path), rest.split()
        if not src:
            continue
        if len(parts) == 3 and parts[1] in 'TDBR':
            defs[parts[2]] = src
        elif len(parts) == 2 and parts[0] == 'U':
            uses.setdefault(src, set()).add(parts[1])
    call_edges = {}
    for src, syms in uses.items():
        for sym in syms:
            d = defs.get(sym)
            if d and d != src:
                call_edges.setdefault(src, set()).add(d)
                why.setdefault(('call', src, d), sym)
    if not uses:
        broken.append('no codec object files under %s (not built?)' % bdir)
    call_cycles = cycles(call_edges)
    ruled = 0
    for comp in call_cycles:
        cyc = one_cycle(comp, call_edges)
        rule = any(all(f.startswith(d) for f in comp) for d in RULE_DIRS)
        ruled += rule
        print('  ' + ' -> '.join(cyc) + ('  (BREAKS THE RULE)' if rule else ''))
        for a, b in zip(cyc, cyc[1:]):
            print('      %s uses %s' % (a, why.get(('call', a, b), '?')))
    print('  %d circle(s) among %d object files' % (len(call_cycles), len(uses)))
    if ruled:
        broken.append('%d reference circle(s) in %s' % (ruled, ', '.join(RULE_DIRS)))

print('\n' + ('BROKEN: ' + '; '.join(broken) if broken else 'OK: every rule holds'))
sys.exit(1 if broken else 0)
EOF
