"""Checkers for the course's exercises: ``check(name, your_function)``.

Every exercise asks the reader to write one function that the chapter teaches. :func:`check`
calls it on seeded random inputs and on edge cases, compares each result with the course's
reference implementation (float64, relative tolerance 1e-6 unless an exercise says otherwise),
and on the first disagreement says which case failed, how, and — when the wrong result matches a
known mistake (a transposed matrix, a missing scale, σ on the wrong factor, …) — what the mistake
most likely is. Inputs are float64 tensors (and a few lists and numbers); the reader's function
must not modify them, and must return within a time limit (30 s per call unless ``check`` is told
otherwise).

>>> from kvattn.exercises import check, describe
>>> describe("kv_memory")          # the task, the signature and the shapes
>>> check("kv_memory", my_kv_memory)
✓ kv_memory: 6 cases agree with the reference (largest difference 2.2e-16)

:data:`EXERCISES` lists the exercises by name; each chapter's exercises are in
``EXERCISES[name].chapter`` order. The references reuse the library where it has the function
(the checkers then also test the reader against the code the book's figures come from).
"""

from __future__ import annotations

import copy
import math
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import diagnostics, interaction, pldr, train
from .mlp import matched_slots as _matched_slots
from .mlp import mlp_cost

Tensor = torch.Tensor


@dataclass(frozen=True)
class Case:
    """One input to an exercise: a label for messages, positional arguments."""

    label: str
    args: tuple


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


@dataclass(frozen=True)
class Passed:
    """What :func:`check` returns when every case agrees; its repr is the one-line verdict."""

    name: str
    n_cases: int
    largest_difference: float

    def __repr__(self) -> str:
        return (
            f"✓ {self.name}: {self.n_cases} cases agree with the reference "
            f"(largest difference {self.largest_difference:.2g})"
        )


class ExerciseFailed(AssertionError):
    """Raised by :func:`check` when the reader's function disagrees with the reference. The
    message names the case, the difference, and the most likely mistake when one is known."""


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
    expected: object, got: object, rtol: float, atol: float
) -> tuple[str | None, float]:
    """(None, largest difference) when ``got`` matches ``expected``; else (reason, inf)."""
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
                return f"element {i} of the tuple: {reason}", math.inf
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
    """Raised inside the reader's function when its time is up: a BaseException, so that an
    ``except Exception`` in the reader's code cannot swallow it."""


def _alarm_available() -> bool:
    """Whether a SIGALRM timer can interrupt a call: POSIX (Linux, macOS), in the main thread,
    with no SIGALRM handler installed outside Python."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) is not None
    )


def _call_with_time_limit(fn: Callable, args: tuple, seconds: float | None) -> object:
    """``fn(*args)``, raising :class:`_TimeUp` inside it after ``seconds`` (when the platform
    allows, see :func:`check`). A pending timer of someone else's is re-armed afterwards with what
    was left of it."""
    if seconds is None or not _alarm_available():
        return fn(*args)
    armed = True

    def alarm(_signum, _frame) -> None:
        if armed:  # a late alarm after the call returned must not escape into the caller
            raise _TimeUp

    previous = signal.signal(signal.SIGALRM, alarm)
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        result = fn(*args)
        armed = False
        return result
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:
            left = outer_delay - (time.monotonic() - start)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), outer_interval)


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


def check(name: str, fn: Callable, *, time_limit: float | None = 30.0) -> Passed:
    """Run exercise ``name`` against the reader's ``fn`` on every case.

    Each case gives ``fn`` fresh copies of its inputs, calls it with a time limit of
    ``time_limit`` seconds (``None``: no limit), checks that the inputs are unchanged (tensors,
    lists, dicts, nested) and compares the result with the reference.

    The time limit uses a SIGALRM timer, so it works where Python can set one: Linux and macOS
    (also in a Jupyter or Colab kernel, whose cells run in the main thread), called from the main
    thread. It interrupts Python code; a single long-running native call (one huge tensor
    operation) is interrupted when it returns. Elsewhere (Windows, or ``check`` called from
    another thread) there is no limit: a function that never returns blocks until interrupted
    (Kernel → Interrupt in Jupyter).

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
        On the first case where ``fn`` raises, does not return within the time limit, returns a
        wrong shape, type, dtype or device (a meta tensor, a numpy array, a list, None, …),
        returns values that differ from the reference, or modifies its inputs. The message names
        the case and, when the output matches a known mistake, explains it.
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
        inputs = f"inputs: {', '.join(_describe_value(a) for a in case.args)}"
        expected = ex.reference(*copy.deepcopy(case.args))
        args = copy.deepcopy(case.args)
        try:
            got = _call_with_time_limit(fn, args, time_limit)
        except _TimeUp:
            raise ExerciseFailed(
                f"{name}: case '{case.label}': your function did not return within "
                f"{time_limit:g} s (check's time_limit); an endless loop, or a wait for something "
                f"that never comes?\n{inputs}"
            ) from None
        except Exception as error:  # the reader's bug, reported with the case that caused it
            raise ExerciseFailed(
                f"{name}: case '{case.label}' raised {type(error).__name__}: {error}\n{inputs}"
            ) from error
        for i, (a, original) in enumerate(zip(args, case.args, strict=True)):
            change = _first_change(original, a, f"argument {i + 1}")
            if change is not None:
                raise ExerciseFailed(
                    f"{name}: case '{case.label}': your function modified its input ({change}, "
                    f"{_describe_value(original)}) in place; compute a new value instead "
                    "(e.g. x + y rather than x += y or x.add_(y), sorted(xs) rather than "
                    f"xs.sort())\n{inputs}"
                )
        reason, diff = _difference(expected, got, ex.rtol, ex.atol)
        if reason is None:
            worst = max(worst, diff)
            continue
        message = f"{name}: case '{case.label}' fails: {reason}."
        for mistake in ex.mistakes:
            try:
                wrong = mistake.fn(*copy.deepcopy(case.args))
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
# Inputs


def _randn(gen: torch.Generator, *shape: int) -> Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _causal_mask(S: int) -> Tensor:
    return torch.ones(S, S, dtype=torch.bool).tril()


def _softmax_attention(scores: Tensor, v: Tensor) -> Tensor:
    S = scores.shape[-1]
    return scores.masked_fill(~_causal_mask(S), -math.inf).softmax(-1) @ v


# ---------------------------------------------------------------------------------------------
# Part I


def _kv_cases(gen):
    d, m = 6, 10
    return [
        Case("random, 5 tokens", (_randn(gen, 5, d), _randn(gen, m, d), _randn(gen, m, d))),
        Case("one token", (_randn(gen, 1, d), _randn(gen, m, d), _randn(gen, m, 3))),
        Case("d_out ≠ d", (_randn(gen, 4, d), _randn(gen, m, d), _randn(gen, m, 2))),
        Case(
            "x = 0", (torch.zeros(3, d, dtype=torch.float64), _randn(gen, m, d), _randn(gen, m, d))
        ),
        Case("batch axis", (_randn(gen, 2, 3, d), _randn(gen, m, d), _randn(gen, m, d))),
        Case(
            "all keys negative",
            (_randn(gen, 3, d).abs(), -_randn(gen, m, d).abs(), _randn(gen, m, d)),
        ),
    ]


def _top_trigger_cases(gen):
    return [
        Case("random, k=3", (_randn(gen, 20, 7), 3)),
        Case("k=1", (_randn(gen, 12, 5), 1)),
        Case("k = every position", (_randn(gen, 6, 4), 6)),
        Case("one key", (_randn(gen, 9, 1), 2)),
    ]


def _absorb_cases(gen):
    d, m = 5, 8
    return [
        Case("random non-symmetric Q", (_randn(gen, m, d), _randn(gen, d, d))),
        Case("Q = identity", (_randn(gen, m, d), torch.eye(d, dtype=torch.float64))),
        Case(
            "Q = a permutation",
            (_randn(gen, m, d), torch.eye(d, dtype=torch.float64)[[1, 2, 3, 4, 0]]),
        ),
        Case("one key", (_randn(gen, 1, d), _randn(gen, d, d))),
    ]


def _mlp_cases(gen, rank: int | None = None):
    d, m = 5, 7

    def w(*s):
        return _randn(gen, *s) / math.sqrt(d)

    qk = (m, d) if rank is None else (m, rank, d)
    cases = []
    for label, sigma, n, d_out in (
        ("SiLU, 4 tokens", F.silu, 4, d),
        ("ReLU, one token", F.relu, 1, 3),
        ("GELU, d_out ≠ d", F.gelu, 3, 2),
        ("tanh, batch axis", torch.tanh, (2, 3), d),
    ):
        shape = (*n, d) if isinstance(n, tuple) else (n, d)
        cases.append(Case(label, (_randn(gen, *shape), w(*qk), w(*qk), w(m, d_out), sigma)))
    return cases


def _bilinear_attention(x, Q, K, V, sigma):
    scores = torch.einsum("...i,jsi,jsk,...k->...j", x, Q, K, x)
    return sigma(scores) @ V


def _interaction_cases(gen):
    d, m = 4, 6
    return [
        Case("random", (_randn(gen, m, d), _randn(gen, m, d), _randn(gen, m, 3))),
        Case("one slot", (_randn(gen, 1, d), _randn(gen, 1, d), _randn(gen, 1, 2))),
        Case("d_out = d", (_randn(gen, m, d), _randn(gen, m, d), _randn(gen, m, d))),
    ]


def _symmetrise_cases(gen):
    return [
        Case("one matrix", (_randn(gen, 4, 4),)),
        Case("a stack (d_out, d, d)", (_randn(gen, 3, 5, 5),)),
        Case("already symmetric", (torch.eye(3, dtype=torch.float64) * 2,)),
        Case("antisymmetric", ((lambda a: a - a.T)(_randn(gen, 4, 4)),)),
    ]


def _gated_interaction_cases(gen):
    d, m = 4, 6

    def sigmoid(z):
        return torch.sigmoid(z)

    def relu_gate(z):
        return (z > 0).to(z.dtype)

    return [
        Case(
            "SiLU gate (sigmoid)",
            (_randn(gen, d), _randn(gen, m, d), _randn(gen, m, d), _randn(gen, m, 3), sigmoid),
        ),
        Case(
            "ReLU gate (step)",
            (_randn(gen, d), _randn(gen, m, d), _randn(gen, m, d), _randn(gen, m, 2), relu_gate),
        ),
        Case(
            "x = 0",
            (
                torch.zeros(d, dtype=torch.float64),
                _randn(gen, m, d),
                _randn(gen, m, d),
                _randn(gen, m, 2),
                sigmoid,
            ),
        ),
    ]


def _gated_interaction(x, W_q, W_k, W_v, gate):
    return torch.einsum("mo,m,mi,mj->oij", W_v, gate(W_q @ x), W_q, W_k)


def _violation_cases(gen, with_alpha: bool):
    cases = []
    for label, sigma in (
        ("SiLU", F.silu),
        ("ReLU", F.relu),
        ("tanh", torch.tanh),
        ("identity", lambda z: z),
    ):
        a, b = _randn(gen, 2000), _randn(gen, 2000)
        alpha = (2.0, -1.5, 0.5, 3.0)[len(cases)]
        cases.append(
            Case(f"{label}, 2000 samples", (sigma, alpha, a, b) if with_alpha else (sigma, a, b))
        )
    return cases


def _exchange_violation(sigma, a, b):
    return float(((sigma(a) * b - sigma(b) * a) ** 2).mean() / ((sigma(a) * b) ** 2).mean())


def _scale_violation(sigma, alpha, a, b):
    return float(
        ((sigma(alpha * a) * b / alpha - sigma(a) * b) ** 2).mean() / ((sigma(a) * b) ** 2).mean()
    )


def _conserved_cases(gen):
    return [
        Case("random", (_randn(gen, 6, 4), _randn(gen, 6, 4))),
        Case("rank-r slots (m, r, d)", (_randn(gen, 5, 2, 4), _randn(gen, 5, 2, 4))),
        Case("balanced: W_q = W_k", ((lambda w: (w, w.clone()))(_randn(gen, 3, 4)))),
    ]


def _truncate_cases(gen):
    return [
        Case("random, r=2", (_randn(gen, 3, 5, 5), 2)),
        Case("r=1", (_randn(gen, 2, 4, 4), 1)),
        Case("full rank kept", (_randn(gen, 2, 3, 3), 3)),
    ]


def _truncate(M, r):
    U, S, Vh = torch.linalg.svd(M)
    return (U[..., :r] * S[..., None, :r]) @ Vh[..., :r, :]


def _matched(d, m1, r):
    budget = mlp_cost("key_value", d, m1)[0]  # parameters of the key-value MLP: 2·m1·d
    return _matched_slots("rank_r", d, budget, rank=r)


def _matched_cases(_gen):
    return [
        Case("d=64, m1=256, r=1", (64, 256, 1)),
        Case("d=64, m1=256, r=2", (64, 256, 2)),
        Case("d=10, m1=7, r=3", (10, 7, 3)),
        Case("d=128, m1=512, r=4", (128, 512, 4)),
    ]


def _paired_t_cases(gen):
    a = [float(v) for v in _randn(gen, 6)]
    return [
        Case(
            "six seeds",
            (a, [x + 0.3 + 0.1 * float(e) for x, e in zip(a, _randn(gen, 6), strict=True)]),
        ),
        Case("two seeds", ([1.0, 2.0], [0.5, 1.8])),
        Case("b better on every seed", ([3.1, 3.3, 3.2, 3.4], [3.0, 3.25, 3.05, 3.3])),
    ]


# ---------------------------------------------------------------------------------------------
# Part II


def _attention_cases(gen, with_G: bool):
    cases = []
    for label, lead, S, d_k in (
        ("4 tokens", (), 4, 8),
        ("heads axis", (2, 3), 5, 4),
        ("one token", (), 1, 6),
    ):
        q, k, v = (_randn(gen, *lead, S, d_k) for _ in range(3))
        G = _randn(gen, d_k, d_k)
        cases.append(Case(label, (q, k, v, G) if with_G else (q, k, v)))
    return cases


def _sdpa(q, k, v):
    return _softmax_attention(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), v)


def _gsdpa(q, k, v, G):
    return _softmax_attention(q @ G @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), v)


def _head_form_cases(gen):
    return [
        Case("d_k=4, d=6", (_randn(gen, 4, 6), _randn(gen, 4, 6))),
        Case("d_k = d", (_randn(gen, 5, 5), _randn(gen, 5, 5))),
        Case("d_k=1", (_randn(gen, 1, 3), _randn(gen, 1, 3))),
    ]


def _asymmetry_cases(gen):
    M = _randn(gen, 5, 5)
    return [
        Case("random", (M,)),
        Case("symmetric", (M + M.T,)),
        Case("antisymmetric", (M - M.T,)),
        Case("rank 1", (torch.outer(_randn(gen, 4), _randn(gen, 4)),)),
    ]


def _density_cases(gen):
    return [
        Case("6 tokens", (_randn(gen, 6, 4),)),
        Case("batch and heads", (_randn(gen, 2, 3, 5, 4),)),
        Case("one token", (_randn(gen, 1, 3),)),
    ]


def _iswiglu_cases(gen):
    return [
        Case("random", (_randn(gen, 3, 4, 4) * 3,)),
        Case("zeros", (torch.zeros(2, 2, dtype=torch.float64),)),
        Case(
            "large |u| (no overflow)",
            (torch.tensor([-80.0, -30.0, 30.0, 80.0], dtype=torch.float64),),
        ),
    ]


def _power_law_cases(gen):
    def positive(*s):
        return _randn(gen, *s).abs() + 0.1

    return [
        Case("one head", (positive(4, 4), _randn(gen, 4, 4), _randn(gen, 4, 4), _randn(gen, 4, 4))),
        Case(
            "heads (H, d_k, d_k)",
            (positive(2, 3, 3), _randn(gen, 2, 3, 3), _randn(gen, 2, 3, 3), _randn(gen, 2, 3, 3)),
        ),
        Case(
            "P = 1, a = I, b = 0 (G = A_LM)",
            (
                positive(3, 3),
                torch.ones(3, 3, dtype=torch.float64),
                torch.eye(3, dtype=torch.float64),
                torch.zeros(3, 3, dtype=torch.float64),
            ),
        ),
    ]


def _power_law(A_LM, P, a, b_a):
    return a @ A_LM.pow(P) + b_a


def _perron_cases(gen):
    return [
        Case("random positive 5×5", (_randn(gen, 5, 5).abs() + 0.01,)),
        Case(
            "rank 1 (A = u vᵀ)",
            (torch.outer(_randn(gen, 4).abs() + 0.1, _randn(gen, 4).abs() + 0.1),),
        ),
        Case("all ones", (torch.ones(3, 3, dtype=torch.float64),)),
    ]


def _perron(A):
    lam, v = diagnostics.perron_frobenius(A, iterations=10_000, tol=1e-15)
    return float(lam), v


def _ce_cases(gen):
    V = 7
    t1 = torch.randint(1, V, (2, 5), generator=gen)
    t2 = t1.clone()
    t2[0, 3:] = 0
    t2[1, 4] = 0
    return [
        Case("no padding", (_randn(gen, 2, 5, V), t1, 0)),
        Case("padded targets", (_randn(gen, 2, 5, V), t2, 0)),
        Case(
            "pad id 3",
            (
                _randn(gen, 2, 5, V),
                torch.where(t1 == 3, 4, t1).index_fill(1, torch.tensor([4]), 3),
                3,
            ),
        ),
    ]


def _ce(logits, targets, pad_id):
    return float(train.lm_cross_entropy(logits, targets, pad_id))


def _dag_cases(gen):
    strictly_upper = torch.triu(_randn(gen, 4, 4), diagonal=1)
    return [
        Case("random 4×4", (_randn(gen, 4, 4) * 0.5,)),
        Case("a DAG (strictly upper triangular)", (strictly_upper,)),
        Case("a stack (H, d, d)", (_randn(gen, 3, 3, 3) * 0.5,)),
        Case("a 2-cycle", (torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64),)),
    ]


def _order_cases(gen):
    x = _randn(gen, 3, 4, 4) + 2.0
    return [
        Case("random", (x, x + 0.1 * _randn(gen, 3, 4, 4))),
        Case("identical runs", (x, x.clone())),
        Case("negative mean", (-x, -x + 0.05 * _randn(gen, 3, 4, 4))),
    ]


def _audit_cases(gen):
    u, a = _randn(gen, 4), _randn(gen, 4)
    return [
        Case("random (H, d, d)", (_randn(gen, 3, 4, 4),)),
        Case("identical rows (A = 1 αᵀ)", (torch.ones(4, 1, dtype=torch.float64) * a,)),
        Case("rank 1 (A = u αᵀ), non-symmetric", (torch.outer(u, a),)),
    ]


def _sigma_ratio(A):
    return diagnostics.rank_audit(A, head_dim=None).sigma_ratio


def _row_spread(A):
    return diagnostics.rank_audit(A, head_dim=None).row_spread


def _rope_cases(gen):
    return [
        Case("6 positions, d_k=4, θ=10000", (_randn(gen, 6, 4), 10_000.0)),
        Case("d_k=8, θ=100", (_randn(gen, 5, 8), 100.0)),
        Case("one position (no rotation)", (_randn(gen, 1, 6), 10_000.0)),
    ]


def _rope(x, theta, interleaved=True, sign=1.0):
    S, d_k = x.shape
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angle = torch.arange(S, dtype=torch.float64)[:, None] * inv_freq
    cos, sin = angle.cos(), sign * angle.sin()
    if interleaved:
        x1, x2 = x[:, 0::2], x[:, 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)
    x1, x2 = x[:, : d_k // 2], x[:, d_k // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1)


def _commutant_cases(gen):
    return [
        Case("random 4×4", (_randn(gen, 4, 4),)),
        Case("a stack of 6×6", (_randn(gen, 2, 6, 6),)),
        Case("already in the commutant", (diagnostics.commutant_projection(_randn(gen, 4, 4)),)),
    ]


def _block_diagonal_only(G):
    out = torch.zeros_like(G)
    for i, j in diagnostics.rope_planes(G.shape[-1]):
        out[..., i : j + 1, i : j + 1] = G[..., i : j + 1, i : j + 1]
    return out


def _commutant_flipped_beta(G):
    P = diagnostics.commutant_projection(G)
    for i, j in diagnostics.rope_planes(G.shape[-1]):
        P[..., i, j], P[..., j, i] = -P[..., i, j], -P[..., j, i]
    return P


def _lr_cases(_gen):
    return [
        Case(f"step {s} of 1000, warm-up 100", (s, 1000, 100, 0.1))
        for s in (0, 49, 99, 100, 550, 999)
    ] + [
        Case("no warm-up, step 0", (0, 200, 0, 0.1)),
        Case("min_ratio 0, last step", (299, 300, 20, 0.0)),
    ]


def _spread_cases(gen):
    X = _randn(gen, 5, 2, 3, 3) + 1.5
    return [
        Case("5 prompts", (X,)),
        Case("2 prompts", (X[:2],)),
        Case("identical prompts", (X[:1].expand(3, -1, -1, -1).clone(),)),
    ]


def _spread(X):
    return torch.tensor(
        [diagnostics.order_parameter(X[0], X[i]) for i in range(1, len(X))], dtype=torch.float64
    )


def _spearman_cases(gen):
    x = _randn(gen, 8)
    return [
        Case("random", (x, _randn(gen, 8))),
        Case("monotone but not linear", (x, x.exp())),
        Case("reversed", (x, -(x**3))),
    ]


def _spearman(x, y):
    rx = x.argsort().argsort().to(torch.float64)
    ry = y.argsort().argsort().to(torch.float64)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float((rx * ry).sum() / (rx.norm() * ry.norm()))


def _pearson(x, y):
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / (x.norm() * y.norm()))


# ---------------------------------------------------------------------------------------------
# The exercises, by chapter

EXERCISES: dict[str, Exercise] = {
    ex.name: ex
    for ex in [
        # -- 1. Key-value memories
        Exercise(
            "kv_memory",
            1,
            "kv_memory(x, K, V) -> Tensor",
            "The feed-forward layer as a key-value memory: relu(x Kᵀ) V. x (..., d), keys K (m, d) "
            "(rows of W1), values V (m, d_out) (rows of W2); returns (..., d_out).",
            lambda x, K, V: F.relu(x @ K.T) @ V,
            _kv_cases,
            (
                Mistake(
                    "no activation: the memory coefficients must be relu(x·k_j), not x·k_j.",
                    lambda x, K, V: (x @ K.T) @ V,
                ),
                Mistake(
                    "softmax over the slots: that is attention over keys, but an FFN uses an "
                    "unnormalised relu.",
                    lambda x, K, V: (x @ K.T).softmax(-1) @ V,
                ),
                Mistake(
                    "relu applied after the values: the non-linearity acts on the coefficients "
                    "x Kᵀ, before they weight V.",
                    lambda x, K, V: F.relu(x @ K.T @ V),
                ),
            ),
        ),
        Exercise(
            "top_triggers",
            1,
            "top_triggers(coefficients, k) -> LongTensor",
            "coefficients (n, m): the memory coefficient of each of m keys at each of n positions. "
            "Return the k positions where each key fires most, shape (m, k), strongest first.",
            lambda c, k: c.topk(k, dim=0).indices.T,
            _top_trigger_cases,
            (
                Mistake(
                    "the k weakest positions: sort in descending order (largest first).",
                    lambda c, k: c.topk(k, dim=0, largest=False).indices.T,
                ),
                Mistake(
                    "shape (k, m): transpose so that row j lists key j's triggers.",
                    lambda c, k: c.topk(k, dim=0).indices,
                ),
            ),
        ),
        Exercise(
            "absorb_query",
            1,
            "absorb_query(K, Q) -> Tensor",
            "A layer relu((x Q) Kᵀ) V with a global query matrix Q (d, d) equals a key-value MLP "
            "relu(x K'ᵀ) V. Return the new keys K' (m, d).",
            lambda K, Q: K @ Q.T,
            _absorb_cases,
            (Mistake("K' = K Q: (xQ)·k = x·(k Qᵀ), so the keys become K Qᵀ.", lambda K, Q: K @ Q),),
        ),
        # -- 2. Bilinear attention inside an MLP
        Exercise(
            "bilinear_attention_mlp",
            2,
            "bilinear_attention_mlp(x, Q, K, V, sigma) -> Tensor",
            "Per-slot bilinear attention y = Σ_j σ(x Q_j K_jᵀ xᵀ) v_j with rank-r slots: Q, K "
            "(m, r, d) (Q[j] holds the columns q_js of Q_j as rows), V (m, d_out), x (..., d); "
            "slot j's score is Σ_s (x·q_js)(x·k_js).",
            _bilinear_attention,
            lambda g: _mlp_cases(g, rank=2),
            (
                Mistake(
                    "σ applied to each rank component before the sum: σ acts on slot j's whole "
                    "score Σ_s (x·q_js)(x·k_js).",
                    lambda x, Q, K, V, s: (
                        s(torch.einsum("...i,jsi,jsk,...k->...js", x, Q, K, x)).sum(-1) @ V
                    ),
                ),
                Mistake(
                    "σ on the query factor only (that is the gated MLP, not bilinear attention).",
                    lambda x, Q, K, V, s: (
                        (
                            s(torch.einsum("...i,jsi->...js", x, Q))
                            * torch.einsum("...i,jsi->...js", x, K)
                        ).sum(-1)
                        @ V
                    ),
                ),
            ),
        ),
        Exercise(
            "symmetric_rank1",
            2,
            "symmetric_rank1(x, W_q, W_k, W_v, sigma) -> Tensor",
            "The rank-1 bilinear layer σ((x W_qᵀ) ⊙ (x W_kᵀ)) W_v; W_q, W_k (m, d), W_v (m, "
            "d_out).",
            lambda x, Wq, Wk, Wv, s: s((x @ Wq.T) * (x @ Wk.T)) @ Wv,
            _mlp_cases,
            (
                Mistake(
                    "σ on the query factor only: that is the gated MLP.",
                    lambda x, Wq, Wk, Wv, s: (s(x @ Wq.T) * (x @ Wk.T)) @ Wv,
                ),
                Mistake(
                    "σ on both factors: the product is taken first, then σ.",
                    lambda x, Wq, Wk, Wv, s: (s(x @ Wq.T) * s(x @ Wk.T)) @ Wv,
                ),
            ),
        ),
        Exercise(
            "gated_mlp",
            2,
            "gated_mlp(x, W_q, W_k, W_v, sigma) -> Tensor",
            "The gated MLP (GLU family) (σ(x W_qᵀ) ⊙ (x W_kᵀ)) W_v; σ on the query factor.",
            lambda x, Wq, Wk, Wv, s: (s(x @ Wq.T) * (x @ Wk.T)) @ Wv,
            _mlp_cases,
            (
                Mistake(
                    "σ on the key factor: by the course's convention the gate is σ(x·q_j) "
                    "(W_q = the gate projection).",
                    lambda x, Wq, Wk, Wv, s: ((x @ Wq.T) * s(x @ Wk.T)) @ Wv,
                ),
                Mistake(
                    "σ on the product: that is the symmetric rank-1 form.",
                    lambda x, Wq, Wk, Wv, s: s((x @ Wq.T) * (x @ Wk.T)) @ Wv,
                ),
                Mistake(
                    "σ applied to the output instead of a factor.",
                    lambda x, Wq, Wk, Wv, s: s(((x @ Wq.T) * (x @ Wk.T)) @ Wv),
                ),
            ),
        ),
        # -- 3. Interaction tensors
        Exercise(
            "interaction_tensor",
            3,
            "interaction_tensor(W_q, W_k, W_v) -> Tensor",
            "B with B[o] = Σ_j W_v[j, o] q_j k_jᵀ, shape (d_out, d, d), so that a bilinear layer's "
            "output o is x B[o] xᵀ. W_q, W_k (m, d); W_v (m, d_out).",
            lambda Wq, Wk, Wv: interaction.interaction_tensor(Wq, Wk, Wv),
            _interaction_cases,
            (
                Mistake(
                    "k_j q_jᵀ instead of q_j k_jᵀ: the quadratic form is the same, but B is the "
                    "transpose (the q↔k exchange).",
                    lambda Wq, Wk, Wv: torch.einsum("mo,mi,mj->oij", Wv, Wk, Wq),
                ),
                Mistake(
                    "the value weights are missing: each slot's q_j k_jᵀ is weighted by W_v[j, o].",
                    lambda Wq, Wk, Wv: torch.einsum("mi,mj->ij", Wq, Wk).expand(
                        Wv.shape[1], -1, -1
                    ),
                ),
            ),
        ),
        Exercise(
            "symmetrise",
            3,
            "symmetrise(B) -> Tensor",
            "The symmetric part ½(B + Bᵀ) of every matrix in B (..., d, d), transposing the last "
            "two "
            "axes only.",
            interaction.symmetrise,
            _symmetrise_cases,
            (
                Mistake(
                    "B + Bᵀ without the ½: the quadratic form doubles.",
                    lambda B: B + B.transpose(-1, -2),
                ),
                Mistake(
                    "½(B − Bᵀ) is the antisymmetric part; the symmetric part adds the transpose.",
                    lambda B: 0.5 * (B - B.transpose(-1, -2)),
                ),
            ),
        ),
        Exercise(
            "gated_interaction",
            3,
            "gated_interaction(x, W_q, W_k, W_v, gate) -> Tensor",
            "The input-dependent interaction tensor of a gated layer at one input x (d,): "
            "B(x)[o] = Σ_j W_v[j, o] g(q_j·x) q_j k_jᵀ, shape (d_out, d, d); gate is g(z) = "
            "σ(z)/z.",
            _gated_interaction,
            _gated_interaction_cases,
            (
                Mistake(
                    "the gate reads the key, g(k_j·x); in the gated MLP it reads the query.",
                    lambda x, Wq, Wk, Wv, g: torch.einsum("mo,m,mi,mj->oij", Wv, g(Wk @ x), Wq, Wk),
                ),
                Mistake(
                    "the gate is missing (this is the bilinear layer's constant B).",
                    lambda x, Wq, Wk, Wv, g: torch.einsum("mo,mi,mj->oij", Wv, Wq, Wk),
                ),
            ),
        ),
        # -- 4. Symmetry breaking
        Exercise(
            "exchange_violation_samples",
            4,
            "exchange_violation_samples(sigma, a, b) -> float",
            "The normalised exchange violation mean((σ(a)b − σ(b)a)²) / mean((σ(a)b)²) over paired "
            "samples a, b (n,).",
            _exchange_violation,
            lambda g: _violation_cases(g, with_alpha=False),
            (
                Mistake(
                    "not normalised: divide by mean((σ(a)b)²).",
                    lambda s, a, b: float(((s(a) * b - s(b) * a) ** 2).mean()),
                ),
                Mistake(
                    "the difference is not squared before averaging.",
                    lambda s, a, b: float((s(a) * b - s(b) * a).mean() / ((s(a) * b) ** 2).mean()),
                ),
            ),
        ),
        Exercise(
            "scale_violation_samples",
            4,
            "scale_violation_samples(sigma, alpha, a, b) -> float",
            "The normalised inverse-scale violation mean((σ(αa)b/α − σ(a)b)²) / mean((σ(a)b)²): "
            "the "
            "transformed slot (αq, k/α) against the original.",
            _scale_violation,
            lambda g: _violation_cases(g, with_alpha=True),
            (
                Mistake(
                    "the key is not divided by α: the transform is (q, k) → (αq, k/α).",
                    lambda s, al, a, b: float(
                        ((s(al * a) * b - s(a) * b) ** 2).mean() / ((s(a) * b) ** 2).mean()
                    ),
                ),
                Mistake(
                    "α applied after σ: scaling the query scales σ's argument, σ(αa).",
                    lambda s, al, a, b: float(
                        ((al * s(a) * b / al - s(a) * b) ** 2).mean() / ((s(a) * b) ** 2).mean()
                    ),
                ),
            ),
        ),
        Exercise(
            "conserved_qk",
            4,
            "conserved_qk(W_q, W_k) -> Tensor",
            "The per-slot quantity ‖q_j‖² − ‖k_j‖² that gradient flow conserves under the scale "
            "symmetry, shape (m,); rank-r slots (m, r, d) sum over all their components.",
            lambda Wq, Wk: Wq.flatten(1).pow(2).sum(1) - Wk.flatten(1).pow(2).sum(1),
            _conserved_cases,
            (
                Mistake(
                    "norms, not squared norms: the conserved quantity is ‖q_j‖² − ‖k_j‖².",
                    lambda Wq, Wk: Wq.flatten(1).norm(dim=1) - Wk.flatten(1).norm(dim=1),
                ),
                Mistake(
                    "summed over the wrong axis: one value per slot j (rows), not per coordinate.",
                    lambda Wq, Wk: Wq.pow(2).sum(0) - Wk.pow(2).sum(0),
                ),
            ),
        ),
        # -- 5. Beyond rank one
        Exercise(
            "truncate_rank",
            5,
            "truncate_rank(M, r) -> Tensor",
            "The best rank-r approximation (Frobenius norm) of every matrix in M (..., d, d): "
            "keep the "
            "r largest singular values (Eckart–Young).",
            _truncate,
            _truncate_cases,
            (
                Mistake(
                    "the r smallest singular values were kept; torch.linalg.svd sorts them in "
                    "descending order, so keep the first r.",
                    lambda M, r: (
                        lambda U, S, Vh: (U[..., -r:] * S[..., None, -r:]) @ Vh[..., -r:, :]
                    )(*torch.linalg.svd(M)),
                ),
                Mistake(
                    "the singular values were dropped: M_r = U_r diag(S_r) V_rᵀ.",
                    lambda M, r: (lambda U, S, Vh: U[..., :r] @ Vh[..., :r, :])(
                        *torch.linalg.svd(M)
                    ),
                ),
            ),
        ),
        Exercise(
            "matched_slots",
            5,
            "matched_slots(d, m1, r) -> int",
            "The most rank-r slots (each: r query and r key vectors of size d, one value vector of "
            "size d) that fit in the parameter budget 2·m1·d of a key-value MLP with m1 slots.",
            _matched,
            _matched_cases,
            (
                Mistake(
                    "rounded up: the layer must fit in the budget, so round down (floor).",
                    lambda d, m1, r: math.ceil(2 * m1 * d / ((2 * r + 1) * d)),
                ),
                Mistake(
                    "the value vector is not counted: a rank-r slot has (2r + 1)·d parameters.",
                    lambda d, m1, r: (2 * m1 * d) // (2 * r * d),
                ),
            ),
        ),
        Exercise(
            "paired_t",
            5,
            "paired_t(a, b) -> float",
            "Student's t for a paired comparison of per-seed results a and b (lists of floats, "
            "same "
            "seeds): the mean of a − b over its standard error (sample sd with n − 1, over √n).",
            lambda a, b: train.paired_difference(a, b).t,
            _paired_t_cases,
            (
                Mistake(
                    "population standard deviation (divide by n); the sample sd divides by n − 1.",
                    lambda a, b: (
                        lambda d: (
                            (sum(d) / len(d))
                            / (
                                math.sqrt(sum((x - sum(d) / len(d)) ** 2 for x in d) / len(d))
                                / math.sqrt(len(d))
                            )
                        )
                    )([x - y for x, y in zip(a, b, strict=True)]),
                ),
                Mistake(
                    "not paired: the seeds pair the runs, so test the differences a_i − b_i, not "
                    "two independent samples.",
                    lambda a, b: (
                        (sum(a) / len(a) - sum(b) / len(b))
                        / math.sqrt(
                            torch.tensor(a).var().item() / len(a)
                            + torch.tensor(b).var().item() / len(b)
                        )
                    ),
                ),
            ),
        ),
        # -- 6. Attention as a learned bilinear form
        Exercise(
            "causal_sdpa",
            6,
            "causal_sdpa(q, k, v) -> Tensor",
            "Causal scaled dot-product attention softmax(q kᵀ/√d_k + mask) v for q, k, v "
            "(..., S, d_k): position i attends to positions j ≤ i.",
            _sdpa,
            lambda g: _attention_cases(g, with_G=False),
            (
                Mistake(
                    "no 1/√d_k scaling of the scores.",
                    lambda q, k, v: _softmax_attention(q @ k.transpose(-1, -2), v),
                ),
                Mistake(
                    "no causal mask: position i must not see j > i.",
                    lambda q, k, v: (
                        (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1) @ v
                    ),
                ),
                Mistake(
                    "softmax over the query axis: each query's weights over keys must sum to 1 "
                    "(softmax over the last axis).",
                    lambda q, k, v: (
                        (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]))
                        .masked_fill(~_causal_mask(q.shape[-2]), -math.inf)
                        .softmax(-2)
                        @ v
                    ),
                ),
            ),
        ),
        Exercise(
            "generalised_sdpa",
            6,
            "generalised_sdpa(q, k, v, G) -> Tensor",
            "Causal attention with a bilinear form G (d_k, d_k): softmax(q G kᵀ/√d_k + mask) v. "
            "G = I gives SDPA.",
            _gsdpa,
            lambda g: _attention_cases(g, with_G=True),
            (
                Mistake(
                    "G transposed (q Gᵀ kᵀ): for a non-symmetric G the order matters.",
                    lambda q, k, v, G: _gsdpa(q, k, v, G.T),
                ),
                Mistake(
                    "no 1/√d_k scaling.",
                    lambda q, k, v, G: _softmax_attention(q @ G @ k.transpose(-1, -2), v),
                ),
            ),
        ),
        Exercise(
            "head_form",
            6,
            "head_form(W_Q, W_K) -> Tensor",
            "An attention head's bilinear form M (d, d) with score(x_i, x_j) = x_i M x_jᵀ, for "
            "q = x W_Qᵀ and k = x W_Kᵀ (W_Q, W_K of shape (d_k, d), no RoPE, before 1/√d_k).",
            lambda WQ, WK: WQ.T @ WK,
            _head_form_cases,
            (
                Mistake(
                    "W_Kᵀ W_Q is the transpose: the query's weights come first, M = W_Qᵀ W_K.",
                    lambda WQ, WK: WK.T @ WQ,
                ),
                Mistake(
                    "W_Q W_Kᵀ is d_k × d_k (the form in query space); the form on tokens is "
                    "W_Qᵀ W_K.",
                    lambda WQ, WK: WQ @ WK.T,
                ),
            ),
        ),
        # -- 7. Power Law Graph Attention
        Exercise(
            "density",
            7,
            "density(q) -> Tensor",
            "The density (Gram) operator A0 = Σ_s q_sᵀ q_s of the block's queries q (..., S, d_k), "
            "shape (..., d_k, d_k) (a sum over positions, not a mean).",
            lambda q: q.transpose(-1, -2) @ q,
            _density_cases,
            (
                Mistake(
                    "q qᵀ is the S × S Gram matrix of positions; the density is qᵀ q (d_k × d_k).",
                    lambda q: q @ q.transpose(-1, -2),
                ),
                Mistake(
                    "a mean over positions; the published density is a sum.",
                    lambda q: q.transpose(-1, -2) @ q / q.shape[-2],
                ),
            ),
        ),
        Exercise(
            "iswiglu",
            7,
            "iswiglu(u) -> Tensor",
            "iSwiGLU(u) = u · silu(u) = u² sigmoid(u), elementwise (≥ 0).",
            pldr.iswiglu,
            _iswiglu_cases,
            (
                Mistake(
                    "silu(u) alone: iSwiGLU multiplies it by u once more (u² sigmoid(u)).", F.silu
                ),
                Mistake(
                    "u · sigmoid(u)² — the sigmoid appears once.",
                    lambda u: u * torch.sigmoid(u) ** 2,
                ),
            ),
        ),
        Exercise(
            "power_law_G",
            7,
            "power_law_G(A_LM, P, a, b_a) -> Tensor",
            "G_LM = a A_P + b_a with the potential A_P = A_LM^{∘P} (elementwise power, exponent "
            "matrix P); all (..., d_k, d_k), a A_P a matrix product.",
            _power_law,
            _power_law_cases,
            (
                Mistake(
                    "a ∘ A_P elementwise: a multiplies A_P as a matrix (a @ A_P).",
                    lambda A, P, a, b: a * A.pow(P) + b,
                ),
                Mistake(
                    "A_P a: the product is a A_P (a on the left).",
                    lambda A, P, a, b: A.pow(P) @ a + b,
                ),
                Mistake(
                    "torch.matrix_power is a matrix power with an integer exponent; the power "
                    "law is elementwise with exponents P.",
                    lambda A, P, a, b: a @ A.pow(P.mean()) + b,
                ),
            ),
        ),
        Exercise(
            "perron_pair",
            7,
            "perron_pair(A_LM) -> (float, Tensor)",
            "The Perron–Frobenius eigenpair of an entrywise-positive matrix (d, d): the dominant "
            "eigenvalue and its eigenvector, scaled to be positive with unit sum.",
            _perron,
            _perron_cases,
            (
                Mistake(
                    "the eigenvector has unit Euclidean norm; scale it to unit sum.",
                    lambda A: (lambda lv: (lv[0], lv[1] / lv[1].norm()))(_perron(A)),
                ),
            ),
        ),
        # -- 8. Training small PLDR-LLMs
        Exercise(
            "masked_cross_entropy",
            8,
            "masked_cross_entropy(logits, targets, pad_id) -> float",
            "Mean next-token cross-entropy (nats) over the targets that are not pad_id; logits "
            "(B, S, V), targets (B, S) integer ids.",
            _ce,
            _ce_cases,
            (
                Mistake(
                    "pad targets are counted; skip them (ignore_index=pad_id).",
                    lambda lo, t, p: float(F.cross_entropy(lo.flatten(0, 1), t.flatten())),
                ),
                Mistake(
                    "summed, not averaged, over the non-pad targets.",
                    lambda lo, t, p: float(
                        F.cross_entropy(
                            lo.flatten(0, 1), t.flatten(), ignore_index=p, reduction="sum"
                        )
                    ),
                ),
            ),
        ),
        Exercise(
            "notears_h",
            8,
            "notears_h(M) -> Tensor",
            "The NOTEARS acyclicity function h(M) = tr(exp(M ∘ M)) − d for every matrix in "
            "M (..., d, d): zero exactly for the weighted adjacency matrix of a DAG.",
            diagnostics.notears_h,
            _dag_cases,
            (
                Mistake(
                    "M @ M instead of the elementwise square M ∘ M (= M * M).",
                    lambda M: (
                        torch.linalg.matrix_exp(M @ M).diagonal(dim1=-2, dim2=-1).sum(-1)
                        - M.shape[-1]
                    ),
                ),
                Mistake(
                    "elementwise exp instead of the matrix exponential (torch.linalg.matrix_exp).",
                    lambda M: torch.exp(M * M).diagonal(dim1=-2, dim2=-1).sum(-1) - M.shape[-1],
                ),
                Mistake(
                    "− d is missing: h is zero for a DAG because tr(exp(0)) = d.",
                    lambda M: torch.linalg.matrix_exp(M * M).diagonal(dim1=-2, dim2=-1).sum(-1),
                ),
            ),
        ),
        Exercise(
            "dag_loss",
            8,
            "dag_loss(M) -> Tensor",
            "The reference's DAG regulariser |log(tr(exp(M ∘ M)) / d)| for every matrix in "
            "M (..., d, d). (For real M the trace is at least d, so the log is never negative.)",
            diagnostics.dag_loss,
            _dag_cases,
            (
                Mistake(
                    "not divided by d inside the log: the loss must vanish for a DAG.",
                    lambda M: torch.log(
                        torch.linalg.matrix_exp(M * M).diagonal(dim1=-2, dim2=-1).sum(-1)
                    ).abs(),
                ),
                Mistake(
                    "M @ M instead of M ∘ M.",
                    lambda M: torch.log(
                        torch.linalg.matrix_exp(M @ M).diagonal(dim1=-2, dim2=-1).sum(-1)
                        / M.shape[-1]
                    ).abs(),
                ),
            ),
        ),
        # -- 9. Inference collapse
        Exercise(
            "order_parameter",
            9,
            "order_parameter(x1, x2) -> float",
            "The SOC paper's order parameter between two runs' tensors of the same shape: "
            "RMSE(x1 − x2) / |mean(x1)|, pooled over every value.",
            diagnostics.order_parameter,
            _order_cases,
            (
                Mistake(
                    "normalised by mean(|x1|) instead of |mean(x1)|.",
                    lambda a, b: float((a - b).pow(2).mean().sqrt() / a.abs().mean()),
                ),
                Mistake(
                    "normalised by the RMS of the runs (that is the 'rms' variant, bounded by 2).",
                    lambda a, b: diagnostics.order_parameter(a, b, "rms"),
                ),
                Mistake(
                    "mean squared error, not its root.",
                    lambda a, b: float((a - b).pow(2).mean() / a.mean().abs()),
                ),
            ),
        ),
        Exercise(
            "sigma_ratio",
            9,
            "sigma_ratio(A) -> Tensor",
            "σ2/σ1, the second-largest over the largest singular value, of every matrix in "
            "A (..., d, d): 0 for a rank-1 matrix.",
            _sigma_ratio,
            _audit_cases,
            (
                Mistake(
                    "σ_min/σ_max: torch.linalg.svdvals sorts in descending order, so σ1 is the "
                    "first.",
                    lambda A: (lambda s: s[..., -1] / s[..., 0])(torch.linalg.svdvals(A)),
                ),
                Mistake("σ1/σ2 (inverted).", lambda A: 1 / _sigma_ratio(A)),
            ),
        ),
        Exercise(
            "row_spread",
            9,
            "row_spread(A) -> Tensor",
            "How different the rows of each matrix in A (..., d, d) are: the variance across rows "
            "(population, per column, averaged over columns) over the mean square of A; 0 when "
            "A = 𝟙αᵀ.",
            _row_spread,
            _audit_cases,
            (
                Mistake(
                    "the variance across columns (dim=-1); rows vary along dim=-2.",
                    lambda A: A.var(dim=-1, unbiased=False).mean(-1) / A.pow(2).mean((-2, -1)),
                ),
                Mistake(
                    "the unbiased variance (n − 1); use unbiased=False.",
                    lambda A: A.var(dim=-2).mean(-1) / A.pow(2).mean((-2, -1)),
                ),
            ),
        ),
        # -- 10. RoPE twirl
        Exercise(
            "rope",
            10,
            "rope(x, theta) -> Tensor",
            "Rotate the rows x (S, d_k) of positions 0…S−1 by RoPE in the interleaved layout: "
            "plane "
            "i = (2i, 2i+1) turns by p·θ^(−2i/d_k) at position p, (x1, x2) → (x1 cos − x2 sin, "
            "x1 sin + x2 cos).",
            _rope,
            _rope_cases,
            (
                Mistake(
                    "the half-split layout (planes (i, i + d_k/2)); this model uses interleaved "
                    "pairs (2i, 2i+1).",
                    lambda x, t: _rope(x, t, interleaved=False),
                ),
                Mistake(
                    "rotation in the opposite direction (sin with the wrong sign).",
                    lambda x, t: _rope(x, t, sign=-1.0),
                ),
                Mistake("frequency exponent −i/d_k; it is −2i/d_k.", lambda x, t: _rope(x, t**0.5)),
            ),
        ),
        Exercise(
            "commutant_projection",
            10,
            "commutant_projection(G) -> Tensor",
            "The orthogonal projection of G (..., d_k, d_k) onto the matrices that commute with "
            "every "
            "RoPE rotation (interleaved planes): per plane a block [[α, −β], [β, α]], zero "
            "elsewhere.",
            diagnostics.commutant_projection,
            _commutant_cases,
            (
                Mistake(
                    "the 2×2 diagonal blocks were kept as they are; only their rotation-scaling "
                    "part [[α, −β], [β, α]] commutes with a rotation.",
                    _block_diagonal_only,
                ),
                Mistake(
                    "β with the wrong sign: β = ½(G[j, i] − G[i, j]) for the plane (i, j).",
                    _commutant_flipped_beta,
                ),
            ),
        ),
        Exercise(
            "commutant_residual",
            10,
            "commutant_residual(G) -> Tensor",
            "‖G − Π(G)‖_F / ‖G‖_F per matrix of G (..., d_k, d_k), Π the commutant projection: 0 "
            "when "
            "G keeps only relative positions.",
            diagnostics.commutant_residual,
            _commutant_cases,
            (
                Mistake(
                    "not normalised by ‖G‖_F.",
                    lambda G: (G - diagnostics.commutant_projection(G)).norm(dim=(-2, -1)),
                ),
                Mistake(
                    "squared norms: the ratio of Frobenius norms, not of their squares.",
                    lambda G: (
                        (G - diagnostics.commutant_projection(G)).pow(2).sum((-2, -1))
                        / G.pow(2).sum((-2, -1))
                    ),
                ),
            ),
        ),
        # -- 11. Criticality
        Exercise(
            "lr_factor",
            11,
            "lr_factor(step, steps, warmup, min_ratio) -> float",
            "The learning-rate factor at 0-based step: linear warm-up (step + 1)/warmup for the "
            "first warmup steps, then cosine decay from 1 to min_ratio at the last step, steps − "
            "1.",
            lambda s, n, w, r: train.lr_multiplier(s, n, w, "cosine", r),
            _lr_cases,
            (
                Mistake(
                    "warm-up from zero (step/warmup): step 0 would not learn at all; use "
                    "(step + 1)/warmup.",
                    lambda s, n, w, r: (
                        s / w if s < w else train.lr_multiplier(s, n, w, "cosine", r)
                    ),
                ),
                Mistake(
                    "the cosine decays to 0, not to min_ratio.",
                    lambda s, n, w, r: train.lr_multiplier(s, n, w, "cosine", 0.0),
                ),
            ),
        ),
        Exercise(
            "prompt_spread",
            11,
            "prompt_spread(X) -> Tensor",
            "Given one deductive tensor for n prompts, X (n, ...), the order parameter of each "
            "prompt "
            "i ≥ 1 against prompt 0 (the SOC paper's 'mean' normalisation), shape (n − 1,).",
            _spread,
            _spread_cases,
            (
                Mistake(
                    "normalised by the other prompt's mean; the reference run is prompt 0, "
                    "x1 = X[0].",
                    lambda X: torch.tensor(
                        [diagnostics.order_parameter(X[i], X[0]) for i in range(1, len(X))],
                        dtype=torch.float64,
                    ),
                ),
            ),
        ),
        Exercise(
            "spearman",
            11,
            "spearman(x, y) -> float",
            "Spearman's rank correlation of two 1-D tensors without ties: the Pearson correlation "
            "of "
            "their ranks (e.g. order parameter against loss across a sweep).",
            _spearman,
            _spearman_cases,
            (Mistake("the Pearson correlation of the values; rank them first.", _pearson),),
        ),
    ]
}
