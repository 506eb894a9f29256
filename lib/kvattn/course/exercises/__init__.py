"""Checkers for the course's exercises: ``check(name, your_function)``.

Every exercise asks the reader to write one function that the chapter teaches. :func:`check`
calls it on seeded random inputs and on edge cases, compares each result with the course's
reference implementation (float64, relative tolerance 1e-6 unless an exercise says otherwise),
and on the first disagreement says which case failed, how, and — when the wrong result matches a
known mistake (a transposed matrix, a missing scale, σ on the wrong factor, …) — what the mistake
most likely is. Inputs are float64 tensors (and a few lists and numbers); the reader's function
must not modify them, and must return within a time limit (30 s per call unless ``check`` is told
otherwise).

>>> from kvattn.course.exercises import check, describe
>>> describe("kv_memory")          # the task, the signature and the shapes
>>> check("kv_memory", my_kv_memory)
✓ kv_memory: 6 cases agree (largest difference 2.2e-16)

:data:`EXERCISES` lists the exercises by name; each chapter's exercises are in
``EXERCISES[name].chapter`` order. The references reuse the library where it has the function
(the checkers then also test the reader against the code the book's figures come from).

The package holds one module per chapter (``ch01`` … ``ch11``), each registering its
exercises into :data:`EXERCISES`; the checking machinery is in ``_checker``.
"""

from . import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11  # noqa: F401
from ._checker import (
    EXERCISES,
    Case,
    Exercise,
    ExerciseFailed,
    Mistake,
    Passed,
    chapter_exercises,
    check,
    describe,
)

__all__ = [
    "EXERCISES",
    "Case",
    "Exercise",
    "ExerciseFailed",
    "Mistake",
    "Passed",
    "chapter_exercises",
    "check",
    "describe",
]
