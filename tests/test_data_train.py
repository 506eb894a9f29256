"""Tests for :mod:`kvattn.data` (corpora, tokenizer, tasks) and :mod:`kvattn.train` (the loop)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from torch import nn

from kvattn import losses, train
from kvattn.data import (
    SPECIAL_TOKENS,
    TokenData,
    encode_documents,
    key_value_recall,
    lm_batch,
    load_text,
    quadratic_task,
    split_documents,
    teacher_student,
    tokenize,
    train_tokenizer,
)
from kvattn.lm import TinyLM, TinyLMConfig
from kvattn.mlp import GatedMLP, KeyValueMLP
from kvattn.train import History, lr_multiplier

# ---------------------------------------------------------------------------------------------
# Corpora


def test_load_pydoc_is_large_and_deterministic(pydoc_text):
    """The built-in corpus has > 400 000 characters and is the same on every call."""
    assert len(pydoc_text) > 400_000
    assert load_text("pydoc") == pydoc_text
    assert load_text("pydoc", max_chars=1234) == pydoc_text[:1234]


def test_load_stdlib_truncates():
    """The stdlib corpus is Python source, cut to max_chars."""
    text = load_text("stdlib", max_chars=50_000)
    assert len(text) == 50_000
    assert "def " in text


def test_load_text_from_path(tmp_path):
    """A path is read as UTF-8 text."""
    path = tmp_path / "corpus.txt"
    path.write_text("héllo wörld\nsecond line 🚀\n", encoding="utf-8")
    assert load_text(path) == "héllo wörld\nsecond line 🚀\n"
    assert load_text(str(path), max_chars=5) == "héllo"


def test_load_text_errors(tmp_path):
    """Missing files, empty corpora and non-positive max_chars are rejected clearly."""
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match=r"no text file at .*nope\.txt; source must be"):
        load_text(missing)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="is empty"):
        load_text(empty)
    with pytest.raises(ValueError, match="max_chars must be positive, got 0"):
        load_text("pydoc", max_chars=0)


# ---------------------------------------------------------------------------------------------
# Tokenizer


def test_tokenizer_is_deterministic(small_text, tokenizer):
    """Training twice on the same text gives the same pieces in the same order."""
    again = train_tokenizer(small_text, vocab_size=512)
    n = tokenizer.get_piece_size()
    assert n == again.get_piece_size() == 512
    assert [tokenizer.id_to_piece(i) for i in range(n)] == [again.id_to_piece(i) for i in range(n)]


def test_tokenizer_special_ids(tokenizer):
    """[PAD]=0, [UNK]=1, [START]=2, [END]=3, as in SPECIAL_TOKENS."""
    assert SPECIAL_TOKENS == {"[PAD]": 0, "[UNK]": 1, "[START]": 2, "[END]": 3}
    for piece, i in SPECIAL_TOKENS.items():
        assert tokenizer.id_to_piece(i) == piece
        assert tokenizer.piece_to_id(piece) == i
    assert (tokenizer.pad_id(), tokenizer.unk_id(), tokenizer.bos_id(), tokenizer.eos_id()) == (
        0,
        1,
        2,
        3,
    )


def test_tokenizer_byte_fallback_and_split_digits(tokenizer):
    """An emoji round-trips through byte pieces (never [UNK]) and "2026" is 4 digit pieces."""
    text = "In 2026 the 🚀 flew ÿ."
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert SPECIAL_TOKENS["[UNK]"] not in ids
    pieces = tokenizer.encode("🚀", out_type=str)
    assert [p for p in pieces if p.startswith("<0x")] == ["<0xF0>", "<0x9F>", "<0x9A>", "<0x80>"]
    digits = [p for p in tokenizer.encode("2026", out_type=str) if p != "▁"]
    assert digits == ["2", "0", "2", "6"]


def test_train_tokenizer_rejects_small_vocab(small_text):
    """A vocabulary below 4 special + 256 byte pieces (+ room) raises ValueError."""
    with pytest.raises(ValueError, match="vocab_size must be >= 300"):
        train_tokenizer(small_text, vocab_size=299)


def test_tokenize_holds_out_every_kth_document(small_text):
    """tokenize holds out every val_every-th paragraph, trains the tokenizer on the rest only, and
    encodes each paragraph followed by [END]."""
    td = tokenize(small_text, vocab_size=512, val_every=5)
    docs = [doc for doc in small_text.split("\n\n") if doc.strip()]
    train_docs = [d for i, d in enumerate(docs) if i % 5 != 4]
    val_docs = [d for i, d in enumerate(docs) if i % 5 == 4]
    assert len(val_docs) == len(docs) // 5
    end = SPECIAL_TOKENS["[END]"]

    def encode(chunk):
        return [i for doc in chunk for i in [*td.tokenizer.encode(doc), end]]

    assert td.train.tolist() == encode(train_docs)
    assert td.val.tolist() == encode(val_docs)
    # the two steps are public, for reading a run's validation blocks without retraining
    assert split_documents(small_text, 5) == (train_docs, val_docs)
    assert encode_documents(td.tokenizer, val_docs).tolist() == encode(val_docs)
    assert int((td.val == end).sum()) == len(val_docs)
    assert int((td.train == end).sum()) == len(train_docs)
    assert td.train.dtype == td.val.dtype == torch.long
    assert td.vocab_size == 512
    reference = train_tokenizer("\n".join(train_docs), 512)
    assert [td.tokenizer.id_to_piece(i) for i in range(512)] == [
        reference.id_to_piece(i) for i in range(512)
    ]
    assert td.decode(td.train[:50]) == td.tokenizer.decode(td.train[:50].tolist())
    assert td.pieces([0, 3]) == ["[PAD]", "[END]"]


def test_tokenize_errors(small_text):
    """val_every must be an int >= 2 and the text must have at least val_every paragraphs."""
    for bad in (1, 0, 2.5):
        with pytest.raises(ValueError, match="val_every must be an int >= 2"):
            tokenize(small_text, 512, val_every=bad)
    with pytest.raises(ValueError, match=r"need at least 10 documents \(paragraphs\), got 3"):
        tokenize("one\n\ntwo\n\nthree", 512, val_every=10)
    with pytest.raises(ValueError, match="val_every must be an int >= 2"):
        split_documents(small_text, True)


# ---------------------------------------------------------------------------------------------
# Batches and tasks


def test_lm_batch_targets_are_shifted_inputs():
    """y[:, t] = ids[start + t + 1]: each row is a contiguous window and y is x shifted by one."""
    ids = torch.arange(1000) * 7 % 997  # distinct values, so positions can be read back
    gen = torch.Generator().manual_seed(0)
    x, y = lm_batch(ids, batch_size=8, block_size=16, generator=gen)
    assert x.shape == y.shape == (8, 16)
    assert x.dtype == y.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x, y, strict=True):
        start = int((ids == row_x[0]).nonzero())
        assert torch.equal(row_x, ids[start : start + 16])
        assert torch.equal(row_y, ids[start + 1 : start + 17])
    again = lm_batch(ids, 8, 16, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again[0], x)


def test_lm_batch_errors():
    """A stream too short for one window (or not 1-D) raises ValueError naming block_size + 1."""
    with pytest.raises(ValueError, match=r"at least block_size \+ 1 = 9"):
        lm_batch(torch.arange(8), 2, 8)
    with pytest.raises(ValueError, match="1-D"):
        lm_batch(torch.arange(100).view(10, 10), 2, 8)


def test_lm_batch_can_reach_the_last_window():
    """With block_size + 2 ids both windows (start 0 and start 1) are valid and should occur."""
    ids = torch.arange(10)
    x, _ = lm_batch(ids, batch_size=200, block_size=8, generator=torch.Generator().manual_seed(0))
    assert set(x[:, 0].tolist()) == {0, 1}


def test_teacher_student_is_seeded():
    """Shapes, dtype, determinism for a seed, and a different draw for another seed."""
    task = teacher_student(d_in=7, d_out=3, n_train=40, n_test=10, width=8, seed=5)
    assert task.x_train.shape == (40, 7) and task.y_train.shape == (40, 3)
    assert task.x_test.shape == (10, 7) and task.y_test.shape == (10, 3)
    assert task.x_train.dtype == torch.float32
    # The last feature is the constant 1 (a stand-in for biases); the others are N(0, 1).
    assert torch.all(task.x_train[:, -1] == 1) and torch.all(task.x_test[:, -1] == 1)
    assert task.x_train[:, :-1].std() > 0.5
    same = teacher_student(d_in=7, d_out=3, n_train=40, n_test=10, width=8, seed=5)
    for a, b in zip(
        (task.x_train, task.y_train, task.x_test, task.y_test),
        (same.x_train, same.y_train, same.x_test, same.y_test),
        strict=True,
    ):
        assert torch.equal(a, b)
    other = teacher_student(d_in=7, d_out=3, n_train=40, n_test=10, width=8, seed=6)
    assert not torch.equal(other.x_train, task.x_train)
    # |tanh| ≤ 1, so every target is bounded by the teacher's output weights.
    assert task.y_train.abs().max() < 8
    with pytest.raises(ValueError, match="need d_in >= 2"):
        teacher_student(d_in=1)


def test_quadratic_task_targets_are_the_quadratic_forms():
    """y_o = x A_o xᵀ with the last input feature fixed at 1 (or not); seeded; A checked."""
    A = torch.randn(2, 4, 4)
    task = quadratic_task(A, n_train=30, n_test=5, seed=1)
    assert task.x_train.shape == (30, 4) and task.y_test.shape == (5, 2)
    assert torch.all(task.x_train[:, -1] == 1)
    expected = torch.einsum("ni,oij,nj->no", task.x_train, A, task.x_train)
    torch.testing.assert_close(task.y_train, expected)
    again = quadratic_task(A, n_train=30, n_test=5, seed=1)
    assert torch.equal(again.x_test, task.x_test)
    free = quadratic_task(A, n_train=30, n_test=5, constant_feature=False)
    assert not torch.all(free.x_train[:, -1] == 1)
    with pytest.raises(ValueError, match=r"A must have shape \(d_out, d, d\), got \(4, 4\)"):
        quadratic_task(torch.randn(4, 4))


def test_key_value_recall_is_seeded():
    """Keys lie on the sphere of radius √d; values are classes in [0, n_values); seeded."""
    task = key_value_recall(n_pairs=50, d=9, n_values=6, seed=2)
    assert task.keys.shape == (50, 9) and task.values.shape == (50,)
    assert task.values.dtype == torch.long and task.n_values == 6
    torch.testing.assert_close(task.keys.norm(dim=1), torch.full((50,), 3.0))
    assert 0 <= int(task.values.min()) and int(task.values.max()) < 6
    again = key_value_recall(n_pairs=50, d=9, n_values=6, seed=2)
    assert torch.equal(again.keys, task.keys) and torch.equal(again.values, task.values)
    with pytest.raises(ValueError, match="n_values >= 2"):
        key_value_recall(n_values=1)


# ---------------------------------------------------------------------------------------------
# Training loop


def test_training_reduces_swiglu_regression_loss():
    """AdamW on the teacher-student task lowers SwiGLU's train and test error substantially."""
    task = teacher_student(d_in=10, d_out=5, n_train=256, n_test=256, seed=0)
    torch.manual_seed(0)
    model = GatedMLP(10, 16, 5, variant="swiglu")
    before = train.regression_error(model, task.x_test, task.y_test)
    hist = train.train(
        model, train.regression_loss(model, task), steps=200, lr=1e-2, progress=False
    )
    assert hist.final_loss < 0.3 * hist.loss[0]
    assert train.regression_error(model, task.x_test, task.y_test) < 0.5 * before
    assert not model.training


def test_training_learns_recall_table():
    """A key-value MLP memorises a small key → value table (accuracy from chance to > 90 %)."""
    task = key_value_recall(n_pairs=64, d=16, n_values=8, seed=0)
    torch.manual_seed(0)
    model = KeyValueMLP(16, 128, 8)
    before = train.recall_accuracy(model, task)
    train.train(model, train.recall_loss(model, task), steps=150, lr=1e-2, progress=False)
    after = train.recall_accuracy(model, task)
    assert before < 0.5
    assert after > 0.9


def test_non_finite_loss_names_the_step():
    """A NaN loss stops training with FloatingPointError naming the step and the lr."""
    model = nn.Linear(3, 1)
    x = torch.randn(8, 3)

    def loss_fn(step):
        loss = model(x).pow(2).mean()
        return loss * float("nan") if step == 3 else loss

    seen = []
    with pytest.raises(FloatingPointError, match=r"non-finite loss nan at step 3 \(lr 0\.01\)"):
        train.train(
            model, loss_fn, steps=10, lr=0.01, progress=False, callback=lambda s, m: seen.append(s)
        )
    assert seen == [0, 1, 2]


@pytest.mark.parametrize(
    ("make_loss", "error", "got"),
    [
        (lambda out: out.pow(2).mean().item(), TypeError, r"got a float \(0\.\d+\)"),
        (lambda out: out.pow(2), ValueError, r"got a tensor of shape \(8, 1\)"),
        (lambda out: out.new_tensor(1.0), ValueError, "got a tensor that does not require grad"),
    ],
    ids=["float", "per-sample losses", "detached"],
)
def test_loss_fn_must_return_a_scalar_tensor_that_requires_grad(make_loss, error, got):
    """A loss_fn returning a Python float, a tensor of per-sample losses or a tensor cut from the
    graph is refused at the first step, before any optimiser step, naming what it must return
    (it used to fail in isfinite, in a tensor's truth value or in backward)."""
    model = nn.Linear(3, 1)
    x = torch.randn(8, 3)
    before = [p.detach().clone() for p in model.parameters()]
    seen = []
    with pytest.raises(
        error,
        match=r"loss_fn must return a scalar \(0-dim\) tensor that requires grad .*"
        + got
        + " at step 0",
    ):
        train.train(
            model,
            lambda step: make_loss(model(x)),
            steps=3,
            lr=0.1,
            progress=False,
            callback=lambda s, m: seen.append(s),
        )
    assert seen == []
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))


def test_non_finite_parameters_are_never_checkpointed():
    """A finite loss with a NaN gradient (sqrt at 0) makes the weights NaN; the next checkpoint
    raises instead, naming the parameter and the step, so on_checkpoint never sees them."""
    model = nn.Linear(3, 1)
    x = torch.randn(8, 3)

    def loss_fn(step):
        loss = model(x).pow(2).mean()
        return loss + torch.sqrt(0.0 * model.bias.sum()) if step == 5 else loss

    saved = []
    with pytest.raises(
        FloatingPointError, match=r"non-finite parameter bias after 6 steps \(step 5\)"
    ):
        train.train(
            model,
            loss_fn,
            steps=10,
            lr=0.01,
            checkpoint_every=3,
            on_checkpoint=lambda step, opt, hist: saved.append(step),
            log_every=10,
            progress=False,
        )
    assert saved == [3]


def test_loss_is_checked_when_it_is_logged():
    """The loss is read (a GPU sync) only every log_every steps: a NaN at step 1 is reported at
    the next logged step, 3, by which time it has poisoned the weights."""
    model = nn.Linear(3, 1)
    x = torch.randn(8, 3)

    def loss_fn(step):
        loss = model(x).pow(2).mean()
        return loss * float("nan") if step == 1 else loss

    seen = []
    with pytest.raises(
        FloatingPointError, match=r"non-finite loss nan at step 3 .*checked every 3 steps"
    ):
        train.train(
            model,
            loss_fn,
            steps=10,
            lr=0.01,
            log_every=3,
            progress=False,
            callback=lambda s, m: seen.append(s),
        )
    assert seen == [0, 1, 2]


def test_lr_multiplier_schedule_endpoints():
    """Linear warm-up to 1, then constant or cosine decay to min_ratio at the last step."""
    assert lr_multiplier(0, 100, 10, "cosine", 0.1) == pytest.approx(0.1)
    assert lr_multiplier(4, 100, 10, "cosine", 0.1) == pytest.approx(0.5)
    assert lr_multiplier(9, 100, 10, "cosine", 0.1) == pytest.approx(1.0)
    assert lr_multiplier(10, 100, 10, "cosine", 0.1) == pytest.approx(1.0)
    assert lr_multiplier(55, 101, 10, "cosine", 0.1) == pytest.approx(0.55)  # half-way: mean
    assert lr_multiplier(99, 100, 10, "cosine", 0.1) == pytest.approx(0.1)  # the last step
    assert lr_multiplier(100, 100, 10, "cosine", 0.1) == pytest.approx(0.1)
    assert lr_multiplier(500, 100, 10, "cosine", 0.1) == pytest.approx(0.1)
    assert lr_multiplier(0, 100, 0, "cosine", 0.2) == pytest.approx(1.0)
    assert lr_multiplier(99, 100, 0, "cosine", 0.2) == pytest.approx(0.2)
    assert lr_multiplier(3, 100, 10, "constant", 0.1) == pytest.approx(0.4)
    assert lr_multiplier(70, 100, 10, "constant", 0.1) == 1.0


ADAMW_HYPER = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-5, weight_decay=0.1)


def _five_adamw_steps(make) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.optim.Optimizer]:
    """The initial and final weights of a one-layer tiny PLDR-LLM (many small parameter
    tensors) after five AdamW steps from ``make(params)`` with weight decay, a warm-up and
    gradient clipping, and the optimiser."""
    from kvattn.benchmark import CONFIGS
    from kvattn.config import PLDRConfig
    from kvattn.pldr import PLDRLLM

    torch.manual_seed(0)
    model = PLDRLLM(PLDRConfig(**{**CONFIGS["tiny"], "num_hidden_layers": 1}))
    ids = torch.randint(0, model.config.vocab_size, (2, 33))
    start = [p.detach().clone() for p in model.parameters()]
    opt = make(list(model.parameters()))
    for step in range(5):
        for group in opt.param_groups:
            group["lr"] = ADAMW_HYPER["lr"] * (step + 1) / 5
        loss = losses.lm_cross_entropy(model(ids[:, :-1]).logits, ids[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
    return start, [p.detach().clone() for p in model.parameters()], opt


def test_the_course_adamw_is_bit_for_bit_the_loop_implementation():
    """train.adamw uses the foreach kernels; five steps leave every weight bit for bit where
    PyTorch's per-tensor loop puts it, so shipped runs made with the loop reproduce."""
    start, ours, opt = _five_adamw_steps(lambda ps: train.adamw(ps, **ADAMW_HYPER))
    assert opt.param_groups[0]["foreach"] is True
    _, loop, opt = _five_adamw_steps(lambda ps: torch.optim.AdamW(ps, **ADAMW_HYPER, foreach=False))
    assert opt.param_groups[0]["foreach"] is False
    assert all(not torch.equal(a, b) for a, b in zip(ours, start, strict=True))  # all took part
    assert all(torch.equal(a, b) for a, b in zip(ours, loop, strict=True))


def test_the_fused_adamw_agrees_with_foreach_to_float_rounding():
    """adamw(fused=True) runs PyTorch's fused kernel: after five steps every weight is within
    1e-5 of foreach's (rounding, amplified by AdamW's normalisation: about 7e-7 on this
    machine), while the steps moved the weights by more than 1e-3, a hundred times the
    tolerance."""
    start, foreach, _ = _five_adamw_steps(lambda ps: train.adamw(ps, **ADAMW_HYPER))
    _, fused, opt = _five_adamw_steps(lambda ps: train.adamw(ps, **ADAMW_HYPER, fused=True))
    assert opt.param_groups[0]["fused"] is True and not opt.param_groups[0]["foreach"]
    moved = max((a - b).abs().max().item() for a, b in zip(foreach, start, strict=True))
    worst = max((a - b).abs().max().item() for a, b in zip(fused, foreach, strict=True))
    assert moved > 1e-3 and worst < 1e-5, (moved, worst)
    with pytest.raises(ValueError, match="fused must be True or False"):
        train.adamw(start, lr=1e-3, fused=1)


def test_train_applies_the_schedule():
    """With SGD on loss = Σp (gradient 1), step s moves p by exactly lr·lr_multiplier(s)."""
    p = nn.Parameter(torch.zeros((), dtype=torch.float64))
    model = nn.Module()
    model.p = p
    trace = []
    train.train(
        model,
        lambda step: model.p * 1.0,
        steps=12,
        lr=0.5,
        optimizer="sgd",
        warmup=3,
        schedule="cosine",
        min_lr_ratio=0.2,
        progress=False,
        callback=lambda s, m: trace.append(float(m.p.detach())),
    )
    moves = -torch.diff(torch.tensor([0.0, *trace], dtype=torch.float64))
    expected = torch.tensor(
        [0.5 * lr_multiplier(s, 12, 3, "cosine", 0.2) for s in range(12)], dtype=torch.float64
    )
    torch.testing.assert_close(moves, expected, rtol=1e-12, atol=1e-12)


def test_history_logging_and_eval_steps():
    """History keeps every log_every-th step plus the last; eval_fn runs every eval_every steps
    and after the last (never twice), without gradients and in eval mode."""
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    x = torch.randn(16, 3)
    calls = []

    def eval_fn():
        calls.append((torch.is_grad_enabled(), model.training))
        return float(len(calls))

    hist = train.train(
        model,
        lambda s: model(x).pow(2).mean(),
        steps=10,
        lr=1e-3,
        log_every=3,
        eval_fn=eval_fn,
        eval_every=4,
        progress=False,
    )
    assert isinstance(hist, History)
    assert hist.steps == [0, 3, 6, 9]
    assert len(hist.loss) == 4 and all(math.isfinite(v) for v in hist.loss)
    assert hist.final_loss == hist.loss[-1]
    assert hist.eval_steps == [3, 7, 9]
    assert hist.evals == [1.0, 2.0, 3.0]
    assert calls == [(False, False)] * 3
    hist = train.train(
        model,
        lambda s: model(x).pow(2).mean(),
        steps=10,
        lr=1e-3,
        eval_fn=lambda: 0.0,
        eval_every=5,
        progress=False,
    )
    assert hist.eval_steps == [4, 9]
    assert hist.steps == list(range(10))


def test_grad_clip_limits_the_update():
    """With grad_clip, one SGD step moves the parameters by at most lr·clip."""
    model = nn.Linear(4, 1, bias=False)
    before = model.weight.detach().clone()
    train.train(
        model,
        lambda s: 1e6 * model(torch.ones(1, 4)).sum(),
        steps=1,
        lr=0.1,
        optimizer="sgd",
        grad_clip=1.0,
        progress=False,
    )
    assert float((model.weight.detach() - before).norm()) == pytest.approx(0.1, rel=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"steps": 0, "lr": 0.1}, "need steps >= 1 and lr > 0"),
        ({"steps": 5, "lr": 0.0}, "need steps >= 1 and lr > 0"),
        ({"steps": 5, "lr": 0.1, "schedule": "linear"}, "schedule must be 'constant' or 'cosine'"),
        (
            {"steps": 5, "lr": 0.1, "optimizer": "adam"},
            "optimizer must be 'adamw', 'adamw_fused' or 'sgd'",
        ),
        ({"steps": 5, "lr": "0.1"}, "need steps >= 1 and lr > 0, got steps=5, lr='0.1'"),
        ({"steps": 5, "lr": 0.1, "grad_clip": -1.0}, "grad_clip must be null .* got -1.0"),
        ({"steps": 5, "lr": 0.1, "clip_value": -1.0}, "clip_value must be null .* got -1.0"),
        ({"steps": 5, "lr": 0.1, "clip_value": 0}, "clip_value must be null .* got 0"),
        ({"steps": 5, "lr": 0.1, "min_lr_ratio": -1}, r"min_lr_ratio must be a number in \[0, 1\]"),
        ({"steps": 5, "lr": 0.1, "min_lr_ratio": 2}, r"min_lr_ratio must be a number in \[0, 1\]"),
        ({"steps": 5, "lr": 0.1, "betas": (0.9,)}, r"betas must be two numbers in \[0, 1\)"),
        ({"steps": 5, "lr": 0.1, "eps": -1e-8}, "eps must be a positive finite number"),
        ({"steps": 5, "lr": 0.1, "weight_decay": -0.1}, "weight_decay must be a finite number"),
        ({"steps": 5, "lr": 0.1, "warmup": 1.5}, "warmup must be an int >= 0, got 1.5"),
        ({"steps": 5, "lr": 0.1, "eval_every": 0}, "eval_every must be an int >= 1, got 0"),
        ({"steps": 5, "lr": 0.1, "checkpoint_every": -2}, "checkpoint_every must be an int >= 1"),
        ({"steps": 5, "lr": 1e39}, r"lr must be a positive finite number below 10, got 1e\+39"),
        ({"steps": 5, "lr": 10}, "lr must be a positive finite number below 10, got 10"),
        ({"steps": 5, "lr": math.nan}, "need steps >= 1 and lr > 0, got steps=5, lr=nan"),
        ({"steps": 5, "lr": math.inf}, "need steps >= 1 and lr > 0, got steps=5, lr=inf"),
        ({"steps": True, "lr": 0.1}, "need steps >= 1 and lr > 0, got steps=True"),
        ({"steps": 5, "lr": True}, "need steps >= 1 and lr > 0, got steps=5, lr=True"),
        ({"steps": 5, "lr": 0.1, "log_every": True}, "log_every must be an int >= 1, got True"),
        ({"steps": 5, "lr": 0.1, "log_every": 2.0}, "log_every must be an int >= 1, got 2.0"),
        ({"steps": 5, "lr": 0.1, "start_step": 1.5}, "start_step must be an int >= 0, got 1.5"),
        ({"steps": 5, "lr": 0.1, "start_step": True}, "start_step must be an int >= 0, got True"),
        ({"steps": 5, "lr": 0.1, "start_step": 6}, r"start_step must lie in \[0, 5\], got 6"),
        ({"steps": 5, "lr": 0.1, "warmup": True}, "warmup must be an int >= 0, got True"),
        ({"steps": 5, "lr": 0.1, "eps": math.nan}, "eps must be a positive finite number"),
        ({"steps": 5, "lr": 0.1, "grad_clip": math.inf}, "grad_clip must be null .* got inf"),
        ({"steps": 5, "lr": 0.1, "weight_decay": True}, "weight_decay must be a finite number"),
        (
            {"steps": 5, "lr": 0.1, "autocast_dtype": torch.int8},
            "autocast_dtype must be None, torch.bfloat16 or torch.float16, got torch.int8",
        ),
        (
            {"steps": 5, "lr": 0.1, "autocast_dtype": torch.float32},
            "autocast_dtype must be None, torch.bfloat16 or torch.float16, got torch.float32",
        ),
        (
            {"steps": 5, "lr": 0.1, "autocast_dtype": "bf16"},
            "autocast_dtype must be None, torch.bfloat16 or torch.float16, got 'bf16'",
        ),
        ({"steps": 5, "lr": 0.1, "progress": "no"}, "progress must be True or False, got 'no'"),
        ({"steps": 5, "lr": 0.1, "progress": 0}, "progress must be True or False, got 0"),
        (
            {"steps": 5, "lr": 0.1, "optimizer_state": {}},
            "optimizer_state must be a dict from Optimizer.state_dict.*lacks 'state', "
            "'param_groups'",
        ),
        (
            {"steps": 5, "lr": 0.1, "optimizer_state": "state.json"},
            "optimizer_state must be None or a dict from Optimizer.state_dict.*got str",
        ),
        (
            {"steps": 5, "lr": 0.1, "optimizer_state": {"state": {}, "param_groups": []}},
            "optimizer_state does not fit this model's adamw optimizer: loaded state dict has a "
            "different number of parameter groups",
        ),
    ],
)
def test_train_argument_errors(kwargs, message):
    """Bad steps, lr, schedule, optimizer, clips, schedule floor, AdamW settings, log_every or
    start_step raise ValueError naming the accepted values, before any step (a negative clip or
    min_lr_ratio used to blow the loss up, lr 1e39 to overflow inside AdamW, log_every=True and
    start_step=1.5 to pass)."""
    model = nn.Linear(2, 1)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=message):
        train.train(model, lambda s: model(torch.ones(2)).sum(), **{"progress": False, **kwargs})
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))


def test_train_lm_seeds_is_paired_and_reproducible():
    """Each seed seeds both the initialisation and the batches: a seed run again repeats its
    curve exactly, another seed differs; evaluations land every eval_every steps and at the end."""
    cfg = TinyLMConfig(vocab_size=30, d_model=8, n_layers=1, n_heads=2, block_size=6, n_slots=8)
    gen = torch.Generator().manual_seed(0)
    tokens = TokenData(
        None,
        torch.randint(0, 30, (300,), generator=gen),
        torch.randint(0, 30, (60,), generator=gen),
    )
    runs = train.train_lm_seeds(cfg, tokens, [0, 1], steps=6, batch_size=4, eval_every=3)
    again = train.train_lm_seeds(cfg, tokens, [0], steps=6, batch_size=4, eval_every=3)
    assert runs.seeds == [0, 1]
    assert runs.eval_steps == [2, 5]
    assert again.evals[0] == runs.evals[0]
    assert runs.evals[0] != runs.evals[1]
    assert runs.final == [e[-1] for e in runs.evals]
    assert runs.n_params == sum(p.numel() for p in TinyLM(cfg).parameters())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seeds": []}, "seeds must name at least one seed"),
        ({"seeds": [0, "1"]}, "every seed must be an int >= 0, got '1'"),
        ({"batch_size": 0}, "batch_size must be an int >= 1, got 0"),
        ({"eval_every": 2.5}, "eval_every must be an int >= 1, got 2.5"),
    ],
)
def test_train_lm_seeds_argument_errors(kwargs, message):
    cfg = TinyLMConfig(vocab_size=30, d_model=8, n_layers=1, n_heads=2, block_size=6, n_slots=8)
    ids = torch.arange(60) % 30
    with pytest.raises(ValueError, match=message):
        train.train_lm_seeds(
            cfg, TokenData(None, ids, ids), **{"seeds": [0], "steps": 2, **kwargs}, progress=False
        )


def test_train_refuses_bad_hooks_and_objects_before_any_step():
    """A model, loss_fn, hook or history of the wrong kind is refused before the first update
    (a callback 'x' used to fail after it, with "'str' object is not callable"; model=None with
    "'NoneType' object has no attribute 'parameters'")."""
    model = nn.Linear(2, 1)
    before = [p.detach().clone() for p in model.parameters()]

    def run(**kwargs):
        args = {"model": model, "loss_fn": lambda s: model(torch.ones(2)).sum(), **kwargs}
        train.train(args.pop("model"), args.pop("loss_fn"), steps=3, lr=0.1, progress=False, **args)

    cases = [
        ({"model": None}, "model must be a torch.nn.Module, got NoneType"),
        (
            {"loss_fn": None},
            r"loss_fn must be callable \(step -> scalar loss tensor\), got NoneType",
        ),
        ({"callback": "x"}, "callback must be None or callable, got str"),
        ({"eval_fn": 1.0}, "eval_fn must be None or callable, got float"),
        ({"on_checkpoint": "x", "checkpoint_every": 1}, "on_checkpoint must be None or callable"),
        ({"history": "abc"}, "history must be None or a History, got str"),
        ({"desc": 5}, "desc must be None or a str, got int"),
    ]
    for kwargs, message in cases:
        with pytest.raises(TypeError, match=message):
            run(**kwargs)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))


def test_evaluations_must_be_finite_numbers():
    """eval_fn's result is a number or a one-element tensor; a string used to be parsed by
    float() ('x' failed with "could not convert string to float"), and a NaN evaluation was
    recorded as if it were a loss."""
    model = nn.Linear(2, 1)

    def run(eval_fn):
        return train.train(
            model,
            lambda s: model(torch.ones(2)).sum(),
            steps=4,
            lr=0.01,
            eval_fn=eval_fn,
            eval_every=2,
            progress=False,
        )

    assert run(lambda: torch.tensor([0.5])).evals == [0.5, 0.5]
    assert run(lambda: 2).evals == [2.0, 2.0]
    with pytest.raises(
        TypeError, match=r"eval_fn must return a number .*got str \('x'\) at step 1"
    ):
        run(lambda: "x")
    with pytest.raises(TypeError, match=r"eval_fn must return a number .*got str"):
        run(lambda: "1.5")
    with pytest.raises(TypeError, match=r"eval_fn must return a number .*got NoneType"):
        run(lambda: None)
    evals = iter([1.0, math.nan])
    history = History()
    with pytest.raises(FloatingPointError, match=r"non-finite evaluation \(nan\) at step 3"):
        train.train(
            model,
            lambda s: model(torch.ones(2)).sum(),
            steps=6,
            lr=0.01,
            eval_fn=lambda: next(evals),
            eval_every=2,
            history=history,
            progress=False,
        )
    assert history.evals == [1.0] and history.eval_steps == [1]  # the NaN is not recorded
    with pytest.raises(FloatingPointError, match=r"non-finite evaluation \(inf\) at step 1"):
        run(lambda: math.inf)
    # NaN weights (a NaN gradient of a finite loss) are the likelier cause, and named
    poisoned = nn.Linear(2, 1)
    with pytest.raises(FloatingPointError, match=r"non-finite parameter weight after 2 steps"):
        train.train(
            poisoned,
            lambda s: poisoned(torch.ones(2)).sum() + torch.sqrt(0.0 * poisoned.weight.sum()),
            steps=4,
            lr=0.01,
            optimizer="sgd",
            eval_fn=lambda: float(poisoned(torch.ones(2)).sum()),
            eval_every=2,
            log_every=10,  # the loss is checked at the last step only
            progress=False,
        )


def test_lm_eval_loss_needs_one_window_and_says_so():
    """One window of block_size + 1 ids suffices; the message used to ask for more than that."""
    cfg = TinyLMConfig(vocab_size=30, d_model=8, n_layers=1, n_heads=2, block_size=6, n_slots=8)
    model = TinyLM(cfg)
    ids = torch.arange(7) % 30
    assert math.isfinite(train.lm_eval_loss(model, ids))
    with pytest.raises(
        ValueError, match=r"^need more than 6 ids to evaluate \(one window of block_size \+ 1 = 7\)"
    ):
        train.lm_eval_loss(model, ids[:6])


def _short_run_tokens(n_train: int = 60, n_val: int = 60) -> TokenData:
    return TokenData(None, torch.arange(n_train) % 30, torch.arange(n_val) % 30)


def test_train_lm_seeds_refuses_what_would_fail_after_training(monkeypatch):
    """Every argument train_lm_seeds passes on is checked before the first seed trains: a
    validation stream shorter than one window used to fail in lm_eval_loss after the first
    seed's steps, a measure 'x' after the first seed, device='cuda' without CUDA with torch's
    AssertionError, cfg=dict and data=None with AttributeErrors, and seeds [0, 0] trained the
    same run twice."""
    cfg = TinyLMConfig(vocab_size=30, d_model=8, n_layers=1, n_heads=2, block_size=6, n_slots=8)

    def run(**kwargs):
        args = {"data": _short_run_tokens(), "seeds": [0], "steps": 2, "progress": False}
        return train.train_lm_seeds(**{"cfg": cfg, **args, **kwargs})

    value_cases = [
        ({"seeds": [0, 1, 0]}, r"seeds has duplicates \[0\], got \[0, 1, 0\]"),
        (
            {"data": _short_run_tokens(n_val=6)},
            "data.val must be a 1-D id tensor of at least "
            r"block_size \+ 1 = 7 ids \(one window\), got shape \(6,\)",
        ),
        ({"data": _short_run_tokens(n_train=6)}, "data.train must be .* 7 ids"),
        ({"device": "meta"}, "device 'meta' holds shapes but no values"),
        ({"progress": "no"}, "progress must be True or False, got 'no'"),
        ({"steps": "10"}, "steps must be an int >= 1, got '10'"),
        ({"lr": 50.0}, "lr must be a positive finite number below 10, got 50.0"),
    ]
    if not torch.cuda.is_available():
        value_cases.append(({"device": "cuda"}, "device 'cuda' is not available on this machine"))
    type_cases = [
        ({"cfg": {"vocab_size": 30}}, "cfg must be a TinyLMConfig, got dict"),
        ({"data": None}, "data must be a TokenData, got NoneType"),
        ({"measure": "x"}, "measure must be None or callable, got str"),
        ({"desc": 3}, "desc must be None or a str, got int"),
    ]
    # train_lm_seeds looks train up in its own module
    monkeypatch.setattr(train.seeds, "train", lambda *a, **k: pytest.fail("a seed trained"))
    for error, cases in ((ValueError, value_cases), (TypeError, type_cases)):
        for kwargs, message in cases:
            with pytest.raises(error, match=message):
                run(**kwargs)
    monkeypatch.undo()
    assert run(measure=lambda m: torch.tensor(0.25)).measured == [0.25]
    assert math.isnan(run(measure=lambda m: math.nan).measured[0])  # the caller's to judge
    with pytest.raises(
        TypeError, match=r"measure must return a number .*got str \('x'\) for seed 0"
    ):
        run(measure=lambda m: "x")


@pytest.mark.slow
def test_python_dash_m_kvattn_train_is_no_command():
    """Pre-training moved to kvattn.pretrain; the old command `python -m kvattn.train --config
    FILE` used to exit 0 having done nothing. It exits 2 and names the new command."""
    out = subprocess.run(
        [sys.executable, "-m", "kvattn.train", "--config", "c.json"],
        capture_output=True,
        text=True,
        timeout=600,  # a hang limit, not a speed check
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "python -m kvattn.pretrain --config FILE" in out.stderr
    assert "kvattn-train" in out.stderr and "Traceback" not in out.stderr


def test_default_autocast_is_bf16_only_on_cuda_devices_that_support_it(monkeypatch):
    from kvattn.train import default_autocast

    assert default_autocast("cpu") is None
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert default_autocast("cuda") is torch.bfloat16
    assert default_autocast(torch.device("cpu")) is None
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation
    )
    assert default_autocast("cuda:0") is None  # emulated bf16 (a T4) trains in float32


def test_lm_cross_entropy_takes_int32_targets():
    """The models take int32 ids (generation_mode_loss documents it); the loss used to fail on
    them with "expected target dtype to be Long"."""
    from kvattn.losses import lm_cross_entropy

    logits = torch.randn(2, 5, 11, generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([[1, 2, 0, 4, 5], [6, 7, 8, 0, 10]])
    expected = lm_cross_entropy(logits, targets)
    assert torch.equal(lm_cross_entropy(logits, targets.int()), expected)
    kept = targets != 0
    by_hand = torch.nn.functional.cross_entropy(logits[kept], targets[kept])
    assert torch.allclose(expected, by_hand)
