"""The schemas of the files the course reads, and the one reader that checks a file against its
schema before anything uses it.

Every kind of file in :data:`KINDS` has a JSON Schema (draft 2020-12) in ``kvattn/schemas/``,
shipped as package data, checked with the ``jsonschema`` library: plans (``data/plans``),
recipes (``data/recipes``), shipped records (the collapse hunt and its studies, trajectories,
designed experiments), benchmark results, the corpora record, and a checkpoint's
``config.json``, ``trainer_state.json`` and ``provenance.json``. A damaged or hand-edited file
is refused by :func:`read_json` with a :class:`SchemaError` that names the file, the place in it
(a JSON path such as ``$.runs.base.changes``) and what was expected, before any work is done
with it.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import jsonschema
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

#: The kinds of file with a schema (``kvattn/schemas/<kind>.json``).
KINDS = (
    "plan_hunt",
    "plan_experiments",
    "plan_study",
    "recipe",
    "hunt_record",
    "trajectory",
    "experiment",
    "benchmark",
    "corpora",
    "config",
    "trainer_state",
    "provenance",
)
#: Kinds whose files may hold NaN or infinity (written by torch-side code, not by a record
#: writer, which refuses them): every other kind refuses them as hand edits.
NAN_ALLOWED = ("config", "trainer_state")
_FOLDER = Path(__file__).resolve().parent / "schemas"
_RESTORE = (
    "restore it (in a clone: git checkout -- FILE; in an install: reinstall kvattn) or remake it "
    "(kvattn-reproduce list names the command of each shipped file)"
)


class SchemaError(ValueError):
    """A file that is not what its kind promises. ``path``: the file; ``field``: where in it
    (a JSON path, ``$`` for the whole); ``expected``: what was expected there, in words."""

    def __init__(self, path: Path | str, field: str, expected: str) -> None:
        self.path, self.field, self.expected = str(path), field, expected
        super().__init__(f"{path}: at {field}: {expected}")


@functools.cache
def _registry() -> Registry:
    resources = []
    for file in sorted(_FOLDER.glob("*.json")):
        contents = json.loads(file.read_text(encoding="utf-8"))
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


@functools.cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    schema = _registry().contents(f"kvattn:{kind}")
    return jsonschema.Draft202012Validator(schema, registry=_registry())


def schema(kind: str) -> dict:
    """The JSON Schema of ``kind`` (one of :data:`KINDS`), as a dict.

    Raises
    ------
    ValueError
        An unknown ``kind``.
    """
    return dict(_validator(kind).schema)


def validate(obj: object, kind: str, where: Path | str) -> object:
    """``obj`` (parsed JSON) if it matches the schema of ``kind``, else :class:`SchemaError`
    naming ``where`` (the file), the place of the most relevant violation and what the schema
    expected there.

    Raises
    ------
    SchemaError
        As above (a ``ValueError``).
    ValueError
        An unknown ``kind``.
    """
    error = best_match(_validator(kind).iter_errors(obj))
    if error is None:
        return obj
    field = error.json_path
    expected = error.message
    if len(expected) > 200:  # a whole nested value quoted: say what it is instead
        expected = f"{type(error.instance).__name__} does not match ({error.validator})"
    if field == "$" and error.validator == "type":
        expected = f"must hold a JSON object ({expected})"
    described = error.schema.get("description") if isinstance(error.schema, dict) else None
    if described:
        expected += f"; expected {described}"
    title = _validator(kind).schema.get("title", kind)
    raise SchemaError(where, field, f"{expected} (schema: {title})")


def _refuse_constant(name: str) -> float:
    raise ValueError(name)


def read_json(path: str | os.PathLike, kind: str) -> object:
    """Read the UTF-8 JSON file ``path`` and check it against the schema of ``kind`` (one of
    :data:`KINDS`) before returning it.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    SchemaError
        (a ``ValueError``) Not UTF-8, not valid JSON (a truncated file: the message gives the line
        and column and says how to restore it), NaN or infinity in a kind outside
        :data:`NAN_ALLOWED`, or a value the schema refuses (as :func:`validate`).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"no file at {path}") from None
    except OSError as err:
        raise SchemaError(path, "$", f"cannot be read: {err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SchemaError(path, "$", f"is not UTF-8 text (byte offset {err.start})") from None
    hook = {} if kind in NAN_ALLOWED else {"parse_constant": _refuse_constant}
    try:
        obj = json.loads(text, **hook)
    except json.JSONDecodeError as err:
        raise SchemaError(
            path,
            f"line {err.lineno}, column {err.colno}",
            f"is not valid JSON ({err.msg}): the file is damaged or cut short; "
            + _RESTORE.replace("FILE", str(path)),
        ) from None
    except ValueError as err:
        raise SchemaError(
            path, "$", f"holds {err}, which a record never holds (JSON writes a NaN as null)"
        ) from None
    return validate(obj, kind, path)


@functools.lru_cache(maxsize=512)
def _checked(path: str, mtime_ns: int, size: int, kind: str) -> None:
    read_json(path, kind)


def check_file(path: str | os.PathLike, kind: str) -> Path:
    """``path`` once its file has passed :func:`read_json` (remembered until the file changes:
    its modification time or size), for the locators that return a path to read later.

    Raises
    ------
    FileNotFoundError, SchemaError
        As :func:`read_json`.
    """
    path = Path(path)
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"no file at {path}") from None
    _checked(str(path), stat.st_mtime_ns, stat.st_size, kind)
    return path
