"""The exercise checkers: they accept the reference solutions, reject every listed mistake with
its explanation, and their references agree with independent implementations."""

from __future__ import annotations

import _thread
import dataclasses
import itertools
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from kvattn import config, diagnostics, memories, mlp, pldr, plga, symmetry
from kvattn.course import exercises
from kvattn.course.exercises import EXERCISES, ExerciseFailed, check

MISTAKES = [(name, i) for name, ex in EXERCISES.items() for i in range(len(ex.mistakes))]


def test_at_least_three_exercises_in_every_chapter():
    counts = Counter(ex.chapter for ex in EXERCISES.values())
    assert sorted(counts) == list(range(1, 12))
    assert min(counts.values()) >= 3
    assert exercises.chapter_exercises(7) == [
        "density",
        "iswiglu_slope",
        "recover_P",
        "perron_pair",
        "plga_head",
    ]


@pytest.mark.parametrize("name", EXERCISES)
def test_reference_passes(name):
    result = check(name, EXERCISES[name].reference)
    assert result.n_cases >= 3
    assert result.largest_difference == 0.0
    assert repr(result).startswith(f"✓ {name}: {result.n_cases} cases agree")


@pytest.mark.parametrize(("name", "index"), MISTAKES)
def test_each_mistake_is_rejected_and_explained(name, index):
    mistake = EXERCISES[name].mistakes[index]
    with pytest.raises(ExerciseFailed) as info:
        check(name, mistake.fn)
    message = str(info.value)
    assert message.startswith(f"{name}: case '")
    assert f"Most likely mistake: {mistake.explanation}" in message


def test_every_exercise_has_a_mistake_to_explain():
    assert all(ex.mistakes for ex in EXERCISES.values())


def test_a_crashing_solution_names_the_case_and_the_error():
    def broken(x, K, V):
        return x @ K @ V  # K is (m, d): the product needs Kᵀ

    with pytest.raises(
        ExerciseFailed, match=r"kv_memory: case 'random, 5 tokens' raised RuntimeError"
    ):
        check("kv_memory", broken)


@pytest.mark.parametrize("time_limit", [30.0, None])
def test_a_solution_that_calls_sys_exit_fails_the_case(time_limit):
    """Audit NE01: a reader's function calling sys.exit(3) raised SystemExit out of check (a
    script exited with status 3, no case named). It fails the case like any other error."""
    with pytest.raises(
        ExerciseFailed,
        match=r"^kv_memory: case 'random, 5 tokens' raised SystemExit: 3 \(sys\.exit ends ",
    ):
        check("kv_memory", lambda x, K, V: sys.exit(3), time_limit=time_limit)


def test_wrong_shape_and_type_are_reported():
    with pytest.raises(ExerciseFailed, match=r"expected shape \(5, 6\), got \(6, 5\)"):
        check("kv_memory", lambda x, K, V: (F.relu(x @ K.T) @ V).T)
    with pytest.raises(
        ExerciseFailed, match=r"expected a torch\.Tensor of shape \(5, 6\), got list of 5 items"
    ):
        check("kv_memory", lambda x, K, V: (F.relu(x @ K.T) @ V).tolist())
    with pytest.raises(
        ExerciseFailed,
        match=r"expected a number \(a Python float or a 0-d tensor\), got tensor of shape "
        r"\(3, 4, 4\)",
    ):
        check("order_inflation", lambda a, b: (a - b).pow(2))
    with pytest.raises(ExerciseFailed, match="NaN or infinite"):
        check("kv_memory", lambda x, K, V: F.relu(x @ K.T) @ V / 0.0)
    # no chapter's exercise returns indices now: a throw-away one checks the message
    top = exercises.Exercise(
        "top_positions",
        12,
        "top_positions(c, k)",
        "",
        lambda c, k: c.topk(k, dim=0).indices.T,
        lambda g: [exercises.Case("random", (torch.randn(9, 4, generator=g), 2))],
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(EXERCISES, "top_positions", top)
        with pytest.raises(ExerciseFailed, match="expected integer indices"):
            check("top_positions", lambda c, k: c.topk(k, dim=0).indices.T.double())
    assert "top_positions" not in EXERCISES


def test_generic_hints_for_unlisted_mistakes():
    with pytest.raises(
        ExerciseFailed,
        match=r"Hint: your result is 2 times the expected one: a missing or extra factor",
    ):
        check("kv_memory", lambda x, K, V: 2 * F.relu(x @ K.T) @ V)
    with pytest.raises(ExerciseFailed, match="Hint: your result is the transpose"):
        check("eckart_young", lambda M, r: EXERCISES["eckart_young"].reference(M, r).mT)
    with pytest.raises(ExerciseFailed) as info:
        check("attention_from_form", lambda x, M, d_k: x @ M @ x.mT)
    assert "Most likely" not in str(info.value) and "Hint" not in str(info.value)


def test_in_place_modification_is_refused():
    def sneaky(M, r):
        M.add_(M.transpose(-1, -2).clone()).mul_(0.5)
        return EXERCISES["best_slot_form"].reference(M, r)

    with pytest.raises(
        ExerciseFailed, match=r"modified its input \(argument 1, tensor of shape \(3, 5, 5\)\)"
    ):
        check("best_slot_form", sneaky)


def test_modifying_an_input_list_is_refused():
    """The in-place check covered tensors only: sorting or appending to a list input passed."""
    reference = EXERCISES["paired_t"].reference

    def sorts_in_place(a, b):
        result = reference(a, b)
        b.sort()
        return result

    def appends(a, b):
        result = reference(a, b)
        a.append(0.0)
        return result

    with pytest.raises(ExerciseFailed, match=r"modified its input \(argument 2\[0\], list of 6"):
        check("paired_t", sorts_in_place)
    with pytest.raises(ExerciseFailed, match=r"modified its input \(argument 1, list of 6 items\)"):
        check("paired_t", appends)


def test_changes_inside_nested_inputs_are_found():
    first_change = exercises._checker._first_change
    before = {"w": [torch.zeros(2), 1.0], "n": 3}
    same = {"w": [torch.zeros(2), 1.0], "n": 3}
    assert first_change(before, same, "argument 1") is None
    changed = {"w": [torch.tensor([0.0, 1.0]), 1.0], "n": 3}
    assert first_change(before, changed, "argument 1") == "argument 1['w'][0]"
    assert first_change(before, {"w": [torch.zeros(2), 1.0]}, "x") == "x"
    assert first_change((1, [2]), (1, [2, 3]), "x") == "x[1]"
    assert first_change(torch.zeros(2), torch.zeros(2, dtype=torch.float32), "x") is None
    assert first_change(torch.zeros(2), torch.zeros(2, dtype=torch.int64), "x") == "x"


@pytest.mark.slow
def test_a_function_that_never_returns_is_stopped():
    """Bounded by the short limit itself (0.5 s against a 600 s sleep); no duration asserted."""

    def sleeps(x, K, V):
        time.sleep(600)

    def swallows_exceptions(x, K, V):
        while True:
            try:
                time.sleep(600)
            except Exception:  # a reader's catch-all must not swallow the time limit
                pass

    for fn in (sleeps, swallows_exceptions):
        with pytest.raises(
            ExerciseFailed,
            match=r"kv_memory: case 'random, 5 tokens': your function did not return within "
            r"0\.5 s \(check's time_limit\)",
        ):
            check("kv_memory", fn, time_limit=0.5)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_time_limit_keeps_an_outer_alarm():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 500.0)
        check("kv_memory", EXERCISES["kv_memory"].reference, time_limit=100.0)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 500.0
        assert not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


#: How long a test waits for a check that should return within a second or two (a hang limit
#: for a busy machine, not a duration that is asserted).
HANG_LIMIT_S = 300


@pytest.mark.slow
def test_the_time_limit_holds_outside_the_main_thread():
    """A SIGALRM limit could only be set from the main thread: elsewhere there was none, and a
    function that never returned blocked check for good."""
    results = []

    def checks() -> None:
        results.append(check("kv_memory", EXERCISES["kv_memory"].reference).n_cases)
        try:
            check("kv_memory", lambda x, K, V: time.sleep(600), time_limit=0.5)
        except ExerciseFailed as failure:
            results.append(str(failure))

    worker = threading.Thread(target=checks, daemon=True)
    worker.start()
    worker.join(timeout=HANG_LIMIT_S)
    assert len(results) == 2, f"check did not return within {HANG_LIMIT_S} s"
    assert results[0] == 6
    assert "your function did not return within 0.5 s (check's time_limit)" in results[1]


#: Readers' functions that swallow every exception in a loop: around a wait (where a signal is
#: always raised inside the try), around tensor code, and around an inner loop (where anything
#: raised is raised inside the try), checked in a fresh interpreter: a call that cannot be
#: stopped runs on, and a broken fix's check would never return.
_SWALLOWING_READERS = """
import os, time, torch
from kvattn.course.exercises import ExerciseFailed, check

def retries(x, K, V):
    while True:
        try:
            time.sleep(0.01)
        except:
            pass

def spins(x, K, V):
    while True:
        try:
            torch.zeros(1).sum()
        except:
            pass

def nested(x, K, V):
    while True:
        try:
            while True:
                pass
        except:
            pass

for fn in (retries, spins, nested):
    try:
        check("kv_memory", fn, time_limit=0.5)
    except ExerciseFailed as failure:
        print(failure, flush=True)
os._exit(0)  # no interpreter shutdown: an abandoned thread may be inside torch
"""


@pytest.mark.slow
def test_a_bare_except_cannot_swallow_the_time_limit():
    """The limit raised one exception inside the call: a bare except in a loop swallowed it, and
    check never returned."""
    try:
        run = subprocess.run(
            [sys.executable, "-c", _SWALLOWING_READERS],
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT_S,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"check did not return within {HANG_LIMIT_S} s: the bare except won")
    failures = run.stdout.split("kv_memory: case ")[1:]
    assert len(failures) == 3, run.stdout + run.stderr
    for failure in failures:
        assert failure.startswith(
            "'random, 5 tokens': your function did not return within 0.5 s (check's time_limit)"
        )
    # the inner loop catches every stop: check returns all the same, and says what runs on
    assert "It is still running in the background: it did not stop when told to" in failures[2]


def test_the_call_keeps_the_callers_torch_settings():
    """The reader's function runs in a thread of its own; torch's grad mode and default device
    are per thread, and it sees the caller's."""
    call = exercises._checker._call_with_time_limit

    def settings() -> tuple[bool, str]:
        return torch.is_grad_enabled(), torch.zeros(1).device.type

    assert call(settings, (), 60.0) == (True, "cpu")
    with torch.no_grad():
        assert call(settings, (), 60.0) == (False, "cpu")
    torch.set_default_device("meta")
    try:
        assert call(settings, (), 60.0) == (True, "meta")
    finally:
        torch.set_default_device(None)


def test_an_interrupt_stops_the_call_too():
    """Kernel → Interrupt (KeyboardInterrupt in the caller's thread) also ends the call, which
    would otherwise run on in its thread."""
    ended = threading.Event()

    def waits() -> None:
        try:
            time.sleep(0.2)
            _thread.interrupt_main()  # while check waits for this call
            while True:
                time.sleep(0.01)
        finally:
            ended.set()

    # Kernel → Interrupt reaches the check through Python's SIGINT handler, which a kernel
    # installs; interrupt_main does nothing where SIGINT is left to the default action or ignored,
    # as a test run earlier in the same pytest worker may leave it (the full suite once waited
    # out the whole hang limit here)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            exercises._checker._call_with_time_limit(waits, (), float(HANG_LIMIT_S))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ended.wait(HANG_LIMIT_S)


def test_odd_results_get_a_clear_message():
    reference = EXERCISES["kv_memory"].reference
    cases = [
        (
            lambda x, K, V: reference(x, K, V).to("meta"),
            r"on device 'meta', expected one on the "
            r"inputs' device 'cpu' \(a meta tensor has a shape but no values\)",
        ),
        (
            lambda x, K, V: reference(x, K, V).numpy(),
            r"expected a torch\.Tensor of shape "
            r"\(5, 6\), got numpy ndarray of shape \(5, 6\); convert it with torch\.from_numpy",
        ),
        (lambda x, K, V: None, r"expected a torch\.Tensor of shape \(5, 6\), got None\."),
        (
            lambda x, K, V: (reference(x, K, V),),
            r"expected a torch\.Tensor of shape \(5, 6\), "
            r"got tuple of 1 item\.",
        ),
        (
            lambda x, K, V: reference(x, K, V).long(),
            r"expected floating-point values "
            r"\(torch\.float64\), got dtype torch\.int64",
        ),
    ]
    for fn, message in cases:
        with pytest.raises(ExerciseFailed, match=message):
            check("kv_memory", fn)
    with pytest.raises(
        ExerciseFailed,
        match=r"expected a number \(a Python float or a 0-d tensor\), got tensor of shape \(\) "
        r"on device 'meta'",
    ):
        check("order_inflation", lambda a, b: torch.tensor(1.0, device="meta"))
    with pytest.raises(ExerciseFailed, match=r"expected a tuple of 2 values, got None"):
        check("perron_pair", lambda A: None)


def test_bad_time_limits():
    with pytest.raises(ValueError, match=r"time_limit must be a positive finite .* got 0"):
        check("kv_memory", EXERCISES["kv_memory"].reference, time_limit=0)
    with pytest.raises(ValueError, match=r"time_limit must be .* got nan"):
        check("kv_memory", EXERCISES["kv_memory"].reference, time_limit=math.nan)
    with pytest.raises(TypeError, match=r"time_limit must be a number of seconds or None, got str"):
        check("kv_memory", EXERCISES["kv_memory"].reference, time_limit="30")
    assert check("kv_memory", EXERCISES["kv_memory"].reference, time_limit=None).n_cases == 6


def test_bad_arguments():
    with pytest.raises(KeyError, match="unknown exercise 'kv'; known: kv_memory"):
        check("kv", lambda: None)
    with pytest.raises(TypeError, match="pass your function itself"):
        check("kv_memory", F.relu(torch.ones(1)))
    with pytest.raises(KeyError):
        exercises.describe("nope")


def test_describe_prints_the_task(capsys):
    exercises.describe("density")
    out = capsys.readouterr().out
    assert out.startswith("Chapter 7: density(q) -> Tensor\n")
    assert "Σ_{s ≤ t} q_sᵀ q_s" in out


# -- the references against independent implementations ------------------------------------------


def test_sdpa_references_match_torch():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 5, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    eye = torch.eye(8, dtype=torch.float64)
    torch.testing.assert_close(EXERCISES["generalised_sdpa"].reference(q, k, v, eye), expected)
    G = torch.randn(8, 8, generator=gen, dtype=torch.float64)
    scores = (q @ G @ k.mT / 8**0.5).masked_fill(
        ~torch.ones(5, 5, dtype=torch.bool).tril(), -math.inf
    )
    torch.testing.assert_close(
        EXERCISES["generalised_sdpa"].reference(q, k, v, G), scores.softmax(-1) @ v
    )


def test_attention_from_form_gives_the_weights_of_sdpa():
    """With M = W_Qᵀ W_K the weights are those of SDPA on q = x W_Qᵀ, k = x W_Kᵀ (read off with
    the identity as values)."""
    gen = torch.Generator().manual_seed(2)
    W_Q, W_K = (torch.randn(4, 6, generator=gen, dtype=torch.float64) for _ in range(2))
    x = torch.randn(3, 5, 6, generator=gen, dtype=torch.float64)
    eye = torch.eye(5, dtype=torch.float64).expand(3, 5, 5)
    expected = F.scaled_dot_product_attention(x @ W_Q.T, x @ W_K.T, eye, is_causal=True)
    got = EXERCISES["attention_from_form"].reference(x, W_Q.T @ W_K, 4)
    torch.testing.assert_close(got, expected)


def _tiny_gpt_attention():
    cfg = config.PLDRConfig(
        vocab_size=16, hidden_size=16, num_attention_heads=2, num_hidden_layers=1, A_dff=8
    )
    torch.manual_seed(0)
    return pldr.GPT(cfg).double().decoder.dec_layers[0].mha1, cfg.d_k


def test_head_form_and_rope_form_match_the_model():
    """head_form is the model's form on [x, 1] with biases; rope_form with G = I is its form at
    distance i − j; with a commuting G the form depends on i − j only, with a general G not."""
    attn, d_k = _tiny_gpt_attention()
    with torch.no_grad():
        torch.nn.init.normal_(attn.wq.bias)
        torch.nn.init.normal_(attn.wk.bias)
    rows = slice(d_k, 2 * d_k)  # head 1
    W_Q, b_Q = attn.wq.weight[rows].detach(), attn.wq.bias[rows].detach()
    W_K, b_K = attn.wk.weight[rows].detach(), attn.wk.bias[rows].detach()
    expected = diagnostics.head_bilinear_form(attn, 1, 0, with_bias=True)
    torch.testing.assert_close(EXERCISES["head_form"].reference(W_Q, b_Q, W_K, b_K), expected)
    rope_form = EXERCISES["rope_form"].reference
    eye = torch.eye(d_k, dtype=torch.float64)
    theta = attn.cfg.rope_theta
    for i, j in [(5, 2), (9, 0), (3, 3)]:
        torch.testing.assert_close(
            rope_form(W_Q, W_K, eye, theta, i, j), diagnostics.head_bilinear_form(attn, 1, i - j)
        )
    G = torch.randn(d_k, d_k, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    Pi = diagnostics.commutant_projection(G)
    torch.testing.assert_close(
        rope_form(W_Q, W_K, Pi, theta, 7, 2), rope_form(W_Q, W_K, Pi, theta, 12, 7)
    )
    moved = (rope_form(W_Q, W_K, G, theta, 7, 2) - rope_form(W_Q, W_K, G, theta, 12, 7)).norm()
    assert moved > 0.1 * rope_form(W_Q, W_K, G, theta, 7, 2).norm()


def test_folded_keys_and_thresholds_give_the_same_layer():
    """fold_affine's reference against the layer it folds, and against the library's
    absorb_global_query for a pure query (c = 0)."""
    gen = torch.Generator().manual_seed(3)
    K, A, c = (torch.randn(*s, generator=gen) for s in ((8, 5), (5, 5), (5,)))
    x = torch.randn(4, 5, generator=gen)
    keys, thresholds = EXERCISES["fold_affine"].reference(K, A, c)
    torch.testing.assert_close((x @ A + c) @ K.T, x @ keys.T + thresholds)
    layer = mlp.KeyValueMLP(5, 8, d_out=3)
    with torch.no_grad():
        layer.W_k.copy_(K)
    absorbed = memories.absorb_global_query(layer, A)
    torch.testing.assert_close(absorbed.W_k, EXERCISES["fold_affine"].reference(K, A, 0 * c)[0])


def test_strongest_slots_reads_the_largest_contributions():
    """The reference keeps exactly the n contributions relu(x·k_j) v_j largest in norm, found
    here by a loop over one token's slots; n = m gives the whole layer."""
    gen = torch.Generator().manual_seed(4)
    x, K, V = (torch.randn(*s, generator=gen, dtype=torch.float64) for s in ((6,), (9, 6), (9, 3)))
    ref = EXERCISES["strongest_slots"].reference
    parts = [torch.relu(x @ k) * v for k, v in zip(K, V, strict=True)]
    largest = sorted(parts, key=lambda p: -float(p.norm()))
    for n in (1, 3, 9):
        torch.testing.assert_close(ref(x[None], K, V, n)[0], sum(largest[:n]))
    torch.testing.assert_close(ref(x[None], K, V, 9)[0], torch.relu(x @ K.T) @ V)
    assert (ref(x[None], K, V, 1)[0] - ref(x[None], K, V, 9)[0]).norm() > 1e-3


def test_written_values_read_every_stored_input_back():
    """A memory written by write_values recalls each of its N keys exactly, also for N > d
    (where a linear memory x Xᵀ V could not: X Xᵀ has rank d), and V = Y for orthonormal keys."""
    gen = torch.Generator().manual_seed(5)
    X = torch.nn.functional.normalize(torch.randn(40, 8, generator=gen, dtype=torch.float64), dim=1)
    Y = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    V = EXERCISES["write_values"].reference(X, Y)
    torch.testing.assert_close(torch.relu(X @ X.T) @ V, Y)
    assert torch.linalg.matrix_rank(X @ X.T) == 8
    E = torch.eye(4, dtype=torch.float64)
    torch.testing.assert_close(EXERCISES["write_values"].reference(E, Y[:4]), Y[:4])


def test_rank1_layer_matches_the_full_bilinear_layer():
    """The rank-1 layer built from the slot matrices computes the full layer of those matrices
    (mlp.FullBilinearAttentionMLP at rank 1, fed the same M_j through slot_matrices)."""
    torch.manual_seed(6)
    full = mlp.FullBilinearAttentionMLP(6, 5, rank=1, d_out=4, act="gelu").double()
    x = torch.randn(7, 6, dtype=torch.float64)
    build = EXERCISES["rank1_layer"].reference
    layer = build(mlp.slot_matrices(full), full.W_v.detach(), torch.nn.functional.gelu)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), full(x))


def test_rope_reference_matches_the_model():
    cfg = config.PLDRConfig(
        vocab_size=16, hidden_size=16, num_attention_heads=2, num_hidden_layers=1, A_dff=8
    )
    rope = plga.RotaryEmbedding(cfg.d_k, 32, 10_000.0, interleaved=True)
    x = torch.randn(7, cfg.d_k, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    expected = rope(x.view(1, 7, 1, cfg.d_k)).view(7, cfg.d_k)
    torch.testing.assert_close(EXERCISES["rope"].reference(x, 10_000.0), expected)


def test_generation_loss_references_match_the_library():
    """Chapter 8's references on a model the library measures too: generation_loss is
    ablations.generation_mode_loss, the full pass differs from it for a block-density PLDR-LLM
    and not for a GPT, and gap_by_position averages to full pass − generation, with zeros at the
    first position (one key: the softmax is 1 whatever G_LM is) and at the last (the same
    input)."""
    from kvattn.ablations import generation_mode_loss
    from kvattn.course.exercises import ch08

    gen = torch.Generator().manual_seed(0)
    for block_density in (True, False):
        model = ch08._tiny_model(gen, block_density=block_density, seed=0)

        def lm(ids, model=model):
            return model(ids).logits.detach()

        blocks = ch08._blocks(gen, 3, 8)
        ours = EXERCISES["generation_loss"].reference(lm, blocks)
        assert ours == pytest.approx(generation_mode_loss(model, blocks), rel=1e-6)
        full = F.cross_entropy(lm(blocks[:, :-1]).transpose(1, 2), blocks[:, 1:]).item()
        gap = EXERCISES["gap_by_position"].reference(lm, blocks)
        assert gap.shape == (8,)
        assert gap.mean().item() == pytest.approx(full - ours, abs=1e-12)
        assert gap[0].abs() < 1e-12 and gap[-1].abs() < 1e-12
        if block_density:
            assert abs(full - ours) > 1e-2 and gap[1:-1].abs().max() > 1e-2
        else:
            assert abs(full - ours) < 1e-12 and gap.abs().max() < 1e-12


def test_truncation_matches_the_layer_and_eckart_young():
    layer = mlp.FullBilinearAttentionMLP(5, 3, 5, rank=5).double()
    M = mlp.slot_matrices(layer)
    cut = mlp.slot_matrices(mlp.truncate_rank(layer, 2, cut="matrix"))
    torch.testing.assert_close(EXERCISES["eckart_young"].reference(M, 2), cut)
    S = torch.linalg.svdvals(M)
    error = (M - cut).norm(dim=(-2, -1))
    torch.testing.assert_close(error, S[:, 2:].norm(dim=-1))


def test_perron_pair_is_an_eigenpair():
    A = torch.rand(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(6)) + 0.1
    lam, v = EXERCISES["perron_pair"].reference(A)
    torch.testing.assert_close(A @ v, lam * v)
    assert lam == pytest.approx(float(torch.linalg.eigvals(A).abs().max()), rel=1e-12)
    assert float(v.sum()) == pytest.approx(1.0) and bool((v > 0).all())


def test_matched_slots_values():
    ref = EXERCISES["matched_slots"].reference
    assert ref(64, 64, 256, 1) == 170  # 2·256/3 rounded down
    assert ref(64, 64, 256, 2) == 102  # 2·256/5
    assert ref(64, 16, 256, 2) == 75  # 256·80 // (4·64 + 16): fewer than the rule's 102
    assert ref(10, 3, 7, 3) == 1  # 7·13 // (6·10 + 3)
    assert EXERCISES["matched_slots"].chapter == EXERCISES["eckart_young"].chapter == 2


def test_paired_t_and_spearman_values():
    assert EXERCISES["paired_t"].reference([1.0, 2.0], [0.5, 1.8]) == pytest.approx(
        0.35 / (math.sqrt(0.045) / math.sqrt(2))
    )
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    assert EXERCISES["spearman"].reference(x, x.exp()) == pytest.approx(1.0)
    y = torch.tensor([2.0, 1.0, 4.0, 3.0], dtype=torch.float64)
    assert EXERCISES["spearman"].reference(x, y) == pytest.approx(0.6)  # 1 − 6·4/(4·15)


def test_permutation_p_values():
    """Chapter 11: exact values, and agreement with an independent count over orderings."""
    ref = EXERCISES["permutation_p"].reference
    low, high = torch.arange(3.0, dtype=torch.float64), torch.tensor([10.0, 11.0, 12.0])
    assert ref(high, low) == pytest.approx(2 / 20)  # the split and its mirror of 20
    four_low = torch.arange(4.0, dtype=torch.float64)
    assert ref(high[:2], four_low) == pytest.approx(1 / 15)
    same = torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    assert ref(same[:2], same[2:]) == 1.0  # no difference: every split ties
    x, y = torch.tensor([0.3, -1.2, 2.0]), torch.tensor([0.1, 0.5, -0.4, 1.1])
    pooled = torch.cat([x, y]).tolist()
    observed = abs(x.mean() - y.mean()).item()
    hits = [
        abs(sum(p[:3]) / 3 - sum(p[3:]) / 4) >= observed - 1e-9
        for p in itertools.permutations(pooled)
    ]
    assert ref(x, y) == pytest.approx(sum(hits) / len(hits))
    smallest = EXERCISES["smallest_p"].reference
    assert smallest(2, 4) == pytest.approx(1 / 15) and smallest(3, 3) == pytest.approx(0.1)
    assert ref(high[:2], four_low) == pytest.approx(smallest(2, 4))


def test_commutant_projection_commutes_with_rope():
    G = torch.randn(6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    P = EXERCISES["commutant_projection"].reference(G)
    rope = plga.RotaryEmbedding(6, 8, 100.0, interleaved=True)
    eye = torch.eye(6, dtype=torch.float64).view(6, 1, 1, 6)
    R = rope(eye, start=3).view(6, 6)
    torch.testing.assert_close(R @ P, P @ R)
    assert float((R @ G - G @ R).abs().max()) > 0.1


def test_prefix_density_ends_with_the_block_density_and_grows_by_one_term():
    q = torch.randn(2, 6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    A = EXERCISES["density"].reference(q)
    torch.testing.assert_close(A[:, -1], q.mT @ q)
    torch.testing.assert_close(A[:, 3] - A[:, 2], torch.einsum("bi,bj->bij", q[:, 3], q[:, 3]))


def test_iswiglu_slope_is_the_autograd_derivative():
    u = torch.linspace(-20, 20, 401, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(plga.iswiglu(u).sum(), u)
    torch.testing.assert_close(EXERCISES["iswiglu_slope"].reference(u.detach()), grad)


def test_recover_P_reads_the_exponents_of_a_plga_layer():
    cfg = config.PLDRConfig(
        vocab_size=16, hidden_size=16, num_attention_heads=2, num_hidden_layers=1, A_dff=8
    )
    torch.manual_seed(1)
    model = pldr.PLDRLLM(cfg).double()
    pg = model.decoder.dec_layers[0].mha1.plgatt_layer
    with torch.no_grad():
        pg.a.copy_(torch.eye(cfg.d_k) + 0.1 * torch.randn_like(pg.a))
    t = model(torch.tensor([[3, 5, 7, 9, 11]]), output_pldr_attentions=True).pldr_attentions[0]
    P = EXERCISES["recover_P"].reference(t.A_LM[0], t.G_LM[0], pg.a, pg.b_a).detach()
    away = (t.A_LM[0].log().abs() > 0.1).detach()  # where log A_LM is not near 0
    torch.testing.assert_close(P[away], pg.P.detach()[away], rtol=1e-6, atol=1e-8)


def test_order_inflation_is_the_ratio_of_the_two_order_parameters():
    gen = torch.Generator().manual_seed(9)
    x1 = torch.randn(3, 4, 4, generator=gen, dtype=torch.float64) + 0.3
    x2 = x1 + 0.2 * torch.randn(3, 4, 4, generator=gen, dtype=torch.float64)
    ratio = diagnostics.order_parameter(x1, x2) / diagnostics.order_parameter(x1, x2, "rms")
    assert EXERCISES["order_inflation"].reference(x1, x2) == pytest.approx(ratio, rel=1e-12)


def test_rank_one_distance_and_row_spread_are_least_squares_fits():
    A = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(10))
    U, S, Vh = torch.linalg.svd(A)
    best = S[0] * torch.outer(U[:, 0], Vh[0])
    assert float(EXERCISES["rank_one_distance"].reference(A)) == pytest.approx(
        float((A - best).norm() / A.norm()), rel=1e-12
    )
    alpha = A.mean(0)
    spread = float(EXERCISES["row_spread"].reference(A))
    assert spread == pytest.approx(float((A - alpha).pow(2).sum() / A.pow(2).sum()), rel=1e-12)
    shift = 0.1 * torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert float((A - alpha - shift).pow(2).sum() / A.pow(2).sum()) > spread


def test_decoding_agreement_values():
    ref = torch.tensor([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]])
    out = torch.tensor([[1, 2, 3, 4, 9, 6], [1, 2, 9, 4, 5, 6]])
    # prompt of 2: row 0 agrees on 2 of 4 new tokens before differing, row 1 on none
    assert EXERCISES["decoding_agreement"].reference(ref, out, 2) == pytest.approx(2 / 8)
    assert EXERCISES["decoding_agreement"].reference(ref, ref, 2) == 1.0


def test_plane_residuals_add_up_to_the_squared_commutant_residual():
    G = torch.randn(2, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(11))
    parts = EXERCISES["plane_residuals"].reference(G)
    assert parts.shape == (2, 4, 4)
    torch.testing.assert_close(parts.sum((-2, -1)), diagnostics.commutant_residual(G) ** 2)


def test_twirl_average_tends_to_the_commutant_projection():
    """Over many positions with fast planes (θ = 10, d_k = 4) the density's average converges
    to the projection; over few it does not."""
    G = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(12))
    twirl = EXERCISES["twirl_average"].reference
    Pi = diagnostics.commutant_projection(G)
    far = float((twirl(G, 10.0, 4) - Pi).norm() / G.norm())
    near = float((twirl(G, 10.0, 3000) - Pi).norm() / G.norm())
    assert near < 0.01 < far


def test_factor_hints_only_for_simple_factors():
    """'2 times', '√2 times', '−1 times' help; '1.001 times' (a different formula) would mislead."""
    with pytest.raises(ExerciseFailed, match=r"Hint: your number is 1/2 times the expected one"):
        check("order_inflation", lambda a, b: 0.5 * EXERCISES["order_inflation"].reference(a, b))
    with pytest.raises(ExerciseFailed, match=r"Hint: your result is √2 times"):
        check("kv_memory", lambda x, K, V: math.sqrt(2) * F.relu(x @ K.T) @ V)
    with pytest.raises(ExerciseFailed) as info:
        check("permutation_p", lambda x, y: 1.001 * EXERCISES["permutation_p"].reference(x, y))
    assert "Hint" not in str(info.value)
    with pytest.raises(ExerciseFailed, match=r"expected 0\.1, got 0\.1001"):
        check("permutation_p", lambda x, y: 1.001 * EXERCISES["permutation_p"].reference(x, y))


def test_float32_solutions_pass_at_float32_tolerance_and_half_precision_is_refused():
    """Rounding in float32 (~1e-6 relative) is not a mistake; a wrong formula still fails."""
    result = check("kv_memory", lambda x, K, V: F.relu(x.float() @ K.float().T) @ V.float())
    assert 0 < result.largest_difference < 1e-4
    with pytest.raises(ExerciseFailed, match=r"\[your result is float32"):
        check("kv_memory", lambda x, K, V: (x.float() @ K.float().T) @ V.float())
    with pytest.raises(ExerciseFailed, match=r"torch\.bfloat16, too coarse"):
        check("kv_memory", lambda x, K, V: (F.relu(x @ K.T) @ V).bfloat16())


def test_register_refuses_duplicates_and_non_exercises_without_adding_any():
    before = list(EXERCISES)
    fresh = exercises.Exercise("a_new_one", 12, "a_new_one(x)", "", abs, lambda g: [])
    with pytest.raises(ValueError, match=r"'kv_memory' \(chapter 12\) is already registered \(ch"):
        exercises._checker.register(fresh, dataclasses.replace(fresh, name="kv_memory", chapter=12))
    with pytest.raises(ValueError, match=r"'a_new_one' \(chapter 12\) is already registered"):
        exercises._checker.register(fresh, fresh)
    with pytest.raises(TypeError, match="register takes Exercise records, got dict"):
        exercises._checker.register(fresh, {"name": "x"})
    assert list(EXERCISES) == before


# -- the Part I capstone ------------------------------------------------------------------------


def _slot_loop_layer(W_q, W_k, W_v, act):
    """A reader's gated_from_slots written literally as the sum over slots."""

    def layer(x):
        return sum(
            act(x @ q)[..., None] * (x @ k)[..., None] * v
            for q, k, v in zip(W_q, W_k, W_v, strict=True)
        )

    return layer


def test_gated_from_slots_accepts_a_slot_by_slot_layer_and_wants_a_function():
    assert check("gated_from_slots", _slot_loop_layer).n_cases == 4
    with pytest.raises(
        ExerciseFailed,
        match=r"expected a function \(the layer, to be called on tensor of shape \(4, 5\)\), got "
        r"tensor of shape \(7, 5\)",
    ):
        check("gated_from_slots", lambda W_q, W_k, W_v, act: W_q)
    with pytest.raises(
        ExerciseFailed,
        match=r"case 'SiLU \(SwiGLU\), 4 tokens': the function yours returned raised RuntimeError",
    ):
        check("gated_from_slots", lambda W_q, W_k, W_v, act: lambda x: x @ W_q)


def test_symmetry_breaking_reference_zero_where_a_symmetry_holds():
    ex = EXERCISES["symmetry_breaking"]
    got = {c.label: ex.reference(*c.args) for c in ex.cases(torch.Generator().manual_seed(0))}
    exchange, scale = got["symmetric rank-1 σ((x·q)(x·k)), SiLU, α = 3"]
    assert exchange == 0.0 and scale < 1e-25
    exchange, scale = got["ReGLU, α = 0.5 (ReLU is positively homogeneous)"]
    assert exchange > 0.1 and scale < 1e-25
    exchange, scale = got["SwiGLU, α = 2"]
    assert exchange > 0.1 and scale > 0.01

    # A reader who rebuilds the layer rather than calling kvattn.symmetry agrees with it.
    def rebuilds(build, W_q, W_k, W_v, act, x, alpha):
        y = build(W_q, W_k, W_v, act)(x)
        swapped, scaled = build(W_k, W_q, W_v, act)(x), build(alpha * W_q, W_k / alpha, W_v, act)(x)
        return tuple(float(((z - y) ** 2).sum() / (y**2).sum()) for z in (swapped, scaled))

    assert check("symmetry_breaking", rebuilds).n_cases == 5


def test_symmetry_breaking_on_one_slot_estimates_the_population_violations():
    """One slot with q = e1, k = e2, v = 1 on x ~ N(0, I₂): the layer's relative violations are
    Monte Carlo estimates of kvattn.symmetry's E[(σ(a)b − σ(b)a)²]/E[(σ(a)b)²] and its scale
    analogue (a, b independent standard normals)."""
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(400_000, 2, generator=gen, dtype=torch.float64)
    eye = torch.eye(2, dtype=torch.float64)
    build = exercises.ch04.gated_layer
    exchange, scale = EXERCISES["symmetry_breaking"].reference(
        build, eye[:1], eye[1:], torch.ones(1, 1, dtype=torch.float64), F.silu, x, 2.0
    )
    assert exchange == pytest.approx(symmetry.exchange_violation("silu"), rel=0.02)
    assert scale == pytest.approx(symmetry.scale_violation("silu", 2.0), rel=0.02)


# -- the Part II capstone ----------------------------------------------------------------------


def test_plga_head_reference_is_the_shipped_models_own_head():
    """The reference agrees with PLDRLLM's deductive tensors (float64) for every layer and head,
    and y = E v is the head's slice of the attention output before the output projection."""
    from kvattn.course.exercises import ch07

    model = ch07.shipped_model()
    ids = torch.tensor([[5, 17, 300, 42, 9, 1000, 77, 8]])
    out = model(ids, output_pldr_attentions=True).pldr_attentions
    captured = {}
    for layer in range(model.config.num_hidden_layers):
        attn = model.decoder.dec_layers[layer].mha1
        handle = attn.dense.register_forward_pre_hook(lambda m, a: captured.update(y=a[0]))
        model(ids)
        handle.remove()
        for head in range(model.config.num_attention_heads):
            got = EXERCISES["plga_head"].reference(*ch07.shipped_head(model, ids, layer, head))
            t = out[layer]
            expected = [getattr(t, n)[0, head] for n in ("A0", "A", "A_LM", "A_P", "G_LM", "E")]
            d_k = model.config.d_k
            expected.append(captured["y"][0, :, head * d_k : (head + 1) * d_k])
            for name, g, e in zip(EXERCISES["plga_head"].outputs, got, expected, strict=True):
                torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12, msg=name)


def test_plga_head_names_the_first_broken_stage():
    reference = EXERCISES["plga_head"].reference

    def wrong_power(q, k, v, weights):
        A0, A, A_LM = reference(q, k, v, weights)[:3]
        A_P = A_LM.pow(1.5 * weights["P"])  # carried on into G_LM, E and y
        G_LM = weights["a"] @ A_P + weights["b_a"]
        E = torch.softmax(
            (q @ G_LM @ k.T / k.shape[-1] ** 0.5).masked_fill(
                ~torch.ones(len(q), len(q), dtype=torch.bool).tril(), -math.inf
            ),
            -1,
        )
        return A0, A, A_LM, A_P, G_LM, E, E @ v

    with pytest.raises(ExerciseFailed) as info:
        check("plga_head", wrong_power)
    message = str(info.value)
    assert message.startswith(
        "plga_head: case 'pldr_tiny, layer 0, head 0, 22 tokens of Python' fails: stage 'A_P' is "
        "the first that differs; A0, A, A_LM agree: values differ"
    )
    assert "Most likely" not in message
    with pytest.raises(ExerciseFailed, match=r"stage 'A' is the first that differs; A0 agrees"):
        check("plga_head", lambda q, k, v, w: (q.T @ q, *reference(q, k, v, w)[:-1])[:7])
    assert check("plga_head", reference).n_cases == 3


def test_shipped_head_refuses_bad_arguments():
    from kvattn.course.exercises import ch07

    model = ch07.shipped_model()
    ids = torch.tensor([[5, 17, 300]])
    with pytest.raises(ValueError, match=r"layer must be in 0 … 1, got 2"):
        ch07.shipped_head(model, ids, 2, 0)
    with pytest.raises(ValueError, match=r"head must be in 0 … 3, got 4"):
        ch07.shipped_head(model, ids, 0, 4)
    with pytest.raises(ValueError, match=r"ids must be token ids of shape \(1, S\), got \(3,\)"):
        ch07.shipped_head(model, ids[0], 0, 0)
    gpt = pldr.GPT(model.config)
    with pytest.raises(TypeError, match=r"model must be a PLDRLLM with PLGA attention, got 'sdpa'"):
        ch07.shipped_head(gpt, ids, 0, 0)


def test_gated_layer_refuses_an_activation_without_a_gated_variant():
    W = torch.ones(2, 3, dtype=torch.float64)
    with pytest.raises(
        ValueError, match=r"act must be F\.silu, F\.relu, F\.gelu or torch\.sigmoid"
    ):
        exercises.ch04.gated_layer(W, W, W, torch.tanh)


def test_minimum_detectable_effect_exercise_values_and_mistakes():
    ref = EXERCISES["minimum_detectable_effect"].reference
    # 8 pairs: t_{0.975,7} = 2.364624, t_{0.8,7} = 0.896029
    assert ref(0.03, 8) == pytest.approx((2.364624252 + 0.896029340) * 0.03 / math.sqrt(8))
    check("minimum_detectable_effect", lambda sd, n: ref(sd, n))
    with pytest.raises(ExerciseFailed, match="normal quantiles"):
        check("minimum_detectable_effect", lambda sd, n: (1.959964 + 0.841621) * sd / math.sqrt(n))
    with pytest.raises(ExerciseFailed, match="divide sd by √n"):
        check("minimum_detectable_effect", lambda sd, n: ref(sd, n) * math.sqrt(n))


def test_eckart_young_exercise_names_the_slot_cut_as_a_mistake():
    with pytest.raises(ExerciseFailed, match="the cut chapter 2 makes for the slot score"):
        check("eckart_young", lambda M, r: mlp.score_cut(M, r)[0].mT @ mlp.score_cut(M, r)[1])


# -- Part I: the references against the library and against measurements ------------------------


def test_agreement_chance_is_the_mean_over_every_pairing():
    """The exact chance level is the average agreement over all m! pairings of values with keys
    (what memories.agreement estimates by shuffling)."""
    import itertools

    next_token = torch.tensor([3, 1, 3, 2, 3])
    top_token = torch.tensor([3, 3, 2, 1, 0])
    rates = [
        float((top_token[list(p)] == next_token).double().mean())
        for p in itertools.permutations(range(5))
    ]
    rate = float((top_token == next_token).double().mean())
    expected = rate / (sum(rates) / len(rates))
    got = EXERCISES["agreement_over_chance"].reference(next_token, top_token)
    assert got == pytest.approx(expected, rel=1e-12)


def test_gated_mlp_reference_is_the_course_layer_in_llama_layout():
    layer = mlp.GatedMLP(5, 7, 3, variant="swiglu").double()
    x = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        got = EXERCISES["gated_mlp"].reference(x, layer.W_q, layer.W_v.T, layer.W_k, F.silu)
        torch.testing.assert_close(got, layer(x))


def test_best_slot_form_is_the_score_cut_and_beats_the_matrix_cut():
    M = torch.randn(4, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(10))
    S = EXERCISES["best_slot_form"].reference(M, 1)
    Q, K = mlp.score_cut(M, 1)
    torch.testing.assert_close(S, (Q.mT @ K + K.mT @ Q) / 2)
    sym = (M + M.mT) / 2
    U, s, Vh = torch.linalg.svd(M)
    ey = (U[..., :1] * s[..., None, :1]) @ Vh[..., :1, :]
    score_error = (sym - S).norm(dim=(-2, -1))
    matrix_error = (sym - (ey + ey.mT) / 2).norm(dim=(-2, -1))
    assert bool((score_error <= matrix_error + 1e-12).all())


def test_form_from_outputs_recovers_the_symmetrised_interaction_tensor():
    from kvattn import interaction

    layer = mlp.GatedMLP(5, 6, 3, variant="bilinear").double().requires_grad_(False)
    S = EXERCISES["form_from_outputs"].reference(layer, 5)
    torch.testing.assert_close(S, interaction.symmetrise(interaction.interaction_tensor(layer)))


def test_function_gap_is_zero_exactly_when_the_outputs_agree():
    """The gap of exercise function_gap against an independent judge, the layers' outputs: 0 (to
    rounding) for the changes that keep the function, and then the outputs agree; positive for
    the others, and then they differ."""
    ex = EXERCISES["function_gap"]
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)

    def outputs(W_q, W_k, W_v):
        return ((x @ W_q.T) * (x @ W_k.T)) @ W_v

    for case in ex.cases(torch.Generator().manual_seed(0)):
        first, second = case.args
        gap = ex.reference(first, second)
        same = torch.allclose(outputs(*first), outputs(*second), rtol=1e-10, atol=1e-10)
        assert (gap < 1e-12) == same, case.label
        assert same == (case.label.startswith(("q_j ↔ k_j", "slots reordered", "(q_j, k_j, v_j)")))


def test_best_fixed_form_solves_the_normal_equations():
    """The reference of best_fixed_form recovers sym(B) of a bilinear layer exactly, and for a
    gated layer its residual is orthogonal to every product x_a x_b (the normal equations of
    least squares), which numpy's solver confirms."""
    import numpy as np

    from kvattn import interaction

    ex = EXERCISES["best_fixed_form"]
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(200, 4, generator=gen, dtype=torch.float64)
    bilinear = mlp.GatedMLP(4, 6, 3, variant="bilinear").double().requires_grad_(False)
    S = ex.reference(bilinear, x)
    expected = interaction.symmetrise(interaction.interaction_tensor(bilinear))
    torch.testing.assert_close(S, expected, rtol=1e-10, atol=1e-12)
    swiglu = mlp.GatedMLP(4, 6, 2, variant="swiglu").double().requires_grad_(False)
    S = ex.reference(swiglu, x)
    torch.testing.assert_close(S, S.transpose(-1, -2))
    residual = swiglu(x) - interaction.bilinear_form(S, x)
    products = (x[:, :, None] * x[:, None, :]).reshape(200, 16)
    assert float((products.T @ residual).abs().max()) < 1e-10
    solution = np.linalg.lstsq(products.numpy(), swiglu(x).numpy(), rcond=None)[0]
    torch.testing.assert_close(S, torch.from_numpy(solution.T.reshape(2, 4, 4)))
    # the fitted form is not the average of the gated layer's local matrices sym(B_o(x))
    local = interaction.symmetrise(interaction.gated_interaction(swiglu, x)).mean(0)
    assert float((S - local).abs().max()) > 1e-3


def test_effective_parameters_is_the_jacobian_rank_of_the_layer():
    """The rank of ∂sym(B)/∂weights equals kvattn.symmetry.jacobian_rank of the layer's outputs,
    below saturation (two directions per slot lost) and above it (the function space is full)."""
    for d, m, d_out in ((6, 3, 4), (3, 6, 2)):
        torch.manual_seed(d)
        layer = mlp.GatedMLP(d, m, d_out, variant="bilinear").double()
        x = torch.randn(400, d, dtype=torch.float64)
        measured = symmetry.jacobian_rank(layer, x).rank
        got = EXERCISES["effective_parameters"].reference(
            layer.W_q.detach(), layer.W_k.detach(), layer.W_v.detach()
        )
        assert got == measured == min(m * (2 * d + d_out - 2), d_out * d * (d + 1) // 2)


def test_symmetry_directions_match_the_measured_jacobian_deficits():
    torch.manual_seed(0)
    x = torch.randn(400, 6)
    m = 3
    layers = {kind: mlp.GatedMLP(6, m, 4, variant=kind) for kind in exercises.ch04._GATED}
    layers["symmetric_silu"] = mlp.SymmetricRank1Bilinear(6, m, 4, act="silu")
    layers["key_value_relu"] = mlp.KeyValueMLP(6, m, 4, act="relu")
    layers["key_value_silu"] = mlp.KeyValueMLP(6, m, 4, act="silu")
    reference = EXERCISES["symmetry_directions"].reference
    assert set(layers) == set(exercises.ch04._DIRECTIONS)
    for kind, layer in layers.items():
        assert symmetry.jacobian_rank(layer, x).deficit == m * reference(kind), kind


def test_conserved_quantity_matches_the_library_and_combines_symmetries():
    layer = mlp.GatedMLP(4, 5, 3, variant="bilinear")
    C = symmetry.conserved_quantities(layer)
    ref = EXERCISES["conserved_quantity"].reference
    with torch.no_grad():
        torch.testing.assert_close(ref((layer.W_q, layer.W_k), (1, -1)), C["qk"])
        torch.testing.assert_close(ref((layer.W_k, layer.W_v), (1, -1)), C["kv"])
        both = ref((layer.W_q, layer.W_k, layer.W_v), (1, 1, -2))
        torch.testing.assert_close(both, C["qv"] + C["kv"])


def test_violations_from_the_gate_estimate_the_population_values():
    gen = torch.Generator().manual_seed(11)
    a, b = (torch.randn(400_000, generator=gen, dtype=torch.float64) for _ in range(2))
    exchange = EXERCISES["exchange_violation_samples"].reference(torch.sigmoid, a, b)
    assert exchange == pytest.approx(symmetry.exchange_violation("silu"), rel=0.02)
    coefficient = EXERCISES["scale_coefficient_samples"].reference
    for name, gate in (("silu", torch.sigmoid), ("gelu", exercises.ch04._normal_cdf)):
        C = coefficient(gate, a)
        assert C == pytest.approx(symmetry.scale_violation_coefficient(name), rel=0.02)
        # the leading term of the small-α expansion: E_sc(1.1) ≈ C (ln 1.1)²
        assert C * math.log(1.1) ** 2 == pytest.approx(symmetry.scale_violation(name, 1.1), rel=0.1)


def test_homogeneous_violations_are_the_library_quadrature_of_the_two_slope_activation():
    """The closed forms of exercise homogeneous_violations against kvattn.symmetry's quadrature of
    σ(z) = c₊z (z > 0), c₋z (z < 0); for α < 0 the scale violation is twice the exchange's and
    does not depend on |α|."""
    ref = EXERCISES["homogeneous_violations"].reference
    for c_plus, c_minus in ((1.0, 0.0), (1.0, 0.1), (1.0, -1.0), (2.0, 0.5), (0.0, 1.0)):

        def act(z, cp=c_plus, cm=c_minus):
            return torch.where(z > 0, cp * z, cm * z)

        for alpha in (0.5, 2.0, -1.0, -3.0):
            exchange, scale = ref(c_plus, c_minus, alpha)
            assert exchange == pytest.approx(symmetry.exchange_violation(act), rel=1e-9)
            assert scale == pytest.approx(symmetry.scale_violation(act, alpha), rel=1e-9, abs=1e-12)
            assert scale == (0.0 if alpha > 0 else pytest.approx(2 * exchange, rel=1e-12))
    assert ref(1.0, 0.0, 2.0) == (1.0, 0.0)  # ReLU: the chapter's table
    assert ref(1.0, 0.0, -1.0) == (1.0, 2.0)
    assert ref(1.0, 1.0, -3.0) == (0.0, 0.0)  # the identity keeps both


def test_holm_rejections_and_tost_p_against_independent_computations():
    """Chapter 5's Holm and equivalence exercises: the references agree with a direct count of
    Holm's step-down procedure and with scipy's one-sided one-sample t-tests on data built to
    have the given mean and standard error; each listed mistake is told apart."""
    import numpy as np
    from scipy import stats as sps

    holm_ref = EXERCISES["holm_rejections"].reference
    assert holm_ref([0.0158, 0.0456, 0.0254]) == 1  # chapter 5's 12,000-step family
    assert holm_ref([0.0158, 0.0456]) == 2  # SiLU and GELU alone
    assert holm_ref([0.012, 0.03, 0.04, 0.011]) == 2  # 0.04 < 0.05 but the procedure stopped
    tost = EXERCISES["tost_p"].reference
    rng = np.random.default_rng(0)
    for mean, se, n, margin in [(0.002, 0.003, 20, 0.01), (-0.007, 0.002, 12, 0.01)]:
        z = rng.standard_normal(n)
        z = (z - z.mean()) / z.std(ddof=1)  # mean 0, sample sd 1
        d = mean + se * np.sqrt(n) * z  # mean `mean`, standard error `se`
        lower = sps.ttest_1samp(d, -margin, alternative="greater").pvalue
        upper = sps.ttest_1samp(d, margin, alternative="less").pvalue
        assert tost(mean, se, n, margin) == pytest.approx(max(lower, upper), rel=1e-9)
        lo, hi = sps.t.interval(0.90, n - 1, loc=mean, scale=se)
        assert (tost(mean, se, n, margin) < 0.05) == (-margin < lo and hi < margin)
    with pytest.raises(ExerciseFailed, match="did not stop"):
        check(
            "holm_rejections",
            lambda p, alpha=0.05: EXERCISES["holm_rejections"].mistakes[0].fn(p, alpha),
        )
    with pytest.raises(ExerciseFailed, match="BOTH one-sided"):
        check("tost_p", EXERCISES["tost_p"].mistakes[0].fn)
