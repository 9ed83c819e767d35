"""The spreadsheets app's formula engine: cell references, parsing and evaluation, and how formulas
shift when a row is inserted.

A formula is ``=`` and an expression of SUM, AVERAGE, MIN, MAX and COUNT over ranges and cells of
one sheet, and + - * / between cells and numbers. ``compute`` evaluates a sheet's cells together
(a formula reads other formulas' values; a cycle gives ``#CYCLE!``, a division by zero ``#DIV/0!``).
Kept apart from the app so that the app module reads as its tools. Standard library only: it runs
inside the sandbox.
"""

from __future__ import annotations

import re
from typing import Any

from ._base import ToolFailure

FUNCTIONS = ("SUM", "AVERAGE", "MIN", "MAX", "COUNT")
MAX_ROWS, MAX_COLS = 5000, 52  # columns A..AZ


_REF_RE = re.compile(r"^([A-Z]{1,2})([1-9][0-9]*)$")


def col_letters(col: int) -> str:
    """1 -> 'A', 27 -> 'AA'."""
    out = ""
    while col:
        col, rem = divmod(col - 1, 26)
        out = chr(65 + rem) + out
    return out


def _col_number(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - 64
    return n


def parse_ref(ref: Any, field: str = "ref") -> tuple[int, int]:
    """'B7' -> (7, 2); ToolFailure naming ``field`` when it is not a cell reference."""
    m = _REF_RE.match(ref.strip().upper()) if isinstance(ref, str) else None
    if m is None:
        raise ToolFailure(f"{field} must be a cell reference like 'B7', got {ref!r}")
    row, col = int(m.group(2)), _col_number(m.group(1))
    if row > MAX_ROWS or col > MAX_COLS:
        raise ToolFailure(f"{field} {ref!r} is outside the sheet (rows 1-{MAX_ROWS}, columns A-{col_letters(MAX_COLS)})")
    return row, col


def cell_ref(row: int, col: int) -> str:
    return f"{col_letters(col)}{row}"


class FormulaError(Exception):
    """A formula that cannot be parsed."""


class _Fail(Exception):
    """A spreadsheet error value met while evaluating (#DIV/0!, #VALUE!, #CYCLE!)."""


_TOKEN_RE = re.compile(r"\s*(?:(?P<func>[A-Z]+)\s*\(|(?P<range>[A-Z]{1,2}[0-9]+:[A-Z]{1,2}[0-9]+)|"
                       r"(?P<ref>[A-Z]{1,2}[0-9]+)|(?P<num>[0-9]+(?:\.[0-9]+)?)|(?P<op>[-+*/(),]))")


def parse_formula(text: str) -> Any:
    """The syntax tree of a formula ('=' first); FormulaError with the reason when it is not one."""
    if not text.startswith("="):
        raise FormulaError("a formula starts with '='")
    body, tokens, pos = text[1:].upper(), [], 0
    while pos < len(body):
        if body[pos:].strip() == "":
            break
        m = _TOKEN_RE.match(body, pos)
        if m is None:
            raise FormulaError(f"unexpected {body[pos:].strip()[:10]!r}")
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    if not tokens:
        raise FormulaError("the formula is empty")
    at = [0]

    def peek() -> tuple[str, str] | None:
        return tokens[at[0]] if at[0] < len(tokens) else None

    def take() -> tuple[str, str]:
        tok = peek()
        if tok is None:
            raise FormulaError("the formula ends too early")
        at[0] += 1
        return tok

    def expr() -> Any:
        node = term()
        while (tok := peek()) and tok in (("op", "+"), ("op", "-")):
            take()
            node = (tok[1], node, term())
        return node

    def term() -> Any:
        node = unary()
        while (tok := peek()) and tok in (("op", "*"), ("op", "/")):
            take()
            node = (tok[1], node, unary())
        return node

    def unary() -> Any:
        tok = peek()
        if tok in (("op", "-"), ("op", "+")):
            take()
            return ("neg", unary()) if tok == ("op", "-") else unary()
        return atom()

    def atom() -> Any:
        kind, text_ = take()
        if kind == "num":
            return ("num", float(text_))
        if kind == "ref":
            return ("ref", *_checked(text_))
        if kind == "range":
            raise FormulaError(f"a range like {text_} only goes inside {', '.join(FUNCTIONS)}")
        if kind == "func":
            if text_ not in FUNCTIONS:
                raise FormulaError(f"unknown function {text_}; known: {', '.join(FUNCTIONS)}")
            args = [arg()]
            while peek() == ("op", ","):
                take()
                args.append(arg())
            if take() != ("op", ")"):
                raise FormulaError(f"{text_}( needs a closing ')'")
            return ("func", text_, args)
        if (kind, text_) == ("op", "("):
            node = expr()
            if take() != ("op", ")"):
                raise FormulaError("a '(' needs a closing ')'")
            return node
        raise FormulaError(f"unexpected {text_!r}")

    def arg() -> Any:
        tok = peek()
        if tok is not None and tok[0] == "range":
            take()
            first, last = tok[1].split(":")
            (r1, c1), (r2, c2) = _checked(first), _checked(last)
            return ("range", min(r1, r2), min(c1, c2), max(r1, r2), max(c1, c2))
        return expr()

    node = expr()
    if peek() is not None:
        raise FormulaError(f"unexpected {peek()[1]!r} after the end of the formula")  # type: ignore[index]
    return node


def _checked(ref: str) -> tuple[int, int]:
    try:
        return parse_ref(ref)
    except ToolFailure as exc:
        raise FormulaError(str(exc)) from None


def number(value: float) -> int | float:
    """A result as a spreadsheet shows it: whole numbers as integers, others to 6 decimals."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return round(value, 6)


def _evaluate(node: Any, get: Any) -> float:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "ref":
        value = get(node[1], node[2])
        if value is None:
            return 0.0
        if isinstance(value, str):
            if value.startswith("#"):
                raise _Fail(value)
            raise _Fail("#VALUE!")
        return float(value)
    if kind == "neg":
        return -_evaluate(node[1], get)
    if kind == "func":
        values: list[float] = []
        for arg in node[2]:
            if arg[0] == "ref":  # a cell named in a function counts only when it holds a number
                arg = ("range", arg[1], arg[2], arg[1], arg[2])
            if arg[0] == "range":
                for r in range(arg[1], arg[3] + 1):
                    for c in range(arg[2], arg[4] + 1):
                        value = get(r, c)
                        if isinstance(value, str) and value.startswith("#"):
                            raise _Fail(value)
                        if isinstance(value, (int, float)):
                            values.append(float(value))
            else:
                values.append(_evaluate(arg, get))
        name = node[1]
        if name == "SUM":
            return float(sum(values))
        if name == "COUNT":
            return float(len(values))
        if name == "AVERAGE":
            if not values:
                raise _Fail("#DIV/0!")
            return sum(values) / len(values)
        return (min if name == "MIN" else max)(values) if values else 0.0
    left, right = _evaluate(node[1], get), _evaluate(node[2], get)
    if kind == "+":
        return left + right
    if kind == "-":
        return left - right
    if kind == "*":
        return left * right
    if right == 0:
        raise _Fail("#DIV/0!")
    return left / right


def compute(cells: dict[tuple[int, int], tuple[Any, str | None]]) -> dict[tuple[int, int], Any]:
    """The value of every cell of a sheet, ``cells`` mapping (row, col) to (value, formula)."""
    done: dict[tuple[int, int], Any] = {}
    active: set[tuple[int, int]] = set()

    def get(row: int, col: int) -> Any:
        key = (row, col)
        if key in done:
            return done[key]
        value, formula = cells.get(key, (None, None))
        if formula is None:
            done[key] = value
            return value
        if key in active:
            return "#CYCLE!"
        active.add(key)
        try:
            result: Any = number(_evaluate(parse_formula(formula), get))
        except _Fail as exc:
            result = str(exc)
        except FormulaError:
            result = "#ERROR!"
        active.discard(key)
        done[key] = result
        return result

    for key in cells:
        get(*key)
    return {key: done[key] for key in cells}


def shift_formula(formula: str, at: int) -> str:
    """A formula after a row is inserted at row ``at``: references at or below it move down one, and a
    range grows when the row falls strictly inside it (first row < at <= last row)."""
    def ref_row(row: int) -> int:
        return row + 1 if row >= at else row

    def repl(m: re.Match[str]) -> str:
        if m.group("r2"):
            r1, r2 = int(m.group("r1")), int(m.group("r2"))
            new1 = ref_row(r1)
            new2 = r2 + 1 if r2 >= at else r2
            return f"{m.group('c1')}{new1}:{m.group('c2')}{new2}"
        return f"{m.group('c1')}{ref_row(int(m.group('r1')))}"

    head, body = formula[:1], formula[1:]
    return head + re.sub(r"(?<![A-Z])(?P<c1>[A-Z]{1,2})(?P<r1>[0-9]+)(?::(?P<c2>[A-Z]{1,2})(?P<r2>[0-9]+))?",
                         repl, body.upper())
