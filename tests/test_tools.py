"""Tools: schemas from type hints, docstrings, validation, running, result formatting."""

from __future__ import annotations

import asyncio
import enum
import json
import threading
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest

from nbagent.loop import tools as tools_mod
from nbagent.core.errors import NbagentError
from nbagent.providers.base import ToolSpec
from nbagent.loop.tools import Tool, ToolOutput, format_result, parse_docstring, to_tools, tool


def props(t: Tool) -> dict:
    return t.input_schema["properties"]


# --- schemas -------------------------------------------------------------------------


def test_schema_scalars_and_required():
    @tool
    def f(s: str, i: int, x: float, b: bool, n: None, anything, a: Any = 1):
        """Scalars."""

    assert f.input_schema == {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "n": {"type": "null"},
            "anything": {},
            "a": {"default": 1},
        },
        "required": ["s", "i", "x", "b", "n", "anything"],
        "additionalProperties": False,
    }


def test_schema_containers():
    @tool
    def f(
        a: list[int],
        b: list,
        c: dict,
        d: dict[str, float],
        e: tuple,
        g: tuple[int, ...],
        h: tuple[str, int],
        s: set[str],
        nested: list[list[str]],
    ):
        pass

    assert props(f) == {
        "a": {"type": "array", "items": {"type": "integer"}},
        "b": {"type": "array"},
        "c": {"type": "object"},
        "d": {"type": "object", "additionalProperties": {"type": "number"}},
        "e": {"type": "array"},
        "g": {"type": "array", "items": {"type": "integer"}},
        "h": {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "integer"}],
            "minItems": 2,
            "maxItems": 2,
        },
        "s": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "nested": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
    }


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def test_schema_literal_enum_optional_defaults():
    @tool
    def t(
        mode: Literal["fast", "slow"],
        color: Color,
        level: Level = Level.HIGH,
        mixed: Literal[1, "a"] = 1,
        opt: Optional[int] = None,
        opt2: str | None = "x",
        req_opt: Optional[str] = ...,  # type: ignore[assignment]
        ratio: float = 0.5,
        flag: bool = False,
        tags: list[str] = ["a"],  # noqa: B006
    ):
        pass

    p = props(t)
    assert p["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert p["color"] == {"type": "string", "enum": ["red", "green"]}
    assert p["level"] == {"type": "integer", "enum": [1, 2], "default": 2}
    assert p["mixed"] == {"enum": [1, "a"], "default": 1}
    assert p["opt"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert p["opt2"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": "x"}
    assert p["ratio"] == {"type": "number", "default": 0.5}
    assert p["flag"] == {"type": "boolean", "default": False}
    assert p["tags"] == {"type": "array", "items": {"type": "string"}, "default": ["a"]}
    assert "req_opt" not in t.input_schema["required"]  # has a default (Ellipsis, not JSON)
    assert "default" not in p["req_opt"]
    assert t.input_schema["required"] == ["mode", "color"]


def test_optional_without_default_is_required():
    @tool
    def f(x: Optional[int]):
        pass

    assert f.input_schema["required"] == ["x"]
    assert props(f)["x"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


@dataclass
class Point:
    """A point.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
    """

    x: int
    y: int = 0


@dataclass
class Shape:
    name: str
    points: list[Point] = field(default_factory=list)
    origin: Optional[Point] = None


def test_schema_dataclass_nested():
    @tool
    def area(shape: Shape, scale: float = 1.0) -> float:
        """Area of a shape."""
        return 0.0

    point = {
        "type": "object",
        "properties": {
            "x": {"type": "integer", "description": "Horizontal position."},
            "y": {"type": "integer", "default": 0, "description": "Vertical position."},
        },
        "required": ["x"],
        "additionalProperties": False,
    }
    assert props(area)["shape"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "points": {"type": "array", "items": point},
            "origin": {"anyOf": [point, {"type": "null"}], "default": None},
        },
        "required": ["name"],
        "additionalProperties": False,
    }


class Movie(TypedDict, total=False):
    title: str
    year: int


class Book(TypedDict):
    title: str
    pages: int


def test_schema_typeddict():
    @tool
    def f(m: Movie, b: Book):
        pass

    assert props(f)["m"] == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
        "required": [],
        "additionalProperties": False,
    }
    assert props(f)["b"]["required"] == ["title", "pages"]


def test_schema_annotated_description():
    @tool
    def f(x: Annotated[int, "How many."]):
        pass

    assert props(f)["x"] == {"type": "integer", "description": "How many."}


class Weird:
    pass


def test_unsupported_annotations_do_not_crash():
    class Local:
        pass

    @tool
    def f(a: Weird, b: NoSuchName, c: list[Weird], d: complex = 1j, e: Local = None):  # noqa: F821
        pass

    assert props(f)["a"] == {}
    assert props(f)["b"] == {}  # unresolvable: no constraint, the others still resolve
    assert props(f)["c"] == {"type": "array", "items": {}}
    assert "default" not in props(f)["d"]  # complex default is not JSON: not recorded
    assert props(f)["e"] == {"default": None}  # a local class under `from __future__ import annotations`
    assert f.input_schema["required"] == ["a", "b", "c"]


def test_kwargs_allows_extra_and_args_skipped():
    @tool
    def f(a: int, *rest, **extra):
        pass

    assert f.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
    }
    assert f.validate({"a": 1, "zzz": 2}) == []


# --- pydantic -----------------------------------------------------------------------


try:
    import pydantic
except ImportError:  # pragma: no cover
    pydantic = None

if pydantic is not None:

    class Address(pydantic.BaseModel):
        city: str

    class User(pydantic.BaseModel):
        name: str
        age: int = 0
        address: Address | None = None


@pytest.mark.skipif(pydantic is None, reason="pydantic not installed")
async def test_pydantic_schema_and_conversion():
    @tool
    def register(user: User) -> User:
        """Register a user."""
        return user

    s = props(register)["user"]
    assert s == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "default": 0},
            "address": {
                "anyOf": [
                    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                    {"type": "null"},
                ],
                "default": None,
            },
        },
        "required": ["name"],
    }

    out = await register.run({"user": {"name": "Ann", "address": {"city": "Oslo"}}})
    assert not out.is_error, out.text
    assert isinstance(out.value, User)
    assert out.value.address.city == "Oslo"
    assert json.loads(out.text) == {"name": "Ann", "age": 0, "address": {"city": "Oslo"}}

    bad = await register.run({"user": {"name": "Ann", "age": "old"}})
    assert bad.is_error and "'user.age': expected integer" in bad.text
    assert format_result(User(name="B")) == '{"name": "B", "age": 0, "address": null}'


# --- docstrings -----------------------------------------------------------------------


def test_google_docstring():
    @tool
    def search(query: str, limit: int = 10) -> list:
        """Search the index
        for documents.

        Longer text that is not part of the description.

        Args:
            query: The text to look for,
                possibly spanning lines.
            limit (int): At most this many results.

        Returns:
            A list of hits.

        Raises:
            ValueError: When the index is missing.
        """
        return []

    assert search.description == "Search the index for documents."
    assert set(props(search)) == {"query", "limit"}
    assert parse_docstring(search.__doc__)[1] == {
        "query": "The text to look for, possibly spanning lines.",
        "limit": "At most this many results.",
    }
    assert props(search)["query"]["description"] == "The text to look for, possibly spanning lines."
    assert props(search)["limit"] == {"type": "integer", "default": 10, "description": "At most this many results."}


def test_numpy_docstring():
    @tool
    def f(a: int, b: str, c=None):
        """Do a thing.

        Parameters
        ----------
        a : int
            The first one.
            Continued.
        b : str
            The second.
        c
            Untyped.

        Returns
        -------
        int
            Nothing to see.
        """

    assert f.description == "Do a thing."
    assert props(f)["a"]["description"] == "The first one. Continued."
    assert props(f)["b"]["description"] == "The second."
    assert props(f)["c"] == {"description": "Untyped.", "default": None}


def test_sphinx_docstring():
    @tool
    def f(a: int, b: str):
        """Sphinx style.

        :param a: The first
            argument.
        :param str b: The second.
        :type a: int
        :returns: nothing
        """

    assert f.description == "Sphinx style."
    assert props(f)["a"]["description"] == "The first argument."
    assert props(f)["b"]["description"] == "The second."


def test_docstring_without_blank_line_and_missing():
    summary, params = parse_docstring("Add two numbers.\nArgs:\n    a: first\n    b: second")
    assert summary == "Add two numbers."
    assert params == {"a": "first", "b": "second"}
    assert parse_docstring("") == ("", {})

    @tool
    def nodoc(x: int):
        pass

    assert nodoc.description == ""


# --- names, decorator forms, repr ---------------------------------------------------------


def test_decorator_forms_and_direct_call():
    @tool
    def a(x: int) -> int:
        """Double."""
        return 2 * x

    @tool()
    def b(x: int) -> int:
        return x + 1

    @tool(name="renamed", description="Custom.", requires_approval=True)
    def c(x: int) -> int:
        """Ignored docstring."""
        return x

    @tool("by_position")
    def d() -> str:
        return "d"

    assert all(isinstance(t, Tool) for t in (a, b, c, d))
    assert a(3) == 6 and b(x=1) == 2 and c(5) == 5 and d() == "d"
    assert a.__name__ == "a" and a.__doc__ == "Double."
    assert (a.name, a.requires_approval) == ("a", False)
    assert (c.name, c.description, c.requires_approval) == ("renamed", "Custom.", True)
    assert d.name == "by_position"
    assert a.spec == ToolSpec("a", "Double.", a.input_schema)
    assert repr(a) == "Tool(name='a', params=['x'])"
    assert repr(c) == "Tool(name='renamed', params=['x'], requires_approval=True)"


async def test_async_decorated_direct_call():
    @tool
    async def slow(x: int) -> int:
        await asyncio.sleep(0)
        return x * 10

    assert await slow(2) == 20


def test_invalid_names():
    with pytest.raises(NbagentError) as ei:
        tool(lambda x: x)
    assert ei.value.kind == "config" and "<lambda>" in str(ei.value)
    for bad in ("has space", "", "x" * 65, "dot.name", "ünï"):
        with pytest.raises(NbagentError):
            Tool(bad, "", None, print)
    assert Tool("ok-name_1", "", None, print).name == "ok-name_1"
    assert tool(name="named")(lambda x: x).name == "named"


def test_hand_built_tool():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    t = Tool("inc", "Increment.", schema, lambda a: a + 1)
    assert t.spec == ToolSpec("inc", "Increment.", schema)
    out = asyncio.run(t.run({"a": 1}))
    assert (out.text, out.value, out.is_error) == ("2", 2, False)
    assert t(4) == 5
    empty = Tool("noop", None, None, lambda: None)
    assert empty.input_schema == {"type": "object", "properties": {}}
    assert empty.description == ""


def test_to_tools():
    @tool
    def a():
        pass

    def b():
        pass

    got = to_tools([a, b])
    assert list(got) == ["a", "b"] and got["a"] is a and isinstance(got["b"], Tool)
    assert to_tools(None) == {}
    assert list(to_tools(b)) == ["b"]
    with pytest.raises(NbagentError) as ei:
        to_tools([a, tool(name="a")(b)])
    assert ei.value.kind == "config" and "'a'" in str(ei.value)
    with pytest.raises(NbagentError):
        to_tools([42])


# --- validation ---------------------------------------------------------------------------


@tool
def calc(op: Literal["add", "sub"], a: int, b: float = 1.0, tags: list[str] | None = None) -> float:
    """Calculate."""
    return a + b if op == "add" else a - b


def test_validate_ok():
    assert calc.validate({"op": "add", "a": 1}) == []
    assert calc.validate({"op": "sub", "a": 1, "b": 2, "tags": None}) == []
    assert calc.validate({"op": "sub", "a": 1, "b": 2.5, "tags": ["x"]}) == []


def test_validate_problems():
    assert calc.validate({"a": 1}) == ["missing required argument 'op'"]
    assert calc.validate({"op": "add", "a": "1"}) == ["'a': expected integer, got string \"1\""]
    assert calc.validate({"op": "add", "a": True}) == ["'a': expected integer, got boolean true"]
    assert calc.validate({"op": "add", "a": 1.5}) == ["'a': expected integer, got number 1.5"]
    assert calc.validate({"op": "add", "a": 1, "b": False}) == ["'b': expected number, got boolean false"]
    assert calc.validate({"op": "mul", "a": 1}) == ["'op': must be one of \"add\", \"sub\"; got \"mul\""]
    assert calc.validate({"op": "add", "a": 1, "c": 3}) == [
        "unexpected argument 'c' (allowed: 'op', 'a', 'b', 'tags')"
    ]
    assert calc.validate({"op": "add", "a": 1, "tags": [1]}) == [
        "'tags': expected array or null, got array [1]"
    ]
    assert len(calc.validate({"c": 1})) == 3  # op, a missing; c unexpected
    assert calc.validate([1]) == ["arguments must be a JSON object, got array"]


def test_validate_nested_paths():
    @tool
    def f(shape: Shape, pair: tuple[int, str]):
        pass

    problems = f.validate({"shape": {"name": "s", "points": [{"x": 1}, {"x": "2", "z": 0}]}, "pair": [1]})
    assert problems == [
        "'shape.points[1].x': expected integer, got string \"2\"",
        "'shape.points[1]': unexpected property 'z' (allowed: 'x', 'y')",
        "'pair': needs at least 2 items, got 1",
    ]
    assert f.validate({"shape": {}, "pair": [1, "a"]}) == ["'shape': missing required property 'name'"]


def test_enum_is_type_strict():
    @tool
    def f(x: Literal[1, 2]):
        pass

    assert f.validate({"x": 1}) == []
    assert f.validate({"x": True}) != []


# --- running ---------------------------------------------------------------------------------


async def test_run_sync_in_thread_and_async():
    main = threading.get_ident()
    seen = {}

    @tool
    def sync_tool(x: int) -> dict:
        seen["thread"] = threading.get_ident()
        return {"x": x, "ok": True}

    @tool
    async def async_tool(x: int) -> list:
        await asyncio.sleep(0)
        return [x, None]

    out = await sync_tool.run({"x": 2})
    assert isinstance(out, ToolOutput)
    assert out == ToolOutput(text='{"x": 2, "ok": true}', is_error=False, value={"x": 2, "ok": True}, error="")
    assert seen["thread"] != main
    out = await async_tool.run({"x": 3})
    assert (out.text, out.value) == ("[3, null]", [3, None])


async def test_run_invalid_args_does_not_call_handler():
    called = []

    @tool
    def f(a: int) -> int:
        called.append(a)
        return a

    out = await f.run({"a": "x", "b": 1})
    assert out.is_error and not called
    assert out.text == out.error
    assert out.text.startswith("Invalid arguments for tool 'f': ")
    assert "'a': expected integer" in out.text and "unexpected argument 'b'" in out.text
    assert (await f.run(None)).text == "Invalid arguments for tool 'f': missing required argument 'a'"


async def test_run_exception_becomes_error_result():
    @tool
    def boom(x: int) -> int:
        raise ValueError(f"bad x {x}")

    @tool
    async def aboom() -> None:
        raise KeyError("k")

    out = await boom.run({"x": 1})
    assert out == ToolOutput(text="ValueError: bad x 1", is_error=True, value=None, error="ValueError: bad x 1")
    out = await aboom.run({})
    assert out.is_error and out.text == "KeyError: 'k'"


async def test_run_sync_returning_awaitable():
    async def inner():
        return "done"

    t = Tool("wrapped", "", None, lambda: inner())
    assert (await t.run({})).text == "done"


async def test_dataclass_argument_conversion():
    got = {}

    @tool
    def draw(shape: Shape, at: tuple[int, int] = (0, 0), pts: list[Point] | None = None) -> str:
        got.update(shape=shape, at=at, pts=pts)
        return shape.name

    out = await draw.run(
        {"shape": {"name": "tri", "points": [{"x": 1, "y": 2}, {"x": 3}], "origin": {"x": 9}},
         "at": [4, 5], "pts": [{"x": 7}]}
    )
    assert not out.is_error, out.text
    assert got["shape"] == Shape("tri", [Point(1, 2), Point(3, 0)], Point(9, 0))
    assert got["at"] == (4, 5)
    assert got["pts"] == [Point(7)]


async def test_enum_argument_conversion():
    @tool
    def paint(c: Color, levels: list[Level] | None = None):
        return c, levels

    out = await paint.run({"c": "red", "levels": [2]})
    assert out.value == (Color.RED, [Level.HIGH])
    assert out.text == '["red", [2]]'


# --- formatting ---------------------------------------------------------------------------------


def test_format_scalars_and_structures():
    assert format_result("plain") == "plain"
    assert format_result(None) == "null"
    assert format_result(3) == "3" and format_result(2.5) == "2.5" and format_result(True) == "true"
    assert format_result({"a": [1, "é"]}) == '{"a": [1, "é"]}'
    assert format_result((1, 2)) == "[1, 2]"
    assert format_result(Point(1, 2)) == '{"x": 1, "y": 2}'
    assert format_result({"p": Point(1)}) == '{"p": {"x": 1, "y": 0}}'

    class Obj:
        def __str__(self):
            return "custom"

    assert format_result(Obj()) == "custom"
    assert format_result({"o": Obj()}) == '{"o": "custom"}'


def test_format_dataframe_and_series():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": range(1234), "b": ["x"] * 1234, "c": 1.5, "d": 0, "e": True})
    text = format_result(df)
    first, rest = text.split("\n", 1)
    assert first == "DataFrame: 1,234 rows x 5 columns"
    assert "..." in rest
    assert len(rest.splitlines()) < 70  # max_rows keeps it compact
    small = format_result(pd.DataFrame({"x": [1, 2]}))
    assert small == "DataFrame: 2 rows x 1 columns\n   x\n0  1\n1  2"
    s = format_result(pd.Series([1, 2], name="n"))
    assert s.splitlines()[0] == "Series 'n': 2 rows, dtype int64"


def test_truncation_cap(monkeypatch):
    text = format_result("x" * 25_000)
    assert text == "x" * 20_000 + "\n… [truncated 5,000 chars]"
    assert format_result("abcdef", max_chars=4) == "abcd\n… [truncated 2 chars]"
    assert format_result("abcd", max_chars=4) == "abcd"
    monkeypatch.setattr(tools_mod, "DEFAULT_MAX_RESULT_CHARS", 10)
    assert format_result("y" * 12) == "y" * 10 + "\n… [truncated 2 chars]"


async def test_truncation_per_tool_and_dataframe():
    pd = pytest.importorskip("pandas")

    @tool(max_result_chars=100)
    def big() -> Any:
        return pd.DataFrame({"a": range(10_000), "b": range(10_000)})

    out = await big.run({})
    assert out.text.startswith("DataFrame: 10,000 rows x 2 columns\n")
    assert out.text.endswith(" chars]") and "… [truncated " in out.text
    assert len(out.text.split("\n… [truncated")[0]) == 100
    assert isinstance(out.value, pd.DataFrame)


def test_broken_str_does_not_raise():
    class Bad:
        def __str__(self):
            raise RuntimeError("no")

    assert format_result(Bad()) == "[a Bad that cannot be shown as text: RuntimeError: no]"


def test_pandas_not_imported_for_plain_results():
    import subprocess
    import sys

    code = (
        "import sys; from nbagent.loop.tools import format_result, tool\n"
        "format_result({'a': 1}); format_result(object())\n"
        "print('pandas' in sys.modules, 'pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    assert out.stdout.split() == ["False", "False"]


def test_runtime_annotations_without_future_import():
    ns: dict = {}
    exec(
        "from typing import Optional, Literal\n"
        "def f(a: int, b: 'list[str]', c: Optional[float] = None, d: int | None = None,\n"
        "      e: Literal['x'] = 'x', g: list[dict] = None):\n"
        "    '''Doc.'''\n",
        ns,
    )
    t = tool(ns["f"])
    assert t.input_schema == {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "array", "items": {"type": "string"}},
            "c": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "d": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "e": {"type": "string", "enum": ["x"], "default": "x"},
            "g": {"type": "array", "items": {"type": "object"}, "default": None},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }


async def test_async_callable_object_handler_runs_on_loop():
    class Handler:
        async def __call__(self, x: int) -> int:
            return x + 1

    t = Tool("obj", "", {"type": "object", "properties": {"x": {"type": "integer"}}}, Handler())
    assert (await t.run({"x": 1})).value == 2
    out = await t.run("not a dict")  # type: ignore[arg-type]
    assert out.is_error and "arguments must be a JSON object, got string" in out.text
