"""Grammar-aware mutations of polymap's inputs: ``.loop`` kernels, mapping and architecture YAML, ``.npz``.

Every mutator takes a :class:`random.Random` (so a case is its seed) and
returns new text or bytes. ``.loop`` mutations work on the language's tokens
(numbers, names, operators, brackets, keywords) and on its structure (a loop
nested deeper, a statement duplicated, a condition or-ed, a bound reversed);
YAML mutations on the data (a value made huge, negative, a string, a list;
an entry dropped or duplicated; nesting; tags and aliases); ``.npz``
mutations on the arrays (dtype, shape, layout, NaN, a missing or extra
array) and on the bytes (truncated, flipped).
"""
from __future__ import annotations

import copy
import io
import random
import re

import numpy as np
import yaml

TOKEN = re.compile(r"\d+\.\d*(?:e[+-]?\d+)?|\d+|[A-Za-z_]\w*|\.\.|[+\-*/%]=|[<>=!]=|&&|\|\||\S")
NUMBERS = ["0", "1", "-1", "2", "3", "7", "64", "1000", "4611686018427387904", "9223372036854775807",
           "9223372036854775808", "18446744073709551616", "1e308", "0.5", "-0"]
OPERATORS = ["+", "-", "*", "/", "%", "+=", "-=", "*=", "/=", "max=", "min=", "=", "<", "<=", "==", "!=",
             "and", "or", "not", "..", "step", "floor", "max", "min"]
KEYWORDS = ["kernel", "for", "in", "if", "else", "inout", "out", "local", "where", "step", "f32", "f64", "i32"]


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _join(tokens: list[str]) -> str:
    out = " ".join(tokens)
    return out.replace(" { ", " {\n").replace(" } ", "\n}\n")


def mutate_loop(text: str, rng: random.Random) -> str:
    """One to three mutations of a kernel's text."""
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(LOOP_MUTATORS)(text, rng)
    return text


def _swap_number(text: str, rng: random.Random) -> str:
    spans = [m.span() for m in re.finditer(r"(?<![\w.])\d+(?![\w.])", text)]
    if not spans:
        return text
    a, b = rng.choice(spans)
    return text[:a] + rng.choice(NUMBERS) + text[b:]


def _swap_token(text: str, rng: random.Random) -> str:
    toks = _tokens(text)
    if not toks:
        return text
    k = rng.randrange(len(toks))
    names = sorted(set(t for t in toks if t[0].isalpha()))
    pool = rng.choice([OPERATORS, KEYWORDS, NUMBERS, names or KEYWORDS])
    toks[k] = rng.choice(pool)
    return _join(toks)


def _delete_or_duplicate(text: str, rng: random.Random) -> str:
    toks = _tokens(text)
    if len(toks) < 2:
        return text
    k = rng.randrange(len(toks))
    if rng.random() < 0.5:
        del toks[k]
    else:
        toks.insert(k, toks[k])
    return _join(toks)


def _truncate(text: str, rng: random.Random) -> str:
    return text[: rng.randrange(len(text) + 1)]


def _duplicate_line(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    body = [k for k, line in enumerate(lines) if ":" in line and ("=" in line)]
    if not body:
        return text
    k = rng.choice(body)
    copies = [re.sub(r"^(\s*)(\w+):", lambda m, c=c: f"{m.group(1)}{m.group(2)}_{c}:", lines[k])
              for c in range(rng.choice([1, 2, 40]))]
    return "\n".join(lines[: k + 1] + copies + lines[k + 1:])


def _nest_deeper(text: str, rng: random.Random) -> str:
    m = re.search(r"for (\w+) in ([^{,]+)", text)
    if not m:
        return text
    extra = ", ".join(f"z{k} in 0..2" for k in range(rng.choice([1, 4, 12])))
    return text[: m.end()] + ", " + extra + text[m.end():]


def _reverse_bound(text: str, rng: random.Random) -> str:
    spans = list(re.finditer(r"in (\w+)\.\.(\w+)", text))
    if not spans:
        return text
    m = rng.choice(spans)
    return text[: m.start()] + f"in {m.group(2)}..{m.group(1)}" + text[m.end():]


def _or_conditions(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    stmts = [k for k, line in enumerate(lines) if re.match(r"\s*\w+: ", line)]
    if not stmts:
        return text
    k = rng.choice(stmts)
    indent = re.match(r"\s*", lines[k]).group(0)
    terms = " or ".join(f"{rng.choice(['i', 'j', 'k', 'N', 'M'])} % {rng.randint(1, 9)} == 0"
                        for _ in range(rng.choice([1, 2, 5, 40])))
    lines[k] = f"{indent}if {terms} {{\n{lines[k]}\n{indent}}}"
    return "\n".join(lines)


def _parens(text: str, rng: random.Random) -> str:
    spans = [m.span() for m in re.finditer(r"(?<==\s)[^\n]+", text)]
    if not spans:
        return text
    a, b = rng.choice(spans)
    depth = rng.choice([2, 50, 400])
    return text[:a] + "(" * depth + text[a:b] + ")" * depth + text[b:]


def _bytes(text: str, rng: random.Random) -> str:
    k = rng.randrange(len(text) + 1)
    return text[:k] + rng.choice(["\0", "\ufeff", "\u00e9", "\t", "\r", "#", "\\", "'", '"', "{", "}"]) + text[k:]


LOOP_MUTATORS = [_swap_number, _swap_number, _swap_token, _delete_or_duplicate, _truncate, _duplicate_line,
                 _nest_deeper, _reverse_bound, _or_conditions, _parens, _bytes]


# --------------------------------------------------------------------------- YAML

YAML_VALUES = [0, -1, 1, 2, 3, 16, 10**6, 2**63, 2**64, 1e308, -1e-9, 0.5, "x", "", None, True, [], {}, [1, 2],
               {"a": 1}, "64KiB", "1 GiB", "-5 B", "nan", float("inf")]


def _value(rng: random.Random):
    """A fresh copy of one of :data:`YAML_VALUES`: the lists and dicts there are mutated in place by
    later mutations, and a shared one made every case depend on the cases before it (and grow
    cycles: a list inside itself, a RecursionError in :func:`_paths`)."""
    return copy.deepcopy(rng.choice(YAML_VALUES))


def mutate_yaml(text: str, rng: random.Random) -> str:
    """A mutation of a mapping or architecture file: its data, or its text."""
    if rng.random() < 0.15:
        return rng.choice(YAML_TEXT)(text, rng)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    for _ in range(rng.randint(1, 3)):
        data = _mutate_data(data, rng)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=rng.random() < 0.3)


def _mutate_data(data, rng: random.Random):
    paths = list(_paths(data, ()))
    if not paths:
        return _value(rng)
    path = rng.choice(paths)
    parent, key = _parent(data, path)
    if parent is None:
        return _value(rng)
    what = rng.random()
    if what < 0.6:
        parent[key] = _value(rng)
    elif what < 0.8 and isinstance(parent, dict):
        del parent[key]
    elif isinstance(parent, list):
        parent.insert(key, parent[key])
    else:
        parent[rng.choice(["extra", "tile", "order", "capacity", "levels", "kernel"])] = parent[key]
    return data


def _paths(data, prefix):
    if isinstance(data, dict):
        for k, v in data.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(data, list):
        for k, v in enumerate(data):
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))


def _parent(data, path):
    node = data
    for k in path[:-1]:
        node = node[k]
    return (node, path[-1]) if isinstance(node, (dict, list)) else (None, None)


def _deep(text: str, rng: random.Random) -> str:
    d = rng.choice([10, 100, 500])
    return text + "\nx: " + "[" * d + "]" * d + "\n"


def _tagged(text: str, rng: random.Random) -> str:
    return rng.choice(["!!python/object:os.system ['true']\n", "a: &a [*a]\n", "a: &x 1\nb: *y\n",
                       "levels: !!binary aGVsbG8=\n", "? [a, b]\n: 1\n", "--- 1\n--- 2\n"]) + text


def _truncate_text(text: str, rng: random.Random) -> str:
    return text[: rng.randrange(len(text) + 1)]


YAML_TEXT = [_deep, _tagged, _truncate_text, _bytes]


# --------------------------------------------------------------------------- .npz

def mutate_npz(arrays: dict[str, np.ndarray], rng: random.Random) -> bytes:
    """The bytes of an ``.npz`` holding a mutation of ``arrays`` (or damaged bytes of a good one)."""
    arrays = dict(arrays)
    what = rng.random()
    names = sorted(arrays)
    if names and what < 0.7:
        name = rng.choice(names)
        a = arrays[name]
        arrays[name] = rng.choice([
            lambda: a.astype(rng.choice([np.float32, np.float64, np.int32, np.int64, np.complex64, np.bool_])),
            lambda: np.asfortranarray(a),
            lambda: a.reshape(-1) if a.ndim else a.reshape(1),
            lambda: a[..., ::-1] if a.ndim else a,
            lambda: np.full_like(a, np.nan) if a.dtype.kind == "f" else a,
            lambda: np.full_like(a, np.inf) if a.dtype.kind == "f" else a,
            lambda: np.zeros((0,) * max(a.ndim, 1), dtype=a.dtype),
            lambda: np.zeros(a.shape + (2,), dtype=a.dtype),
            lambda: np.array("text"),
        ])()
    elif names and what < 0.8:
        del arrays[rng.choice(names)]
    elif what < 0.85:
        arrays["extra"] = np.zeros(3)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    if rng.random() < 0.25 and data:
        data = bytearray(data)
        if rng.random() < 0.5:
            del data[rng.randrange(len(data)):]
        else:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data)
    return data
