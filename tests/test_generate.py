"""Tests for :mod:`kvattn.generate` (``generate_text`` and the command line) and for the
UTF-8 check of corpus and prompt files: every bad input is refused with a message that names
it, before the model is loaded; a model with NaN weights fails instead of printing text."""

from __future__ import annotations

import shutil

import pytest
import torch

import kvattn
import kvattn.generate as generate_module
from kvattn.checkpoint import load_pretrained
from kvattn.data import check_tokenizer, load_text, load_tokenizer, shipped, train_tokenizer
from kvattn.generate import generate_text, main

CHECKPOINT = shipped("gpt_tiny")


@pytest.fixture
def no_model_load(monkeypatch):
    """Make loading the model fail loudly: argument checks must come before it."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(generate_module, "load_pretrained", refuse)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(prompt=""), ValueError, "prompt is empty or only whitespace"),
        (dict(prompt=" \n\t "), ValueError, r"empty or only whitespace \(' \\n\\t '\)"),
        (dict(prompt=b"The assert"), TypeError, "prompt must be a str, got bytes"),
        (dict(prompt="caf\udce9"), ValueError, "not valid text .* at character 3"),
        (dict(prompt="\u200b\ufeff"), ValueError, "encodes to no tokens"),
        (dict(checkpoint=5), TypeError, "checkpoint must be a str or Path, got int"),
        (dict(max_new_tokens="5"), TypeError, "max_new_tokens must be an int, got '5'"),
        (dict(max_new_tokens=-1), ValueError, "max_new_tokens must be a non-negative int"),
        (dict(temperature="0.5"), TypeError, "temperature must be a real number, got '0.5'"),
        (dict(temperature=1e-40), ValueError, "temperature=1e-40 is below"),
        (dict(top_p=True), TypeError, "top_p must be a real number, got True"),
        (dict(seed=True), TypeError, "seed must be an int, got True"),
        (dict(seed="0"), TypeError, "seed must be an int, got '0'"),
        (dict(cache="full"), ValueError, "cache must be one of"),
        (dict(device=0), TypeError, "device must be None or a str"),
        (
            dict(seed=2**64),
            ValueError,
            r"seed must lie in \[0, 2\*\*64\), got 18446744073709551616",
        ),
        (dict(seed=-1), ValueError, r"seed must lie in \[0, 2\*\*64\), got -1"),
        (dict(device="meta"), ValueError, "device 'meta' holds no values"),
        (dict(device="gpu"), ValueError, "device 'gpu' is not a device such as 'cpu'"),
    ],
)
def test_generate_text_refuses_bad_arguments_before_loading(no_model_load, kwargs, error, match):
    """Regression: a whitespace prompt used to reach the model as an empty id tensor, strings
    reached the decoder, a non-UTF-8 prompt failed inside SentencePiece."""
    kwargs = {"checkpoint": CHECKPOINT, "prompt": "The assert", "max_new_tokens": 3, **kwargs}
    with pytest.raises(error, match=match):
        generate_text(**kwargs)


@pytest.fixture(scope="module")
def other_tokenizer():
    """A tokenizer trained in another run, with 512 pieces instead of the checkpoint's 2048."""
    return train_tokenizer(load_text(max_chars=30_000), vocab_size=512)


def test_tokenizer_from_another_run_is_refused(tmp_path, no_model_load, other_tokenizer):
    """Regression: SentencePiece's "piece id is out of range" after decoding; now refused when
    tokenizer and model meet, naming both files and both sizes."""
    for name in ("config.json", "model.safetensors"):
        shutil.copy(CHECKPOINT / name, tmp_path / name)
    (tmp_path / "tokenizer.model").write_bytes(other_tokenizer.serialized_model_proto())
    match = (
        rf"{tmp_path}/tokenizer.model has 512 pieces but the model's vocab_size in "
        rf"{tmp_path}/config.json is 2048"
    )
    with pytest.raises(ValueError, match=match):
        generate_text(tmp_path, "The assert", max_new_tokens=3)
    check_tokenizer(load_tokenizer(CHECKPOINT), 2048, CHECKPOINT)  # the shipped pair is fine


def test_corrupt_tokenizer_names_the_file(tmp_path):
    (tmp_path / "tokenizer.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match=rf"{tmp_path}/tokenizer.model is not a SentencePiece"):
        load_tokenizer(tmp_path)


def test_non_utf8_corpus_names_the_path(tmp_path):
    """Regression: a bare UnicodeDecodeError that did not say which file."""
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\u00e9 au lait".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{path} is not UTF-8 text: byte 0xe9 at offset 3"):
        load_text(path)


def test_command_line_prompt_file(tmp_path, capsys):
    """--prompt-file reads a UTF-8 file and decodes as --prompt does; a non-UTF-8 file exits
    with status 1 and a message naming it."""
    good = tmp_path / "prompt.txt"
    good.write_text("The assert", encoding="utf-8")
    assert main(["--checkpoint", str(CHECKPOINT), "--prompt-file", str(good)]) == 0
    from_file = capsys.readouterr().out
    assert main(["--checkpoint", str(CHECKPOINT), "--prompt", "The assert"]) == 0
    assert capsys.readouterr().out == from_file
    assert from_file.startswith("The assert") and len(from_file) > len("The assert\n")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"caf\xe9")
    with pytest.raises(SystemExit) as exit_info:
        main(["--checkpoint", str(CHECKPOINT), "--prompt-file", str(bad)])
    assert exit_info.value.code == 1
    assert f"{bad} is not UTF-8 text" in capsys.readouterr().err


def test_command_line_fails_on_nan_weights(tmp_path, capsys):
    """Regression: a checkpoint with NaN weights decoded greedily to token 0 and the command
    exited 0; now it exits 1 and names the tensor (load_pretrained refuses non-finite weights;
    NaN logits from finite weights are tested in test_pldr.py)."""
    model = load_pretrained(CHECKPOINT)
    with torch.no_grad():
        model.decoder.dec_layers[0].ffn.gluw1.weight[0, 0] = float("nan")
    kvattn.save_pretrained(model, tmp_path)
    shutil.copy(CHECKPOINT / "tokenizer.model", tmp_path / "tokenizer.model")
    with pytest.raises(SystemExit) as exit_info:
        main(["--checkpoint", str(tmp_path), "--prompt", "The assert"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "decoder.dec_layers.0.ffn.gluw1.weight holds NaN or infinite values" in err


def test_a_device_this_machine_lacks_is_refused_before_anything_is_read(monkeypatch, capsys):
    """Audit G10, G11: --device cuda without CUDA and --device meta printed torch's tracebacks
    after the checkpoint and tokenizer were read. Both now exit 1 with a one-line message, before
    the checkpoint is looked at."""

    def refuse(*args, **kwargs):
        raise AssertionError("the checkpoint was read before the device was checked")

    monkeypatch.setattr(generate_module, "resolve_checkpoint", refuse)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device, message in (
        ("cuda", "device 'cuda' is not available on this machine"),
        ("meta", "device 'meta' holds no values"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["--checkpoint", str(CHECKPOINT), "--prompt", "x", "--device", device])
        assert exit_info.value.code == 1
        err = capsys.readouterr().err
        assert f"python -m kvattn.generate: error: {message}" in err and "Traceback" not in err


def test_command_line_seed_out_of_range_is_a_usage_error(no_model_load, capsys):
    """Audit G21: --seed 2**70 failed with "Overflow when unpacking long long" after loading."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--checkpoint", str(CHECKPOINT), "--prompt", "x", "--seed", str(2**70)])
    assert exit_info.value.code == 1
    assert f"seed must lie in [0, 2**64), got {2**70}" in capsys.readouterr().err
