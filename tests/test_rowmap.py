"""The metric learner's row map (kvattn.diagnostics.rowmap): each unit's gain, the composite
gain, and the theorem of chapter 11 that A's row energy splits through the last LayerNorm as
Σ_j γ_j² × the normalised shape's row energy in coordinate j (checked on trained models)."""

from __future__ import annotations

import pytest
import torch

from kvattn import diagnostics as D
from kvattn.checkpoint import load_pretrained
from kvattn.config import PLDRConfig
from kvattn.data import collapse_hunt, shipped
from kvattn.pldr import PLDRLLM


def _tiny(seed: int = 0, **kw) -> PLDRLLM:
    torch.manual_seed(seed)
    cfg = dict(
        vocab_size=60,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=2,
        num_reslayerA=3,
        max_position_embeddings=32,
    )
    return PLDRLLM(PLDRConfig(**{**cfg, **kw}))


def _probes(vocab: int = 60, n: int = 3, seed: int = 5) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(4, vocab, (1, 16), generator=gen) for _ in range(n)]


def test_unit_gains_are_the_jacobian_norms_unit_by_unit_and_bound_the_composite():
    """Unit n's gain is ‖∂u_n/∂r‖₂ at the rows as they reach it (recomputed by central
    differences for one head's rows); the median product of the units' gains bounds the
    composite gain from above, and the composite equals row_map_gain's, pooled over heads."""
    model = _tiny().double()
    probes = _probes()
    gains = D.unit_gains(model, probes)
    assert gains.unit.shape == (2, 3) and gains.composite.shape == (2,)
    attention = model.decoder.dec_layers[0].mha1
    outputs = D.deductive_tensors(model, probes)
    with torch.no_grad():
        rows = torch.cat([attention.layernorm1(o[0].A0) for o in outputs]).reshape(-1, 8)
        second = attention.reslayerAs[0](rows)  # the rows unit 2 sees
        h, norms = 1e-6, []
        unit = attention.reslayerAs[1]
        for r in second:
            J = torch.stack([(unit(r + h * e) - unit(r - h * e)) / (2 * h) for e in torch.eye(8)])
            norms.append(torch.linalg.matrix_norm(J, ord=2))
    assert float(gains.unit[0, 1]) == pytest.approx(float(torch.stack(norms).median()), rel=1e-6)
    assert (gains.product >= gains.composite - 1e-12).all()
    per_head = D.row_map_gain(model, probes)
    assert per_head.min(-1).values.le(gains.composite + 1e-12).all()
    assert per_head.max(-1).values.ge(gains.composite - 1e-12).all()


def test_a_dead_gate_gives_gain_zero_and_a_passive_unit_gain_one():
    """γ = 0 in the last LayerNorm: that unit's gain and the composite are exactly 0 (every row
    of A is β); a unit whose GLU blocks output 0 has gain 1 (LayerNorm of a LayerNormed row)."""
    model = _tiny(num_reslayerA=2)
    probes = _probes()
    with torch.no_grad():
        for block in model.decoder.dec_layers:
            block.mha1.reslayerAs[-1].layernormA.weight.zero_()
    gains = D.unit_gains(model, probes)
    assert (gains.unit[:, -1] == 0).all() and (gains.composite == 0).all()
    assert (gains.unit[:, 0] > 0.3).all()
    passive = _tiny(num_reslayerA=1, layer_norm_eps=1e-12)
    with torch.no_grad():
        for block in passive.decoder.dec_layers:
            for dense in block.mha1.reslayerAs[0].denseAs:
                for p in dense.gluw3.parameters():
                    p.zero_()
    torch.testing.assert_close(
        D.unit_gains(passive, probes).unit, torch.ones(2, 1, dtype=torch.float64), rtol=1e-5, atol=0
    )


@pytest.mark.parametrize(
    "folder",
    [lambda: shipped("pldr_tiny"), lambda: collapse_hunt("lr1e-2_wu500_seed2", checkpoint=True)],
    ids=["pldr_tiny", "hunt-nearest"],
)
def test_theorem_row_energy_splits_through_the_last_layernorm(folder):
    """Theorem (chapter 11): A_i = β + γ ⊙ n_i for every row, so the row energy of A equals
    Σ_j γ_j² × the row energy of the normalised shape in coordinate j, exactly; checked on two
    trained models to float64 rounding, and A_energy is the row energy of the A the model
    itself computes (diagnostics.deductive_tensors)."""
    model = load_pretrained(folder())
    vocab = model.config.vocab_size
    probes = _probes(vocab=vocab, n=3, seed=1)
    split = D.row_energy_split(model, probes)
    torch.testing.assert_close(split.A_energy, split.split, rtol=1e-10, atol=0)
    outs = D.deductive_tensors(model, probes)
    for layer in range(model.config.num_hidden_layers):
        A = torch.cat([o[layer].A[:, :, -1] if o[layer].A.ndim == 5 else o[layer].A for o in outs])
        A = A.detach().double()
        energy = ((A - A.mean(-2, keepdim=True)) ** 2).mean(-2).sum(-1).mean()
        assert float(split.A_energy[layer]) == pytest.approx(float(energy), rel=1e-4)
    assert (split.shape_total > 0).all()


def test_the_split_reads_the_gate_apart_from_the_shape():
    """Halving γ of the last layer's last LayerNorm quarters that layer's A row energy and
    leaves the shape's energy as it was: the split separates the gate route from the shape
    route. (The earlier layer is untouched: its A feeds the later one.)"""
    model = _tiny()
    probes = _probes()
    before = D.row_energy_split(model, probes)
    with torch.no_grad():
        model.decoder.dec_layers[-1].mha1.reslayerAs[-1].layernormA.weight.mul_(0.5)
    after = D.row_energy_split(model, probes)
    torch.testing.assert_close(after.shape_energy, before.shape_energy)
    torch.testing.assert_close(after.A_energy[-1], before.A_energy[-1] / 4, rtol=1e-6, atol=0)
    torch.testing.assert_close(after.A_energy[0], before.A_energy[0])


def test_the_probes_record_the_row_map_and_load_without_them():
    """collapse_measures records unit_gain, composite_gain, A_row_energy and shape_row_energy
    per layer; a constant-G model records None; a trajectory without them still loads."""
    model = _tiny(num_reslayerA=2)
    probes = _probes()
    gen = torch.Generator().manual_seed(3)
    eval_ids = torch.randint(4, 60, (2, 17), generator=gen)
    record = D.collapse_measures(model, probes, eval_ids).as_record()
    assert len(record["unit_gain"]) == 2 and all(len(u) == 2 for u in record["unit_gain"])
    assert record["A_row_energy"][0] == pytest.approx(record["shape_row_energy"][0], rel=10)
    trajectory = D.new_probes(3)
    D.append_probe(trajectory, 0, record)
    assert set(D.COLLAPSE_ROW_MAP_MEASURES) <= set(trajectory)


def test_row_map_functions_refuse_a_model_without_a_metric_learner():
    from kvattn.config import PLDRConfig as Config
    from kvattn.pldr import GPT

    gpt = GPT(Config(vocab_size=60, hidden_size=16, num_attention_heads=2, num_hidden_layers=1))
    for fn in (D.unit_gains, D.row_energy_split, D.row_map_gain):
        with pytest.raises(TypeError, match="PLGA"):
            fn(gpt, _probes())
    with pytest.raises(ValueError):
        D.unit_gains(_tiny(), [])


def test_identical_rows_reads_exact_rank_one_in_the_models_precision():
    """With γ = 0 in every layer's last LayerNorm every row of A is β, bitwise: share 1; a
    random metric learner's rows all differ: share 0."""
    model = _tiny(num_reslayerA=2)
    probes = _probes()
    assert (D.identical_rows(model, probes) == 0).all()
    with torch.no_grad():
        for block in model.decoder.dec_layers:
            block.mha1.reslayerAs[-1].layernormA.weight.zero_()
    assert (D.identical_rows(model, probes) == 1).all()
