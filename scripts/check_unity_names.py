#!/usr/bin/env python3
"""Names local to a source file must be unique within its unity group.

The library modules (src/<module>/), the CLIs, the benchmark programs, the fuzz targets and
each test folder are compiled as unity sources (CMake's UNITY_BUILD: every .cpp of a target
included into one translation unit).
Two files' functions, types or variables with internal linkage (in an anonymous namespace,
`static`, namespace-scope `const`/`constexpr`) then share one scope: the same definition
twice is a compile error, but two overloads of one name are not, and a call in one file can
silently pick the other file's overload. This check fails on any such name defined in two
files of one group (a namespace alias or `using X = Y` repeated with the same Y is fine).

Files that CMake keeps out of the unity sources are skipped here too: the library's files
with a target pragma or a #define (their macros would leak into the next file; the rule of
nl_module in CMakeLists.txt), the tests' alloc_probe.cpp, bench/peak_kernels.cpp (a library
of its own) and bench/arm64_icount.cpp (built by bench/arm64_icount.sh). The parse is
lexical (comments, strings and preprocessor lines dropped, function bodies skipped by
braces): enough for this codebase's style, checked against planted clashes (ctest
build.unity_names.planted).

  scripts/check_unity_names.py [ROOT]        exit 0: no clash; 1: clashes listed
  scripts/check_unity_names.py --planted     the check against a tree with known clashes
"""
import os
import re
import sys
from collections import defaultdict

SKIP_RE = re.compile(r'pragma (GCC target|clang attribute)|^[ \t]*#[ \t]*define', re.M)
IDENT = r'[A-Za-z_]\w*'


def strip(src):
    src = re.sub(r'/\*.*?\*/', ' ', src, flags=re.S)
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'R"(\w*)\(.*?\)\1"', '""', src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\\n])*"', '""', src)
    src = re.sub(r"'(\\.|[^'\\\n])*'", "''", src)
    return '\n'.join('' if l.lstrip().startswith('#') else l for l in src.split('\n'))


def drop_template_headers(s):
    while s.startswith('template'):
        i, depth = s.find('<'), 0
        if i < 0:
            return s
        for j in range(i, len(s)):
            depth += {'<': 1, '>': -1}.get(s[j], 0)
            if depth == 0:
                s = s[j + 1:].lstrip()
                break
        else:
            return s
    return s


def local_names(path):
    """(name, kind, detail) for each internal-linkage name defined at namespace scope."""
    src = strip(open(path, encoding='utf-8').read())
    out, stack, stmt, i = [], [], '', 0
    while i < len(src):
        c = src[i]
        if stack and stack[-1] == 'body':  # skip a function/class/initializer body
            depth = 1
            while i < len(src) and depth:
                depth += {'{': 1, '}': -1}.get(src[i], 0)
                i += 1
            stack.pop()
            stmt = ''
            continue
        if c == '}':
            if stack:
                stack.pop()
            stmt, i = '', i + 1
            continue
        if c not in '{;':
            stmt += c
            i += 1
            continue
        s = ' '.join(stmt.split())
        stmt, i = '', i + 1
        anon = 'anon' in stack
        if c == '{':
            m = re.fullmatch(r'(?:inline )?namespace(?: (' + IDENT + r'(?:::' + IDENT + r')*))?', s)
            if m:
                stack.append('ns' if m.group(1) else 'anon')
                continue
            if re.fullmatch(r'extern ""', s):
                stack.append('ns')
                continue
            stack.append('body')
        name = classify(s, anon)
        if name:
            out.append(name)
    return out


def classify(s, anon):
    s = drop_template_headers(s)
    if not s or s.startswith(('using namespace', 'friend ', 'extern ')):
        return None
    m = re.fullmatch(r'namespace (' + IDENT + r') = (.+)', s)
    if m:
        return (m.group(1), 'alias', m.group(2).replace(' ', ''))
    m = re.fullmatch(r'using (?:typename )?((?:' + IDENT + r')?(?:::' + IDENT + r')*::(' + IDENT + r'))', s)
    if m:  # a using-declaration: the same in every file, or a clash
        return (m.group(2), 'alias', m.group(1))
    if re.match(r'[A-Z][A-Z0-9_]*\(', s):  # a macro's use (TEST(...) { ... })
        return None
    m = re.fullmatch(r'using (' + IDENT + r') = (.+)', s)
    if m:
        return (m.group(1), 'alias', m.group(2).replace(' ', ''))
    m = re.match(r'typedef .*?(' + IDENT + r')$', s)
    if m and anon:
        return (m.group(1), 'alias', s)
    m = re.fullmatch(r'(?:\[\[\w+\]\] )?(?:struct|class|union|enum(?: class| struct)?) (?:alignas\([^)]*\) )?(' + IDENT + r')(?: final)?(?: ?:.*)?', s)
    if m:
        return (m.group(1), 'type', '') if anon else None
    static = re.match(r'(?:\[\[\w+\]\] )?(?:inline )?static\b', s) is not None
    const = re.match(r'(?:static )?(?:inline )?(?:constexpr|const)\b', s) is not None
    paren = s.find('(')
    eq = s.find('=')
    head = s[:paren] if paren >= 0 and (eq < 0 or paren < eq) else s[:eq] if eq >= 0 else s
    if 'operator' in head:
        return None
    m = re.search(r'(' + IDENT + r')\s*(?:\[[^\]]*\]\s*)*(?:\{.*)?$', head.strip())
    if not m:
        return None
    name = m.group(1)
    if name in ('const', 'override', 'noexcept', 'return', 'if', 'for', 'while', 'switch', 'sizeof', 'decltype'):
        return None
    is_function = paren >= 0 and (eq < 0 or paren < eq)
    if anon or static or (const and not is_function and '::' not in name):
        return (name, 'function' if is_function else 'variable', '')
    return None


def groups(root):
    """Unity groups: (label, [files])."""
    out = []
    for top in ('src', 'tests'):
        base = os.path.join(root, top)
        for d in sorted(os.listdir(base)):
            p = os.path.join(base, d)
            if os.path.isdir(p):
                out.append((f'{top}/{d}', sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith('.cpp'))))
    cli = os.path.join(root, 'cli')
    out.append(('cli', sorted(os.path.join(cli, f) for f in os.listdir(cli) if f.endswith('.cpp'))))
    bench = os.path.join(root, 'bench')  # nl_bench: its programs (bench/CMakeLists.txt)
    if os.path.isdir(bench):
        out.append(('bench', sorted(os.path.join(bench, f) for f in os.listdir(bench)
                                    if f.endswith('.cpp') and f not in ('peak_kernels.cpp', 'arm64_icount.cpp'))))
    # fuzz targets that compile library or CLI files with their driver (fuzz/CMakeLists.txt)
    for label, rel in (('fuzz:config_toml', ['fuzz/config_toml_fuzz.cpp', 'cli/config_file.cpp', 'cli/did_you_mean.cpp']),
                       ('fuzz:nightly_status', ['fuzz/nightly_status_fuzz.cpp', 'src/eval/nightly_status.cpp',
                                                'src/eval/nightly_runs.cpp', 'src/eval/nightly_publish.cpp'])):
        files = [os.path.join(root, r) for r in rel]
        if all(os.path.isfile(f) for f in files):
            out.append((label, files))
    serve = os.path.join(cli, 'serve')
    if os.path.isdir(serve):
        out.append(('cli/serve', sorted(os.path.join(serve, f) for f in os.listdir(serve) if f.endswith('.cpp')) +
                    [os.path.join(cli, f) for f in ('command_line.cpp', 'command_program.cpp', 'did_you_mean.cpp')]))
    return out


def clashes(files, own_units_in):
    """own_units_in: the folder prefix whose files CMake keeps apart when they match SKIP_RE
    (the library's, src/; the tests and CLIs include every file in their unity source)."""
    seen = defaultdict(list)
    for f in files:
        if os.path.basename(f) == 'alloc_probe.cpp':
            continue
        if f.startswith(own_units_in) and SKIP_RE.search(open(f, encoding='utf-8').read()):
            continue
        for name, kind, detail in set(local_names(f)):
            seen[name].append((os.path.basename(f), kind, detail))
    bad = []
    for name, defs in sorted(seen.items()):
        if len({f for f, _, _ in defs}) < 2:
            continue
        if all(k == 'alias' for _, k, _ in defs) and len({d for _, _, d in defs}) == 1:
            continue
        bad.append((name, sorted({f for f, _, _ in defs})))
    return bad


def planted():
    """The check against a tree with known clashes (ctest build.unity_names.planted)."""
    import tempfile
    files = {
        'src/m/a.cpp': 'namespace nl {\nnamespace {\nnamespace fs = std::filesystem;\nusing json = nlohmann::json;\n'
                       'int helper(int x) { return x; }\nstruct Local { int v; };\n}  // namespace\n'
                       'static double scale(double v) { return v; }\nconstexpr int kLimit = 4;\n}\n',
        'src/m/b.cpp': 'namespace nl {\nnamespace {\nnamespace fs = std::filesystem;\nusing json = nlohmann::json;\n'
                       'long helper(long x) { return x + 1; }\n}\nstatic float scale(float v) { return v; }\n'
                       'void exported(int) {}\nconst char* kLimit = "";\n}\n',
        'src/m/c.cpp': '// macros stay in their own unit: not checked\n#define X 1\nnamespace { int helper(char) { return 0; } }\n',
        'tests/t/a_test.cpp': 'namespace {\nusing nl::QType;\nTEST(A, B) { }\nint twice(long) { return 0; }\n}\n',
        # a test file with a #define is still in its folder's unity source: checked
        'tests/t/c_test.cpp': '#define Y 1\nnamespace {\nint twice(int) { return 1; }\n}\n',
        'tests/t/b_test.cpp': 'namespace {\nusing nl::QType;\nTEST(A, C) { }\n}\n',
        'cli/main.cpp': 'int main() { return 0; }\n',
        # the benchmark programs share nl_bench's unity source; peak_kernels.cpp is a library apart
        'bench/step.cpp': 'namespace {\nstruct Shape { int rows; };\nint lanes(int n) { return n; }\n}\n',
        'bench/matvec.cpp': 'namespace {\nstruct Shape { long rows, cols; };\n}\n',
        'bench/peak_kernels.cpp': 'namespace {\nlong lanes(long n) { return n; }\n}\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            open(os.path.join(root, rel), 'w').write(text)
        found = {(label, name) for label, fs in groups(root) for name, _ in clashes(fs, os.path.join(root, 'src'))}
    want = {('src/m', 'helper'), ('src/m', 'scale'), ('src/m', 'kLimit'), ('tests/t', 'twice'), ('bench', 'Shape')}
    if found != want:
        print(f'planted clashes: found {sorted(found)}, want {sorted(want)}')
        return 1
    print('planted clashes: found exactly', sorted(want))
    return 0


def main():
    if sys.argv[1:] == ['--planted']:
        return planted()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    found = False
    for label, files in groups(root):
        for name, where in clashes(files, os.path.join(root, 'src')):
            found = True
            print(f'{label}: `{name}` is defined in {", ".join(where)}: rename one (their unity source would '
                  f'hold both)')
    if found:
        return 1
    print('unity names: no name local to a file is defined twice in one unity group')
    return 0


if __name__ == '__main__':
    sys.exit(main())
