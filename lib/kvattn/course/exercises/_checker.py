"""The checking machinery behind :func:`kvattn.course.exercises.check`: the exercise records, the
registry :data:`EXERCISES` that the chapter modules fill, the comparison with the reference, the
diagnosis of a wrong result, the time limit, and the input helpers the chapters share."""

from __future__ import annotations

import copy
import ctypes
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

Tensor = torch.Tensor


@dataclass(frozen=True)
class Case:
    """One input to an exercise: a label for messages, positional arguments, and for an exercise
    whose answer is itself a function (a layer built from weights), the arguments ``apply_to``
    that :func:`check` calls the returned function with before comparing."""

    label: str
    args: tuple
    apply_to: tuple = ()


@dataclass(frozen=True)
class Mistake:
    """A plausible wrong implementation and the explanation shown when the reader's output
    matches it."""

    explanation: str
    fn: Callable


@dataclass(frozen=True)
class Exercise:
    """An implement-this-function exercise.

    ``signature`` and ``task`` are what :func:`describe` prints; ``cases(gen)`` builds the inputs
    from a seeded generator; ``reference`` gives the right answer; ``mistakes`` are wrong
    variants used to explain a failure. Tolerances are for ``torch.allclose`` in float64.
    ``outputs`` names the elements of a tuple result (the stages of a pipeline, in order), so that
    a failure names the first stage that differs.
    """

    name: str
    chapter: int
    signature: str
    task: str
    reference: Callable
    cases: Callable[[torch.Generator], list[Case]]
    mistakes: tuple[Mistake, ...] = ()
    rtol: float = 1e-6
    atol: float = 1e-9
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Passed:
    """What :func:`check` returns when every case agrees; its repr is the one-line verdict."""

    name: str
    n_cases: int
    largest_difference: float

    def __repr__(self) -> str:
        return (
            f"✓ {self.name}: {self.n_cases} cases agree "
            f"(largest difference {self.largest_difference:.2g})"
        )


class ExerciseFailed(AssertionError):
    """Raised by :func:`check` when the reader's function disagrees with the reference. The
    message names the case, the difference, and the most likely mistake when one is known."""


EXERCISES: dict[str, Exercise] = {}
"""Every exercise by name, in the book's order (the chapter modules register theirs on import)."""


def register(*exercises: Exercise) -> None:
    """Add exercises to :data:`EXERCISES`, in the order given (a chapter's order in the book).
    Nothing is added when any of them is refused.

    Raises
    ------
    TypeError
        An argument is not an :class:`Exercise`.
    ValueError
        A name is already registered, or given twice (two exercises would share a checker and a
        label in the book).
    """
    seen: dict[str, int] = {name: ex.chapter for name, ex in EXERCISES.items()}
    for ex in exercises:
        if not isinstance(ex, Exercise):
            raise TypeError(f"register takes Exercise records, got {type(ex).__name__}")
        if ex.name in seen:
            raise ValueError(
                f"exercise name {ex.name!r} (chapter {ex.chapter}) is already registered "
                f"(chapter {seen[ex.name]}); names must be unique"
            )
        seen[ex.name] = ex.chapter
    EXERCISES.update((ex.name, ex) for ex in exercises)


# ---------------------------------------------------------------------------------------------
# Comparison


def _describe_value(x: object) -> str:
    if isinstance(x, Tensor):
        where = "" if x.device.type == "cpu" else f" on device '{x.device}'"
        return f"tensor of shape {tuple(x.shape)}{where}"
    if type(x).__module__ == "numpy" and hasattr(x, "shape"):
        return f"numpy {type(x).__name__} of shape {tuple(x.shape)}"
    if callable(x):
        return getattr(x, "__name__", "a function")
    if isinstance(x, list | tuple | dict):
        return f"{type(x).__name__} of {len(x)} item{'' if len(x) == 1 else 's'}"
    return repr(x)


def _as_number(x: object) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    if isinstance(x, Tensor) and x.ndim == 0 and x.device.type != "meta":
        return float(x)
    return None


def _difference(
    expected: object, got: object, rtol: float, atol: float, names: tuple[str, ...] = ()
) -> tuple[str | None, float]:
    """(None, largest difference) when ``got`` matches ``expected``; else (reason, inf).
    ``names`` label the elements of a tuple (stages, in order): the reason names the first stage
    that differs and the ones before it that agree."""
    if isinstance(expected, tuple):
        if not isinstance(got, tuple | list) or len(got) != len(expected):
            return (
                f"expected a tuple of {len(expected)} values, got {_describe_value(got)}",
                math.inf,
            )
        worst = 0.0
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            reason, diff = _difference(e, g, rtol, atol)
            if reason is not None:
                if not names:
                    return f"element {i} of the tuple: {reason}", math.inf
                agree = f"; {', '.join(names[:i])} agree{'s' if i == 1 else ''}" if i else ""
                return f"stage '{names[i]}' is the first that differs{agree}: {reason}", math.inf
            worst = max(worst, diff)
        return None, worst
    if isinstance(expected, Tensor) and expected.ndim > 0:
        if not isinstance(got, Tensor):
            hint = "; convert it with torch.from_numpy" if type(got).__module__ == "numpy" else ""
            return (
                f"expected a torch.Tensor of shape {tuple(expected.shape)}, got "
                f"{_describe_value(got)}{hint}",
                math.inf,
            )
        if got.device != expected.device:
            what = "a meta tensor has a shape but no values" if got.device.type == "meta" else ""
            return (
                f"your result is a tensor on device '{got.device}', expected one on the inputs' "
                f"device '{expected.device}'" + (f" ({what})" if what else ""),
                math.inf,
            )
        if tuple(got.shape) != tuple(expected.shape):
            return (
                f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}",
                math.inf,
            )
        if not expected.is_floating_point():
            if got.is_floating_point() or got.is_complex():
                return f"expected integer indices ({expected.dtype}), got {got.dtype}", math.inf
            wrong = (got.to(expected.dtype) != expected).nonzero()
            if len(wrong):
                index = tuple(int(i) for i in wrong[0])
                return (
                    f"{len(wrong)} entries differ, first at index {index}: expected "
                    f"{int(expected[index])}, got {int(got[index])}",
                    math.inf,
                )
            return None, 0.0
        got = got.detach()
        if got.is_complex():
            return f"expected real values, got {got.dtype}", math.inf
        if not got.is_floating_point():
            return (
                f"expected floating-point values ({expected.dtype}), got dtype {got.dtype}",
                math.inf,
            )
        if got.dtype in (torch.float16, torch.bfloat16):
            return (
                f"your result is {got.dtype}, too coarse to compare; compute in the inputs' dtype "
                "(float64)",
                math.inf,
            )
        if got.dtype == torch.float32:  # rounding alone reaches ~1e-6; a wrong formula does not
            rtol, atol = max(rtol, 1e-4), max(atol, 1e-6)
        single = got.dtype == torch.float32
        got = got.to(torch.float64)
        if not torch.isfinite(got).all():
            return "your result contains NaN or infinite values", math.inf
        diff = (got - expected).abs()
        if not torch.allclose(got, expected, rtol=rtol, atol=atol):
            index = tuple(int(i) for i in (diff == diff.max()).nonzero()[0])
            return (
                f"values differ: largest difference {float(diff.max()):.3g} at index {index} "
                f"(expected {float(expected[index]):.10g}, got {float(got[index]):.10g})"
                + (" [your result is float32: compared at float32 tolerance]" if single else ""),
                math.inf,
            )
        return None, float(diff.max()) if diff.numel() else 0.0
    e, g = _as_number(expected), _as_number(got)
    if g is None:
        return (
            f"expected a number (a Python float or a 0-d tensor), got {_describe_value(got)}",
            math.inf,
        )
    if not math.isfinite(g):
        return f"expected a finite number, got {g}", math.inf
    if abs(g - e) > atol + rtol * abs(e):
        return f"expected {e:.10g}, got {g:.10g}", math.inf
    return None, abs(g - e)


def _first_change(before: object, after: object, where: str) -> str | None:
    """Where ``after`` differs from its pristine copy ``before`` (tensors, lists, tuples and dicts,
    nested), as a path such as ``argument 1[2]``; None when nothing changed."""
    if isinstance(before, Tensor):
        same = (
            isinstance(after, Tensor)
            and after.shape == before.shape
            and after.dtype == before.dtype
            and torch.equal(after, before)
        )
        return None if same else where
    if isinstance(before, list | tuple):
        if type(after) is not type(before) or len(after) != len(before):
            return where
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            change = _first_change(b, a, f"{where}[{i}]")
            if change is not None:
                return change
        return None
    if isinstance(before, dict):
        if not isinstance(after, dict) or list(after) != list(before):
            return where
        for key, b in before.items():
            change = _first_change(b, after[key], f"{where}[{key!r}]")
            if change is not None:
                return change
        return None
    return None if after is before or after == before else where


class _TimeUp(BaseException):
    """Raised inside the reader's function to stop it when its time is up (a BaseException, so
    that an ``except Exception`` in the reader's code lets it through), and in the caller of a
    call that timed out, with one argument: whether the call is still running."""


#: How long a timed-out call is given to stop (told again and again) before it is abandoned.
_STOP_GRACE_S = 1.0


def _raise_in(thread: threading.Thread, error: type[BaseException] | None) -> None:
    """Raise ``error`` in ``thread`` at its next Python instruction (None: cancel a pending one).
    CPython's PyThreadState_SetAsyncExc, on every platform."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread.ident), None if error is None else ctypes.py_object(error)
    )


def _call_with_time_limit(fn: Callable, args: tuple, seconds: float | None) -> object:
    """``fn(*args)``; after ``seconds``, :class:`_TimeUp` here, whatever ``fn`` does.

    The call runs in a daemon thread that this (the caller's) thread waits for, so that nothing
    the reader's code does can keep ``check`` from returning: a signal raised inside the call
    (the former SIGALRM limit) is swallowed by a bare ``except:`` in a loop, every time. When
    the time is up the call is told to stop (:class:`_TimeUp` raised in it, repeatedly for
    :data:`_STOP_GRACE_S`); one that still runs is abandoned, and ``_TimeUp(True)`` says so.
    The thread gets the caller's grad mode and default device, torch's thread-local settings
    that a reader may have changed."""
    if seconds is None:
        return fn(*args)
    outcome: list = []  # (returned, value or exception), appended once by the worker
    lock = threading.Lock()  # no stop is sent once the outcome is in
    done = threading.Event()
    grad, device = torch.is_grad_enabled(), torch.get_default_device()

    def call() -> None:
        result: tuple = (False, None)
        try:
            torch.set_grad_enabled(grad)
            if torch.get_default_device() != device:
                torch.set_default_device(device)
            result = (True, fn(*args))
        except BaseException as error:  # the reader's error (or a stop): the caller reports it
            result = (False, error)
        finally:
            while not done.is_set():  # a stop sent as fn ended may land here: record it anyway
                try:
                    with lock:
                        if not outcome:
                            outcome.append(result)
                        _raise_in(worker, None)  # no stop pending, and none sent from now on
                    done.set()
                except _TimeUp:
                    pass

    def stop() -> bool:
        """Tell the call to stop until it does or the grace time ends; whether it stopped."""
        end = time.monotonic() + _STOP_GRACE_S
        while not done.is_set() and time.monotonic() < end:
            with lock:
                if not outcome:
                    _raise_in(worker, _TimeUp)
            done.wait(0.05)
        return done.is_set()

    worker = threading.Thread(target=call, name="kvattn check", daemon=True)
    worker.start()
    deadline = time.monotonic() + seconds
    try:
        # short waits: a SIGINT that another thread received (or, on Windows, any) is acted on
        # only when this thread runs Python code again (and Thread.join, interrupted, would
        # take the call for finished)
        while not done.is_set() and (left := deadline - time.monotonic()) > 0:
            done.wait(min(left, 0.1))
    except BaseException:  # KeyboardInterrupt (Kernel → Interrupt) stops the call as well
        stop()
        raise
    with lock:
        finished = bool(outcome)
    if not finished:
        raise _TimeUp(not stop())
    returned, value = outcome[0]
    if returned:
        return value
    raise value


def _check_time_limit(time_limit: object) -> float | None:
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float):
        raise TypeError(
            f"time_limit must be a number of seconds or None, got {type(time_limit).__name__}"
        )
    if not (math.isfinite(time_limit) and time_limit > 0):
        raise ValueError(
            f"time_limit must be a positive finite number of seconds (or None for no limit), "
            f"got {time_limit!r}"
        )
    return float(time_limit)


def _simple_factor(c: float) -> str | None:
    """``c`` written as ±p/q or ±√(p/q) with p, q ≤ 8 (the factors a forgotten ½, 2, √d_k or
    sign produce), or None when it is no such number."""
    sign = "−" if c < 0 else ""
    for q in range(1, 9):
        for p in range(1, 9):
            if math.gcd(p, q) != 1:
                continue
            ratio = str(p) if q == 1 else f"{p}/{q}"
            if math.isclose(abs(c), p / q, rel_tol=1e-6):
                return sign + ratio
            if math.isclose(abs(c), math.sqrt(p / q), rel_tol=1e-6):
                return f"{sign}√{ratio}" if q == 1 else f"{sign}√({ratio})"
    return None


def _generic_hint(expected: object, got: object) -> str | None:
    """A diagnosis for wrong results that match no listed mistake: a simple constant factor off
    (½, 2, √2, −1, …), or a transpose."""
    if not (isinstance(expected, Tensor) and isinstance(got, Tensor)):
        e, g = _as_number(expected), _as_number(got)
        factor = _simple_factor(g / e) if e and g else None
        if factor is not None and factor != "1":
            return f"your number is {factor} times the expected one: a missing or extra factor?"
        return None
    if (
        got.shape != expected.shape
        or got.device != expected.device
        or not (expected.is_floating_point() and got.is_floating_point())
    ):
        return None
    g = got.detach().to(torch.float64)
    if expected.ndim >= 2 and expected.shape[-1] == expected.shape[-2]:
        if torch.allclose(g, expected.transpose(-1, -2), rtol=1e-6, atol=1e-9):
            return "your result is the transpose of the expected one (last two axes)"
    denominator = float((expected * expected).sum())
    if denominator > 0:
        c = float((g * expected).sum()) / denominator
        factor = _simple_factor(c) if c else None
        if factor not in (None, "1") and torch.allclose(g, c * expected, rtol=1e-6, atol=1e-9):
            return f"your result is {factor} times the expected one: a missing or extra factor?"
    return None


def _describe_args(args: tuple) -> str:
    return ", ".join(_describe_value(a) for a in args)


def _run(
    fn: Callable, args: tuple, time_limit: float | None, where: str, inputs: str, returned: bool
) -> object:
    """``fn(*args)`` under the time limit; the reader's exception (``SystemExit`` included) or
    time-out becomes an :class:`ExerciseFailed` naming the case (``where``) and, when
    ``returned``, that the function the reader's function returned was the one that failed."""
    who = "the function yours returned" if returned else "your function"
    try:
        return _call_with_time_limit(fn, args, time_limit)
    except _TimeUp as up:
        running = (
            " It is still running in the background: it did not stop when told to (a bare "
            "`except:` that swallows the stop, or a long call outside Python); restart the "
            "kernel to end it."
            if up.args[0]
            else ""
        )
        raise ExerciseFailed(
            f"{where}: {who} did not return within {time_limit:g} s (check's time_limit); an "
            f"endless loop, or a wait for something that never comes?{running}\n{inputs}"
        ) from None
    # the reader's bug, reported with the case that caused it; sys.exit too, which would end a
    # script with no case named (a KeyboardInterrupt still stops check)
    except (Exception, SystemExit) as error:
        where = f"{where}: {who}" if returned else where
        exits = isinstance(error, SystemExit)
        hint = " (sys.exit ends the program: return a result)" if exits else ""
        raise ExerciseFailed(
            f"{where} raised {type(error).__name__}: {error}{hint}\n{inputs}"
        ) from error


def check(name: str, fn: Callable, *, time_limit: float | None = 30.0) -> Passed:
    """Run exercise ``name`` against the reader's ``fn`` on every case.

    Each case gives ``fn`` fresh copies of its inputs, calls it with a time limit of
    ``time_limit`` seconds (``None``: no limit), checks that the inputs are unchanged (tensors,
    lists, dicts, nested) and compares the result with the reference. Where the case has
    ``apply_to`` arguments the result must be a function, and what it returns for them is
    compared; where the exercise names its ``outputs``, a wrong tuple is reported by the first
    element (stage) that differs.

    With a time limit, each call runs in a thread of its own, so ``check`` returns when the time
    is up whatever the function does, on every platform (Linux, macOS, Windows; in a Jupyter or
    Colab kernel, and from any thread). The call is then told to stop (an exception raised in
    it, which ``except Exception`` does not catch); one that has not stopped a second later is
    left running in the background, and the message says so: a long native call (``time.sleep``,
    one huge tensor operation) stops when it returns, a loop with a bare ``except:`` around an
    inner loop only when the kernel restarts. The thread starts with the caller's grad mode and
    default device. Kernel → Interrupt stops ``check`` and the call. With ``time_limit=None``
    the function runs in the caller's thread, with no limit.

    Returns
    -------
    Passed
        When every case agrees (its repr is a one-line verdict).

    Raises
    ------
    KeyError
        Unknown exercise name (the message lists the known ones).
    TypeError
        ``fn`` is not callable, or ``time_limit`` is not a number or None.
    ValueError
        ``time_limit`` is not positive and finite.
    ExerciseFailed
        On the first case where ``fn`` raises (``SystemExit`` from ``sys.exit`` included), does
        not return within the time limit, returns a wrong shape, type, dtype or device (a meta
        tensor, a numpy array, a list, None, …), returns values that differ from the reference,
        or modifies its inputs (or, where a function is the answer, returns something else, or a
        function that fails). The message names the case and, when the output matches a known
        mistake, explains it.
    """
    if name not in EXERCISES:
        raise KeyError(f"unknown exercise {name!r}; known: {', '.join(EXERCISES)}")
    if not callable(fn):
        raise TypeError(f"pass your function itself (callable), got {type(fn).__name__}")
    time_limit = _check_time_limit(time_limit)
    ex = EXERCISES[name]
    cases = ex.cases(torch.Generator().manual_seed(0))
    worst = 0.0
    for case in cases:
        inputs = f"inputs: {_describe_args(case.args)}"
        expected = ex.reference(*copy.deepcopy(case.args))
        args = copy.deepcopy(case.args)
        got = _run(fn, args, time_limit, f"{name}: case '{case.label}'", inputs, returned=False)
        for i, (a, original) in enumerate(zip(args, case.args, strict=True)):
            change = _first_change(original, a, f"argument {i + 1}")
            if change is not None:
                raise ExerciseFailed(
                    f"{name}: case '{case.label}': your function modified its input ({change}, "
                    f"{_describe_value(original)}) in place; compute a new value instead "
                    "(e.g. x + y rather than x += y or x.add_(y), sorted(xs) rather than "
                    f"xs.sort())\n{inputs}"
                )
        if case.apply_to:
            inputs += f"; your function's result applied to {_describe_args(case.apply_to)}"
            if not callable(got):
                raise ExerciseFailed(
                    f"{name}: case '{case.label}': expected a function (the layer, to be called on "
                    f"{_describe_args(case.apply_to)}), got {_describe_value(got)}\n{inputs}"
                )
            expected = expected(*copy.deepcopy(case.apply_to))
            got = _run(
                got,
                copy.deepcopy(case.apply_to),
                time_limit,
                f"{name}: case '{case.label}'",
                inputs,
                returned=True,
            )
        reason, diff = _difference(expected, got, ex.rtol, ex.atol, ex.outputs)
        if reason is None:
            worst = max(worst, diff)
            continue
        message = f"{name}: case '{case.label}' fails: {reason}."
        for mistake in ex.mistakes:
            try:
                wrong = mistake.fn(*copy.deepcopy(case.args))
                if case.apply_to:
                    wrong = wrong(*copy.deepcopy(case.apply_to))
            except Exception:  # a mistake that cannot run on this case cannot be the diagnosis
                continue
            if _difference(wrong, got, 1e-6, 1e-9)[0] is None:
                message += f"\nMost likely mistake: {mistake.explanation}"
                break
        else:
            hint = _generic_hint(expected, got)
            if hint is not None:
                message += f"\nHint: {hint}"
        message += f"\n{inputs}"
        raise ExerciseFailed(message)
    return Passed(name, len(cases), worst)


def describe(name: str) -> None:
    """Print an exercise's signature and task (what the book page says, for use in a notebook)."""
    if name not in EXERCISES:
        raise KeyError(f"unknown exercise {name!r}; known: {', '.join(EXERCISES)}")
    ex = EXERCISES[name]
    print(f"Chapter {ex.chapter}: {ex.signature}\n{ex.task}")


def chapter_exercises(chapter: int) -> list[str]:
    """Names of the exercises of one chapter, in the book's order."""
    return [n for n, ex in EXERCISES.items() if ex.chapter == chapter]


# ---------------------------------------------------------------------------------------------
# Inputs the chapters share


def randn(gen: torch.Generator, *shape: int) -> Tensor:
    """Standard normal float64 inputs of ``shape`` from the case generator ``gen``."""
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def causal_mask(S: int) -> Tensor:
    """(S, S) boolean mask, True where query i may attend to key j ≤ i."""
    return torch.ones(S, S, dtype=torch.bool).tril()
