"""Tests for :mod:`kvattn.checkpoint`: published-format round trips, tensor names and counts, a
hand-written published checkpoint, and clear errors for every kind of bad checkpoint."""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import kvattn.checkpoint as C
from kvattn.checkpoint import (
    CONFIG_NAME,
    PREFIX_ARCHITECTURE,
    PREFIX_MODEL_TYPE,
    WEIGHTS_NAME,
    from_published,
    load_pretrained,
    recover_directory,
    replace_directory,
    save_pretrained,
    staging_directory,
    to_published,
)
from kvattn.config import PLDRConfig
from kvattn.pldr import GPT, PLDRLLM

F64 = torch.float64
#: The config.json key that marks a kvattn GPT written as an identity-G PLDR-LLM.
MARKER = "kvattn_architecture"
L, H, DK, D, V, A_DFF, FF, NRES, NDENSE = 2, 4, 8, 32, 128, 12, 80, 2, 2

#: The fields of config.json that the published HF port reads [gokden2025kvg].
PUBLISHED_FIELDS = (
    "vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads head_dim "
    "max_position_embeddings A_dff num_reslayerA num_denseA layer_norm_eps rope_theta "
    "reference_rope attention_bias glu_bias final_bias hidden_act custom_G_type cache_first_G "
    "tie_word_embeddings model_type"
).split()


def cfg(**overrides) -> PLDRConfig:
    base = dict(
        vocab_size=V,
        hidden_size=D,
        num_attention_heads=H,
        num_hidden_layers=L,
        intermediate_size=FF,
        A_dff=A_DFF,
        num_reslayerA=NRES,
        num_denseA=NDENSE,
        max_position_embeddings=64,
    )
    return PLDRConfig(**{**base, **overrides})


def build(kind: str, seed: int = 0, **overrides):
    """A tiny model of one kind with generic (perturbed) weights, in eval mode."""
    torch.manual_seed(seed)
    if kind == "gpt":
        model = GPT(cfg(**overrides))
    elif kind == "constant_g":
        model = PLDRLLM(cfg(custom_G_type="random", **overrides))
    else:
        model = PLDRLLM(cfg(**overrides))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_((0.01 if name.endswith(".P") else 0.1) * torch.randn(p.shape, generator=g))
    return model.eval()


IDS = torch.tensor([[5, 17, 3, 99, 42, 8, 1, 64, 120], [7, 0, 0, 11, 12, 13, 14, 15, 16]])


def logits(model, ids=IDS, **kw):
    with torch.no_grad():
        return model(ids, **kw).logits


def per_layer_keys(num_reslayerA: int = NRES, num_denseA: int = NDENSE) -> int:
    return 25 + num_reslayerA * (6 * num_denseA + 2)


@pytest.fixture
def saved(tmp_path) -> tuple[PLDRLLM, Path]:
    model = build("plga")
    return model, save_pretrained(model, tmp_path / "ckpt")


def edit_config(directory: Path, **changes) -> None:
    file = directory / CONFIG_NAME
    data = json.loads(file.read_text())
    data.update(changes)
    file.write_text(json.dumps(data))


def edit_tensors(directory: Path, fn) -> None:
    file = directory / WEIGHTS_NAME
    tensors = load_file(file)
    fn(tensors)
    save_file(tensors, file)


# ---------------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize(
    ("kind", "overrides"),
    [
        ("plga", {}),
        ("plga", dict(density="prefix", reference_rope=False, plga_init="xavier_uniform")),
        ("gpt", {}),
        ("constant_g", {}),
    ],
)
def test_round_trip_is_bit_identical(tmp_path, kind, overrides):
    model = build(kind, **overrides)
    directory = save_pretrained(model, tmp_path / "ckpt")
    assert directory == tmp_path / "ckpt"
    assert sorted(p.name for p in directory.iterdir()) == [CONFIG_NAME, WEIGHTS_NAME]
    loaded = load_pretrained(directory)
    assert type(loaded) is type(model) and not loaded.training
    assert loaded.config == model.config
    assert loaded.state_dict().keys() == model.state_dict().keys()
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert torch.equal(logits(loaded), logits(model))
    assert torch.equal(
        logits(loaded, output_pldr_attentions=True), logits(model, output_pldr_attentions=True)
    )
    assert torch.equal(loaded.generate(IDS, 5), model.generate(IDS, 5))


def test_published_names_round_trip_through_state_dict():
    for kind in ("plga", "gpt", "constant_g"):
        model = build(kind)
        state = model.state_dict()
        back = from_published(to_published(state, model.config), model.config)
        assert back.keys() == state.keys()
        assert all(torch.equal(back[k], v) for k, v in state.items())


def test_float64_round_trip_and_dtype_argument(tmp_path):
    """A float64 model records torch_dtype 'float64'; load_pretrained(dtype=float64) reproduces it
    bit for bit. Loading a float32 checkpoint with dtype=float64 gives a float64 model whose RoPE
    tables were rebuilt (finite, equal to a fresh model's) and whose logits match float32's."""
    model64 = build("plga").to(F64)
    d64 = save_pretrained(model64, tmp_path / "f64")
    assert json.loads((d64 / CONFIG_NAME).read_text())["torch_dtype"] == "float64"
    with safe_open(d64 / WEIGHTS_NAME, "pt") as f:
        assert f.get_tensor("final_layer.weight").dtype == F64
    back = load_pretrained(d64, dtype=F64)
    assert torch.equal(logits(back), logits(model64))

    model = build("plga")
    loaded = load_pretrained(save_pretrained(model, tmp_path / "f32"), dtype=F64)
    assert {p.dtype for p in loaded.parameters()} == {F64}
    rope = loaded.decoder.dec_layers[0].mha1.rope
    assert rope.cos.dtype == F64 and rope.cos.device.type == "cpu"
    fresh = build("plga").decoder.dec_layers[0].mha1.rope
    torch.testing.assert_close(rope.cos, fresh.cos.to(F64), rtol=0, atol=0)
    torch.testing.assert_close(rope.sin, fresh.sin.to(F64), rtol=0, atol=0)
    out = logits(loaded)
    assert out.dtype == F64 and out.isfinite().all()
    torch.testing.assert_close(out, logits(model).to(F64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("float32", torch.float32),
        ("float16", torch.float16),
        ("bfloat16", torch.bfloat16),
        ("float64", F64),
    ],
)
def test_dtype_given_as_a_config_json_name(saved, name, dtype):
    """Regression: dtype="float16" used to fail with "Invalid device string". The names that
    config.json records are accepted and mean the torch dtype of that name."""
    _, directory = saved
    by_name = load_pretrained(directory, dtype=name)
    by_dtype = load_pretrained(directory, dtype=dtype)
    assert {p.dtype for p in by_name.parameters()} == {dtype}
    for key, value in by_dtype.state_dict().items():
        assert torch.equal(by_name.state_dict()[key], value), key


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(dtype="half"), ValueError, r"dtype 'half' is not one of .*'float16'"),
        (dict(dtype="torch.float16"), ValueError, r"dtype 'torch.float16' is not one of"),
        (dict(dtype="cpu"), ValueError, r"dtype 'cpu' is a device: did you mean device='cpu'"),
        (dict(dtype="cuda:0"), ValueError, r"did you mean device='cuda:0'"),
        (dict(dtype=torch.int64), ValueError, r"floating-point dtype, got torch.int64"),
        (dict(dtype=16), TypeError, r"dtype must be None, a torch dtype or one of .* got 16"),
        (
            dict(device=torch.float16),
            TypeError,
            r"device got the dtype torch.float16: did you mean dtype=torch.float16",
        ),
        (dict(device="float16"), ValueError, r"device 'float16' is a dtype name: did you mean "),
        (dict(device="gpu"), ValueError, r"device 'gpu' is not a device such as 'cpu'"),
        (dict(device=0.5), TypeError, r"device must be None, a str such as 'cuda:0' or a torch"),
    ],
)
def test_dtype_and_device_mixups_are_named_before_any_work(tmp_path, kwargs, error, match):
    """A dtype passed as the device (or the reverse), an unknown name or an integer dtype is
    refused with a message naming the argument, before the checkpoint is even looked for."""
    with pytest.raises(error, match=match):
        load_pretrained(tmp_path / "does-not-exist", **kwargs)


def test_rope_tables_are_rebuilt_after_loading(saved):
    """The RoPE tables are non-persistent; the loader builds the model on the meta device and
    must rebuild them, with the config's layout."""
    model, directory = saved
    loaded = load_pretrained(directory)
    for a, b in zip(loaded.decoder.dec_layers, model.decoder.dec_layers, strict=True):
        assert a.mha1.rope.cos.device.type == "cpu"
        assert torch.equal(a.mha1.rope.cos, b.mha1.rope.cos)
        assert torch.equal(a.mha1.rope.sin, b.mha1.rope.sin)
        assert a.mha1.rope.interleaved is True
    assert logits(loaded).isfinite().all()
    assert "rope" not in " ".join(load_file(directory / WEIGHTS_NAME))


# ---------------------------------------------------------------------------------------------
# Published format


def test_config_json_has_published_fields(saved):
    _, directory = saved
    raw = json.loads((directory / CONFIG_NAME).read_text())
    assert raw["architectures"] == ["PldrllmForCausalLM"]
    assert raw["model_type"] == "pldrllm"
    assert raw["torch_dtype"] == "float32"
    for name in PUBLISHED_FIELDS:
        assert name in raw, name
    expected = dict(
        vocab_size=V,
        hidden_size=D,
        intermediate_size=FF,
        num_hidden_layers=L,
        num_attention_heads=H,
        head_dim=DK,
        A_dff=A_DFF,
        num_reslayerA=NRES,
        num_denseA=NDENSE,
        layer_norm_eps=1e-6,
        rope_theta=10000.0,
        reference_rope=True,
        attention_bias=True,
        glu_bias=True,
        final_bias=True,
        hidden_act="silu",
        custom_G_type=None,
        tie_word_embeddings=False,
        pad_token_id=0,
    )
    assert {k: raw[k] for k in expected} == expected
    assert "extra" not in raw and "kvattn_architecture" not in raw


def test_safetensors_has_published_names_and_shapes(saved):
    _, directory = saved
    with safe_open(directory / WEIGHTS_NAME, "pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        meta = f.metadata()
        assert meta["format"] == "pt" and len(meta["kvattn_sha256"]) == 64
    assert len(shapes) == L * per_layer_keys() + 5 == 2 * (25 + 2 * 14) + 5
    p = "decoder.dec_layers.1.mha1."
    expected = {
        "decoder.embedding.weight": (V, D),
        "decoder.layernorm1.weight": (D,),
        "final_layer.weight": (V, D),
        "final_layer.bias": (V,),
        "decoder.dec_layers.0.mha1.plgatt_layer.Wlst": (H, DK, DK),
        p + "plgatt_layer.blst": (H, DK, DK),
        p + "plgatt_layer.pwlst": (H, DK, DK),
        p + "plgatt_layer.alst": (H, DK, DK),
        p + "plgatt_layer.balst": (H, DK, DK),
        p + "wq.weight": (D, D),
        p + "dense.bias": (D,),
        p + "layernorm1.weight": (DK,),
        "decoder.dec_layers.0.mha1.reslayerAs.0.denseAs.0.gluw1.weight": (A_DFF, DK),
        p + "reslayerAs.1.denseAs.1.gluw2.bias": (A_DFF,),
        p + "reslayerAs.1.denseAs.1.gluw3.weight": (DK, A_DFF),
        p + "reslayerAs.1.layernormA.bias": (DK,),
        "decoder.dec_layers.1.ffn.gluw1.weight": (FF, D),
        "decoder.dec_layers.1.ffn.gluw3.weight": (D, FF),
        "decoder.dec_layers.1.layernorm2.bias": (D,),
    }
    for key, shape in expected.items():
        assert shapes.get(key) == shape, key
    kvattn_names = [k for k in shapes if k.rsplit(".", 1)[-1] in ("W", "b_W", "P", "a", "b_a")]
    assert kvattn_names == []


def test_key_count_formula_for_other_sizes(tmp_path):
    """25 + num_reslayerA·(6·num_denseA + 2) keys per layer, plus 5."""
    model = build("plga", num_hidden_layers=3, num_reslayerA=3, num_denseA=1)
    directory = save_pretrained(model, tmp_path / "c")
    assert len(load_file(directory / WEIGHTS_NAME)) == 3 * per_layer_keys(3, 1) + 5 == 3 * 49 + 5
    gpt_dir = save_pretrained(build("gpt", num_hidden_layers=3), tmp_path / "g")
    assert len(load_file(gpt_dir / WEIGHTS_NAME)) == 3 * 18 + 5 + 2  # + the two G buffers


def test_constant_g_checkpoint_layout(tmp_path):
    model = build("constant_g")
    directory = save_pretrained(model, tmp_path / "cg")
    tensors = load_file(directory / WEIGHTS_NAME)
    past = tensors["decoder.past_G_values"]
    assert past.shape == (L, 3, 1, H, DK, DK) and past.dtype == torch.float32
    for i, G in enumerate(model.G_LM()):
        assert torch.equal(past[i, 2, 0], G)
    assert (past[:, :2] == 0).all()
    status = tensors["decoder.past_G_values_status"]
    assert status.dtype == torch.bool and status.shape == (L,) and status.all()
    banned = ("plgatt_layer", "reslayerAs", "mha1.layernorm1", "G_LM")
    assert not [k for k in tensors if any(b in k for b in banned)]
    assert len(tensors) == L * 18 + 5 + 2
    raw = json.loads((directory / CONFIG_NAME).read_text())
    assert raw["custom_G_type"] == "random" and raw["architectures"] == ["PldrllmForCausalLM"]


def test_gpt_is_written_as_an_identity_g_pldrllm(tmp_path):
    """Regression: a GPT used to be written with architectures ["KvattnGPTForCausalLM"] and no
    custom_G_type, which the published PldrllmForCausalLM builds as a PLGA model with random
    PLGA tensors. It is now written as the published format's own SDPA model: custom_G_type
    "identity", architectures ["PldrllmForCausalLM"], the persistent G buffers with G_LM = I
    (A and A_LM zero, as the port's G_values_init) and no PLGA tensors; only a kvattn key marks
    it. Its file is exactly that of the identity constant-G model with the same weights."""
    assert C.GPT_MARKER_KEY == MARKER
    gpt = build("gpt")
    directory = save_pretrained(gpt, tmp_path / "gpt")
    raw = json.loads((directory / CONFIG_NAME).read_text())
    assert raw["architectures"] == ["PldrllmForCausalLM"] and raw["model_type"] == "pldrllm"
    assert raw["custom_G_type"] == "identity" and raw[MARKER] == "KvattnGPTForCausalLM"
    for name in PUBLISHED_FIELDS:
        assert name in raw, name
    tensors = load_file(directory / WEIGHTS_NAME)
    past = tensors["decoder.past_G_values"]
    assert past.shape == (L, 3, 1, H, DK, DK) and past.dtype == torch.float32
    assert torch.equal(past[:, 2, 0], torch.eye(DK).expand(L, H, DK, DK))
    assert (past[:, :2] == 0).all()
    status = tensors["decoder.past_G_values_status"]
    assert status.dtype == torch.bool and status.shape == (L,) and status.all()
    banned = ("plgatt_layer", "reslayerAs", "mha1.layernorm1", "G_LM")
    assert not [k for k in tensors if any(b in k for b in banned)]
    assert len(tensors) == L * 18 + 5 + 2
    for key, value in to_published(gpt.state_dict(), gpt.config).items():
        assert torch.equal(tensors[key], value), key
    # the identity constant-G model with these weights writes the same file, but for the marker
    const_g = PLDRLLM(cfg(custom_G_type="identity"))
    const_g.load_state_dict(
        {**gpt.state_dict(), **{k: v for k, v in const_g.state_dict().items() if "G_LM" in k}}
    )
    other = save_pretrained(const_g, tmp_path / "const_g")
    assert json.loads((other / CONFIG_NAME).read_text()) == {
        k: v for k, v in raw.items() if k != MARKER
    }
    theirs = load_file(other / WEIGHTS_NAME)
    assert theirs.keys() == tensors.keys()
    assert all(torch.equal(theirs[k], v) for k, v in tensors.items())


@pytest.mark.parametrize("dtype", [torch.float32, F64, torch.bfloat16])
def test_gpt_round_trip_through_the_identity_g_format(tmp_path, dtype):
    """The marked identity-G checkpoint loads back as a GPT: same config (custom_G_type None,
    as a GPT's), every tensor equal, the same logits, in the model's dtype (the identity is
    exact in every dtype)."""
    gpt = build("gpt").to(dtype)
    directory = save_pretrained(gpt, tmp_path / "gpt")
    assert load_file(directory / WEIGHTS_NAME)["decoder.past_G_values"].dtype == dtype
    loaded = load_pretrained(directory)
    assert type(loaded) is GPT and loaded.config == gpt.config
    assert loaded.config.custom_G_type is None
    assert loaded.state_dict().keys() == gpt.state_dict().keys()
    for key, value in gpt.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert torch.equal(logits(loaded), logits(gpt))
    # written back, it is the same file
    again = load_file(save_pretrained(loaded, tmp_path / "again") / WEIGHTS_NAME)
    first = load_file(directory / WEIGHTS_NAME)
    assert again.keys() == first.keys() and all(torch.equal(again[k], first[k]) for k in first)


def test_unmarked_identity_g_checkpoint_loads_as_constant_g_with_the_gpt_logits(tmp_path):
    """Without the kvattn key, an identity-G checkpoint (published, or a kvattn constant-G model)
    loads as the constant-G PLDR-LLM, as before; it computes the GPT's logits exactly (q·I = q),
    which is what the published port computes from the same file."""
    gpt = build("gpt")
    directory = save_pretrained(gpt, tmp_path / "gpt")
    raw = json.loads((directory / CONFIG_NAME).read_text())
    del raw[MARKER]
    (directory / CONFIG_NAME).write_text(json.dumps(raw))
    loaded = load_pretrained(directory)
    assert type(loaded) is PLDRLLM and loaded.config.custom_G_type == "identity"
    assert all(torch.equal(G, torch.eye(DK).expand(H, DK, DK)) for G in loaded.G_LM())
    assert torch.equal(logits(loaded), logits(gpt))
    assert torch.equal(
        logits(loaded, output_pldr_attentions=True), logits(gpt, output_pldr_attentions=True)
    )


def _old_gpt_checkpoint(gpt, directory: Path) -> Path:
    """A GPT checkpoint in the format kvattn wrote before: architectures
    ["KvattnGPTForCausalLM"], custom_G_type null, no G buffers (as data/gpt_tiny was)."""
    save_pretrained(gpt, directory)
    raw = json.loads((directory / CONFIG_NAME).read_text())
    del raw[MARKER]
    raw.update(architectures=["KvattnGPTForCausalLM"], custom_G_type=None)
    (directory / CONFIG_NAME).write_text(json.dumps(raw))
    tensors = load_file(directory / WEIGHTS_NAME)
    del tensors["decoder.past_G_values"], tensors["decoder.past_G_values_status"]
    save_file(tensors, directory / WEIGHTS_NAME, metadata={"format": "pt"})
    return directory


def test_old_gpt_checkpoints_still_load_as_before(tmp_path):
    gpt = build("gpt")
    loaded = load_pretrained(_old_gpt_checkpoint(gpt, tmp_path / "old"))
    assert type(loaded) is GPT and loaded.config == gpt.config
    for key, value in gpt.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert torch.equal(logits(loaded), logits(gpt))


@pytest.mark.parametrize(
    ("config_changes", "tensor_change", "match"),
    [
        ({MARKER: "KvattnTinyLM"}, None, r"kvattn_architecture must be 'KvattnGPTForCausalLM'"),
        (
            dict(custom_G_type="random"),
            None,
            r"custom_G_type 'identity', but custom_G_type is 'random'",
        ),
        (dict(custom_G_type=None), None, r"custom_G_type 'identity', but custom_G_type is None"),
        ({}, "perturb", r"G_LM = I.*layer 1"),
        ({}, "drop", r"missing decoder.past_G_values"),
        ({}, "unset", r"past_G_values_status"),
    ],
)
def test_marked_gpt_checkpoint_must_be_identity_g(tmp_path, config_changes, tensor_change, match):
    """The kvattn key is trusted only with what it promises: custom_G_type "identity" and G_LM
    = I in every layer (a checkpoint whose G was edited is not a GPT)."""
    directory = save_pretrained(build("gpt"), tmp_path / "gpt")
    edit_config(directory, **config_changes)

    def change(t):
        if tensor_change == "perturb":
            t["decoder.past_G_values"] = t["decoder.past_G_values"].clone()
            t["decoder.past_G_values"][1, 2, 0, 3, 0, 1] = 1e-3
        elif tensor_change == "drop":
            del t["decoder.past_G_values"], t["decoder.past_G_values_status"]
        elif tensor_change == "unset":
            t["decoder.past_G_values_status"] = torch.zeros(L, dtype=torch.bool)

    if tensor_change:
        edit_tensors(directory, change)
    with pytest.raises(ValueError, match=match):
        load_pretrained(directory)


# ---------------------------------------------------------------------------------------------
# A checkpoint written by hand in the published format


def _published_tensors(seed: int = 0, constant_g: bool = False) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return 0.1 * torch.randn(shape, generator=g)

    t = {
        "decoder.embedding.weight": torch.randn(V, D, generator=g),
        "decoder.layernorm1.weight": 1 + r(D),
        "decoder.layernorm1.bias": r(D),
        "final_layer.weight": r(V, D),
        "final_layer.bias": r(V),
    }
    for i in range(L):
        p = f"decoder.dec_layers.{i}."
        for name in ("wq", "wk", "wv", "dense"):
            t[f"{p}mha1.{name}.weight"], t[f"{p}mha1.{name}.bias"] = r(D, D), r(D)
        for name in ("gluw1", "gluw2"):
            t[f"{p}ffn.{name}.weight"], t[f"{p}ffn.{name}.bias"] = r(FF, D), r(FF)
        t[f"{p}ffn.gluw3.weight"], t[f"{p}ffn.gluw3.bias"] = r(D, FF), r(D)
        for name in ("layernorm1", "layernorm2"):
            t[f"{p}{name}.weight"], t[f"{p}{name}.bias"] = 1 + r(D), r(D)
        if constant_g:
            continue
        for name in ("Wlst", "blst", "alst", "balst"):
            t[f"{p}mha1.plgatt_layer.{name}"] = r(H, DK, DK)
        t[f"{p}mha1.plgatt_layer.pwlst"] = 0.1 * r(H, DK, DK)
        t[f"{p}mha1.layernorm1.weight"], t[f"{p}mha1.layernorm1.bias"] = 1 + r(DK), r(DK)
        for j in range(NRES):
            u = f"{p}mha1.reslayerAs.{j}."
            for k in range(NDENSE):
                for name in ("gluw1", "gluw2"):
                    t[f"{u}denseAs.{k}.{name}.weight"] = r(A_DFF, DK)
                    t[f"{u}denseAs.{k}.{name}.bias"] = r(A_DFF)
                t[f"{u}denseAs.{k}.gluw3.weight"], t[f"{u}denseAs.{k}.gluw3.bias"] = (
                    r(DK, A_DFF),
                    r(DK),
                )
            t[f"{u}layernormA.weight"], t[f"{u}layernormA.bias"] = 1 + r(DK), r(DK)
    if constant_g:
        t["decoder.past_G_values"] = torch.randn(L, 3, 1, H, DK, DK, generator=g)
        t["decoder.past_G_values_status"] = torch.ones(L, dtype=torch.bool)
    return t


def _published_config(**changes) -> dict:
    """A config.json shaped like the released PLDR-LLM-v51-SOC-110M-1 one, at the tiny size."""
    return {
        "A_dff": A_DFF,
        "architectures": ["PldrllmForCausalLM"],
        "attention_bias": True,
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration_pldrllm.PldrllmConfig",
            "AutoModelForCausalLM": "modeling_pldrllm.PldrllmForCausalLM",
        },
        "bos_token_id": 2,
        "cache_first_G": False,
        "custom_G_type": None,
        "dtype": "float32",
        "eos_token_id": 3,
        "final_bias": True,
        "glu_bias": True,
        "head_dim": DK,
        "hidden_act": "silu",
        "hidden_size": D,
        "initializer_range": 0.02,
        "intermediate_size": FF,
        "layer_norm_eps": 1e-6,
        "max_position_embeddings": 64,
        "model_type": "pldrllm",
        "num_attention_heads": H,
        "num_denseA": NDENSE,
        "num_hidden_layers": L,
        "num_reslayerA": NRES,
        "output_pldr_attentions": False,
        "pad_token_id": 0,
        "reference_rope": True,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "transformers_version": "4.56.1",
        "use_cache": True,
        "vocab_size": V,
        **changes,
    }


def _write_published(directory: Path, tensors: dict, config: dict) -> Path:
    directory.mkdir(parents=True)
    save_file(tensors, directory / WEIGHTS_NAME, metadata={"format": "pt"})
    (directory / CONFIG_NAME).write_text(json.dumps(config))
    return directory


def test_load_hand_written_published_checkpoint(tmp_path):
    tensors = _published_tensors()
    assert len(tensors) == L * per_layer_keys() + 5
    directory = _write_published(tmp_path / "pub", tensors, _published_config())
    model = load_pretrained(directory)
    assert type(model) is PLDRLLM and model.config.custom_G_type is None
    assert model.config.extra["transformers_version"] == "4.56.1"
    assert model.config.extra["auto_map"]["AutoConfig"] == "configuration_pldrllm.PldrllmConfig"
    names = {"W": "Wlst", "b_W": "blst", "P": "pwlst", "a": "alst", "b_a": "balst"}
    for i, layer in enumerate(model.decoder.dec_layers):
        for ours, theirs in names.items():
            got = getattr(layer.mha1.plgatt_layer, ours)
            assert torch.equal(got, tensors[f"decoder.dec_layers.{i}.mha1.plgatt_layer.{theirs}"])
    state = model.state_dict()
    for key, value in tensors.items():
        ours = key
        for theirs_name, our_name in ((v, k) for k, v in names.items()):
            ours = ours.replace(f"plgatt_layer.{theirs_name}", f"plgatt_layer.{our_name}")
        assert torch.equal(state[ours], value), key
    out = logits(model, output_pldr_attentions=True)
    assert out.isfinite().all()
    # and it writes back the very same tensors
    again = load_file(save_pretrained(model, tmp_path / "again") / WEIGHTS_NAME)
    assert again.keys() == tensors.keys()
    assert all(torch.equal(again[k], v) for k, v in tensors.items())


def test_load_hand_written_constant_g_checkpoint(tmp_path):
    """A v51G-style checkpoint: custom_G_type set, G in past_G_values[:, 2, 0]; no architectures
    field (the loader defaults to PLDR-LLM)."""
    tensors = _published_tensors(constant_g=True)
    config = _published_config(custom_G_type="external")
    del config["architectures"]
    model = load_pretrained(_write_published(tmp_path / "g", tensors, config))
    assert type(model) is PLDRLLM
    for i, G in enumerate(model.G_LM()):
        assert torch.equal(G, tensors["decoder.past_G_values"][i, 2, 0])
    assert logits(model).isfinite().all()


def test_unset_g_status_is_refused(tmp_path):
    tensors = _published_tensors(constant_g=True)
    tensors["decoder.past_G_values_status"][1] = False
    directory = _write_published(
        tmp_path / "g", tensors, _published_config(custom_G_type="external")
    )
    with pytest.raises(ValueError, match="past_G_values_status marks some layers' G as unset"):
        load_pretrained(directory)


# ---------------------------------------------------------------------------------------------
# Bad checkpoints


def test_missing_tensor(saved):
    _, directory = saved
    key = "decoder.dec_layers.1.mha1.plgatt_layer.pwlst"
    edit_tensors(directory, lambda t: t.pop(key))
    with pytest.raises(ValueError, match=r"does not match its config \(PldrllmForCausalLM\)") as e:
        load_pretrained(directory)
    assert "missing 1 tensors" in str(e.value) and "decoder.dec_layers.1.mha1.plgatt_layer.P" in (
        str(e.value)
    )


def test_unexpected_tensor(saved):
    _, directory = saved
    edit_tensors(directory, lambda t: t.update({"decoder.extra.weight": torch.zeros(3)}))
    with pytest.raises(ValueError, match=r"unexpected 1 tensors, e.g. \['decoder.extra.weight'\]"):
        load_pretrained(directory)


def test_wrong_shape_names_key_and_config(saved):
    _, directory = saved
    key = "decoder.dec_layers.0.mha1.reslayerAs.1.denseAs.0.gluw1.weight"
    edit_tensors(directory, lambda t: t.update({key: torch.zeros(A_DFF + 1, DK)}))
    with pytest.raises(ValueError, match=r"config\.json implies") as e:
        load_pretrained(directory)
    msg = str(e.value)
    assert key in msg and "(13, 8)" in msg and "(12, 8)" in msg and "A_dff=12" in msg


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        (dict(vocab_size=100), r"decoder.embedding.weight has shape \(128, 32\).*vocab_size=100"),
        (dict(hidden_size=48, head_dim=12), r"has shape .*hidden_size=48"),
        (dict(hidden_size=48), "must equal hidden_size = 48"),
        (dict(num_hidden_layers=1), "unexpected"),
        (dict(num_hidden_layers=3), "missing"),
        (dict(num_reslayerA=3), "missing"),
        (dict(custom_G_type="identity"), "unexpected"),
        (dict(A_dff=0), "A_dff must be a positive int"),
        (dict(density="causal"), "density must be"),
    ],
)
def test_config_contradicting_weights(saved, changes, match):
    _, directory = saved
    edit_config(directory, **changes)
    with pytest.raises(ValueError, match=match):
        load_pretrained(directory)


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda b: b[: len(b) // 2], id="cut-in-half"),
        pytest.param(lambda b: b[:-1], id="last-byte-missing"),
        pytest.param(lambda b: b[:8] + b"\x00" * 16 + b[24:], id="header-bytes-zeroed"),
        pytest.param(lambda b: b"\xff" * 8 + b[8:], id="header-length"),
        pytest.param(lambda b: b"", id="empty"),
        pytest.param(lambda b: random.Random(0).randbytes(1000), id="random-bytes"),
    ],
)
def test_truncated_or_corrupted_weights(saved, corrupt):
    _, directory = saved
    file = directory / WEIGHTS_NAME
    file.write_bytes(corrupt(file.read_bytes()))
    with pytest.raises(ValueError, match=r"model.safetensors is truncated or corrupted"):
        load_pretrained(directory)


def test_flipped_tensor_bytes_fail_the_recorded_checksum(saved):
    """Damaged tensor data leaves a readable file; the checksum recorded at save time catches it."""
    _, directory = saved
    file = directory / WEIGHTS_NAME
    data = bytearray(file.read_bytes())
    data[-5] ^= 0xFF  # inside the last tensor's bytes
    file.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="do not match the SHA-256 checksum"):
        load_pretrained(directory)


@pytest.mark.parametrize(
    ("text", "match"),
    [('{"vocab_size": 128,', "is not valid JSON"), ("[1, 2]", "must hold a JSON object")],
)
def test_invalid_config_json(saved, text, match):
    _, directory = saved
    (directory / CONFIG_NAME).write_text(text)
    with pytest.raises(ValueError, match=match):
        load_pretrained(directory)


def test_missing_files(saved, tmp_path):
    _, directory = saved
    other = tmp_path / "other"
    shutil.copytree(directory, other)
    (directory / CONFIG_NAME).unlink()
    with pytest.raises(FileNotFoundError, match=r"has no config\.json"):
        load_pretrained(directory)
    (other / WEIGHTS_NAME).unlink()
    with pytest.raises(FileNotFoundError, match=r"has no model\.safetensors"):
        load_pretrained(other)
    with pytest.raises(FileNotFoundError, match="no checkpoint directory at"):
        load_pretrained(tmp_path / "does-not-exist")
    with pytest.raises(ValueError, match="expected a checkpoint directory"):
        load_pretrained(other / CONFIG_NAME)


class _Trap:
    """Unpickling this creates a marker directory: proof that a file was unpickled."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


@pytest.mark.parametrize("suffix", [".bin", ".pt", ".pth", ".pkl", ".ckpt"])
def test_pickle_files_are_refused_unread(tmp_path, monkeypatch, suffix):
    marker = tmp_path / "unpickled"
    file = tmp_path / f"model{suffix}"
    file.write_bytes(pickle.dumps(_Trap(marker)))

    def forbidden(*args, **kwargs):
        raise AssertionError("a pickle file was read")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    for path in (file, str(file), tmp_path / f"absent{suffix}"):
        with pytest.raises(ValueError, match="pickle-based checkpoint"):
            load_pretrained(path)
    assert not marker.exists()


def test_unknown_architecture_and_model_type(saved):
    _, directory = saved
    edit_config(directory, architectures=["LlamaForCausalLM"])
    with pytest.raises(ValueError, match="unknown architecture 'LlamaForCausalLM'"):
        load_pretrained(directory)
    edit_config(directory, architectures=["PldrllmForCausalLM"], model_type="llama")
    with pytest.raises(ValueError, match="model_type 'llama', not 'pldrllm'"):
        load_pretrained(directory)


def test_gpt_checkpoint_is_not_a_plga_checkpoint(tmp_path):
    """Relabelling a GPT checkpoint as a PLGA PLDR-LLM fails: the PLGA tensors are missing."""
    directory = save_pretrained(build("gpt"), tmp_path / "gpt")
    raw = json.loads((directory / CONFIG_NAME).read_text())
    del raw[MARKER]
    (directory / CONFIG_NAME).write_text(json.dumps({**raw, "custom_G_type": None}))
    with pytest.raises(ValueError, match="missing 70 tensors"):
        load_pretrained(directory)


# ---------------------------------------------------------------------------------------------
# Bad inputs: config fields, config.json, weights


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (dict(attention_bias="false"), "attention_bias must be true or false, got 'false'"),
        (dict(final_bias=0), "final_bias must be true or false, got 0"),
        (dict(reference_rope=None), "reference_rope must be true or false, got None"),
        (dict(tie_word_embeddings="no"), "tie_word_embeddings must be true or false"),
        (
            dict(pad_token_id=V),
            rf"pad_token_id must lie in \[0, vocab_size\) = \[0, {V}\), got {V}",
        ),
        (dict(eos_token_id=-1), r"eos_token_id must lie in \[0, vocab_size\)"),
        (dict(bos_token_id=2.0), "bos_token_id must be an int token id, got 2.0"),
        (dict(head_dim="8"), "head_dim must be a positive int, got '8'"),
        (dict(model_type="llama"), "model_type must be 'pldrllm', got 'llama'"),
        (dict(extra={"rope_scaling": {"type": "linear", "factor": 2.0}}), "rope_scaling="),
    ],
)
def test_config_fields_are_checked_at_construction(overrides, match):
    """Wrong types are refused rather than used ("false" is truthy and kept the biases), and
    special token ids must index the vocabulary."""
    with pytest.raises(ValueError, match=match):
        cfg(**overrides)


def test_strict_from_dict_names_the_typo_and_the_allowed_keys():
    values = {"hidden_size": D, "num_attention_heads": H, "hiden_size": 16}
    with pytest.raises(ValueError, match=r"'hiden_size' \(did you mean 'hidden_size'\?\)"):
        PLDRConfig.from_dict(values, strict=True)
    # a published config.json keeps the fields kvattn does not use
    loose = PLDRConfig.from_dict({"transformers_version": "4.56.1", "rope_scaling": None})
    assert loose.extra == {"transformers_version": "4.56.1", "rope_scaling": None}
    assert loose.hidden_size == 896


def test_config_key_one_edit_from_a_field_warns_on_loading(saved):
    """Regression: "rope_thet" in config.json used to load silently with the default rope_theta
    (and was written back by save_pretrained). The checkpoint still loads (published configs
    carry keys kvattn does not use), with a warning that names the key and the field."""
    from kvattn.config import ConfigKeyWarning

    model, directory = saved
    edit_config(directory, rope_thet=500000.0)
    with pytest.warns(ConfigKeyWarning, match=r"'rope_thet' .*'rope_theta'"):
        loaded = load_pretrained(directory)
    assert loaded.config.rope_theta == 10000.0
    assert torch.equal(logits(loaded), logits(model))


def test_published_config_loads_without_warnings(tmp_path):
    import warnings

    directory = _write_published(tmp_path / "pub", _published_tensors(), _published_config())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_pretrained(directory)


def test_non_null_rope_scaling_is_refused_and_null_is_kept(saved):
    model, directory = saved
    edit_config(directory, rope_scaling=None)
    assert torch.equal(logits(load_pretrained(directory)), logits(model))
    edit_config(directory, rope_scaling={"rope_type": "linear", "factor": 4.0})
    with pytest.raises(
        ValueError, match=r"config.json: rope_scaling=.*'factor': 4.0.* not supported"
    ):
        load_pretrained(directory)


def test_architectures_must_be_a_list(saved):
    _, directory = saved
    edit_config(directory, architectures="PldrllmForCausalLM")
    with pytest.raises(
        ValueError, match=r"architectures must be a non-empty list .* got 'PldrllmForCausalLM'"
    ):
        load_pretrained(directory)
    edit_config(directory, architectures=[])
    with pytest.raises(ValueError, match="architectures must be a non-empty list"):
        load_pretrained(directory)


def test_integer_weights_are_refused_with_their_name(saved):
    _, directory = saved
    key = "decoder.dec_layers.1.mha1.wq.weight"
    edit_tensors(directory, lambda t: t.update({key: (t[key] * 100).to(torch.int32)}))
    with pytest.raises(ValueError, match=rf"tensor {key} has dtype torch.int32.*floating point"):
        load_pretrained(directory)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_with_their_name(saved, value):
    _, directory = saved
    key = "decoder.dec_layers.0.mha1.plgatt_layer.pwlst"

    def poison(tensors):
        tensors[key] = tensors[key].clone()
        tensors[key][1, 2, 3] = value

    edit_tensors(directory, poison)
    with pytest.raises(ValueError, match=rf"tensor {key} holds NaN or infinite values"):
        load_pretrained(directory)


def test_prefix_density_checkpoint_is_refused_by_a_published_loader(tmp_path):
    """A prefix-density model gets its own model_type and architectures (an unknown model type to
    the published AutoConfig), and kvattn maps them back to the prefix model."""
    model = build("plga", density="prefix")
    directory = save_pretrained(model, tmp_path / "prefix")
    raw = json.loads((directory / CONFIG_NAME).read_text())
    assert raw["model_type"] == PREFIX_MODEL_TYPE != "pldrllm"
    assert raw["architectures"] == [PREFIX_ARCHITECTURE]
    loaded = load_pretrained(directory)
    assert type(loaded) is PLDRLLM and loaded.config.density == "prefix"
    assert loaded.config.model_type == "pldrllm"
    assert torch.equal(logits(loaded), logits(model))
    block = json.loads(
        (save_pretrained(build("plga"), tmp_path / "block") / CONFIG_NAME).read_text()
    )
    assert block["model_type"] == "pldrllm" and block["architectures"] == ["PldrllmForCausalLM"]
    edit_config(directory, density="block")
    with pytest.raises(ValueError, match=f"model_type '{PREFIX_MODEL_TYPE}' but density 'block'"):
        load_pretrained(directory)


# ---------------------------------------------------------------------------------------------
# Crash-safe saving


def test_a_kill_while_saving_leaves_the_old_checkpoint_whole(saved, monkeypatch):
    """save_pretrained writes config.json before the weights; a kill in between used to leave a
    new config.json beside the old weights. Now the old folder is untouched until the new one is
    complete."""
    old, directory = saved
    (directory / "tokenizer.model").write_bytes(b"tok")
    old_config = (directory / CONFIG_NAME).read_text()

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(C.published, "save_file", killed)
    with pytest.raises(KeyboardInterrupt):
        save_pretrained(build("plga", seed=1, num_hidden_layers=1), directory)
    monkeypatch.undo()
    assert (directory / CONFIG_NAME).read_text() == old_config
    assert torch.equal(logits(load_pretrained(directory)), logits(old))
    # the next save clears the leftover staging folder and keeps files it does not own
    new = build("plga", seed=1)
    save_pretrained(new, directory)
    assert sorted(p.name for p in directory.parent.iterdir()) == ["ckpt"]
    assert (directory / "tokenizer.model").read_bytes() == b"tok"
    assert torch.equal(logits(load_pretrained(directory)), logits(new))


def test_recover_directory_after_a_kill_between_the_two_moves(tmp_path):
    """replace_directory moves the old folder aside, then the new one in; a kill in between leaves
    no folder at all. Recovery moves the complete new folder in (or, without it, the old one
    back)."""
    target = tmp_path / "run"
    staging = staging_directory(target)
    assert staging == tmp_path / "run.kvattn-staging"
    aside = tmp_path / "run.kvattn-replaced"
    for folder, text in ((staging, "new"), (aside, "old")):
        folder.mkdir()
        (folder / "f").write_text(text)
    recover_directory(target)
    assert (target / "f").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    target.rename(aside)
    recover_directory(target)
    assert (target / "f").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    # an interrupted first write (staging only) is discarded; a present target keeps its content
    staging.mkdir()
    recover_directory(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    staging.mkdir()
    (staging / "f").write_text("newer")
    replace_directory(target)
    assert (target / "f").read_text() == "newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize("name", [".", "..", "a/.."])
def test_save_pretrained_needs_a_named_folder(tmp_path, monkeypatch, name):
    """The folder is swapped as a whole: never the working directory or one above it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="directory must name a folder"):
        save_pretrained(build("gpt"), name)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("inside", [False, True])
def test_save_pretrained_refuses_the_working_directory_and_its_parents(
    tmp_path, monkeypatch, inside
):
    """Regression: save_pretrained(model, os.getcwd()) was accepted and swapped the working
    directory away (the process was left in a deleted folder). The working directory, and any
    folder that contains it, are refused before any work, however they are spelled."""
    ckpt = save_pretrained(build("gpt"), tmp_path / "ckpt")
    cwd = ckpt / "sub" if inside else ckpt
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    (tmp_path / "link").symlink_to(ckpt)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    relative = Path(*[".."] * (2 if inside else 1), "ckpt")
    spellings = [ckpt, os.getcwd(), tmp_path / "link", relative, str(relative)]
    for target in spellings:
        with pytest.raises(ValueError, match="working directory"):
            save_pretrained(build("gpt", seed=1), target)
    assert Path.cwd() == cwd and cwd.is_dir()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def _kill_between_the_two_moves(directory: Path, new) -> None:
    """What a kill between replace_directory's two moves leaves: the old folder moved aside, the
    complete new one still in the staging folder, and no folder at ``directory``."""
    staging = staging_directory(directory)
    C.write_pretrained(new, staging)
    directory.rename(directory.with_name(directory.name + ".kvattn-replaced"))
    assert not directory.exists() and staging.is_dir()


def test_load_pretrained_completes_an_interrupted_replace(saved):
    """Regression: after a kill between the two moves of a save, load_pretrained said there was no
    checkpoint while a complete one sat in the staging folder. It now verifies the staged
    checkpoint (its checksum) and completes the move, as the training code's resume does."""
    _, directory = saved
    new = build("plga", seed=1)
    _kill_between_the_two_moves(directory, new)
    loaded = load_pretrained(directory)
    assert torch.equal(logits(loaded), logits(new))
    assert sorted(p.name for p in directory.parent.iterdir()) == ["ckpt"]


@pytest.mark.parametrize("damage", ["checksum", "no-weights", "no-checksum"])
def test_an_unverifiable_staged_checkpoint_is_named_and_left_alone(saved, damage):
    """A staged checkpoint that cannot be verified is not moved in: the error names it (and the
    old one, moved aside), and both stay as they are."""
    _, directory = saved
    _kill_between_the_two_moves(directory, build("plga", seed=1))
    staging = staging_directory(directory)
    weights = staging / WEIGHTS_NAME
    if damage == "checksum":
        data = bytearray(weights.read_bytes())
        data[-5] ^= 0xFF
        weights.write_bytes(bytes(data))
    elif damage == "no-weights":
        weights.unlink()
    else:
        save_file(load_file(weights), weights, metadata={"format": "pt"})
    before = sorted(p.name for p in directory.parent.iterdir())
    with pytest.raises(FileNotFoundError, match="interrupted") as err:
        load_pretrained(directory)
    assert str(staging) in str(err.value) and "ckpt.kvattn-replaced" in str(err.value)
    assert sorted(p.name for p in directory.parent.iterdir()) == before


def test_a_lone_staging_folder_is_named(tmp_path):
    """A first save killed before its move leaves only the staging folder: the error names it."""
    directory = tmp_path / "ckpt"
    C.write_pretrained(build("gpt"), staging_directory(directory))
    with pytest.raises(FileNotFoundError, match=r"ckpt\.kvattn-staging holds a save that was"):
        load_pretrained(directory)
    assert staging_directory(directory).is_dir()


def test_shipped_gpt_is_in_the_identity_g_format_and_reads_as_its_old_file(tmp_path):
    """data/gpt_tiny was rewritten from the old GPT format by save_pretrained: its config.json is
    the published identity-G PLDR-LLM's, it loads as kvattn's GPT, and written back in the old
    format it loads with every tensor and the logits unchanged."""
    from kvattn.data import shipped

    raw = json.loads((shipped("gpt_tiny") / CONFIG_NAME).read_text())
    assert raw["architectures"] == ["PldrllmForCausalLM"]
    assert raw["custom_G_type"] == "identity" and raw[MARKER] == "KvattnGPTForCausalLM"
    new = load_pretrained(shipped("gpt_tiny"))
    assert type(new) is GPT
    old = load_pretrained(_old_gpt_checkpoint(new, tmp_path / "old"))
    assert type(old) is GPT and old.config == new.config
    for key, value in old.state_dict().items():
        assert torch.equal(new.state_dict()[key], value), key
    ids = torch.randint(
        1, old.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(logits(new, ids), logits(old, ids))


# ---------------------------------------------------------------------------------------------
# Symbolic links, devices, paths and contradictions in config.json (reliability audit)


def test_save_pretrained_keeps_symbolic_links_inside_the_folder(saved, tmp_path):
    """Audit K44: a link to a folder inside the checkpoint folder was replaced by a full copy of
    its target. Links (to files and to folders) are carried over as links, targets untouched."""
    _, directory = saved
    (tmp_path / "notes.txt").write_text("original")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.txt").write_text("data")
    (directory / "link.txt").symlink_to(tmp_path / "notes.txt")
    (directory / "linkdir").symlink_to(tmp_path / "data")
    new = build("plga", seed=1)
    save_pretrained(new, directory)
    assert (directory / "link.txt").is_symlink() and (directory / "linkdir").is_symlink()
    assert os.readlink(directory / "link.txt") == str(tmp_path / "notes.txt")
    assert os.readlink(directory / "linkdir") == str(tmp_path / "data")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["big.txt"]
    assert torch.equal(logits(load_pretrained(directory)), logits(new))


def test_save_pretrained_into_a_symlinked_folder_updates_its_target(saved, tmp_path):
    """Audit K46: saving to a link to a checkpoint folder replaced the link by a new folder, left
    the target's old weights in place and a ``*.kvattn-replaced`` link behind. The link now
    stays a link and its target holds the new checkpoint; nothing is left beside either."""
    _, real = saved
    link = tmp_path / "linked"
    link.symlink_to(real)
    new = build("plga", seed=1)
    assert save_pretrained(new, link) == link
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert torch.equal(logits(load_pretrained(real)), logits(new))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "linked"]


def test_save_pretrained_refuses_a_dangling_link(tmp_path):
    """A link whose target is missing is refused, naming both, before anything is written."""
    link = tmp_path / "linked"
    link.symlink_to(tmp_path / "gone" / "ckpt")
    with pytest.raises(ValueError, match=r"linked is a symbolic link to .*gone/ckpt, which does"):
        save_pretrained(build("gpt"), link)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["linked"]


def _save_killed_between_the_two_moves(model, directory, monkeypatch) -> None:
    """save_pretrained(model, directory) killed after it moved the old folder aside and before it
    moved the new one in (the staging folder's rename fails)."""
    rename = Path.rename

    def killed(self, target):
        if self.name.endswith(".kvattn-staging"):
            raise OSError("killed between the two moves")
        return rename(self, target)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "rename", killed)
        with pytest.raises(OSError, match="killed between the two moves"):
            save_pretrained(model, directory)


@pytest.mark.parametrize("then", ["save", "load"])
def test_an_interrupted_save_through_a_link_is_recovered(saved, tmp_path, monkeypatch, then):
    """Audit NK06: a save through a link killed between its two moves left the link dangling
    (its target moved aside); saving through the link again was refused as 'create that folder',
    advice that, followed, lost the old checkpoint and the folder's other files (NK06c). A save
    now recovers the target first, as for a plain folder (a load already did)."""
    _, real = saved
    (real / "tokenizer.model").write_bytes(b"tok")
    link = tmp_path / "linked"
    link.symlink_to(real)
    interrupted = build("plga", seed=1)
    _save_killed_between_the_two_moves(interrupted, link, monkeypatch)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt.kvattn-replaced",
        "ckpt.kvattn-staging",
        "linked",
    ]
    if then == "save":
        newer = build("plga", seed=2)
        assert save_pretrained(newer, link) == link
    else:
        newer = interrupted
        assert torch.equal(logits(load_pretrained(link)), logits(interrupted))
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "linked"]
    assert (real / "tokenizer.model").read_bytes() == b"tok"
    assert torch.equal(logits(load_pretrained(real)), logits(newer))


def test_a_dangling_link_names_an_interrupted_first_save_and_keeps_it(tmp_path):
    """A link whose target a first save, killed before its move, never made: the refusal names
    the staged save (no advice that would lose it), and nothing is deleted."""
    link = tmp_path / "linked"
    link.symlink_to(tmp_path / "ckpt")
    C.write_pretrained(build("gpt"), staging_directory(link))
    with pytest.raises(ValueError, match=r"rename .*ckpt\.kvattn-staging, a save interrupted befo"):
        save_pretrained(build("gpt"), link)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.kvattn-staging", "linked"]


@pytest.mark.parametrize("via", ["recover_directory", "save_pretrained"])
def test_an_old_folder_with_files_the_folder_lacks_is_kept(tmp_path, via):
    """Audit NK06c: with the folder re-made (empty) after a kill between the two moves, recovery
    took the leftovers for stale and deleted the old checkpoint, the interrupted save and the
    folder's other files. An aside folder holding files the folder lacks is now kept and named;
    nothing is deleted. One whose files the folder holds (a kill after the second move) goes."""
    target = tmp_path / "ckpt"
    staging, aside = staging_directory(target), tmp_path / "ckpt.kvattn-replaced"
    for folder in (staging, aside):
        C.write_pretrained(build("gpt"), folder)
        (folder / "tokenizer.model").write_bytes(b"tok")
    target.mkdir()
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    with pytest.raises(FileExistsError, match=r"ckpt\.kvattn-replaced holds .* lacks") as err:
        recover_directory(target) if via == "recover_directory" else save_pretrained(
            build("gpt"), target
        )
    assert "config.json, model.safetensors, tokenizer.model" in str(err.value)
    assert str(staging) in str(err.value)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    # the folder now holds the old one's files: the aside folder is a stale leftover
    shutil.rmtree(target)
    shutil.copytree(aside, target)
    recover_directory(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


@pytest.mark.parametrize("reserved", ["kvattn-staging", "kvattn-replaced"])
@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_file_or_link_at_a_reserved_name_is_refused_by_name(saved, tmp_path, reserved, kind):
    """Audit NK07, NK08: a file, or a link to a reader's folder, at ``<dir>.kvattn-staging``
    failed with a bare FileExistsError after the old checkpoint was copied. It is refused before
    any work, saying what that name is for; the reader's file or folder is untouched."""
    model, directory = saved
    path = tmp_path / f"ckpt.{reserved}"
    if kind == "file":
        path.write_text("notes")
    else:
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "precious.txt").write_text("keep")
        path.symlink_to(tmp_path / "mine")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    what = "a file" if kind == "file" else "a symbolic link"
    with pytest.raises(ValueError, match=rf"ckpt\.{reserved} is {what}, not a folder kvattn made"):
        save_pretrained(build("plga", seed=1), directory)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert torch.equal(logits(load_pretrained(directory)), logits(model))


@pytest.mark.parametrize(
    ("model", "directory", "match"),
    [
        ("x", "ckpt", "model must be a PLDRLLM or GPT, got str"),
        (torch.nn.Linear(2, 2), "ckpt", "model must be a PLDRLLM or GPT, got Linear"),
        (None, 5, "directory must be a str or Path, got int"),
    ],
)
def test_save_pretrained_checks_its_arguments_before_writing(tmp_path, model, directory, match):
    """Audit K74: save_pretrained('x', dir) failed with an AttributeError after creating the
    staging folder, which was left behind. Both arguments are checked before anything exists."""
    model = build("gpt") if model is None else model
    target = tmp_path / directory if isinstance(directory, str) else directory
    with pytest.raises(TypeError, match=match):
        save_pretrained(model, target)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("device", "cuda", "count", "match"),
    [
        ("meta", True, 1, "device 'meta' holds no values"),
        (torch.device("meta"), True, 1, "device 'meta' holds no values"),
        ("cuda", False, 0, "device 'cuda' is not available on this machine"),
        ("cuda:1", True, 1, "device 'cuda:1' is not available on this machine"),
        (torch.device("cuda", 1), True, 1, "device 'cuda:1' is not available on this machine"),
    ],
)
def test_load_pretrained_refuses_unusable_devices_before_any_work(
    tmp_path, monkeypatch, device, cuda, count, match
):
    """Audit K51, K52: device='cuda' without CUDA failed with torch's AssertionError after the
    files were read, and device='meta' returned a model without weights. Both are refused before
    the checkpoint is even looked for (the folder here does not exist)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    with pytest.raises(ValueError, match=match):
        load_pretrained(tmp_path / "does-not-exist", device=device)


def test_load_pretrained_names_the_type_of_a_bad_path():
    """Audit K70: load_pretrained(123) failed inside pathlib."""
    with pytest.raises(TypeError, match=r"path_or_hub_id must be a str or a path .* got 123 \(int"):
        load_pretrained(123)
    with pytest.raises(TypeError, match=r"revision must be None or a str, got 1 \(int\)"):
        load_pretrained("owner/name", revision=1)


def test_a_mistyped_local_path_is_reported_as_a_missing_folder(tmp_path, monkeypatch):
    """Audit K69: 'ckpts/pldr' (no folder ckpts here) looked like a hub id, and the message only
    said to install huggingface_hub. It now says first that the folder does not exist, and
    mentions the hub as the other reading; a failed download says the same."""
    import sys
    import types

    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    with pytest.raises(FileNotFoundError) as err:
        load_pretrained("ckpts/pldr")
    message = str(err.value)
    assert message.startswith("no checkpoint directory at ckpts/pldr (no folder ckpts here)")
    assert "if 'ckpts/pldr' is a Hugging Face hub id, install huggingface_hub" in message

    def offline(repo_id, **kwargs):
        raise OSError(f"cannot reach the hub for {repo_id}")

    hub = types.SimpleNamespace(snapshot_download=offline)
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    with pytest.raises(FileNotFoundError) as err:
        load_pretrained("ckpts/pldr")
    message = str(err.value)
    assert message.startswith("no checkpoint directory at ckpts/pldr (no folder ckpts here)")
    assert "downloading 'ckpts/pldr' from the Hugging Face hub failed" in message
    assert "OSError: cannot reach the hub for ckpts/pldr" in message


def test_prefix_density_needs_its_model_type(saved):
    """Audit K72: density 'prefix' under model_type 'pldrllm' loaded as the prefix model, while a
    published loader runs that file as the block-density model. The contradiction is refused,
    saying how save_pretrained writes a prefix model."""
    _, directory = saved
    edit_config(directory, density="prefix")
    with pytest.raises(
        ValueError, match=rf"density 'prefix' but model_type 'pldrllm'.*'{PREFIX_MODEL_TYPE}'"
    ):
        load_pretrained(directory)


def test_contradicting_recorded_dtypes_are_refused(saved, monkeypatch):
    """Audit K73: torch_dtype 'bfloat16' beside dtype 'float16' loaded as bfloat16 without a
    word. They must agree (published files carry only dtype, kvattn's only torch_dtype); the
    weights are not read before the check."""
    model, directory = saved
    edit_config(directory, dtype="float32")  # agreeing: loads as before
    assert torch.equal(logits(load_pretrained(directory)), logits(model))
    edit_config(directory, torch_dtype="bfloat16", dtype="float16")

    def forbidden(*args, **kwargs):
        raise AssertionError("the weights were read before config.json was checked")

    monkeypatch.setattr(C.loading, "load_file", forbidden)
    with pytest.raises(
        ValueError, match="records torch_dtype 'bfloat16' but dtype 'float16'; they must agree"
    ):
        load_pretrained(directory)


def test_config_json_typo_is_named_in_the_error_it_causes(saved):
    """Audit K59: with 'hiden_size' for 'hidden_size' the error blamed hidden_size = 896 (the
    default, a value the file never gave) and the warning naming the typo never appeared,
    because construction failed first. The error now names the key and what it probably means."""
    _, directory = saved
    raw = json.loads((directory / CONFIG_NAME).read_text())
    raw["hiden_size"] = raw.pop("hidden_size")
    (directory / CONFIG_NAME).write_text(json.dumps(raw))
    with pytest.raises(ValueError) as err:
        load_pretrained(directory)
    message = str(err.value)
    assert "must equal hidden_size = 896" in message
    assert "config key 'hiden_size' is not a field; it looks like a typo of 'hidden_size'" in (
        message
    )
    assert "hidden_size took its default 896" in message


def test_config_json_alias_of_a_field_warns_on_loading(saved):
    """Audit K60: 'rotary_emb_base' (another library's name for rope_theta) was ignored without a
    word and the model built with theta 10000. It still loads (its value is not used) but warns,
    naming the published field."""
    from kvattn.config import ConfigKeyWarning

    _, directory = saved
    raw = json.loads((directory / CONFIG_NAME).read_text())
    del raw["rope_theta"]
    (directory / CONFIG_NAME).write_text(json.dumps({**raw, "rotary_emb_base": 500000.0}))
    with pytest.warns(ConfigKeyWarning, match=r"'rotary_emb_base' .*name for 'rope_theta'"):
        loaded = load_pretrained(directory)
    assert loaded.config.rope_theta == 10000.0


@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda", 1), "cpu:0"])
def test_a_device_this_machine_has_passes_the_check(tmp_path, monkeypatch, device):
    """The device check lets every GPU that torch counts through (here two, faked): loading goes
    on and fails only at the missing folder."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(FileNotFoundError, match="no checkpoint directory at"):
        load_pretrained(tmp_path / "does-not-exist", device=device)
