"""Tests for :mod:`kvattn.lm` (TinyLM) and :mod:`kvattn.memories` (keys, values, agreement)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kvattn import memories, train
from kvattn.lm import TinyLM, TinyLMConfig
from kvattn.memories import (
    Triggers,
    absorb_global_query,
    agreement,
    pattern_consistency,
    slot_report,
    top_triggers,
    value_distributions,
)
from kvattn.mlp import GatedMLP, KeyValueMLP

VOCAB, T = 40, 8


def _tiny(ffn="key_value", **kw) -> TinyLM:
    torch.manual_seed(0)
    cfg = TinyLMConfig(
        vocab_size=VOCAB, d_model=16, n_layers=2, n_heads=2, block_size=T, n_slots=12, ffn=ffn, **kw
    )
    return TinyLM(cfg).eval()


# ---------------------------------------------------------------------------------------------
# TinyLM


@pytest.mark.parametrize(("ffn", "rank"), [("key_value", 1), ("swiglu", 1), ("full_bilinear", 2)])
def test_forward_shapes(ffn, rank):
    """Logits are (B, T, vocab) for T ≤ block_size; ffn_inputs collects one (B, T, d) per layer."""
    model = _tiny(ffn, rank=rank)
    idx = torch.randint(0, VOCAB, (3, T))
    inputs: list[torch.Tensor] = []
    with torch.no_grad():
        logits = model(idx, ffn_inputs=inputs)
        assert model(idx[:, :5]).shape == (3, 5, VOCAB)
    assert logits.shape == (3, T, VOCAB)
    assert [tuple(h.shape) for h in inputs] == [(3, T, 16)] * 2
    assert model.blocks[1].ffn.rank == rank


def test_causal():
    """Changing token t changes logits at t and later, never before t."""
    model = _tiny()
    idx = torch.randint(0, VOCAB, (2, T))
    changed = idx.clone()
    changed[:, 5] = (idx[:, 5] + 1) % VOCAB
    with torch.no_grad():
        a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :5], b[:, :5], rtol=1e-6, atol=1e-6)
    assert (a[:, 5:] - b[:, 5:]).abs().amax(dim=(0, 2)).min() > 1e-4


def test_loss_is_next_token_cross_entropy():
    """model.loss is the mean cross-entropy of the logits against the targets."""
    model = _tiny()
    idx, tgt = torch.randint(0, VOCAB, (2, 3, T))
    with torch.no_grad():
        expected = F.cross_entropy(model(idx).reshape(-1, VOCAB), tgt.reshape(-1))
        torch.testing.assert_close(model.loss(idx, tgt), expected)


def test_memory_coefficients_are_relu_of_normalised_inputs():
    """memory_coefficients = ReLU(LN(x) W_kᵀ), with LN(x) recomputed block by block by hand."""
    model = _tiny()
    idx = torch.randint(0, VOCAB, (2, T))
    with torch.no_grad():
        x = model.tok_emb(idx) + model.pos_emb(torch.arange(T))
        by_hand = []
        for block in model.blocks:
            x = x + block.attn(block.ln_attn(x))
            h = block.ln_ffn(x)
            by_hand.append(h)
            x = x + block.ffn(h)
        for layer in (0, 1):
            coeff = model.memory_coefficients(idx, layer)
            assert coeff.shape == (2, T, 12)
            expected = F.relu(by_hand[layer] @ model.blocks[layer].ffn.W_k.T)
            torch.testing.assert_close(coeff, expected, rtol=1e-5, atol=1e-6)
            assert (coeff >= 0).all()
        inputs: list[torch.Tensor] = []
        model(idx, ffn_inputs=inputs)
        torch.testing.assert_close(inputs[1], by_hand[1], rtol=1e-5, atol=1e-6)


def test_value_logits_and_distributions():
    """value_logits = W_v W_Uᵀ of shape (n_slots, vocab); the distributions are its softmax."""
    model = _tiny()
    logits = model.value_logits(1)
    assert logits.shape == (12, VOCAB)
    torch.testing.assert_close(logits, model.blocks[1].ffn.W_v @ model.head.weight.T)
    probs = value_distributions(model, 1)
    torch.testing.assert_close(probs.sum(-1), torch.ones(12))
    torch.testing.assert_close(probs, torch.softmax(logits, -1))
    assert _tiny("swiglu").value_logits(0).shape == (12, VOCAB)


def test_generate():
    """Greedy generation is deterministic and appends tokens; sampling is reproducible with a
    generator and the context is cropped to block_size."""
    model = _tiny()
    prompt = torch.randint(0, VOCAB, (2, 3))
    out = model.generate(prompt, 10, temperature=0)
    assert out.shape == (2, 13)
    assert torch.equal(out[:, :3], prompt)
    assert torch.equal(model.generate(prompt, 10, temperature=0), out)
    a = model.generate(prompt, 10, generator=torch.Generator().manual_seed(1))
    b = model.generate(prompt, 10, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert int(a.min()) >= 0 and int(a.max()) < VOCAB


def test_config_round_trip_and_errors():
    """to_dict round-trips; bad sizes raise ValueError naming the field."""
    cfg = _tiny().cfg
    assert TinyLMConfig(**cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=4"):
        TinyLMConfig(vocab_size=10, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="vocab_size must be a positive int, got 0"):
        TinyLMConfig(vocab_size=0)
    with pytest.raises(ValueError, match="n_heads must be a positive int, got True"):
        TinyLMConfig(vocab_size=10, n_heads=True)
    with pytest.raises(ValueError, match="unknown ffn 'moe'; expected one of"):
        TinyLMConfig(vocab_size=10, ffn="moe")


def test_tiny_lm_refuses_a_config_that_is_not_a_tinylm_config():
    """A dict of the fields gave AttributeError "'dict' object has no attribute 'vocab_size'"
    (also from train_lm_seeds, before its first step)."""
    fields = _tiny().cfg.to_dict()
    with pytest.raises(TypeError, match=r"^cfg must be a TinyLMConfig, got dict$"):
        TinyLM(fields)
    assert TinyLM(TinyLMConfig(**fields)).cfg == _tiny().cfg


def test_ids_errors():
    """Out-of-range, too long, wrongly typed or shaped ids raise ValueError."""
    model = _tiny()
    with pytest.raises(ValueError, match=rf"token ids must lie in \[0, {VOCAB}\)"):
        model(torch.tensor([[1, VOCAB]]))
    with pytest.raises(ValueError, match="token ids must lie in"):
        model(torch.tensor([[-1, 2]]))
    with pytest.raises(ValueError, match=f"sequence length {T + 1} exceeds block_size {T}"):
        model(torch.zeros(1, T + 1, dtype=torch.long))
    with pytest.raises(ValueError, match=r"int64 tensor of shape \(batch, time\)"):
        model(torch.zeros(1, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"int64 tensor of shape \(batch, time\)"):
        model(torch.zeros(3, dtype=torch.long))


def test_lm_eval_loss_is_mean_over_windows():
    """lm_eval_loss = mean next-token loss over consecutive windows, whatever the batch size."""
    model = _tiny()
    ids = torch.randint(0, VOCAB, (5 * T + 3,))
    x = ids[: 5 * T].view(5, T)
    y = ids[1 : 5 * T + 1].view(5, T)
    with torch.no_grad():
        expected = float(model.loss(x, y))
        first = float(model.loss(x[:1], y[:1]))
    assert train.lm_eval_loss(model, ids, batch_size=2) == pytest.approx(expected, rel=1e-5)
    assert train.lm_eval_loss(model, ids, batch_size=8) == pytest.approx(expected, rel=1e-5)
    assert train.lm_eval_loss(model, ids, max_windows=1) == pytest.approx(first, rel=1e-5)
    with pytest.raises(ValueError, match="need more than"):
        train.lm_eval_loss(model, ids[:T])


def test_lm_loss_draws_seeded_batches():
    """lm_loss samples training windows from the generator: same seed, same loss."""

    class _Data:
        train = torch.randint(0, VOCAB, (200,))

    model = _tiny()
    a = train.lm_loss(model, _Data(), 4, torch.Generator().manual_seed(3))(0)
    b = train.lm_loss(model, _Data(), 4, torch.Generator().manual_seed(3))(0)
    assert torch.isfinite(a) and float(a.detach()) == float(b.detach())
    assert a.requires_grad


# ---------------------------------------------------------------------------------------------
# Trigger examples and agreement


def test_top_triggers_match_brute_force():
    """top_triggers keeps, per slot, the largest memory coefficients over all scanned prefixes
    (last position of each window skipped), sorted descending, with consistent positions."""
    model = _tiny()
    ids = torch.randint(0, VOCAB, (5 * T + 4,))
    trig = top_triggers(model, ids, layer=1, top_k=4, batch_size=2)
    n = 5
    assert torch.equal(trig.stream, ids[: n * T + 1])
    assert trig.coefficient.shape == trig.position.shape == (12, 4)
    with torch.no_grad():
        coeff = model.memory_coefficients(ids[: n * T].view(n, T), 1)[:, :-1]  # (n, T-1, m)
    flat = coeff.reshape(-1, 12).T  # (m, n(T-1))
    positions = (torch.arange(n)[:, None] * T + torch.arange(T - 1)[None, :]).reshape(-1)
    best = flat.sort(dim=1, descending=True).values[:, :4]
    torch.testing.assert_close(trig.coefficient, best, rtol=1e-5, atol=1e-6)
    assert torch.all(trig.coefficient[:, :-1] >= trig.coefficient[:, 1:])
    assert torch.all(trig.position % T != T - 1)  # every prefix has a next token in its window
    lookup = {int(p): i for i, p in enumerate(positions)}
    for j in range(12):
        assert len(set(trig.position[j].tolist())) == 4
        got = torch.stack([flat[j, lookup[int(p)]] for p in trig.position[j]])
        torch.testing.assert_close(got, trig.coefficient[j], rtol=1e-5, atol=1e-6)


def test_top_triggers_window_limit_and_errors():
    """max_windows bounds the scanned stream; bad layers and short streams raise ValueError."""
    model = _tiny()
    ids = torch.randint(0, VOCAB, (10 * T,))
    trig = top_triggers(model, ids, layer=0, top_k=3, max_windows=2)
    assert len(trig.stream) == 2 * T + 1
    assert int(trig.position.max()) < 2 * T
    with pytest.raises(ValueError, match=r"layer must lie in \[0, 2\), got 2"):
        top_triggers(model, ids, layer=2)
    with pytest.raises(ValueError, match=f"need more than {T + 1} ids"):
        top_triggers(model, ids[:T], layer=0)


def _constructed_triggers():
    """Slots 0..3 whose top triggers end at positions 0..3 of a known stream."""
    stream = torch.tensor([5, 2, 4, 1, 3, 0, 2])
    position = torch.tensor([[0, 4], [1, 4], [2, 4], [3, 4]])
    return Triggers(torch.ones(4, 2), position, stream)  # next tokens: 2, 4, 1, 3


def test_agreement_on_constructed_case():
    """Values whose arg-max is known: 3 of 4 agree (rate 0.75) and the rank of the next token is
    0 for agreeing slots and its exact rank otherwise."""
    values = torch.full((4, 6), 0.01)
    values[0, 2] = values[1, 4] = values[3, 3] = 0.9  # agree with next tokens 2, 4, 3
    values[2, 0], values[2, 5], values[2, 1] = 0.9, 0.5, 0.3  # slot 2: token 1 is third
    result = agreement(_constructed_triggers(), values, n_shuffles=2000, seed=0)
    assert result.rate == 0.75
    assert result.rank.tolist() == [0, 0, 2, 0]
    # Random re-pairing matches 3 of the 16 (top, next) pairs: expected baseline 3/16.
    assert result.baseline == pytest.approx(3 / 16, abs=0.02)
    again = agreement(_constructed_triggers(), values, n_shuffles=2000, seed=0)
    assert again.baseline == result.baseline


def test_agreement_extremes():
    """All values predicting one shared next token: rate and baseline 1; none: both 0."""
    trig = Triggers(torch.ones(3, 1), torch.zeros(3, 1, dtype=torch.long), torch.tensor([0, 4]))
    hit = torch.zeros(3, 6)
    hit[:, 4] = 1.0
    full = agreement(trig, hit)
    assert (full.rate, full.baseline) == (1.0, 1.0)
    miss = torch.zeros(3, 6)
    miss[:, 2] = 1.0
    none = agreement(trig, miss)
    assert (none.rate, none.baseline) == (0.0, 0.0)
    assert none.rank.tolist() == [1, 1, 1]


def test_pattern_consistency():
    """Fraction of a slot's top triggers that end in its most common last token."""
    stream = torch.tensor([7, 7, 3, 7, 9, 1])
    position = torch.tensor([[0, 1, 3, 2], [2, 4, 5, 0], [4, 4, 4, 4]])
    trig = Triggers(torch.ones(3, 4), position, stream)
    assert pattern_consistency(trig).tolist() == [0.75, 0.25, 1.0]


# ---------------------------------------------------------------------------------------------
# The global query is absorbed into the keys


@pytest.mark.parametrize("act", ["relu", "gelu", "identity"])
def test_absorb_global_query(act):
    """σ((xQ) W_kᵀ) W_v equals the absorbed layer with keys k'_j = Q k_j (W_k' = W_k Qᵀ)."""
    layer = KeyValueMLP(6, 9, 4, act=act)
    Q = torch.randn(6, 6)
    absorbed = absorb_global_query(layer, Q)
    x = torch.randn(2, 3, 6)
    with torch.no_grad():
        torch.testing.assert_close(absorbed(x), layer(x @ Q), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(absorbed.W_k, layer.W_k @ Q.T)
        torch.testing.assert_close(absorbed.W_v, layer.W_v, rtol=0, atol=0)
    assert absorbed is not layer and absorbed.act is layer.act


def test_absorb_global_query_rejects_wrong_shape():
    """Q must be (d_model, d_model)."""
    with pytest.raises(ValueError, match=r"Q must have shape \(6, 6\), got \(6, 5\)"):
        absorb_global_query(KeyValueMLP(6, 3), torch.randn(6, 5))


def test_absorb_global_query_preserves_float64():
    """A float64 layer gives a float64 absorbed layer, exact to 1e-12."""
    layer = KeyValueMLP(6, 9, 4).to(torch.float64)
    Q = torch.randn(6, 6, dtype=torch.float64)
    absorbed = absorb_global_query(layer, Q)
    assert absorbed.W_k.dtype == torch.float64
    x = torch.randn(5, 6, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(absorbed(x), layer(x @ Q), rtol=1e-12, atol=1e-12)


def test_absorb_works_for_gated_key_factor():
    """Control for the chapter's claim: a shared Q is absorbed by any layer linear in x before σ;
    here the same algebra applied to a gated layer's W_q and W_k gives the same outputs."""
    layer = GatedMLP(6, 5, 3, variant="swiglu").to(torch.float64)
    Q = torch.randn(6, 6, dtype=torch.float64)
    new = GatedMLP(6, 5, 3, variant="swiglu").to(torch.float64)
    with torch.no_grad():
        new.W_q.copy_(layer.W_q @ Q.T)
        new.W_k.copy_(layer.W_k @ Q.T)
        new.W_v.copy_(layer.W_v)
        x = torch.randn(7, 6, dtype=torch.float64)
        torch.testing.assert_close(new(x), layer(x @ Q), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# CUDA


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_tiny_lm_and_memories_on_cuda():
    """TinyLM runs on CUDA; trigger results come back on the CPU; absorb keeps the device."""
    model = _tiny().to("cuda")
    ids = torch.randint(0, VOCAB, (4 * T + 1,))
    with torch.no_grad():
        logits = model(ids[:T].view(1, T).to("cuda"))
    assert logits.device.type == "cuda" and logits.dtype == torch.float32
    trig = top_triggers(model, ids, layer=0, top_k=2)
    assert trig.coefficient.device.type == "cpu"
    assert value_distributions(model, 0).device.type == "cpu"
    layer = KeyValueMLP(6, 4).to("cuda")
    Q = torch.randn(6, 6, device="cuda")
    absorbed = absorb_global_query(layer, Q)
    assert absorbed.W_k.device.type == "cuda"
    x = torch.randn(3, 6, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(absorbed(x), layer(x @ Q), rtol=1e-4, atol=1e-4)


def test_value_distributions_mask_unseen_tokens_and_check_the_layer():
    model = _tiny()
    seen = torch.zeros(VOCAB, dtype=torch.bool)
    seen[:5] = True
    values = memories.value_distributions(model, 0, seen=seen)
    assert torch.all(values[:, 5:] == 0)
    assert torch.allclose(values.sum(-1), torch.ones(values.shape[0]))
    with pytest.raises(ValueError, match=r"layer must lie in \[0, "):
        memories.value_distributions(model, 7)
    assert torch.equal(
        memories.seen_tokens(torch.tensor([0, 2, 2]), 4), torch.tensor([True, False, True, False])
    )


def test_absorb_global_query_needs_a_key_value_layer():
    from kvattn.mlp import GatedMLP

    with pytest.raises(TypeError, match="expected a KeyValueMLP"):
        memories.absorb_global_query(GatedMLP(4, 3), torch.eye(4))


def test_lift_labels_use_the_fewest_decimals_that_tell_lifts_apart():
    """Regression (chapter 1, fast mode): five lifts printed as "×1.3" each."""
    from kvattn.memories import lift_labels

    assert lift_labels([1.2701, 1.2676, 1.31]) == ["×1.270", "×1.268", "×1.310"]
    assert lift_labels([2.0, 1.5]) == ["×2.0", "×1.5"]
    assert lift_labels([1.25, 1.25]) == ["×1.2", "×1.2"]  # equal lifts stay equal
    assert lift_labels([1.000001, 1.000002]) == ["×1.0000", "×1.0000"]  # capped at 4 decimals
    with pytest.raises(ValueError, match="lifts is empty"):
        lift_labels([])


def test_slot_explorer_labels_each_bar_and_starts_at_uniform():
    from kvattn.course.explorers import slot
    from kvattn.memories import SlotReport

    reports = [
        SlotReport(1, s, [("ctx", "a", "b", 0.5)], [("▁x", 1.2701), ("▁y", 1.2676)]) for s in (0, 1)
    ]
    fig = slot.figure(reports, "Memory slot")
    bar = fig.data[1]
    assert list(bar.text) == ["×1.268", "×1.270"]
    assert fig.layout[bar.xaxis.replace("x", "xaxis")].range[0] == 1.0


def test_slot_report_lift_is_relative_to_the_tokens_the_value_can_give(small_text):
    """Regression (reader review, chapter 1): with values restricted to seen tokens, a flat
    value printed ×(vocab / seen) instead of ×1, because the lift used the whole vocabulary."""
    from kvattn.data import tokenize
    from kvattn.memories import Triggers, slot_report

    data = tokenize(small_text, vocab_size=512)
    values = torch.zeros(2, data.vocab_size)
    values[0, 10:30] = 1 / 20  # flat over 20 tokens
    values[1, 10:30] = torch.linspace(1, 2, 20) / torch.linspace(1, 2, 20).sum()
    stream = data.train[:50]
    triggers = Triggers(torch.ones(2, 3), torch.tensor([[5, 6, 7], [8, 9, 10]]), stream)
    flat = slot_report(data, triggers, values, layer=0, slot=0, n_tokens=4)
    assert [lift for _, lift in flat.value_tokens] == pytest.approx([1.0] * 4)
    graded = slot_report(data, triggers, values, layer=0, slot=1, n_tokens=1)
    assert graded.value_tokens[0][1] == pytest.approx(20 * 2 / torch.linspace(1, 2, 20).sum())


def test_tinylm_config_beta_reaches_the_swish_and_is_refused_elsewhere():
    from kvattn.lm import TinyLM, TinyLMConfig

    model = TinyLM(TinyLMConfig(vocab_size=16, d_model=8, n_heads=2, ffn="swiglu", beta=4.0))
    z = torch.linspace(-3, 3, 7)
    assert torch.allclose(model.blocks[0].ffn.act(z), z * torch.sigmoid(4.0 * z))
    with pytest.raises(ValueError, match="'relu' takes no beta"):
        TinyLMConfig(vocab_size=16, ffn="key_value", beta=2.0)
    with pytest.raises(ValueError, match="'gelu' takes no beta"):
        TinyLMConfig(vocab_size=16, ffn="geglu", beta=2.0)
    with pytest.raises(ValueError, match="beta must be finite and >= 0"):
        TinyLMConfig(vocab_size=16, ffn="swiglu", beta=float("nan"))


@pytest.fixture(scope="module")
def slot_inputs(small_text):
    """TokenData, and the triggers and values of layer 1 of a two-layer TinyLM over them."""
    from kvattn.data import tokenize

    data = tokenize(small_text, vocab_size=512)
    torch.manual_seed(0)
    cfg = TinyLMConfig(vocab_size=data.vocab_size, d_model=8, n_layers=2, n_heads=2, n_slots=6)
    model = TinyLM(cfg).eval()
    triggers = top_triggers(model, data.val[:400], layer=1, top_k=3)
    return data, triggers, value_distributions(model, 1)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"slot": True}, ValueError, r"^slot must be an int >= 0, got True$"),  # NX40
        ({"slot": 1.5}, ValueError, r"^slot must be an int >= 0, got 1\.5$"),  # NX41
        ({"slot": 6}, ValueError, r"^slot must lie in \[0, 6\), got 6$"),
        ({"context": -3}, ValueError, r"^context must be an int >= 0, got -3$"),  # NX42
        ({"n_triggers": -1}, ValueError, r"^n_triggers must be an int >= 0, got -1$"),
        ({"n_tokens": 2.0}, ValueError, r"^n_tokens must be an int >= 0, got 2\.0$"),
        ({"n_tokens": 513}, ValueError, r"^n_tokens must be at most the vocabulary \(512\)"),
        ({"layer": True}, ValueError, r"^layer must be an int >= 0, got True$"),
        ({"layer": 0}, ValueError, r"^layer 0 is not the layer of the triggers \(1\)"),  # NX44
        ({"triggers": "t"}, TypeError, r"^triggers must be a Triggers .*, got str$"),
        ({"values": [[0.5, 0.5]]}, TypeError, r"^values must be a floating-point tensor"),
        ({"values": torch.ones(5, 512)}, ValueError, r"^values must have shape \(6, V\)"),
    ],
)
def test_slot_report_checks_every_argument_first(slot_inputs, change, error, match):
    """Audit NX40-NX44: slot_report checked only the slot's range. A bool or float slot failed
    deep in torch, a negative context gave empty contexts, and the layer, only a label, was not
    checked against the triggers (a one-layer model's report said layer 5). Every argument is
    now checked first, and the triggers record the layer top_triggers scanned."""
    data, triggers, values = slot_inputs
    args = {"triggers": triggers, "values": values, "layer": 1, "slot": 2} | change
    with pytest.raises(error, match=match):
        slot_report(data, **args)
    assert triggers.layer == 1
    report = slot_report(data, triggers, values, layer=1, slot=2, n_triggers=0, context=0)
    assert (report.layer, report.slot, report.triggers) == (1, 2, [])
