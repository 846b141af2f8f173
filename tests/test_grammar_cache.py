"""The parser's LALR tables kept in the user's cache: used, rebuilt when damaged, skipped when unwritable.

Independent check: every variant parses the examples to the same IR as a parser
built without any cache.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from lark import Lark

import polymap.grammar as grammar
from polymap.grammar import _parser, parse_program
from polymap.grammar.postlex import SeparatorPostLex
from polymap.grammar.transformer import LoopTransformer
from polymap import ir

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.loop"))[:6]


def _uncached(text: str, name: str) -> ir.Program:
    parser = Lark.open("loop.lark", rel_to=grammar.__file__, parser="lalr", lexer="basic",
                       postlex=SeparatorPostLex(), propagate_positions=True, maybe_placeholders=True)
    return LoopTransformer(ir.SourceFile(name, text)).transform(parser.parse(text))


@pytest.fixture
def fresh_parser(monkeypatch, tmp_path):
    def use(cache_home: Path):
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
        _parser.cache_clear()
    yield use
    _parser.cache_clear()


def _tables(home: Path) -> list[Path]:
    return sorted((home / "polymap").glob("loop-grammar-lark-*.tables"))


def _same_as_uncached():
    for path in EXAMPLES:
        text = path.read_text()
        assert parse_program(text, path.name) == _uncached(text, path.name), path.name


def test_tables_are_written_then_read(fresh_parser, tmp_path):
    fresh_parser(tmp_path)
    _same_as_uncached()
    (tables,) = _tables(tmp_path)
    first = tables.read_bytes()
    assert len(first.split(b"\n", 1)[0]) == 64  # lark's hash of grammar, options and version
    fresh_parser(tmp_path)  # a new process would find the file
    _same_as_uncached()
    assert tables.read_bytes() == first


def test_damaged_tables_are_rebuilt(fresh_parser, tmp_path):
    fresh_parser(tmp_path)
    _parser()
    (tables,) = _tables(tmp_path)
    good = tables.read_bytes()
    for damage in (b"not a hash\n\x80garbage", good[: len(good) // 2], b""):
        tables.write_bytes(damage)
        fresh_parser(tmp_path)
        _same_as_uncached()
        rebuilt = tables.read_bytes()  # whole again (pickled tables need not be byte-identical)
        assert rebuilt.split(b"\n", 1)[0] == good.split(b"\n", 1)[0] and len(rebuilt) > len(good) // 2
        fresh_parser(tmp_path)
        _same_as_uncached()


def test_unwritable_cache_goes_without(fresh_parser, tmp_path, capsys):
    in_the_way = tmp_path / "file"
    in_the_way.write_text("")
    fresh_parser(in_the_way)  # XDG_CACHE_HOME is a file: no directory can be made under it
    _same_as_uncached()
    assert capsys.readouterr().err == ""
