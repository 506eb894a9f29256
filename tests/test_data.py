"""kvattn.data: what its functions refuse, before any work (the corpora, tokenizer, batches and
tasks themselves are tested in test_data_train.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kvattn import data


@pytest.mark.parametrize("source", [123, None, b"pydoc", ["pydoc"]])
def test_load_text_refuses_a_source_that_is_neither_a_str_nor_a_path(source):
    """123 gave pathlib's "expected str, bytes or os.PathLike object, not int"."""
    with pytest.raises(TypeError, match=r"source must be 'pydoc', 'stdlib', 'hf:NAME' or a path"):
        data.load_text(source)


@pytest.mark.parametrize("vocab_size", [400.5, "400", True, None])
def test_train_tokenizer_refuses_a_vocab_size_that_is_not_an_int(vocab_size):
    """400.5 reached SentencePiece ("cannot parse as int"), '400' failed in '<'."""
    with pytest.raises(
        ValueError, match=r"vocab_size must be an int >= 300 \(4 special \+ 256 byte tokens\), got"
    ):
        data.train_tokenizer("some text\n" * 50, vocab_size)
    with pytest.raises(ValueError, match=r"vocab_size must be an int >= 300"):
        data.tokenize("a paragraph\n\n" * 20, vocab_size)


def test_tokenizing_refuses_text_that_is_not_a_str():
    """Bytes failed inside str.split with "a bytes-like object is required, not 'str'"."""
    with pytest.raises(TypeError, match=r"^text must be a str, got bytes$"):
        data.tokenize(b"one\n\ntwo\n\nthree")
    with pytest.raises(TypeError, match=r"^text must be a str, got bytes$"):
        data.split_documents(b"one\n\ntwo", 2)
    with pytest.raises(TypeError, match=r"^text must be a str, got list$"):
        data.train_tokenizer(["one", "two"], 400)


IDS = torch.arange(100)


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((IDS, 0, 8), {}, ValueError, r"^batch_size must be an int >= 1, got 0$"),
        ((IDS, 2.5, 4), {}, ValueError, r"^batch_size must be an int >= 1, got 2.5$"),
        ((IDS, 2, 0), {}, ValueError, r"^block_size must be an int >= 1, got 0$"),
        ((IDS, 2, -3), {}, ValueError, r"^block_size must be an int >= 1, got -3$"),
        ((IDS, 2, True), {}, ValueError, r"^block_size must be an int >= 1, got True$"),
        ((IDS, np.int64(2), 4), {}, ValueError, r"^batch_size must be an int >= 1"),
        ((IDS.float(), 2, 4), {}, TypeError, r"integer tensor of token ids, got torch.float32$"),
        ((IDS > 5, 2, 4), {}, TypeError, r"integer tensor of token ids, got torch.bool$"),
        ((list(range(100)), 2, 4), {}, TypeError, r"integer tensor of token ids, got list$"),
        ((IDS, 2, 4), dict(device="cuda:99"), ValueError, r"device 'cuda:99' is not available"),
        ((IDS, 2, 4), dict(device="meta"), ValueError, r"device 'meta' holds shapes but no values"),
        ((IDS, 2, 4), dict(device="gpu"), ValueError, r"device must name a torch device"),
    ],
)
def test_lm_batch_refuses_what_is_not_a_batch_of_a_token_stream(args, kwargs, error, message):
    """Batch 0, block 0 and block True gave empty or width-1 batches, float ids float batches,
    and the rest torch's errors (randint overloads, AssertionError without CUDA)."""
    with pytest.raises(error, match=message):
        data.lm_batch(*args, **kwargs)


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((IDS, 0), ValueError, r"^block_size must be an int >= 1, got 0$"),
        ((IDS, -1), ValueError, r"^block_size must be an int >= 1, got -1$"),
        ((IDS, True), ValueError, r"^block_size must be an int >= 1, got True$"),
        ((IDS, 4.0), ValueError, r"^block_size must be an int >= 1, got 4.0$"),
        ((IDS.float(), 4), TypeError, r"integer tensor of token ids, got torch.float32$"),
        ((IDS.tolist(), 4), TypeError, r"integer tensor of token ids, got list$"),
        ((IDS.view(10, 10), 4), ValueError, r"^ids must be 1-D, got shape \(10, 10\)$"),
    ],
)
def test_blocks_refuses_what_is_not_a_token_stream_and_a_width(args, error, message):
    """blocks(ids, 0) gave width-1 blocks (no inputs), True was read as 1, -1 divided by zero."""
    with pytest.raises(error, match=message):
        data.blocks(*args)


def test_batches_of_good_input_are_what_they_were():
    """The checks change nothing for a good stream: int32 ids still give int32 windows."""
    x, y = data.lm_batch(IDS.int(), 3, 5, generator=torch.Generator().manual_seed(1))
    assert x.dtype == torch.int32 and torch.equal(x[:, 1:], y[:, :-1])
    assert data.blocks(IDS, 9).tolist() == IDS.view(10, 10).tolist()


def test_collapse_hunt_refuses_a_checkpoint_flag_that_is_not_a_bool():
    """'no' is truthy: it looked for the checkpoint folder."""
    with pytest.raises(ValueError, match=r"^checkpoint must be True or False, got 'no'$"):
        data.collapse_hunt("base", checkpoint="no")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_in=10.5), r"got d_in = 10.5$"),
        (dict(d_out=True), r"got d_out = True$"),
        (dict(width=0), r"got width = 0$"),
        (dict(n_test=np.int64(8)), r"got n_test = np.int64\(8\)$"),
        (dict(seed=-1), r"^seed must be an int in \[0, 2\*\*64\), got -1$"),
        (dict(seed=2**70), r"^seed must be an int in \[0, 2\*\*64\), got 1180591620717411303424$"),
        (dict(seed=1.0), r"^seed must be an int in \[0, 2\*\*64\), got 1.0$"),
    ],
)
def test_teacher_student_names_the_argument_that_is_not_an_int_in_range(kwargs, message):
    """d_out=True made a one-output task; d_in=10.5 failed in torch.randn."""
    with pytest.raises(ValueError, match=message):
        data.teacher_student(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(n_values=64.5),
            r"^need n_pairs >= 1, d >= 1 and n_values >= 2 \(ints\), got n_values = 64.5$",
        ),
        (dict(d=True), r"got d = True$"),
        (dict(n_pairs="512"), r"got n_pairs = '512'$"),
        (dict(seed=None), r"^seed must be an int in \[0, 2\*\*64\), got None$"),
    ],
)
def test_key_value_recall_names_the_argument_that_is_not_an_int_in_range(kwargs, message):
    """n_values=64.5 failed in torch.randint's overloads."""
    with pytest.raises(ValueError, match=message):
        data.key_value_recall(**kwargs)


@pytest.fixture(scope="module")
def tokens(small_text):
    return data.tokenize(small_text, vocab_size=512)


@pytest.mark.parametrize(
    "ids, error, message",
    [
        ([99999], ValueError, r"token ids must be ints in \[0, 512\) .*got 99999$"),
        ([5, -1, 512], ValueError, r"in \[0, 512\) \(this tokenizer's vocabulary\), got -1, 512$"),
        ([[5, 6], [700]], ValueError, r"got 700$"),
        ([1.0, 2.0], ValueError, r"got 1.0, 2.0$"),
        (torch.tensor([3, 600]), ValueError, r"got 600$"),
        (
            torch.tensor([3.0]),
            ValueError,
            r"token ids must be an integer tensor, got torch.float32",
        ),
        (list(range(600, 610)), ValueError, r"got 600, 601, 602, 603, 604 and 5 more$"),
    ],
)
def test_decode_and_pieces_name_ids_outside_the_vocabulary(tokens, ids, error, message):
    """SentencePiece's "piece id is out of range" named neither the id nor the vocabulary."""
    with pytest.raises(error, match=message):
        tokens.decode(ids)
    with pytest.raises(error, match=message):
        tokens.pieces(ids)


def test_decode_and_pieces_of_good_ids_are_sentencepieces(tokens):
    ids = tokens.train[:40]
    assert tokens.decode(ids) == tokens.tokenizer.decode(ids.tolist())
    assert tokens.decode([ids[:5].tolist(), ids[5:9].tolist()]) == tokens.tokenizer.decode(
        [ids[:5].tolist(), ids[5:9].tolist()]
    )
    assert tokens.pieces(np.array([0, 3]).tolist()) == ["[PAD]", "[END]"]
    assert Path(data.collapse_hunt("base")).name == "base.json"


def test_validation_blocks_are_the_blocks_pretraining_evaluates():
    """One home for a run's validation blocks: the held-out documents, encoded with the run's
    tokenizer, [END] after each, packed into blocks, exactly as pretrain cuts data.val."""
    from kvattn.data import blocks, load_text, tokenize, validation_blocks

    recipe = {"corpus": "pydoc", "corpus_chars": 60_000, "val_every": 10, "block_size": 16}
    tokens = tokenize(load_text("pydoc", max_chars=60_000), vocab_size=400, val_every=10)
    got = validation_blocks(recipe, tokens.tokenizer)
    assert torch.equal(got, blocks(tokens.val, 16))
    assert got.shape[1] == 17 and (got == 3).any()  # [END] = 3 separates the documents
    with pytest.raises(KeyError, match=r"the recipe lacks \['block_size'\]"):
        validation_blocks({k: v for k, v in recipe.items() if k != "block_size"}, tokens.tokenizer)


def test_hunt_study_refuses_a_study_that_is_not_one():
    with pytest.raises(ValueError, match="study must be one of"):
        data.hunt_study("collapse_hunt", "base")
    with pytest.raises(FileNotFoundError, match="no shipped hunt_reruns run"):
        data.hunt_study("hunt_reruns", "nope")
