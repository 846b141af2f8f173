"""Bad .loop input: each error class of dsl.md, with its message, line and column."""
from __future__ import annotations

import pytest

from polymap.driver import parse
from polymap.errors import LoopSyntaxError, PolymapError, SemanticError
from polymap.grammar import parse_program
from polymap.passes.frontend.semantics import check_program, checked


def errors_of(text: str, exc_type=PolymapError):
    with pytest.raises(exc_type) as info:
        parse(text, "bad.loop")
    return info.value.diagnostics


def one_error(text: str, exc_type=PolymapError):
    (d,) = errors_of(text, exc_type)
    return d


def where(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """(line, col) of the ``nth`` occurrence of ``needle`` in ``text``, 1-based."""
    pos = -1
    for _ in range(nth + 1):
        pos = text.index(needle, pos + 1)
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def assert_at(diag, text: str, needle: str, fragment: str, nth: int = 0):
    assert fragment in diag.message, diag.message
    assert (diag.loc.line, diag.loc.col) == where(text, needle, nth), diag.render()
    assert diag.severity == "error"


def kernel(body: str, decls: str = "in A[N, N]\nout B[N]\nout s", params: str = "N = 8, M = 4",
           where_clause: str = "") -> str:
    where_part = f" where {where_clause}" if where_clause else ""
    return f"kernel k({params}){where_part} {{\n{decls}\n{body}\n}}\n"


# --------------------------------------------------------------------------- syntax


@pytest.mark.parametrize("text, needle, fragment", [
    (kernel("s = 1 +"), "}", "expected an expression, found '}'"),
    (kernel("s = A[0, 1 s = 2"), "s = 2", "expected an operator, ',' or ']', found 's'"),
    (kernel("s = 1 s = 2"), "s = 2", "a newline, ';' or '}'"),
    (kernel("for in in 0..N { s = 1 }"), "in in", "expected a name, found the keyword 'in'"),
    (kernel("for i in 0..N s = 1"), "s = 1", "'step' or '{', found 's'"),
    (kernel("s + 1"), "+ 1", "expected '=' or an assignment operator"),
    (kernel("s = (1 + 2"), "}", "')', found '}'"),
    (kernel("s = 1 @ 2"), "@", "unexpected character '@'"),
    ("kernel k(N) { out s\n s = 1\n", None, "found the end of the file"),
    ("kernel k(N { }", "{", "expected ')', ',' or '='"),
    ("kernel k(N) { }\nnonsense", "nonsense", "expected the end of the file or 'kernel'"),
    (kernel("s = 1\nout late"), "out late", "declarations must come before"),
    (kernel("for i in 0..N { out t\n s = 1 }"), "out t", "expected a statement"),
])
def test_syntax_errors(text, needle, fragment):
    d = one_error(text, LoopSyntaxError)
    assert fragment in d.message, d.message
    if needle is None:  # end of file: after the last character
        last = text.rstrip().splitlines()
        assert (d.loc.line, d.loc.col) == (len(last), len(last[-1]) + 1)
    else:
        assert (d.loc.line, d.loc.col) == where(text, needle)


def test_assignment_in_a_condition_hints_at_equality():
    text = kernel("for i in 0..N { if i = 2 { s = 1 } }")
    d = one_error(text, LoopSyntaxError)
    assert (d.loc.line, d.loc.col) == where(text, "= 2")
    assert d.notes == ("use '==' to compare",)


def test_syntax_error_is_raised_by_parse_program_itself():
    with pytest.raises(LoopSyntaxError):
        parse_program("kernel", "x.loop")


# --------------------------------------------------------------------------- names


def test_undefined_names_everywhere():
    text = kernel("for i in 0..Q {\n if i < R { B[i + T] = u + A[i, V] } }", decls="in A[N, N]\nout B[N]\nin C[W]")
    diags = errors_of(text, SemanticError)
    got = [(d.message, d.loc.line, d.loc.col) for d in diags]
    expected = [("undefined name 'W'", *where(text, "W")), ("undefined name 'Q'", *where(text, "Q")),
                ("undefined name 'R'", *where(text, "R")), ("undefined name 'T'", *where(text, "T")),
                ("undefined name 'u'", *where(text, "u +")), ("undefined name 'V'", *where(text, "V"))]
    assert got == expected


def test_undefined_target_and_where_clause_names():
    text = kernel("zz[0] = 1", params="N", where_clause="N > P")
    d1, d2 = errors_of(text, SemanticError)
    assert_at(d1, text, "P", "undefined name 'P'")
    assert_at(d2, text, "zz", "undefined name 'zz'")


def test_redefined_names():
    text = "kernel k(N, M, N) {\n in A[N]\n out A[N]\n in M\n}"
    d1, d2, d3 = errors_of(text, SemanticError)
    assert_at(d1, text, "N)", "parameter 'N' is defined twice")
    assert_at(d2, text, "A[N]", "tensor 'A' is declared twice (first at line 2)", nth=1)
    assert_at(d3, text, "M\n}", "tensor 'M' is already defined as a parameter")


@pytest.mark.parametrize("body, needle, kind", [
    ("for N in 0..4 { s = 1 }", "N in", "parameter"),
    ("for A in 0..4 { s = 1 }", "A in", "tensor"),
    ("for i in 0..N { for i in 0..N { s = 1 } }", "i in 0..N { s", "iterator"),
    ("for i in 0..N, i in 0..4 { s = 1 }", "i in 0..4", "iterator"),
])
def test_iterator_shadowing(body, needle, kind):
    text = kernel(body)
    assert_at(one_error(text), text, needle, f"iterator '{needle[0]}' shadows the {kind}")


def test_sibling_loops_may_reuse_an_iterator():
    checked(parse_program(kernel("for i in 0..N { B[i] = 0 }\nfor i in 0..N { B[i] += 1 }"), "ok.loop"))


def test_duplicate_labels_explicit_and_implicit():
    text = kernel("a: s = 1\nfor i in 0..N { a: B[i] = 0 }\ns = 2\nS2: s = 3")
    d1, d2 = errors_of(text)
    assert_at(d1, text, "a: B", "duplicate label 'a': already used at line 5")
    # the third statement is unlabelled, hence S2, which the fourth then reuses
    assert_at(d2, text, "S2:", "duplicate label 'S2': already used for an unlabelled statement at line 7")


def test_implicit_label_clashing_with_explicit_one():
    text = kernel("S1: s = 1\ns = 2")  # the second statement is implicitly S1
    d = one_error(text)
    assert_at(d, text, "s = 2", "duplicate label 'S1' (the name of this unlabelled statement)")


# --------------------------------------------------------------------------- tensors


@pytest.mark.parametrize("body, needle, fragment", [
    ("for i in 0..N { B[i, i] = 0 }", "B[i, i]", "tensor 'B' has 1 dimension but is indexed with 2 subscripts"),
    ("for i in 0..N { B[i] = A[i] }", "A[i]", "tensor 'A' has 2 dimensions but is indexed with 1 subscript"),
    ("s = A", "A\n}", "tensor 'A' has 2 dimensions but is indexed with 0 subscripts"),
    ("for i in 0..N { s[i] = 0 }", "s[i]", "'s' is a scalar and cannot be subscripted"),
    ("for i in 0..N { B[i] = i[0] }", "i[0]", "'i' is an iterator, not a tensor"),
])
def test_wrong_number_of_subscripts(body, needle, fragment):
    text = kernel(body)
    assert_at(one_error(text), text, needle, fragment)


def test_write_to_in_tensor():
    text = kernel("for i in 0..N { A[i, i] += 1 }")
    assert_at(one_error(text), text, "A[i, i]", "'A' is declared 'in' and cannot be written")


@pytest.mark.parametrize("body, needle, fragment", [
    ("for i in 0..N { i = 1 }", "i = 1", "cannot assign to iterator 'i'"),
    ("N = 1", "N = 1", "cannot assign to parameter 'N'"),
])
def test_assigning_to_iterator_or_parameter(body, needle, fragment):
    text = kernel(body)
    assert_at(one_error(text), text, needle, fragment)


def test_unknown_dtype():
    text = kernel("s = 1", decls="out s : f16")
    assert_at(one_error(text), text, "f16", "unknown dtype 'f16'")


@pytest.mark.parametrize("step, fragment", [("0", "'0'"), ("-2", "'-2'"), ("N", "'N'"), ("2 * M", "'2 * M'")])
def test_step_must_be_a_positive_constant(step, fragment):
    text = kernel(f"for i in 0..N step {step} {{ B[i] = 0 }}")
    assert_at(one_error(text), text, step + " {", "step must be a positive integer constant, not " + fragment)


def test_parameter_default_must_be_a_size():
    text = "kernel k(N = 0) {\n out s\n s = N\n}"
    assert_at(one_error(text), text, "N = 0", "parameters are sizes and must be >= 1")


@pytest.mark.parametrize("expr, needle, fragment", [
    ("foo(1)", "foo(1)", "unknown function 'foo'"),
    ("sqrt(1, 2)", "sqrt", "sqrt takes 1 argument, not 2"),
    ("pow(2)", "pow", "pow takes 2 arguments, not 1"),
    ("max(1)", "max", "max takes at least 2 arguments, not 1"),
    ("select(1 < 2, 3)", "select", "select takes 3 arguments"),
])
def test_functions_and_arities(expr, needle, fragment):
    text = kernel(f"s = {expr}")
    assert_at(one_error(text), text, needle, fragment)


# --------------------------------------------------------------------------- affinity


@pytest.mark.parametrize("body, needle, fragment", [
    ("for i in 0..N, j in 0..N { B[i * j] = 0 }", "i * j", "'i * j' in a subscript is a product of iterators"),
    ("for i in 0..N { B[N * i] = 0 }", "N * i", "is a product of a parameter and an iterator"),
    ("for i in 0..N { B[i] = A[B[i], 0] }", "B[i], 0", "'B[i]' is a data-dependent subscript"),
    ("for i in 0..N { B[i] = A[s, 0] }", "s, 0", "'s' is a data-dependent subscript"),
    ("for i in 0..N { B[floor(i / M)] = 0 }", "floor", "floor(e / c) needs a positive integer constant c, not 'M'"),
    ("for i in 0..N { B[floor(i)] = 0 }", "floor", "floor must be written floor(e / c)"),
    ("for i in 0..N { B[i % 0] = 0 }", "i % 0", "'%' needs a positive integer constant on its right, not '0'"),
    ("for i in 0..N { B[i / 2] = 0 }", "i / 2", "is a division; write floor(i / 2)"),
    ("for i in 0..N { B[i + 0.5] = 0 }", "0.5", "the float literal '0.5' cannot appear in a subscript"),
    ("for i in 0..N { B[abs(i)] = 0 }", "abs(i)", "only floor, min and max are allowed"),
    ("for i in 0..N { B[i < 2] = 0 }", "i < 2", "is not an integer expression"),
    ("for i in 0..B[0] { s = 1 }", "B[0]", "'B[0]' in a loop bound is data-dependent control flow"),
    ("for i in 0..N, j in 0..i * i { s = 1 }", "i * i", "in a loop bound is a product of iterators"),
    ("for i in min(N, M)..N { s = 1 }", "min(N, M)", "a lower bound may be max(...)"),
    ("for i in 0..max(N, M) { s = 1 }", "max(N, M)", "an upper bound may be min(...)"),
    ("for i in 0..N { if s > 0 { B[i] = 1 } }", "s > 0", "'s' in a condition is data-dependent control flow"),
    ("for i in 0..N { if i * N < 4 { B[i] = 1 } }", "i * N", "in a condition is a product of a parameter"),
    ("for i in 0..N { if i { B[i] = 1 } }", "i {", "'i' is not a comparison"),
])
def test_non_affine_terms_are_named(body, needle, fragment):
    text = kernel(body)
    assert_at(one_error(text), text, needle, fragment)


def test_quasi_affine_forms_are_accepted():
    text = kernel("for t in 0..N step 4, i in max(t, 1)..min(t + 4, N, 2*M - 1) {\n"
                  "  if (i + t) % 3 == 0 and not floor(i / 2) >= M or i != 2 * t - N {\n"
                  "    B[floor((i + 1) / 2) - floor(i / 2) + i % 2 - 1] = A[-i + 2*i, 3 * (M - 1) - M] * i + N / 2\n"
                  "  }\n}", where_clause="N >= 2 * M and M % 2 == 0")
    assert check_program(parse_program(text, "ok.loop")) == []


@pytest.mark.parametrize("decls, needle, fragment", [
    ("in A[N * M]\nout s", "N * M", "'N * M' in an extent is a product of parameters"),
    ("in A[N]\nin C[A]\nout s", "A]", "'A' reads a tensor; an extent must be affine in parameters"),
    ("in A[i]\nout s", "i]", "undefined name 'i'"),
    ("in A[2.0 * N]\nout s", "2.0", "the float literal '2.0' cannot appear in an extent"),
])
def test_extents_are_affine_in_parameters(decls, needle, fragment):
    text = kernel("s = 1", decls=decls)
    assert_at(one_error(text), text, needle, fragment)


def test_where_clause_must_be_affine():
    text = kernel("s = 1", params="N, M", where_clause="N * M > 4 and N >= 1")
    assert_at(one_error(text), text, "N * M", "in a where clause is a product of parameters")


# --------------------------------------------------------------------------- reporting


BAD = """kernel k(N = 8) {
  in A[N]
  out B[N]
  for i in 0..N step 0 {
    B[i * i] = A[i] + q
    A[i] = 1
  }
}
"""


def test_several_errors_are_reported_together_in_source_order():
    diags = errors_of(BAD, SemanticError)
    got = [(d.loc.line, d.loc.col, d.message.split(":")[0]) for d in diags]
    assert got == [
        (4, 22, "step must be a positive integer constant, not '0'"),
        (5, 7, "'i * i' in a subscript is a product of iterators, which is not affine; multiply only by integer constants"),
        (5, 23, "undefined name 'q'"),
        (6, 5, "'A' is declared 'in' and cannot be written; declare it 'inout' or 'out'"),
    ]


def test_errors_from_several_kernels_together():
    text = "kernel a(N) { out x\n x = p }\nkernel b(N) { out y\n y = q }\n"
    d1, d2 = errors_of(text)
    assert (d1.message, d1.loc.line, d2.message, d2.loc.line) == ("undefined name 'p'", 2, "undefined name 'q'", 4)


def test_rendered_format():
    with pytest.raises(SemanticError) as info:
        parse(BAD, "bad.loop")
    lines = str(info.value).splitlines()
    assert lines[0] == "bad.loop:4:22: error: step must be a positive integer constant, not '0'"
    assert lines[1] == "      for i in 0..N step 0 {"
    assert lines[2] == "    " + " " * 21 + "^"
    assert lines[3].startswith("bad.loop:5:7: error: 'i * i' in a subscript")
    assert lines[4] == "        B[i * i] = A[i] + q"
    assert lines[5] == "    " + " " * 6 + "^^^^^"


def test_rendered_syntax_error():
    with pytest.raises(LoopSyntaxError) as info:
        parse("kernel k(N) {\n  out x\n  x = = 1\n}\n", "s.loop")
    assert str(info.value).splitlines() == [
        "s.loop:3:7: error: expected an expression, found '='",
        "      x = = 1",
        "          ^",
    ]


def test_checked_returns_the_program_and_check_program_lists_nothing_for_good_code():
    program = parse_program(kernel("for i in 0..N { B[i] = A[i, N - 1 - i] + s }",
                                   decls="in A[N, N]\nout B[N]\nin s"), "ok.loop")
    assert check_program(program) == []
    assert checked(program) is program


def test_empty_file_and_duplicate_kernels():
    d = one_error("# nothing here\n", SemanticError)
    assert "the file holds no kernel" in d.message and (d.loc.line, d.loc.col) == (1, 1)
    text = "kernel a(N) { out x\n x = 1 }\nkernel a(N) { out y\n y = 1 }\n"
    assert_at(one_error(text), text, "kernel a", "kernel 'a' is defined twice (first at line 1)", nth=1)
