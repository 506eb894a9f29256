"""Saving and loading the ecosystem's way (issue 39): model.save_pretrained(dir) and
PLDRLLM.from_pretrained(dir) / GPT.from_pretrained(dir) are kvattn.save_pretrained and
kvattn.load_pretrained, through a base class below the models."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open

import kvattn
from kvattn.data import shipped
from kvattn.pldr import GPT, PLDRLLM
from kvattn.pretrained import PreTrainedModel


@pytest.mark.parametrize("name, cls", [("pldr_tiny", PLDRLLM), ("gpt_tiny", GPT)])
def test_the_methods_round_trip_the_shipped_checkpoints_as_the_functions_do(tmp_path, name, cls):
    model = cls.from_pretrained(shipped(name))
    assert type(model) is cls and isinstance(model, PreTrainedModel)
    ids = torch.arange(1, 33)[None, :] % model.config.vocab_size
    with torch.no_grad():
        before = model(ids).logits
    by_method = model.save_pretrained(tmp_path / "method")
    by_function = kvattn.save_pretrained(model, tmp_path / "function")
    assert (by_method / "config.json").read_bytes() == (by_function / "config.json").read_bytes()
    # the same tensors, bit for bit, and the same metadata (safetensors orders the header's
    # metadata differently from one save to the next, even of one function: compared as data)
    files = [safe_open(p / "model.safetensors", "pt") for p in (by_method, by_function)]
    assert files[0].metadata() == files[1].metadata()
    assert sorted(files[0].keys()) == sorted(files[1].keys())
    for key in files[0].keys():
        a, b = (f.get_tensor(key) for f in files)
        assert a.dtype == b.dtype and torch.equal(a, b), key
    again = cls.from_pretrained(by_method)
    with torch.no_grad():
        assert torch.equal(again(ids).logits, before)
    # the loader picks the class from config.json
    assert type(PreTrainedModel.from_pretrained(by_method)) is cls


def test_from_pretrained_refuses_a_checkpoint_of_the_other_class():
    with pytest.raises(TypeError, match="holds a PLDRLLM, not a GPT"):
        GPT.from_pretrained(shipped("pldr_tiny"))
    with pytest.raises(TypeError, match="holds a GPT, not a PLDRLLM"):
        PLDRLLM.from_pretrained(shipped("gpt_tiny"))
