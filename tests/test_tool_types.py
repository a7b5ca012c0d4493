"""Tool parameters of standard types -- datetime, date, time, UUID, Path, Enum, Literal,
Annotated limits, and what pydantic's TypeAdapter knows -- get a schema, are validated, and
reach the function as the annotated Python values."""

from __future__ import annotations

import datetime
import decimal
import enum
import pathlib
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Annotated, Literal

import annotated_types as at
import pytest

from nbagent import tool

pydantic = pytest.importorskip("pydantic")
ROOT = Path(__file__).resolve().parents[1]


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


seen: dict = {}


@tool
def book(when: datetime.datetime, day: datetime.date, at_: datetime.time, ref: uuid.UUID, folder: pathlib.Path,
         colour: Colour, size: Literal["S", "M", "L"],
         guests: Annotated[int, at.Ge(1), at.Le(8)],
         name: Annotated[str, pydantic.Field(min_length=2, max_length=5, pattern=r"^[a-z]+$", description="Who.")],
         share: Annotated[float, at.Gt(0), at.Lt(1)] = 0.5,
         tags: Annotated[list[str], at.MaxLen(2)] = (),
         step: Annotated[float, at.MultipleOf(0.1)] = 0.3,
         price: decimal.Decimal = decimal.Decimal("1.5")) -> str:
    """Book a table."""
    seen.update(locals())
    return "ok"


GOOD = {"when": "2026-12-01T15:30:00+00:00", "day": "2026-12-24", "at_": "19:30", "ref": str(uuid.UUID(int=7)),
        "folder": "data/out", "step": 0.3, "colour": "blue", "size": "M", "guests": 4, "name": "ana", "price": "2.25"}


def props():
    return book.input_schema["properties"]


def test_each_type_gets_the_schema_pydantic_would_give_it():
    p = props()
    assert p["when"] == {"type": "string", "format": "date-time"}
    assert p["day"] == {"type": "string", "format": "date"}
    assert p["at_"] == {"type": "string", "format": "time"}
    assert p["ref"] == {"type": "string", "format": "uuid"}
    assert p["folder"] == {"type": "string", "format": "path"}
    assert p["colour"] == {"type": "string", "enum": ["red", "blue"]}
    assert p["size"] == {"type": "string", "enum": ["S", "M", "L"]}
    assert p["guests"] == {"type": "integer", "minimum": 1, "maximum": 8}
    assert p["name"] == {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$",
                         "description": "Who."}
    assert p["share"] == {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.5}
    assert p["tags"]["maxItems"] == 2
    assert p["price"]["anyOf"] == pydantic.TypeAdapter(decimal.Decimal).json_schema()["anyOf"]  # from TypeAdapter
    for name in ("when", "day", "ref", "folder", "guests", "name", "size", "colour"):
        assert pydantic.TypeAdapter(book._hints[name]).json_schema().items() >= {
            k: v for k, v in p[name].items() if k != "description"}.items(), name


async def test_valid_arguments_arrive_as_python_values():
    out = await book.run(dict(GOOD))
    assert not out.is_error, out.text
    assert seen["when"] == datetime.datetime(2026, 12, 1, 15, 30, tzinfo=datetime.timezone.utc)
    assert seen["day"] == datetime.date(2026, 12, 24) and seen["at_"] == datetime.time(19, 30)
    assert seen["ref"] == uuid.UUID(int=7) and seen["folder"] == pathlib.Path("data/out")
    assert seen["colour"] is Colour.BLUE and seen["price"] == decimal.Decimal("2.25")


@pytest.mark.parametrize("field, value, says", [
    ("when", "yesterday", "expected a date-time string"),
    ("day", "2026-13-01", "expected a date string"),
    ("ref", "not-a-uuid", "expected a uuid string"),
    ("colour", "green", "must be one of"),
    ("size", "XL", "must be one of"),
    ("guests", 0, "must be >= 1"),
    ("guests", 9, "must be <= 8"),
    ("share", 1.0, "must be < 1"),
    ("name", "a", "needs at least 2 characters"),
    ("name", "abcdef", "allows at most 5 characters"),
    ("name", "Ana", "must match the pattern"),
    ("tags", ["a", "b", "c"], "allows at most 2 items"),
    ("step", 0.25, "must be a multiple of 0.1"),
    ("price", "lots", "Invalid arguments"),
])
async def test_bad_arguments_are_refused_with_a_reason_the_model_can_use(field, value, says):
    seen.clear()
    out = await book.run({**GOOD, field: value})
    assert out.is_error and says in out.text, out.text
    assert field in out.text and not seen  # names the argument; the function never ran


def test_without_pydantic_the_standard_types_still_get_schemas_and_checks():
    code = ("import sys; sys.modules['pydantic'] = None\n"
            "import datetime, uuid, asyncio, decimal\n"
            "from nbagent import tool\n"
            "@tool\n"
            "def f(when: datetime.datetime, ref: uuid.UUID, price: decimal.Decimal = None) -> str:\n"
            "    return type(when).__name__ + ' ' + type(ref).__name__ + ' ' + repr(price)\n"
            "p = f.input_schema['properties']\n"
            "print(p['when']['format'], p['ref']['format'], p['price'])\n"
            "print(asyncio.run(f.run({'when': '2026-01-02T03:04:05', 'ref': str(uuid.UUID(int=1)), 'price': 2})).text)\n"
            "print(asyncio.run(f.run({'when': 'soon', 'ref': 'x'})).text)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    first, second, third = done.stdout.splitlines()
    assert first == "date-time uuid {'default': None}"  # Decimal: no schema without pydantic, passed as it is
    assert second == "datetime UUID 2"
    assert "expected a date-time string" in third and "expected a uuid string" in third
