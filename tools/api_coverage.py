#!/usr/bin/env python3
"""Measures how much of JAX's API tessel declares.

For each JAX namespace listed in tools/api_names/ (jax.numpy, jax.nn, ...),
every public JAX name is looked up in the matching C++ namespace of tessel's
public headers (dsl/tessel/*.hpp and dsl/tessel/core/*.hpp). A name is
present when tessel declares it there: a function, a function template, an
object (`inline constexpr AllTag all{}`), a `using` alias or declaration, or
a type. The script writes

  docs/api-coverage.md            the coverage per namespace, for readers;
  tests/dsl/api_coverage_test.cpp a using-declaration for every present name,
                                  so the build fails when one disappears.

Usage (Python 3 standard library only):

  python3 tools/api_coverage.py            regenerate both files
  python3 tools/api_coverage.py --check    exit 1 if either file is stale
  python3 tools/api_coverage.py --update-names JAX_GIT_DIR [--rev REV]
      re-read the name lists from JAX's source (a clone or a bare mirror):
      every public name of each namespace module goes to
      tools/api_names/<namespace>.txt unless tools/api_names/excluded.txt
      leaves it out; new names are reported (they count as missing until
      someone implements them or excludes them with a reason).

Input files in tools/api_names/:
  <namespace>.txt   one JAX name per line; '#' starts a comment line.
  excluded.txt      `namespace.name: reason` lines: public JAX names that
                    tessel leaves out on purpose (dtype objects, constants,
                    Python-only helpers, submodules, primitive objects).
  aliases.txt       `jax_name cpp_name` lines (jax_name may be qualified, as
                    jax.lax.switch): the C++ spelling of a name that is a C++
                    keyword (switch -> switch_).

The scanner is not a C++ parser: it strips comments, strings and
preprocessor lines (macros are not expanded: a name declared only by a macro
is not seen), follows `namespace` blocks (nested, `a::b`), skips the
bodies of classes and functions and every `detail` or anonymous namespace,
and takes the declared name of each statement at namespace scope. The
generated test compiles the result, so a name wrongly found present shows up
as a build error.
"""

import argparse
import ast
import difflib
import math
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES_DIR = os.path.join(ROOT, "tools", "api_names")
HEADER_DIRS = [os.path.join(ROOT, "dsl", "tessel"), os.path.join(ROOT, "dsl", "tessel", "core")]
DOC_PATH = os.path.join(ROOT, "docs", "api-coverage.md")
TEST_PATH = os.path.join(ROOT, "tests", "dsl", "api_coverage_test.cpp")


class Namespace:
    def __init__(self, jax, source, cpp, goal, goal_text):
        self.jax = jax            # jax.numpy
        self.source = source      # its module in JAX's repository
        self.cpp = cpp            # tessel::nn
        self.goal = goal          # None, ("percent", p), ("all",) or ("these", names)
        self.goal_text = goal_text

    @property
    def short(self):  # ts::nn
        return "ts" + self.cpp[len("tessel"):]


NAMESPACES = [
    Namespace("jax.numpy", "jax/numpy/__init__.py", "tessel", ("percent", 90), "at least 90%"),
    Namespace("jax.nn", "jax/nn/__init__.py", "tessel::nn", ("all",), "every function"),
    Namespace("jax.nn.initializers", "jax/nn/initializers.py", "tessel::nn::initializers", None, "none set"),
    Namespace("jax.random", "jax/random.py", "tessel::random", ("percent", 80), "at least 80%"),
    # Issue 36 lists the special functions users reach for first; the goal is those.
    Namespace("jax.scipy.special", "jax/scipy/special.py", "tessel::scipy::special",
              ("these", ("erf", "erfc", "erfinv", "gammaln", "digamma", "logit", "expit", "xlogy", "xlog1py",
                         "i0e", "i1e", "betaln", "log_ndtr", "ndtr", "ndtri")),
              "the 15 functions issue 36 lists"),
    Namespace("jax.lax", "jax/lax/__init__.py", "tessel::lax", None, "none set"),
]
BY_JAX = {ns.jax: ns for ns in NAMESPACES}

CPP_KEYWORDS = set("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
register reinterpret_cast requires return short signed sizeof static static_assert static_cast struct
switch template this thread_local throw true try typedef typeid typename union unsigned using virtual void
volatile wchar_t while xor xor_eq
""".split())


# ---------------------------------------------------------------- input files

def names_path(ns):
    return os.path.join(NAMES_DIR, ns.jax + ".txt")


def read_names(ns):
    """The names of a namespace file, and its '# Source:' line (or None)."""
    names, source = [], None
    with open(names_path(ns), encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if line.startswith("# Source:"):
                source = line[len("# Source:"):].strip()
            if not line or line.startswith("#"):
                continue
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", line):
                sys.exit(f"{names_path(ns)}:{lineno}: not a name: {line!r}")
            names.append(line)
    if len(set(names)) != len(names):
        sys.exit(f"{names_path(ns)}: a name is listed twice")
    return names, source


def read_excluded():
    """{namespace: {name: reason}} from excluded.txt."""
    out = defaultdict(dict)
    path = os.path.join(NAMES_DIR, "excluded.txt")
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            qualified, sep, reason = line.partition(":")
            if not sep or not reason.strip():
                sys.exit(f"{path}:{lineno}: expected 'namespace.name: reason'")
            jax_ns, _, name = qualified.strip().rpartition(".")
            if jax_ns not in BY_JAX:
                sys.exit(f"{path}:{lineno}: unknown namespace {jax_ns!r}")
            if name in out[jax_ns]:
                sys.exit(f"{path}:{lineno}: {qualified} is listed twice")
            out[jax_ns][name] = reason.strip()
    return out


def read_aliases():
    """{(namespace or None, jax name): cpp name} from aliases.txt."""
    out = {}
    path = os.path.join(NAMES_DIR, "aliases.txt")
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                sys.exit(f"{path}:{lineno}: expected 'jax_name cpp_name'")
            jax_name, cpp_name = parts
            jax_ns, _, name = jax_name.rpartition(".")
            if jax_ns and jax_ns not in BY_JAX:
                sys.exit(f"{path}:{lineno}: unknown namespace {jax_ns!r}")
            out[(jax_ns or None, name)] = cpp_name
    return out


def cpp_name(aliases, ns, name):
    return aliases.get((ns.jax, name), aliases.get((None, name), name))


# ---------------------------------------------------------------- the C++ scanner

def strip_comments_and_literals(text):
    """Comments removed (newlines kept), string and character literals as "" and ''."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            raw = c == '"' and i > 0 and text[i - 1] == "R"
            if raw:  # R"delim( ... )delim"
                open_paren = text.find("(", i)
                delim = text[i + 1:open_paren]
                j = text.find(")" + delim + '"', open_paren)
                j = n if j < 0 else j + len(delim) + 2
            else:
                j = i + 1
                while j < n and text[j] != c:
                    j += 2 if text[j] == "\\" else 1
                j += 1
            out.append(c + c + "\n" * text.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_preprocessor(text):
    """Preprocessor lines (with their continuations) removed; the macro names #defined."""
    lines, macros, cont = [], set(), False
    for line in text.split("\n"):
        if cont or line.lstrip().startswith("#"):
            m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)", line)
            if m and not cont:
                macros.add(m.group(1))
            cont = line.rstrip().endswith("\\")
            lines.append("")
        else:
            lines.append(line)
    return "\n".join(lines), macros


TOKEN_RE = re.compile(r"""[A-Za-z_]\w*|\d[\w.']*|::|""|''|\S""")
SKIP_CALL = {"decltype", "alignas", "noexcept", "__attribute__", "__declspec", "requires", "sizeof", "alignof"}
SPECIFIERS = {"inline", "constexpr", "consteval", "constinit", "static", "extern", "const", "volatile",
              "thread_local", "explicit", "virtual", "friend", "typename", "mutable"}


def tokenize(text, macros):
    toks = []
    for m in TOKEN_RE.finditer(text):
        toks.append((m.group(0), text.count("\n", 0, m.start()) + 1))
    # Drop macro invocations (a macro defined in the headers: NAME or NAME(...)).
    out, i = [], 0
    while i < len(toks):
        t = toks[i][0]
        if t in macros:
            i += 1
            if i < len(toks) and toks[i][0] == "(":
                depth = 0
                while i < len(toks):
                    depth += {"(": 1, ")": -1}.get(toks[i][0], 0)
                    i += 1
                    if depth == 0:
                        break
            continue
        out.append(toks[i])
        i += 1
    return out


def skip_angles(st, i):
    """st[i] is '<': the index after its matching '>' (parentheses inside are opaque)."""
    depth, paren = 0, 0
    while i < len(st):
        t = st[i]
        if t in "([":
            paren += 1
        elif t in ")]":
            paren -= 1
        elif paren == 0 and t == "<":
            depth += 1
        elif paren == 0 and t == ">":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def skip_group(st, i):
    """st[i] opens ( [ or {: the index after its match."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    open_, close, depth = st[i], pairs[st[i]], 0
    while i < len(st):
        if st[i] == open_:
            depth += 1
        elif st[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def classify(st, terminator):
    """The (name, kind) a namespace-scope statement declares, or None.

    kind: 'namespace' (name: the list of components), 'function', 'object',
    'alias', 'using' or 'type'."""
    i = 0
    is_template = False
    while i < len(st):  # template <...> prefixes, attributes
        if st[i] == "template" and i + 1 < len(st) and st[i + 1] == "<":
            i = skip_angles(st, i + 1)
            is_template = True
        elif st[i] == "[" and i + 1 < len(st) and st[i + 1] == "[":
            i = skip_group(st, i)
        else:
            break
    st = st[i:]
    if not st:
        return None
    if st[0] == "namespace" or st[:2] == ["inline", "namespace"]:
        if terminator != "{":
            return None  # namespace alias
        inline = st[0] == "inline"
        comps = [t for t in st[st.index("namespace") + 1:] if t not in ("::", "inline")]
        # (component, inline): an inline namespace's names are its parent's.
        return ([(c, inline) for c in comps] or [("<anonymous>", False)], "namespace")
    if st[0] == "extern" and len(st) == 2 and st[1] == '""':
        return ([], "namespace")  # extern "C" { ... }: transparent
    if st[0] == "static_assert" or "operator" in st:
        return None
    if st[0] == "using":
        if len(st) > 1 and st[1] == "namespace":
            return None
        if "=" in st:
            return (st[st.index("=") - 1], "alias")
        names = [t for t in st[1:] if re.fullmatch(r"[A-Za-z_]\w*", t) and t != "typename"]
        return (names[-1], "using") if names else None
    j = 0
    while j < len(st) and st[j] in SPECIFIERS:
        j += 1
    if j < len(st) and st[j] in ("class", "struct", "union", "enum"):
        k = j + 1
        if st[j] == "enum" and k < len(st) and st[k] in ("class", "struct"):
            k += 1
        while k < len(st) and st[k] == "[":
            k = skip_group(st, k)
        if k < len(st) and st[k] == "alignas":
            k = skip_group(st, k + 1)
        if k < len(st) and re.fullmatch(r"[A-Za-z_]\w*", st[k]):
            name = st[k]
            after = st[k + 1:]
            if terminator == "{" and (not after or after[0] in (":", "final")):
                return (name, "type")
            if terminator == ";" and not after:
                return (name, "type")  # forward declaration
    # Walk at depth 0: a '=' first makes an object, a '(' after a name a function.
    k, angle = j, 0
    while k < len(st):
        t = st[k]
        if t in ("(", "[") and angle == 0:
            prev = st[k - 1] if k > 0 else ""
            if t == "(" and prev in SKIP_CALL:
                k = skip_group(st, k)
                continue
            if t == "(" and re.fullmatch(r"[A-Za-z_]\w*", prev) and prev not in CPP_KEYWORDS:
                if k >= 2 and st[k - 2] == "::":
                    return None  # an out-of-line definition of a member or qualified name
                return (prev, "function template" if is_template else "function")
            if t == "[" and re.fullmatch(r"[A-Za-z_]\w*", prev):
                return (prev, "object")  # an array object
            k = skip_group(st, k)
            continue
        if t == "{" and angle == 0:
            k = skip_group(st, k)
            continue
        if t == "<":
            angle += 1
        elif t == ">" and angle > 0:
            angle -= 1
        elif t == "=" and angle == 0:
            break
        k += 1
    # An object: the last name before '=', a brace initialiser or the end.
    head = st[:k]
    if len(head) >= 2 and re.fullmatch(r"[A-Za-z_]\w*", head[-1]) and head[-1] not in CPP_KEYWORDS:
        if len(head) >= 2 and head[-2] == "::":
            return None
        return (head[-1], "object")
    return None


def scan_headers():
    """{cpp namespace: {name: set of (kind, file)}} of tessel's public headers."""
    decls = defaultdict(lambda: defaultdict(set))
    files = []
    for d in HEADER_DIRS:
        if os.path.isdir(d):
            files += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".hpp"))
    texts = {}
    macros = set()
    for path in files:
        with open(path, encoding="utf-8") as f:
            text, m = strip_preprocessor(strip_comments_and_literals(f.read()))
        texts[path] = text
        macros |= m
    for path in files:
        rel = os.path.relpath(path, ROOT)
        toks = tokenize(texts[path], macros)
        blocks = []  # ("ns", [components]) or ("other", None)
        path_ns = []
        st, paren, i = [], 0, 0
        while i < len(toks):
            t = toks[i][0]
            i += 1
            if blocks and blocks[-1][0] == "other":
                if t == "{":
                    blocks.append(("other", None))
                elif t == "}":
                    blocks.pop()
                continue
            if t in "([" and len(t) == 1:
                paren += 1
            elif t in ")]" and len(t) == 1:
                paren -= 1
            if paren > 0 or t not in ("{", "}", ";"):
                st.append(t)
                continue
            if t == "}":
                if blocks:
                    kind, comps = blocks.pop()
                    del path_ns[len(path_ns) - len(comps):]
                st = []
                continue
            decl = classify(st, t)
            st = []
            if decl and decl[1] == "namespace":
                blocks.append(("ns", decl[0]))
                path_ns += decl[0]
                continue
            if t == "{":
                blocks.append(("other", None))
            if not decl:
                continue
            name, kind = decl
            visible = [c for c, inline in path_ns if not inline]
            if not visible or visible[0] != "tessel" or {"detail", "<anonymous>"} & {c for c, _ in path_ns}:
                continue
            decls["::".join(visible)][name].add((kind, rel))
    return decls


# ---------------------------------------------------------------- coverage

def measure():
    excluded = read_excluded()
    aliases = read_aliases()
    decls = scan_headers()
    results = []
    for ns in NAMESPACES:
        names, source = read_names(ns)
        both = sorted(set(names) & set(excluded[ns.jax]))
        if both:
            sys.exit(f"{ns.jax}: listed and excluded at once: {', '.join(both)}")
        present, missing, elsewhere, objects = [], [], {}, set()
        for name in sorted(names):
            cpp = cpp_name(aliases, ns, name)
            if cpp in decls.get(ns.cpp, {}):
                present.append((name, cpp))
                if any(kind == "object" for kind, _ in decls[ns.cpp][cpp]):
                    objects.add(cpp)
            else:
                missing.append(name)
                other = sorted("ts" + o[len("tessel"):] + "::" + cpp for o in decls
                               if o != ns.cpp and cpp in decls[o])
                if other:
                    elsewhere[name] = other
            if cpp in CPP_KEYWORDS:
                print(f"warning: {ns.jax}.{name} is a C++ keyword; give it a C++ name in aliases.txt",
                      file=sys.stderr)
        results.append(dict(ns=ns, names=names, source=source, present=present, missing=missing,
                            elsewhere=elsewhere, excluded=excluded[ns.jax], objects=objects))
    return results


def goal_status(r):
    ns, total, have = r["ns"], len(r["names"]), len(r["present"])
    if ns.goal is None:
        return None, ""
    if ns.goal[0] == "these":
        need = len(ns.goal[1])
        have = len([n for n in ns.goal[1] if n in {p[0] for p in r["present"]}])
    else:
        need = total if ns.goal[0] == "all" else math.ceil(ns.goal[1] * total / 100)
    if have >= need:
        return need, "met"
    return need, f"{need - have} to go"


def pct(a, b):
    return f"{100.0 * a / b:.0f}%" if b else "-"


def code_list(items):
    return ", ".join(items) if items else "none"


def render_markdown(results):
    # "jax-ml/jax@abc (JAX 0.11.1, ...), jax/numpy/__init__.py": the part before the module path.
    sources = sorted({r["source"].rsplit(", ", 1)[0] for r in results if r["source"]})
    out = []
    w = out.append
    w("# JAX API coverage")
    w("")
    w("How much of JAX's Python API tessel declares, namespace by namespace. This page is generated by "
      "`python3 tools/api_coverage.py` (do not edit it by hand; `--check` tells whether it is current). "
      "The JAX names come from the lists in `tools/api_names/`, taken from JAX's own source"
      + (f", {'; '.join(sources)}" if sources else "") + ". A name is *present* when tessel's public "
      "headers (`dsl/tessel/`) declare it in the matching C++ namespace: a function, function template, "
      "object or type. Whether it takes every argument JAX's does is not measured here; "
      "`tests/dsl/api_coverage_test.cpp`, generated alongside, names every present one so that the build "
      "fails if one disappears. JAX names that tessel leaves out on purpose (dtype objects, constants, "
      "Python-only helpers, submodules) are listed with the reason at the end of each section and are not "
      "counted.")
    w("")
    w("| JAX namespace | tessel namespace | present | listed | coverage | goal | status |")
    w("|---|---|---:|---:|---:|---|---|")
    for r in results:
        ns = r["ns"]
        need, status = goal_status(r)
        w(f"| [`{ns.jax}`](#{ns.jax.replace('.', '')}) | `{ns.short}` | {len(r['present'])} | {len(r['names'])} | "
          f"{pct(len(r['present']), len(r['names']))} | {ns.goal_text} | {status or '-'} |")
    w("")
    for r in results:
        ns = r["ns"]
        total, have = len(r["names"]), len(r["present"])
        w(f"## {ns.jax}")
        w("")
        need, status = goal_status(r)
        line = (f"**{have} of {total}** names ({pct(have, total)}) are declared in `{ns.short}`. "
                f"Goal: {ns.goal_text}")
        if need is not None:
            line += f" ({need} names): {status}."
        else:
            line += "."
        w(line)
        w("")
        if r["source"]:
            w(f"JAX's names: `{r['source'].rsplit(', ', 1)[-1]}`, as listed in "
              f"`tools/api_names/{ns.jax}.txt`.")
            w("")
        shown = [f"`{n}`" if n == c else f"`{n}` (as `{c}`)" for n, c in r["present"]]
        w(f"Present ({have}): {code_list(shown)}.")
        w("")
        w(f"Missing ({len(r['missing'])}): {code_list([f'`{n}`' for n in r['missing']])}.")
        w("")
        if r["elsewhere"]:
            w(f"Of the missing, {len(r['elsewhere'])} have a namesake in another tessel namespace (the same "
              "function to declare here too, or only a function of the same name; not counted): "
              + ", ".join(f"`{n}` ({', '.join(f'`{o}`' for o in os_)})" for n, os_ in sorted(r["elsewhere"].items()))
              + ".")
            w("")
        by_reason = defaultdict(list)
        for name, reason in r["excluded"].items():
            by_reason[reason].append(name)
        w(f"Left out on purpose ({len(r['excluded'])}, not counted):")
        w("")
        if by_reason:
            w("| reason | names |")
            w("|---|---|")
            for reason in sorted(by_reason, key=lambda x: (-len(by_reason[x]), x)):
                names = ", ".join(f"`{n}`" for n in sorted(by_reason[reason]))
                w(f"| {reason.replace('|', '/')} | {names} |")
        else:
            w("none.")
        w("")
    w("## How to update")
    w("")
    w("- After adding a JAX function to tessel, run `python3 tools/api_coverage.py` and commit the two "
      "regenerated files.")
    w("- A C++ spelling that differs from JAX's because the name is a C++ keyword goes in "
      "`tools/api_names/aliases.txt` (`jax_name cpp_name`, as `switch switch_`).")
    w("- A JAX name that makes no sense in C++ goes in `tools/api_names/excluded.txt` with its reason.")
    w("- For a newer JAX: `python3 tools/api_coverage.py --update-names PATH_TO_JAX_CLONE` rewrites the "
      "name lists from JAX's source and reports the new names.")
    w("")
    return "\n".join(out)


def render_test(results):
    out = []
    w = out.append
    w("// Generated by tools/api_coverage.py (python3 tools/api_coverage.py); do not edit by hand.")
    w("//")
    w("// Every JAX name that docs/api-coverage.md counts as present in tessel, as a")
    w("// using-declaration of its C++ name: when one disappears or is renamed this")
    w("// file stops compiling, and the page must be regenerated. A using-declaration")
    w("// works for overloaded functions, templates, objects and types alike; each")
    w("// namespace has its own block, so that same-named functions of different")
    w("// namespaces do not clash.")
    w("#include <doctest/doctest.h>")
    w("")
    w("#include <tessel/tessel.hpp>")
    w("")
    w('TEST_CASE("api coverage: the JAX names counted as present are declared") {')
    w("  int names = 0;")
    total = 0
    for r in results:
        ns = r["ns"]
        if not r["present"]:
            w(f"  // {ns.jax} -> {ns.cpp}: none present")
            continue
        w(f"  {{  // {ns.jax} -> {ns.cpp}")
        seen = set()
        for name, cpp in r["present"]:
            if cpp in seen:
                continue
            seen.add(cpp)
            note = f"  // {ns.jax}.{name}" if cpp != name else ""
            w(f"    using {ns.cpp}::{cpp};{note}")
            if cpp in r["objects"]:
                w(f"    static_cast<void>({cpp});  // an object: used, or GCC warns that it is not")
        w(f"    names += {len(seen)};")
        w("  }")
        total += len(seen)
    w(f"  CHECK(names == {total});")
    w("}")
    w("")
    return "\n".join(out)


# ---------------------------------------------------------------- name lists from JAX's source

def git_show(git_dir, rev, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{rev}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def module_public_names(source):
    """The public names a JAX namespace module defines (imports, assignments,
    functions, classes and its deprecated-but-available names), less `del`s."""
    tree = ast.parse(source)
    names = set()

    def bind(name):
        if name and not name.startswith("_"):
            names.add(name)

    def visit(body):
        for node in body:
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    bind(a.asname or a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    bind(a.asname or a.name.split(".")[0])
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                bind(node.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        bind(t.id)
                        if t.id == "_deprecations" and isinstance(node.value, ast.Dict):
                            for k, v in zip(node.value.keys, node.value.values):
                                removed = (isinstance(v, ast.Tuple) and len(v.elts) == 2
                                           and isinstance(v.elts[1], ast.Constant) and v.elts[1].value is None)
                                if isinstance(k, ast.Constant) and not removed:
                                    bind(k.value)
            elif isinstance(node, ast.Delete):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        names.discard(t.id)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return names


def update_names(git_dir, rev):
    commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", rev], check=True, capture_output=True,
                            text=True).stdout.strip()
    m = re.search(r'_version\s*(?::\s*str\s*)?=\s*"([^"]+)"', git_show(git_dir, rev, "jax/version.py"))
    version = m.group(1) if m else "unknown"

    def describe(*extra):
        r = subprocess.run(["git", "--git-dir", git_dir, "describe", "--tags", "--match", "jax-v*", *extra, rev],
                           capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    tag = describe("--exact-match")
    if tag:
        label = f"JAX {version}, {tag}"
    else:
        last = describe("--abbrev=0")
        label = f"JAX {version} in development" + (f", after {last}" if last else "")
    excluded = read_excluded()
    for ns in NAMESPACES:
        public = module_public_names(git_show(git_dir, rev, ns.source))
        try:
            old, _ = read_names(ns)
        except FileNotFoundError:
            old = []
        listed = sorted(public - set(excluded[ns.jax]))
        new = sorted(set(listed) - set(old))
        gone = sorted(set(old) - set(listed))
        stale = sorted(set(excluded[ns.jax]) - public)
        with open(names_path(ns), "w", encoding="utf-8") as f:
            f.write(f"# {ns.jax}: the public names of JAX's {ns.jax} namespace, one per line.\n")
            f.write(f"# Source: jax-ml/jax@{commit[:12]} ({label}), {ns.source}\n")
            f.write("# Names tessel leaves out on purpose are not here: see excluded.txt.\n")
            f.write("# Regenerate: python3 tools/api_coverage.py --update-names PATH_TO_JAX_GIT_DIR\n")
            for name in listed:
                f.write(name + "\n")
        print(f"{ns.jax}: {len(listed)} listed, {len(excluded[ns.jax])} excluded"
              + (f"; new: {', '.join(new)}" if new and old else "")
              + (f"; no longer listed: {', '.join(gone)}" if gone else ""))
        if stale:
            print(f"  excluded.txt names that {ns.jax} no longer has: {', '.join(stale)}")


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if docs/api-coverage.md or tests/dsl/api_coverage_test.cpp is not current")
    ap.add_argument("--update-names", metavar="JAX_GIT_DIR",
                    help="rewrite tools/api_names/<namespace>.txt from JAX's source (a clone or bare mirror)")
    ap.add_argument("--rev", default="HEAD", help="the JAX revision for --update-names (default HEAD)")
    args = ap.parse_args()
    if args.update_names:
        update_names(args.update_names, args.rev)
        return 0
    results = measure()
    for r in results:
        ns = r["ns"]
        need, status = goal_status(r)
        print(f"{ns.jax:20} -> {ns.short:24} {len(r['present']):4} / {len(r['names']):4} "
              f"({pct(len(r['present']), len(r['names'])):>4})  goal: {ns.goal_text}"
              + (f" ({status})" if status else ""))
    outputs = [(DOC_PATH, render_markdown(results)), (TEST_PATH, render_test(results))]
    if args.check:
        stale = False
        for path, text in outputs:
            try:
                with open(path, encoding="utf-8") as f:
                    current = f.read()
            except FileNotFoundError:
                current = ""
            if current != text:
                stale = True
                rel = os.path.relpath(path, ROOT)
                print(f"{rel} is not current; run python3 tools/api_coverage.py", file=sys.stderr)
                diff = difflib.unified_diff(current.splitlines(), text.splitlines(), rel, rel + " (expected)",
                                            lineterm="", n=0)
                for k, line in enumerate(diff):
                    if k >= 40:
                        print("...", file=sys.stderr)
                        break
                    print(line, file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
