"""Lark's parse exceptions -> :class:`LoopSyntaxError` in the user's words.

Lark reports the set of terminal names the LALR table accepts at the bad
token (``{'NAME', 'INT', 'LPAR', ...}``); users think in constructs, so
whole families collapse into one phrase ("an expression", "an operator",
"a statement") and the rest are spelled as they are written (``'}'``).

Sketch: ``x[i] = a b`` -> ``expected an operator, a newline or ';' or '}', found 'b'``.
"""
from __future__ import annotations

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from polymap import ir
from polymap.errors import Diagnostic, LoopSyntaxError
from lark import Token

_EXPR_START = {"NAME", "INT", "FLOAT", "LPAR", "MINUS", "PLUS", "NOT"}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "COMPARE_OP", "AND", "OR"}
_ROLES = {"IN", "OUT", "INOUT", "LOCAL"}
_WORDS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "_NL": "a newline",
    "COMPARE_OP": "a comparison",
    "EQUAL": "'='",
    "AUG_OP": "an assignment operator",
    "$END": "the end of the file",
    "SEMICOLON": "';'",
}


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def describe_expected(expected: set[str], parser: Lark) -> str:
    """A phrase for what the parser would have accepted, e.g. ``an expression or '}'``."""
    expected = set(expected)
    words: list[str] = []
    if {"FOR", "IF"} <= expected:
        words.append("a declaration or a statement" if _ROLES <= expected else "a statement")
        expected -= {"FOR", "IF", "NAME"} | _ROLES
    if {"NAME", "INT", "LPAR"} <= expected:
        words.append("an expression")
        expected -= _EXPR_START
    if len(expected & _OPERATORS) >= 3:
        words.append("an operator")
        expected -= _OPERATORS | {"LSQB", "LPAR"}
    if {"EQUAL", "AUG_OP"} <= expected:
        words.append("'=' or an assignment operator such as '+='")
        expected -= {"EQUAL", "AUG_OP"}
    if "_NL" in expected:
        expected.add("SEMICOLON")  # the same separator, spelled both ways
    rest = [_terminal_words(name, parser) for name in expected]
    words += sorted(rest, key=lambda w: (not w[0].isalpha(), w))
    return _join(words) if words else "something else"


def _terminal_words(name: str, parser: Lark) -> str:
    if name in _WORDS:
        return _WORDS[name]
    try:
        pattern = parser.get_terminal(name).pattern
    except KeyError:
        return name.lower()
    return f"'{pattern.value}'" if isinstance(pattern, PatternStr) else name.lower()


def _found(token: Token) -> str:
    if token.type == "$END":
        return "the end of the file"
    if token.type == "_NL":
        return "';'" if token.value == ";" else "the end of the line"
    if token.type in ("NAME", "INT", "FLOAT"):
        return f"'{token.value}'"
    if token.value.isalpha():
        return f"the keyword '{token.value}'"
    return f"'{token.value}'"


def _acceptable(exc: UnexpectedToken) -> set[str]:
    """The terminals that could really come next.

    ``exc.expected`` is the LALR state's lookahead set, which after a default
    reduction includes tokens valid only in other contexts; asking the
    interactive parser which tokens it would actually shift is exact.
    """
    ip = getattr(exc, "interactive_parser", None)
    if ip is None:
        return set(exc.expected)
    return set(ip.accepts()) or set(exc.expected)


def _end_of_text(source: ir.SourceFile) -> ir.Loc:
    lines = source.text.rstrip().splitlines() or [""]
    n, col = len(lines), len(lines[-1]) + 1
    return ir.Loc(n, col, n, col + 1, source)


def syntax_error(exc: UnexpectedInput, parser: Lark, source: ir.SourceFile) -> LoopSyntaxError:
    """The :class:`LoopSyntaxError` for one lark exception, located at the offending token."""
    if isinstance(exc, UnexpectedCharacters):
        char = source.text[exc.pos_in_stream] if exc.pos_in_stream < len(source.text) else exc.char
        loc = ir.Loc(exc.line, exc.column, exc.line, exc.column + 1, source)
        return LoopSyntaxError(Diagnostic(f"unexpected character {char!r}", loc))
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END" or not getattr(tok, "line", None):
            loc = _end_of_text(source)
        else:
            width = 1 if tok.type == "_NL" else max(1, len(tok.value))
            loc = ir.Loc(tok.line, tok.column, tok.line, tok.column + width, source)
        acceptable = _acceptable(exc)
        expected = describe_expected(acceptable, parser)
        notes = ("use '==' to compare",) if tok.type == "EQUAL" and "COMPARE_OP" in acceptable else ()
        return LoopSyntaxError(Diagnostic(f"expected {expected}, found {_found(tok)}", loc, notes=notes))
    line = getattr(exc, "line", 0) or 0
    col = getattr(exc, "column", 0) or 0
    return LoopSyntaxError(Diagnostic("syntax error", ir.Loc(line, col, line, col + 1, source)))
