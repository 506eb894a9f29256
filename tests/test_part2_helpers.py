"""The library helpers that chapters 6 to 10 call for analysis kept out of their cells:
:func:`kvattn.ablations.reparametrise_heads` and :func:`kvattn.ablations.scramble_keys`."""

from __future__ import annotations

import pytest
import torch

from kvattn import diagnostics
from kvattn.ablations import reparametrise_heads, scramble_keys
from kvattn.config import PLDRConfig
from kvattn.pldr import GPT

V, S = 50, 12


def tiny_gpt(**overrides) -> GPT:
    torch.manual_seed(0)
    cfg = dict(
        vocab_size=V,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=2,
        max_position_embeddings=16,
    )
    return GPT(PLDRConfig(**{**cfg, **overrides})).double().eval()


def ids() -> torch.Tensor:
    return torch.randint(1, V, (2, S), generator=torch.Generator().manual_seed(1))


def rope_commuting(shape: tuple[int, ...], d_k: int, gen: torch.Generator) -> torch.Tensor:
    """Random rotation-scalings in every (interleaved) RoPE plane."""
    A = torch.zeros(*shape, d_k, d_k, dtype=torch.float64)
    for a, b in diagnostics.rope_planes(d_k):
        s = 1 + torch.rand(shape, generator=gen, dtype=torch.float64)
        t = torch.randn(shape, generator=gen, dtype=torch.float64)
        A[..., a, a], A[..., b, b], A[..., b, a], A[..., a, b] = s, s, t, -t
    return A


def general(shape: tuple[int, ...], d_k: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, d_k, d_k, generator=gen, dtype=torch.float64) + 3 * torch.eye(d_k)


def test_reparametrise_keeps_every_head_form_and_moves_each_factor():
    model = tiny_gpt()
    cfg = model.config
    A = general((2, 2), cfg.d_k, torch.Generator().manual_seed(2))
    new = reparametrise_heads(model, A)
    for layer in range(2):
        for h in range(2):
            old_attn, new_attn = (
                model.decoder.dec_layers[layer].mha1,
                new.decoder.dec_layers[layer].mha1,
            )
            M_old = diagnostics.head_bilinear_form(old_attn, h, with_bias=True)
            M_new = diagnostics.head_bilinear_form(new_attn, h, with_bias=True)
            assert torch.allclose(M_new, M_old, atol=1e-10)
            rows = slice(h * cfg.d_k, (h + 1) * cfg.d_k)
            assert torch.allclose(new_attn.wq.weight[rows], A[layer, h] @ old_attn.wq.weight[rows])
    # the model itself is untouched
    assert torch.equal(
        model.decoder.dec_layers[0].mha1.wq.weight, tiny_gpt().decoder.dec_layers[0].mha1.wq.weight
    )


def test_reparametrise_with_rope_keeps_logits_only_for_commuting_matrices():
    model = tiny_gpt()
    d_k, x = model.config.d_k, ids()
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        base = model(x).logits
        commuting = reparametrise_heads(model, rope_commuting((2, 2), d_k, gen))(x).logits
        other = reparametrise_heads(model, general((2, 2), d_k, gen))(x).logits
    assert (commuting - base).abs().max() < 1e-10
    assert (other - base).abs().max() > 1e-3


def test_reparametrise_rejects_bad_matrices_before_any_work():
    model = tiny_gpt()
    d_k = model.config.d_k
    with pytest.raises(TypeError, match="PLDRLLM or GPT"):
        reparametrise_heads(torch.nn.Linear(2, 2), torch.eye(2))
    with pytest.raises(TypeError, match="floating-point"):
        reparametrise_heads(model, torch.ones(2, 2, d_k, d_k, dtype=torch.long))
    with pytest.raises(ValueError, match=r"shape \(2, 2, 8, 8\)"):
        reparametrise_heads(model, torch.eye(d_k).expand(2, d_k, d_k))
    singular = torch.eye(d_k).repeat(2, 2, 1, 1)
    singular[1, 0, 3] = 0
    with pytest.raises(ValueError, match="invertible"):
        reparametrise_heads(model, singular)
    with pytest.raises(ValueError, match="finite"):
        reparametrise_heads(model, torch.full((2, 2, d_k, d_k), float("nan")))


def test_scramble_keys_keeps_norms_and_queries_and_changes_only_the_keys():
    model = tiny_gpt()
    cfg = model.config
    new = scramble_keys(model, torch.Generator().manual_seed(0))
    for old_layer, new_layer in zip(model.decoder.dec_layers, new.decoder.dec_layers, strict=True):
        a, b = old_layer.mha1, new_layer.mha1
        assert torch.equal(a.wq.weight, b.wq.weight) and torch.equal(a.wv.weight, b.wv.weight)
        assert torch.equal(a.wk.bias, b.wk.bias)
        for h in range(cfg.num_attention_heads):
            rows = slice(h * cfg.d_k, (h + 1) * cfg.d_k)
            assert torch.isclose(b.wk.weight[rows].norm(), a.wk.weight[rows].norm(), rtol=1e-12)
            cosine = (a.wk.weight[rows] * b.wk.weight[rows]).sum() / a.wk.weight[rows].norm() ** 2
            assert abs(cosine) < 0.5  # a fresh direction, not the old one rescaled
    x = ids()
    with torch.no_grad():
        assert (new(x).logits - model(x).logits).abs().max() > 1e-3
    # seeded: the same generator state gives the same copy
    again = scramble_keys(model, torch.Generator().manual_seed(0))
    assert torch.equal(
        again.decoder.dec_layers[1].mha1.wk.weight, new.decoder.dec_layers[1].mha1.wk.weight
    )


def test_scramble_keys_rejects_bad_arguments():
    model = tiny_gpt()
    with pytest.raises(TypeError, match="PLDRLLM or GPT"):
        scramble_keys("gpt", torch.Generator())
    with pytest.raises(TypeError, match=r"torch\.Generator"):
        scramble_keys(model, 0)
