"""The claims ledger of Part II (chapters 6 to 10) and of the introduction page.

Each claim names the printed output it rests on and checks the claim itself on that output's
data: the shipped records in ``data/`` or the deterministic library calls the chapter makes on
the shipped checkpoints (``data/gpt_tiny``, ``data/pldr_tiny``, ``data/pldr_tiny_dag``, the
collapse hunt's nearest run). The loaders repeat the chapters' calls at the sizes of the fast
build (``KVATTN_FAST=1``, what CI executes) where a chapter picks its size, and are cached, so
that the whole ledger loads each model and each record once.
"""

from __future__ import annotations

import math
from functools import cache
from itertools import pairwise

import torch
from claimlib import ROOT, Claim, load_json

CH6, CH7, CH8 = "06_attention_bilinear", "07_plga_piece_by_piece", "08_training_pldr"
CH9, CH10, INTRO = "09_inference_collapse", "10_rope_twirl", "book/intro"


def _set(data: dict, key, value) -> dict:
    """``data`` with ``key`` set to ``value``: a perturbation against a claim."""
    data[key] = value
    return data


# --------------------------------------------------------------------------------------------
# Loaders. Each repeats, on the CPU with one thread, the chapter's own library calls.


@cache
def _gpt():
    from kvattn.checkpoint import load_pretrained
    from kvattn.data import load_tokenizer, shipped

    torch.set_num_threads(1)
    return load_pretrained(shipped("gpt_tiny")).eval(), load_tokenizer(shipped("gpt_tiny"))


@cache
def _pldr(name: str = "pldr_tiny"):
    from kvattn.checkpoint import load_pretrained
    from kvattn.data import load_tokenizer, shipped

    torch.set_num_threads(1)
    return load_pretrained(shipped(name)).eval(), load_tokenizer(shipped(name))


@cache
def _fresh_pldr():
    """Chapter 9's untrained model: the same architecture, seeded 0."""
    from kvattn.pldr import PLDRLLM

    model, _ = _pldr()
    torch.manual_seed(0)
    return PLDRLLM(model.config).eval()


CH6_PROMPT = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1)"
CH6_LINE = (
    "    def __init__(self, name, value=None):\n        self.name = name\n"
    "        self.value = value\n"
)


@cache
def ch6() -> dict:
    """Chapter 6's checks on gpt_tiny: the rebuilt attention weights, the reparametrisations,
    the constant-G model with G = I, the shift check, the asymmetries and the losses."""
    from kvattn import diagnostics
    from kvattn.ablations import reparametrise_heads, scramble_keys
    from kvattn.config import PLDRConfig
    from kvattn.losses import lm_cross_entropy
    from kvattn.pldr import GPT, PLDRLLM

    gpt, tokenizer = _gpt()
    cfg = gpt.config
    ids = torch.tensor([tokenizer.encode(CH6_PROMPT)])
    out: dict = {}
    with torch.no_grad():
        layer, head = 0, 1
        attn = gpt.decoder.dec_layers[layer].mha1
        x = diagnostics.cpu64(
            gpt.decoder.layernorm1(gpt.decoder.embedding(ids) * gpt.decoder.scale)[0]
        )
        E_model = diagnostics.cpu64(
            gpt(ids, output_pldr_attentions=True).pldr_attentions[layer].E[0, head]
        )
        S = x.shape[0]
        x1 = torch.cat([x, torch.ones(S, 1, dtype=torch.float64)], 1)
        forms = [diagnostics.head_bilinear_form(attn, head, d, with_bias=True) for d in range(S)]
        scores = torch.full((S, S), float("-inf"), dtype=torch.float64)
        for i in range(S):
            for j in range(i + 1):
                scores[i, j] = x1[i] @ forms[i - j] @ x1[j] / cfg.d_k**0.5
        out["rebuild_err"] = (torch.softmax(scores, -1) - E_model).abs().max().item()

        gen = torch.Generator().manual_seed(0)
        L, H, d_k = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.d_k

        def commuting():
            A = torch.zeros(L, H, d_k, d_k, dtype=torch.float64)
            for a_, b_ in diagnostics.rope_planes(d_k, interleaved=cfg.reference_rope):
                s = 1 + torch.rand(L, H, generator=gen, dtype=torch.float64)
                t = torch.randn(L, H, generator=gen, dtype=torch.float64)
                A[..., a_, a_], A[..., b_, b_], A[..., b_, a_], A[..., a_, b_] = s, s, t, -t
            return A

        def general():
            return torch.randn(L, H, d_k, d_k, generator=gen, dtype=torch.float64) + 3 * torch.eye(
                d_k
            )

        base = gpt(ids).logits
        out["commuting"] = (reparametrise_heads(gpt, commuting())(ids).logits - base).abs().max()
        out["general"] = (reparametrise_heads(gpt, general())(ids).logits - base).abs().max()
        out["commuting"], out["general"] = out["commuting"].item(), out["general"].item()

        const = PLDRLLM(PLDRConfig.from_dict({**cfg.to_dict(), "custom_G_type": "identity"}))
        state = dict(gpt.state_dict())
        state.update({k: v for k, v in const.state_dict().items() if k.endswith("G_LM")})
        const.load_state_dict(state)
        out["identity_diff"] = (const.eval()(ids).logits - base).abs().max().item()

        G_random = torch.randn(d_k, d_k, generator=gen, dtype=torch.float64)
        G_comm = diagnostics.commutant_projection(G_random, cfg.reference_rope)
        R = [diagnostics.rope_rotation(attn, p) for p in range(32)]

        def shift(G_):
            return max(
                ((R[i] @ G_ @ R[j].T - R[i + s] @ G_ @ R[j + s].T).norm() / G_.norm()).item()
                for i, j in [(5, 2), (10, 3), (20, 20), (7, 0)]
                for s in [1, 3, 10]
            )

        out["shift_random"], out["shift_commuting"] = shift(G_random), shift(G_comm)

        def asymmetries(model):
            return torch.tensor(
                [
                    [
                        diagnostics.asymmetry(diagnostics.head_bilinear_form(lay.mha1, h))
                        for h in range(H)
                    ]
                    for lay in model.decoder.dec_layers
                ]
            )

        swapped = diagnostics.swap_attention_qk(gpt)
        M0 = forms[0]
        M0s = diagnostics.head_bilinear_form(
            swapped.decoder.dec_layers[layer].mha1, head, 0, with_bias=True
        )
        before = torch.einsum("si,ij,sj->s", x1, M0, x1)
        after = torch.einsum("si,ij,sj->s", x1, M0s, x1)
        out["self_change"] = (before - after).abs().max().item()
        val_ids = torch.tensor(tokenizer.encode(CH6_LINE))

        def next_token_loss(model):
            return lm_cross_entropy(model(val_ids[None, :-1]).logits, val_ids[None, 1:]).item()

        out["loss"], out["loss_swapped"] = next_token_loss(gpt), next_token_loss(swapped)
        torch.manual_seed(0)
        untrained = GPT(cfg).eval()
        out["asym_trained"] = asymmetries(gpt).flatten().tolist()
        out["asym_untrained"] = asymmetries(untrained).flatten().tolist()
        key_gen = torch.Generator().manual_seed(0)
        out["scrambled"] = [
            next_token_loss(scramble_keys(gpt, key_gen)) - out["loss"] for _ in range(5)
        ]
        out["asym_distances"] = [
            diagnostics.asymmetry(diagnostics.head_bilinear_form(lay.mha1, h, d))
            for lay in gpt.decoder.dec_layers
            for h in range(H)
            for d in range(16)
        ]
    return out


CH7_PROMPT = "for index, item in enumerate(items):\n    if item is None:\n        continue"
CH7_PROMPTS = (
    CH7_PROMPT,
    "import os\nimport sys\n\ndef main(argv=None):",
    "class Counter(dict):\n    '''Dict subclass for counting hashable items.'''",
    "    except (OSError, ValueError) as exc:\n        raise RuntimeError(str(exc))",
    "        return self._data[key]\n\n    def __len__(self):",
)


def _decades(x: torch.Tensor) -> float:
    return (x.max().log10() - x.min().log10()).item()


@cache
def ch7() -> dict:
    """Chapter 7's checks on pldr_tiny (layer 0, head 0 for the recomputations; every layer and
    head for the entries, the exponents, the eigenpairs and the order parameters)."""
    from kvattn import diagnostics
    from kvattn.pldr import GPT
    from kvattn.plga import iswiglu

    model, tokenizer = _pldr()
    cfg = model.config
    ids = torch.tensor([tokenizer.encode(CH7_PROMPT)])
    o: dict = {}
    with torch.no_grad():
        res = model(ids, output_pldr_attentions=True).pldr_attentions
        t, head = res[0], 0
        attn = model.decoder.dec_layers[0].mha1
        x = model.decoder.layernorm1(model.decoder.embedding(ids) * model.decoder.scale)
        q = attn.rope(attn.wq(x).view(1, -1, cfg.num_attention_heads, cfg.d_k))[0, :, head]
        A = attn.layernorm1(q.T @ q)
        for unit in attn.reslayerAs:
            A = unit(A)
        pg = attn.plgatt_layer
        A_LM = iswiglu(pg.W[head] @ A + pg.b_W[head]) + 1e-9
        A_P = A_LM.pow(pg.P[head])
        G = pg.a[head] @ A_P + pg.b_a[head]
        k = attn.rope(attn.wk(x).view(1, -1, cfg.num_attention_heads, cfg.d_k))[0, :, head]
        S = ids.shape[1]
        mask = torch.ones(S, S, dtype=torch.bool).tril()
        E = torch.softmax((q @ G @ k.T / cfg.d_k**0.5).masked_fill(~mask, -math.inf), -1)
        o["step_errors"] = {
            "A0": (q.T @ q - t.A0[0, head]).abs().max().item(),
            "A": (A - t.A[0, head]).abs().max().item(),
            "A_LM": (A_LM - t.A_LM[0, head]).abs().max().item(),
            "A_P": ((A_P - t.A_P[0, head]).abs().max() / A_P.abs().max()).item(),
            "G_LM": (G - t.G_LM[0, head]).abs().max().item(),
            "E": (E - t.E[0, head]).abs().max().item(),
        }
        A_LM_all = diagnostics.cpu64(torch.cat([r.A_LM.flatten() for r in res]))
        A_P_all = torch.cat([diagnostics.cpu64(r.A_P).flatten() for r in res])
        o["A_LM_min"] = A_LM_all.min().item()
        o["decades_A_LM"], o["decades_A_P"] = _decades(A_LM_all), _decades(A_P_all)
        o["near_one"] = ((A_P_all - 1).abs() < 0.1).double().mean().item()
        P = torch.cat([lay.mha1.plgatt_layer.P.flatten() for lay in model.decoder.dec_layers])
        o["P_std"], o["P_absmax"] = P.std().item(), P.abs().max().item()
        o["P_init_std"] = (2 / (cfg.d_k * (cfg.d_k + cfg.num_attention_heads))) ** 0.5
        o["pf_min_v"], o["pf_gap"], o["pf_agrees"] = [], [], []
        for r in res:
            lam, v = diagnostics.perron_frobenius(r.A_LM[0])
            ev = torch.linalg.eigvals(diagnostics.cpu64(r.A_LM[0]))
            second = ev.abs().sort(dim=-1, descending=True).values[:, 1]
            o["pf_min_v"] += v.min(-1).values.tolist()
            o["pf_gap"] += (second / lam.double()).tolist()
            o["pf_agrees"].append(bool(torch.allclose(lam.double(), ev.abs().amax(-1), rtol=1e-6)))
        sdpa_like = _pldr_copy()
        for lay in sdpa_like.decoder.dec_layers:
            lay.mha1.plgatt_layer.a.zero_()
            lay.mha1.plgatt_layer.b_a.copy_(torch.eye(cfg.d_k).expand_as(lay.mha1.plgatt_layer.b_a))
        gpt = GPT(cfg)
        gpt.load_state_dict({k: v for k, v in model.state_dict().items() if k in gpt.state_dict()})
        o["sdpa_diff"] = (sdpa_like(ids).logits - gpt.eval()(ids).logits).abs().max().item()
    prompt_ids = [torch.tensor([tokenizer.encode(p)]) for p in CH7_PROMPTS]
    outputs = diagnostics.deductive_tensors(model, prompt_ids)
    profiles = [
        diagnostics.deductive_profile(outputs, li, h)
        for li in range(cfg.num_hidden_layers)
        for h in range(cfg.num_attention_heads)
    ]
    o["g_order"] = [p.order["G_LM"] for p in profiles]
    o["g_order_rms"] = [p.order_rms["G_LM"] for p in profiles]
    return o


def _pldr_copy(name: str = "pldr_tiny"):
    """A fresh copy of a shipped PLDR-LLM, to change by hand."""
    from kvattn.checkpoint import load_pretrained
    from kvattn.data import shipped

    return load_pretrained(shipped(name)).eval()


CH8_MODELS = {"PLDR-LLM": "pldr_tiny", "GPT": "gpt_tiny", "PLDR-LLM + DAG": "pldr_tiny_dag"}
CH8_PROMPT = "def read_config(path):\n    with open(path) as f:"
CH8_BLOCKS = 4  # the first 4 of the chapter's validation blocks (64; 16 in fast builds): cheap


@cache
def ch8_states() -> dict:
    """The three shipped runs' trainer states and parameter counts (chapter 8's first table
    and loss curves)."""
    import json

    out = {}
    for label, name in CH8_MODELS.items():
        state = json.loads((ROOT / "data" / name / "trainer_state.json").read_text())
        model = _gpt()[0] if name == "gpt_tiny" else _pldr(name)[0]
        loss = torch.tensor(state["history"]["loss"])
        out[label] = {
            "history": state["history"],
            "config": state["config"],
            "step": state["step"],
            "parameters": model.num_parameters(),
            "smooth": loss.unfold(0, 50, 1).mean(-1),  # the figure's 50-step smoothing
        }
    return out


@cache
def ch8_losses() -> dict:
    """Chapter 8's full-pass and generation-mode losses on the first validation blocks."""
    import json

    from kvattn.ablations import generation_mode_loss
    from kvattn.data import validation_blocks
    from kvattn.losses import lm_cross_entropy

    config = json.loads((ROOT / "data/pldr_tiny/trainer_state.json").read_text())["config"]
    _, tokenizer = _pldr()
    val = validation_blocks(config, tokenizer)[:CH8_BLOCKS]
    out = {}
    for label, name in CH8_MODELS.items():
        model = _gpt()[0] if name == "gpt_tiny" else _pldr(name)[0]
        with torch.no_grad():
            full = lm_cross_entropy(model(val[:, :-1]).logits, val[:, 1:]).item()
        out[label] = {"full pass": full, "generation": generation_mode_loss(model, val)}
    return out


@cache
def ch8_dag() -> dict:
    """Chapter 8's DAG losses on its prompt, per tensor: the mean over layers, batch, heads."""
    from kvattn import diagnostics, losses

    _, tokenizer = _pldr()
    ids = torch.tensor([tokenizer.encode(CH8_PROMPT)])
    out = {}
    for label in ("PLDR-LLM", "PLDR-LLM + DAG"):
        model = _pldr(CH8_MODELS[label])[0]
        with torch.no_grad():
            outs = model(ids, output_pldr_attentions=True).pldr_attentions
        out[label] = {
            n: losses.dag_loss(diagnostics.cpu64(torch.stack([getattr(o, n) for o in outs])))
            .mean()
            .item()
            for n in ("A_LM", "A_P", "G_LM")
        }
    return out


# Chapter 9 at the fast build's sizes (kvattn.course.env.pick's second values), as CI executes it.
CH9_SNIPPETS, CH9_FINDING = 20, {"snippets": 4, "eval_blocks": 4, "new_tokens": 12}


@cache
def _held_out() -> str:
    from kvattn.data import load_text

    return load_text("stdlib", max_chars=6_300_000)[6_000_000:]


@cache
def ch9_findings() -> dict:
    """The two measured rows of chapter 9's first table (kvattn.course.collapse_report), and the
    untrained model's loss on the first held-out block against ln(vocabulary)."""
    from kvattn.course import collapse_report
    from kvattn.data import blocks
    from kvattn.losses import lm_cross_entropy

    model, tokenizer = _pldr()
    fresh = _fresh_pldr()
    rows = {
        label: collapse_report.measure_finding(label, m, tokenizer, _held_out(), **CH9_FINDING)
        for label, m in [("untrained", fresh), ("pldr_tiny", model)]
    }
    held = blocks(torch.tensor(tokenizer.encode(_held_out())), model.config.max_position_embeddings)
    with torch.no_grad():
        fresh_loss = lm_cross_entropy(fresh(held[:2, :-1]).logits, held[:2, 1:]).item()
    return {
        "rows": rows,
        "published": collapse_report.PUBLISHED_110M,
        "fresh_loss": fresh_loss,
        "uniform_loss": math.log(model.config.vocab_size),
    }


@cache
def ch9_inputs() -> dict:
    """Chapter 9's twenty code and twenty prose snippets, encoded (the generator seeded 0)."""
    from kvattn.data import load_text

    model, tokenizer = _pldr()
    gen = torch.Generator().manual_seed(0)

    def snippets(text, n=CH9_SNIPPETS, chars=300):
        starts = torch.randint(0, len(text) - chars, (n,), generator=gen).tolist()
        return [text[s : s + chars] for s in starts]

    n_pos = model.config.max_position_embeddings
    inputs = {
        kind: [
            torch.tensor([tokenizer.encode(t)[:n_pos]])
            for t in snippets(load_text(kind, max_chars=200_000))
        ]
        for kind in ("stdlib", "pydoc")
    }
    return {"code": inputs["stdlib"], "prose": inputs["pydoc"], "gen": gen}


@cache
def ch9_order() -> dict:
    """Chapter 9's order-parameter table: each deductive tensor's RMS order parameter of every
    snippet against the first, averaged, per kind of text and layer; and its rank audit of A on
    the first eight code snippets, trained and initial."""
    from kvattn import diagnostics

    model, _ = _pldr()
    inputs = ch9_inputs()
    out: dict = {"order": {}, "sigma_ratio": {}, "rank": {}}
    for kind in ("code", "prose"):
        outs = diagnostics.deductive_tensors(model, inputs[kind])
        for li in range(model.config.num_hidden_layers):
            for name in diagnostics.DEDUCTIVE:
                ref = getattr(outs[0][li], name)
                out["order"][kind, li, name] = sum(
                    diagnostics.order_parameter(ref, getattr(o[li], name), "rms") for o in outs[1:]
                ) / (len(outs) - 1)
    for label, m in [("trained", model), ("initial", _fresh_pldr())]:
        outs = diagnostics.deductive_tensors(m, inputs["code"][:8])
        for li in range(model.config.num_hidden_layers):
            A = torch.stack([o[li].A[0] for o in outs])
            audit = diagnostics.rank_audit(A, head_dim=1)
            out["sigma_ratio"][label, li] = audit.sigma_ratio.median().item()
            out["rank"][label, li] = audit.rank.float().median().item()
    return out


CH9_EVAL_BLOCKS = 4  # the first 4 held-out blocks (the chapter: 64, 16 in fast builds)


@cache
def ch9_models() -> dict:
    """Chapter 9's models: the untrained and trained PLDR-LLM, the trained one flattened by hand
    (γ = 0 in each metric learner's last LayerNorm), the constant-G model built from the first
    code snippet's G_LM, G = I with the same weights, and the held-out blocks."""
    from kvattn.ablations import constant_g_from
    from kvattn.data import blocks

    model, tokenizer = _pldr()
    cfg = model.config
    held = blocks(torch.tensor(tokenizer.encode(_held_out())), cfg.max_position_embeddings)
    with torch.no_grad():
        first = ch9_inputs()["code"][0]
        G = [o.G_LM[0] for o in model(first, output_pldr_attentions=True).pldr_attentions]
        flattened = _pldr_copy()
        for block in flattened.decoder.dec_layers:
            block.mha1.reslayerAs[-1].layernormA.weight.zero_()
    identity = [torch.eye(cfg.d_k).expand_as(g) for g in G]
    return {
        "initial": _fresh_pldr(),
        "trained": model,
        "flattened": flattened,
        "constant-G": constant_g_from(model, G).eval(),
        "sdpa": constant_g_from(model, identity).eval(),
        "G": G,
        "val": held[:CH9_EVAL_BLOCKS],
    }


@cache
def ch9_losses() -> dict:
    """The constant-G section's three losses on the held-out blocks (nats/token) and the RMS
    entry and |mean| of the donor snippet's G_LM."""
    from kvattn.ablations import generation_mode_loss
    from kvattn.losses import lm_cross_entropy

    m = ch9_models()
    val = m["val"]
    with torch.no_grad():
        out = {
            "full": generation_mode_loss(m["trained"], val),
            "ablated": lm_cross_entropy(m["constant-G"](val[:, :-1]).logits, val[:, 1:]).item(),
            "sdpa": lm_cross_entropy(m["sdpa"](val[:, :-1]).logits, val[:, 1:]).item(),
        }
    entries = torch.cat([g.flatten() for g in m["G"]])
    out["G_rms"] = entries.pow(2).mean().sqrt().item()
    out["G_absmean"] = entries.mean().abs().item()
    return out


@cache
def ch9_measures() -> dict:
    """The measures table of *How close to constant is close enough?* (fast-build sizes: 3
    donors, 4 probes, 4 blocks): order parameters, frozen-G Δ loss, greedy agreement, the G = I
    Δ loss and the smallest row-map gain, per model."""
    from kvattn import diagnostics

    m, code = ch9_models(), ch9_inputs()["code"]
    donors, probe, eval_blocks = code[1:4], code[:4], m["val"][:4]
    n_layers = m["trained"].config.num_hidden_layers

    def g_order(model, normalisation):
        outs = diagnostics.deductive_tensors(model, probe)
        return max(
            sum(
                diagnostics.order_parameter(outs[0][li].G_LM, o[li].G_LM, normalisation)
                for o in outs[1:]
            )
            / (len(outs) - 1)
            for li in range(n_layers)
        )

    out = {}
    for label in ("initial", "trained", "flattened", "constant-G"):
        model = m[label]
        sub = diagnostics.g_substitution(model, eval_blocks, donors)
        out[label] = {
            "order_rms": g_order(model, "rms"),
            "delta": sub.delta_loss.mean().item(),
            "agree": sub.agreement.mean().item(),
            "identity": sub.identity_delta,
            "gain": None
            if label == "constant-G"
            else diagnostics.row_map_gain(model, probe).min().item(),
        }
    return out


@cache
def ch9_decoding() -> dict:
    """The decoding-modes section: where greedy tokens with "kv" and "kv+g" first differ from
    "none" on five code prompts; the constant-G model's modes on three; the look-ahead of the
    block density, before and after training, and of the prefix variant."""
    from kvattn.config import PLDRConfig
    from kvattn.pldr import PLDRLLM

    m, inputs = ch9_models(), ch9_inputs()
    model, cfg = m["trained"], m["trained"].config
    out: dict = {"differ": {}}
    with torch.no_grad():
        for cache_ in ("kv", "kv+g"):
            firsts = []
            for ids in inputs["code"][:5]:
                ref = model.generate(ids[:, :40], 48, cache="none")
                got = model.generate(ids[:, :40], 48, cache=cache_)
                firsts.append(bool((ref[:, 40:] != got[:, 40:]).any()))
            out["differ"][cache_] = firsts
        out["constant_g_same"] = []
        for ids in inputs["code"][:3]:
            gen = {
                c: m["constant-G"].generate(ids[:, :40], 24, cache=c)
                for c in ("none", "kv", "kv+g")
            }
            out["constant_g_same"].append(
                torch.equal(gen["none"], gen["kv"]) and torch.equal(gen["none"], gen["kv+g"])
            )
        ids = m["val"][:1, :-1].clone()
        S = ids.shape[1]
        changed = ids.clone()
        changed[:, 3 * S // 4 :] = torch.randint(
            4, cfg.vocab_size, (1, S - 3 * S // 4), generator=torch.Generator().manual_seed(0)
        )
        prefix = PLDRLLM(PLDRConfig.from_dict({**cfg.to_dict(), "density": "prefix"})).eval()
        out["leak"] = {
            label: (mm(ids).logits - mm(changed).logits)[:, : 3 * S // 4].abs().max().item()
            for label, mm in [
                ("initial (block)", m["initial"]),
                ("trained (block)", model),
                ("initial (prefix)", prefix),
            ]
        }
    return out


@cache
def ch9_norms() -> dict:
    """Mean |γ| and |β| per layer of the metric learners' last LayerNorm (kvattn.diagnostics.
    metric_norm), for chapter 9's models and the collapse hunt's nearest run."""
    from kvattn import diagnostics
    from kvattn.checkpoint import load_pretrained
    from kvattn.course import hunt_report
    from kvattn.data import collapse_hunt

    m = ch9_models()
    hunt = load_pretrained(collapse_hunt(hunt_report.HUNT_NEAREST, checkpoint=True))
    out = {}
    for label, model in [
        ("initial", m["initial"]),
        ("trained", m["trained"]),
        ("flattened", m["flattened"]),
        ("hunt", hunt),
    ]:
        norm = diagnostics.metric_norm(model)
        out[label] = {"gamma": norm.scale.tolist(), "beta": norm.shift.tolist()}
    return out


CH10_LENGTHS = (4, 8, 16, 32, 64, 128)


@cache
def ch10() -> dict:
    """Chapter 10 on layer 0 of pldr_tiny (16 inputs, the full build's number): the twirl, the
    phases, the concentration, the contraction table (trained and untrained), the exponents,
    and the commutant residuals and diagonal shares of G_LM."""
    from kvattn import diagnostics
    from kvattn.data import load_text

    model, tokenizer = _pldr()
    cfg, attn = model.config, model.decoder.dec_layers[0].mha1
    code = load_text("stdlib", max_chars=400_000)
    gen = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(code) - 2000, (16,), generator=gen).tolist()
    n_pos = cfg.max_position_embeddings
    inputs = [torch.tensor([tokenizer.encode(code[s : s + 2000])[:n_pos]]) for s in starts]
    o: dict = {"lengths": CH10_LENGTHS, "d_k": cfg.d_k}
    with torch.no_grad():
        queries = {
            rope: [diagnostics.layer_queries(model, ids, 0, rope=rope) for ids in inputs]
            for rope in (True, False)
        }
        o["residual"] = {
            rope: [
                torch.stack(
                    [
                        diagnostics.commutant_residual(
                            q[:, :S].transpose(-1, -2) @ q[:, :S] / S, cfg.reference_rope
                        )
                        for q in queries[rope]
                    ]
                )
                .mean()
                .item()
                for S in CH10_LENGTHS
            ]
            for rope in (True, False)
        }
        omega = torch.atan2(attn.rope.sin[1], attn.rope.cos[1]).double()
        turn = (n_pos - 1) * omega
        a, b = torch.triu_indices(len(omega), len(omega), 1)
        phases = (n_pos - 1) * torch.cat(
            [(omega[a] - omega[b]).abs().repeat(4), (omega[a] + omega[b]).repeat(4), 2 * omega]
        )
        o["planes_below_one_turn"] = int((turn < 2 * math.pi).sum())
        o["slow_share"] = (phases < 2 * math.pi).double().mean().item()
        spread = []
        for S in CH10_LENGTHS:
            stack = torch.stack([q[:, :S] for q in queries[True]])
            A = stack.transpose(-1, -2) @ stack / S
            spread.append((A.std(0).pow(2).mean().sqrt() / A.mean(0).abs().mean()).item())
        o["spread"] = spread

    def relative_difference(x, y):
        return (x - y).norm(dim=(-2, -1)) / (0.5 * (x.norm(dim=(-2, -1)) + y.norm(dim=(-2, -1))))

    def contraction(outs, ln):
        ratios = {name: [] for name in diagnostics.DEDUCTIVE}
        for i in range(0, len(inputs) - 1, 2):
            with torch.no_grad():
                d_in = relative_difference(ln(outs[i][0].A0), ln(outs[i + 1][0].A0))
            for name in diagnostics.DEDUCTIVE:
                d_out = relative_difference(
                    getattr(outs[i][0], name), getattr(outs[i + 1][0], name)
                )
                ratios[name].append((d_out / d_in).flatten())
        return {name: torch.cat(r).median().item() for name, r in ratios.items()}

    outs = diagnostics.deductive_tensors(model, inputs)
    o["trained"] = contraction(outs, attn.layernorm1)
    from kvattn.pldr import PLDRLLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        fresh = PLDRLLM(cfg).eval()
    fresh_attn = fresh.decoder.dec_layers[0].mha1
    o["untrained"] = contraction(
        diagnostics.deductive_tensors(fresh, inputs), fresh_attn.layernorm1
    )
    P = diagnostics.cpu64(attn.plgatt_layer.P)
    o["P_std"], o["P_absmax"] = P.std().item(), P.abs().max().item()
    o["P_init_std"] = diagnostics.cpu64(fresh_attn.plgatt_layer.P).std().item()
    A_P = diagnostics.cpu64(torch.stack([x[0].A_P for x in outs]))
    o["A_P_median_dev"] = (A_P - 1).abs().median().item()
    G = diagnostics.cpu64(torch.stack([x[0].G_LM[0] for x in outs]))
    o["G_rms_over_mean"] = (G.pow(2).mean().sqrt() / G.mean().abs()).item()
    o["order_mean"] = diagnostics.order_parameter(G[0], G[1])
    o["order_rms"] = diagnostics.order_parameter(G[0], G[1], "rms")
    o["G_residuals"], o["diag_share"], o["off_diag"] = [], [], []
    for li in range(cfg.num_hidden_layers):
        G_li = torch.stack([diagnostics.cpu64(x[li].G_LM[0]) for x in outs])
        o["G_residuals"].append(
            diagnostics.commutant_residual(G_li, cfg.reference_rope).mean(0).tolist()
        )
        diagonal = torch.diagonal(G_li, dim1=-2, dim2=-1)
        o["diag_share"].append((diagonal.pow(2).sum(-1) / G_li.pow(2).sum((-2, -1))).mean().item())
        rest = G_li - torch.diag_embed(diagonal)
        o["off_diag"].append(diagnostics.commutant_residual(rest, cfg.reference_rope).mean().item())
    random_G = torch.randn(
        1000, cfg.d_k, cfg.d_k, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    o["random_residual"] = (
        diagnostics.commutant_residual(random_G, cfg.reference_rope).median().item()
    )
    return o


# --------------------------------------------------------------------------------------------
# Shipped records: the collapse hunt, its reruns (γ at every probe) and the sweep.


@cache
def records() -> dict:
    """The shipped trajectories by family: the hunt's records (``data/collapse_hunt``), their
    reruns with γ (``data/hunt_reruns``), the constant-rate runs and the sweep's
    trajectories."""
    families = {
        "hunt": "data/collapse_hunt",
        "reruns": "data/hunt_reruns",
        "constant": "data/constant_rate",
        "sweep": "data/trajectories",
    }
    out = {}
    for family, folder in families.items():
        paths = sorted((ROOT / folder).glob("*.json"))
        if family == "sweep":
            paths = [p for p in paths if p.stem.startswith("sweep_")]
        out[family] = {p.stem: load_json(str(p.relative_to(ROOT))) for p in paths}
    return out


def _at(record: dict, measure: str, step: int) -> list:
    return record[measure][record["step"].index(step)]


STUDY = 1e-2  # the training-dynamics study's threshold on the RMS order parameter of G_LM


def check_choices(data):
    from kvattn.course import hunt_report

    assert hunt_report.lowest_end(data["sweep"]) == hunt_report.SWEEP_BEST
    assert hunt_report.SWEEP_BEST == "sweep_lr3e-3_wu500"
    assert hunt_report.lowest_end(data["hunt"]) == hunt_report.HUNT_NEAREST


def check_seed2_at_1000(data):
    run = data["reruns"]["lr1e-2_wu500_seed2"]
    met = [s for s, o in zip(run["step"], run["G_order_rms"], strict=True) if max(o) < STUDY]
    assert met[0] == 1000
    gamma = _at(run, "metric_norm_scale", 1000)
    assert [round(g, 2) for g in gamma] == [0.10, 0.21]


def check_depth8(data):
    from kvattn.course import hunt_report

    deep, base = data["reruns"]["metric_depth8"], data["reruns"]["base"]
    late = [
        (o[1], g[1])
        for s, o, g in zip(
            *(deep[k] for k in ("step", "G_order_rms", "metric_norm_scale")), strict=True
        )
        if s >= 1250
    ]
    assert all(o < STUDY for o, _ in late)
    assert max(_at(deep, "G_order_rms", 1000)) >= STUDY  # from step 1,250, not before
    assert round(late[0][1], 2) == 0.63 and round(late[-1][1], 2) == 0.16
    same = {k for k in base["recipe"] if base["recipe"][k] == deep["recipe"][k]}
    assert {"lr", "warmup", "seed", "steps", "weight_decay", "batch_size", "corpus"} <= same
    g_deep = hunt_report.end_layers(deep, "metric_norm_scale")[1]
    g_base = hunt_report.end_layers(base, "metric_norm_scale")[1]
    assert abs(g_base / g_deep - 1) < 0.25
    o_deep = hunt_report.end_layers(deep, "G_order_rms")[1]
    o_base = hunt_report.end_layers(base, "G_order_rms")[1]
    assert o_base > 10 * o_deep


def check_gamma_falls_order_rises(data):
    from kvattn.course import hunt_report

    for name in ("base", "base_seed2", "corpus1.5M"):
        run = data["reruns"][name]
        i = run["step"].index(2000)
        gamma = run["metric_norm_scale"][i:]
        assert all(b[la] <= a[la] for a, b in pairwise(gamma) for la in range(2)), name
        assert hunt_report.end_value(run) > max(run["G_order_rms"][i]), name


def check_some_runs_freeze_none_exactly(data):
    from kvattn.course import hunt_report

    runs = {**data["hunt"], **data["reruns"], **data["constant"]}
    assert any(hunt_report.end_value(r) < STUDY for r in runs.values())
    assert min(v for r in runs.values() for o in r["G_order_rms"] for v in o) > 0


def check_nearest_not_rank_one(data):
    from kvattn.course import hunt_report

    run = data["hunt"][hunt_report.HUNT_NEAREST]
    assert max(hunt_report.end_layers(run, "G_order_rms")) < STUDY
    assert max(_at(run, "G_order_rms", run["step"][-1])) < STUDY
    assert min(hunt_report.end_layers(run, "A_sigma_ratio")) > 1e-3


def chapter_exercises() -> dict:
    """Per chapter: its number of exercises, and per theorem whether a {test} link follows it
    within its section."""
    import re

    from claimlib import NOTEBOOKS, markdown_cells

    out = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        text = "\n".join(src for _, src in markdown_cells(path.stem))
        theorems = re.split(r"```\{prf:theorem\}", text)[1:]
        out[path.stem] = {
            "exercises": text.count("```{exercise}"),
            "theorems_with_tests": ["{test}`" in re.split(r"\n## ", part)[0] for part in theorems],
        }
    return out


# --------------------------------------------------------------------------------------------
# Checks of chapters 6 to 10 on the loaders' data.

SQRT2 = math.sqrt(2)


def _near_sqrt2(values) -> bool:
    return all(abs(v - SQRT2) < 0.06 for v in values)


def check_ch6_exchange(d):
    rise = d["loss_swapped"] - d["loss"]
    assert d["self_change"] < 1e-9
    assert min(d["scrambled"]) <= rise <= max(d["scrambled"])


def check_ch6_generic(d):
    assert _near_sqrt2(d["asym_trained"]) and _near_sqrt2(d["asym_untrained"])


def check_ch7_compression(d):
    assert d["P_absmax"] < 1
    assert d["decades_A_P"] < d["decades_A_LM"] / 3
    assert 0.2 <= d["near_one"] <= 0.6


def check_ch7_minority(d):
    assert 0.2 <= d["near_one"] <= 0.6


def check_ch8_stable(d):
    assert d["PLDR-LLM"]["parameters"] > d["GPT"]["parameters"]
    for state in d.values():
        evals = state["history"]["evals"]
        assert all(b <= a for a, b in pairwise(evals))
        assert state["smooth"][-1] < state["smooth"][0]


def check_ch8_wiggles(d):
    check_ch8_stable(d)
    bumps = {k: s["smooth"] - s["smooth"].cummin(0).values for k, s in d.items()}
    assert all(b.max() < 0.2 for b in bumps.values())  # wiggles of up to 0.2 nats
    tops = {int(b.argmax()) for b in bumps.values()}
    assert len(tops) == 1  # the same wiggles: the largest at the same step in all three
    shared = ("seed", "batch_size", "block_size", "corpus", "corpus_chars", "vocab_size")
    assert len({tuple(s["config"][k] for k in shared) for s in d.values()}) == 1


def check_ch8_modes(d):
    gpt = d["GPT"]
    assert abs(gpt["full pass"] - gpt["generation"]) < 1e-4
    for label in ("PLDR-LLM", "PLDR-LLM + DAG"):
        assert -0.01 < d[label]["full pass"] - d[label]["generation"] < 0
    assert d["PLDR-LLM"]["generation"] > gpt["generation"]


def check_ch8_small_flattery(d):
    gap = d["PLDR-LLM"]["generation"] - d["GPT"]["generation"]
    for label in ("PLDR-LLM", "PLDR-LLM + DAG"):
        leak = d[label]["full pass"] - d[label]["generation"]
        assert -0.01 < leak < 0 and abs(leak) < gap / 5


def ch8_byte_piece() -> dict:
    """What plain decoding prints for a lone leading byte of a UTF-8 character (0xE2)."""
    _, tokenizer = _pldr()
    piece = tokenizer.piece_to_id("<0xE2>")
    return {"is_byte": tokenizer.is_byte(piece), "decoded": tokenizer.decode([piece])}


def check_ch8_byte(d):
    assert d["is_byte"] and d["decoded"] == "\ufffd"


def check_ch8_dag(d):
    assert d["PLDR-LLM + DAG"]["A_P"] < d["PLDR-LLM"]["A_P"]


def ch9_table() -> dict:
    f = ch9_findings()
    return {
        "untrained": f["rows"]["untrained"],
        "trained": f["rows"]["pldr_tiny"],
        "order": ch9_order(),
        "measures": ch9_measures(),
        "norms": ch9_norms(),
    }


def check_ch9_same_level(d):
    ratio = d["untrained"].order_rms / d["trained"].order_rms
    assert 0.5 < ratio < 2


def check_ch9_neither_collapsed(d):
    for row in (d["untrained"], d["trained"]):
        assert row.order_rms > STUDY and row.sigma_ratio > 0.5


def check_ch9_fraction(d):
    values = [v for (_, _, name), v in d["order"]["order"].items() if name == "G_LM"]
    assert len(values) == 4 and all(0.1 <= v <= 0.2 for v in values)


def check_ch9_full_rank(d):
    assert all(r == 32 for (label, _), r in d["order"]["rank"].items() if label == "trained")


def check_ch9_audit(d):
    sr = d["order"]["sigma_ratio"]
    for li in (0, 1):
        assert 0.1 < sr["trained", li] < sr["initial", li]
        assert d["order"]["rank"]["trained", li] > 2


def check_ch9_power_law(d):
    order = d["order"]["order"]
    for kind in ("code", "prose"):
        for li in (0, 1):
            assert order[kind, li, "A_P"] < order[kind, li, "A_LM"] / 3


def check_ch9_frozen(d):
    t = d["measures"]["trained"]
    assert abs(t["delta"]) < 0.01 and abs(t["delta"]) < 0.1 * t["identity"]
    assert t["agree"] >= 0.9


def check_ch9_flattened(d):
    f = d["measures"]["flattened"]
    assert f["order_rms"] == 0 and f["delta"] == 0 and f["gain"] == 0 and f["agree"] == 1


def check_ch9_responsive(d):
    gains = {k: d["measures"][k]["gain"] for k in ("trained", "initial")}
    assert gains["trained"] > 0.5 and 2 / 3 < gains["trained"] / gains["initial"] < 1.5
    assert all(g > 0.5 for g in d["norms"]["trained"]["gamma"])


def check_ch9_small_share(d):
    assert abs(d["ablated"] - d["full"]) < 0.1 * abs(d["sdpa"] - d["full"])


def check_ch9_both_signs(d):
    assert d["G_rms"] > 10 * d["G_absmean"]


def check_ch9_modes(d):
    assert all(d["constant_g_same"]) and any(d["differ"]["kv+g"])
    assert d["leak"]["trained (block)"] > 0 and d["leak"]["initial (prefix)"] == 0


def check_ch9_hunt_gamma(d):
    gamma, beta = d["hunt"]["gamma"], d["hunt"]["beta"]
    assert all(g < 0.02 for g in gamma) and gamma[1] < gamma[0]
    assert all(1 / 3 < g / b < 3 for g, b in zip(gamma, beta, strict=True))
    assert all(g > 0.5 for g in d["trained"]["gamma"])


def ch9_flags() -> dict:
    """kvattn.benchmark's flags on three ratios: two rounds; a middle half of 30 % of the
    median; a steady one."""
    from kvattn.benchmark.timing import Ratio, flagged

    return {
        "two rounds": flagged(Ratio(2.0, 1.99, 2.01, 2), None).flag,
        "wide": flagged(Ratio(2.0, 1.7, 2.3, 50), None).flag,
        "steady": flagged(Ratio(2.0, 1.9, 2.1, 50), None).flag,
    }


def check_ch9_flags(d):
    assert d["two rounds"] and d["wide"] and d["steady"] is None


def check_ch10_twirl(d):
    r = d["residual"][True]
    assert all(b < a for a, b in pairwise(r)) and r[-1] > 0.5
    assert d["planes_below_one_turn"] > 0 and d["slow_share"] > 0


def check_ch10_below_without(d):
    assert all(a < b for a, b in zip(d["residual"][True], d["residual"][False], strict=True))
    assert d["residual"][True][-1] > 0.5


def check_ch10_concentration(d):
    s = d["spread"]
    assert all(b < a for a, b in pairwise(s))
    assert s[0] / s[-1] < 0.5 * math.sqrt(d["lengths"][-1] / d["lengths"][0])


def check_ch10_contraction(d):
    t = d["trained"]
    before = [1.0, *list(t.values())[:-1]]
    drops = {n: r / b for (n, r), b in zip(t.items(), before, strict=True)}
    assert min(drops, key=drops.get) == "A_P" and t["A"] > 0.9
    assert d["P_absmax"] < 0.5 and d["P_std"] < 1.5 * d["P_init_std"]


def check_ch10_untrained(d):
    assert 2 / 3 < d["untrained"]["A_P"] / d["trained"]["A_P"] < 1.5


def check_ch10_not_onto(d):
    assert 0.05 < d["A_P_median_dev"]
    check_ch10_contraction(d)


def check_ch10_heads(d):
    assert all(abs(r - d["random_residual"]) < 0.02 for r in d["G_residuals"][0])
    assert sum(r < 0.81 for r in d["G_residuals"][1]) > len(d["G_residuals"][1]) / 2


def check_ch10_some_below(d):
    assert sum(r < 0.81 for layer in d["G_residuals"] for r in layer) > 0


def check_ch10_diagonal(d):
    lowest = min(range(len(d["G_residuals"])), key=lambda li: sum(d["G_residuals"][li]))
    assert d["diag_share"][lowest] > 3 / d["d_k"]


def check_ch10_rms_over_mean(d):
    assert d["G_rms_over_mean"] > 5 and d["order_mean"] > 5 * d["order_rms"]


def _move_ratio(data):
    data["sweep"]["sweep_lr3e-3_wu50"]["G_order_rms"] = [
        [v / 10 for v in o] for o in data["sweep"]["sweep_lr3e-3_wu50"]["G_order_rms"]
    ]
    return data


def _lift_seed2(data):
    run = data["reruns"]["lr1e-2_wu500_seed2"]
    run["G_order_rms"][run["step"].index(1000)] = [0.02, 0.02]
    return data


def _gamma_up(data):
    run = data["reruns"]["base"]
    run["metric_norm_scale"][-1] = [0.9, 0.9]
    return data


def _trained_rank_one(data):
    data["order"]["sigma_ratio"]["trained", 1] = 0.9
    return data


@cache
def ch6_lines() -> dict:
    """Chapter 6's explorer on gpt_tiny (kvattn.diagnostics.head_profile, the fibonacci prompt):
    per head, the mean attention weight on each line parallel to the diagonal (offset 0: the
    query itself, 1: the token just before it, ...)."""
    from kvattn import diagnostics

    gpt, tokenizer = _gpt()
    cfg = gpt.config
    ids = torch.tensor([tokenizer.encode(CH6_PROMPT)])
    lines = {}
    for li in range(cfg.num_hidden_layers):
        for h in range(cfg.num_attention_heads):
            E = diagnostics.head_profile(gpt, ids, li, h).E
            lines[li, h] = [E.diagonal(-k).mean().item() for k in range(E.shape[0])]
    return {"lines": lines}


def check_ch6_previous_line(d):
    top = max(d["lines"], key=lambda k: d["lines"][k][1])  # the head the first line names
    means = d["lines"][top]
    assert max(range(len(means)), key=means.__getitem__) == 1  # heaviest line: offset 1
    assert means[1] < 0.5  # less than half of its weight


def _self_heavy(d):
    top = max(d["lines"], key=lambda k: d["lines"][k][1])
    d["lines"][top][0] = 0.9
    return d


def check_ch8_validation_gaps(d):
    pldr, gpt, dag = (d[k]["history"]["evals"] for k in ("PLDR-LLM", "GPT", "PLDR-LLM + DAG"))
    assert len(pldr) == len(gpt) == len(dag) == 16
    assert all(0.14 <= p - g <= 0.2 for p, g in zip(pldr, gpt, strict=True))
    assert all(g < m < p for p, g, m in list(zip(pldr, gpt, dag, strict=True))[1:])


def _gpt_evals_up(d):
    h = d["GPT"]["history"]
    d["GPT"] = {**d["GPT"], "history": {**h, "evals": [v + 0.3 for v in h["evals"]]}}
    return d


@cache
def ch8_gap_by_position() -> dict:
    """Chapter 8's exercise: the full-pass minus generation-mode cross-entropy per position on
    the first two validation blocks (``two``), for each of the three models."""
    import json

    import torch.nn.functional as F

    from kvattn.data import validation_blocks

    config = json.loads((ROOT / "data/pldr_tiny/trainer_state.json").read_text())["config"]
    _, tokenizer = _pldr()
    two = validation_blocks(config, tokenizer)[:2]
    S, targets = two.shape[1] - 1, two[:, 1:]
    out = {}
    for label, name in CH8_MODELS.items():
        model = _gpt()[0] if name == "gpt_tiny" else _pldr(name)[0]
        with torch.no_grad():
            full = model(two[:, :-1]).logits
            prefixes = torch.stack([model(two[:, : t + 1]).logits[:, -1] for t in range(S)], 1)
        per_token = [
            F.cross_entropy(lg.transpose(1, 2), targets, reduction="none")
            for lg in (full, prefixes)
        ]
        out[label] = (per_token[0] - per_token[1]).mean(0).tolist()
    return out


def check_ch8_gap_ends(d):
    for gap in d.values():
        assert gap[-1] == 0  # exactly: the longest prefix is the whole input
        assert abs(gap[0]) < 1e-5  # up to float rounding: one key, weight 1


def check_ch9_other_layer(d):
    sr = d["order"]["sigma_ratio"]
    assert 0.45 <= sr["trained", 1] < 0.5 < sr["trained", 0]


def check_ch9_frozen_95(d):
    check_ch9_frozen(d)
    assert abs(d["measures"]["trained"]["agree"] - 0.95) <= 0.02


def check_gamma_at_freeze(data):
    reruns = data["reruns"]
    first = {}
    for name, run in reruns.items():
        met = [i for i, o in enumerate(run["G_order_rms"]) if max(o) < STUDY]
        if met:
            first[name] = run["metric_norm_scale"][met[0]]
    assert len(first) == 5
    high = {n for n, g in first.items() if min(g) >= 0.10}
    assert high == {"lr1e-2_wu500_seed2"}
    assert all(max(g) < 0.09 for n, g in first.items() if n not in high)
    deep = reruns["metric_depth8"]
    i = deep["step"].index(1250)
    assert all(o[1] < STUDY for o in deep["G_order_rms"][i:])
    assert all(g[1] >= 0.16 for g in deep["metric_norm_scale"][i:])


def check_nearest_last_probe(data):
    from kvattn.course import hunt_report

    run = data["hunt"][hunt_report.HUNT_NEAREST]
    assert max(run["G_order_rms"][-1]) < STUDY
    assert [round(v, 3) for v in run["A_sigma_ratio"][-1]] == [0.065, 0.015]
    assert min(run["A_sigma_ratio"][-1]) > 1e-3  # near rank 1, not exactly


def _nearest_rank_one(data):
    from kvattn.course import hunt_report

    data["hunt"][hunt_report.HUNT_NEAREST]["A_sigma_ratio"][-1] = [1e-16, 1e-16]
    return data


@cache
def depth_run() -> dict:
    """Chapter 11's depth experiment's 8-unit run (data/metric_depth/depth8_seed11.json)."""
    return load_json("data/metric_depth/depth8_seed11.json")


def check_depth_strict(run):
    from kvattn.diagnostics import collapse_reading

    last = {m: run[m][-1] for m in ("G_order_mean", "A_sigma_ratio")}
    assert all(collapse_reading(last, "strict").met)
    assert not all(collapse_reading({"G_order_mean": last["G_order_mean"]}, "published").met)


E = "What the measurement shows"
CLAIMS = [
    # ---------------------------------------------------------------- chapter 6
    Claim(
        CH6,
        "The softmax of $x_i M_h(i-j) x_j^\\top/\\sqrt{d_k}$, RoPE and biases included, "
        "rebuilds the model's attention weights to rounding error",
        "the first check's line max |softmax(x M(i−j) xᵀ/√d_k) − E of the model| (layer 0, "
        "head 1, the fibonacci prompt)",
        ch6,
        lambda d: _assert(d["rebuild_err"] < 1e-5),
        lambda d: _set(d, "rebuild_err", 1e-2),
    ),
    Claim(
        CH6,
        "A reparametrisation of $W_{Q,h}$ and $W_{K,h}$ in the commutant of RoPE leaves the "
        "logits unchanged to rounding, while a general invertible one moves them by orders of "
        "magnitude more",
        "the reparametrisation check's two lines (every head, both layers)",
        ch6,
        lambda d: _assert(d["commuting"] < 1e-4 and d["general"] > 100 * d["commuting"]),
        lambda d: _set(d, "general", 10 * d["commuting"]),
    ),
    Claim(
        CH6,
        "the general matrix changed them visibly",
        "the reparametrisation check's second line",
        ch6,
        lambda d: _assert(d["general"] > 0.1),
    ),
    Claim(
        CH6,
        "With $G = I$ the constant-$G$ model is exactly the GPT",
        "the line constant-G model with G = I vs the GPT",
        ch6,
        lambda d: _assert(d["identity_diff"] < 1e-5),
    ),
    Claim(
        CH6,
        "shifting both tokens leaves the commutant part of a random $G$ unchanged and "
        "changes the random $G$'s own form",
        "the shift check's three lines (layer 0's RoPE, positions and shifts as printed)",
        ch6,
        lambda d: _assert(d["shift_commuting"] < 1e-9 < 0.1 < d["shift_random"]),
        lambda d: _set(d, "shift_random", 1e-12),
    ),
    Claim(
        CH6,
        "Shifting both tokens by the same amount changes a random $G$'s form by about its "
        "whole size",
        "the shift check's first line (about: within 25 % of ‖G‖)",
        ch6,
        lambda d: _assert(0.8 < d["shift_random"] < 1.25),
        lambda d: _set(d, "shift_random", 0.3),
    ),
    Claim(
        CH6,
        "No head's form is close to symmetric.",
        "the asymmetry table at distance 0 (both layers, four heads each)",
        ch6,
        lambda d: _assert(min(d["asym_trained"]) > 1),
    ),
    Claim(
        CH6,
        "Exchanging $W_Q$ and $W_K$ keeps every self-score but raises the loss, by about as "
        "much as replacing the keys by random ones of the same norm",
        "the self-score line and the table of loss rises (the exchange within the range of "
        "five draws of scrambled keys, on the chapter's line of code)",
        ch6,
        check_ch6_exchange,
        lambda d: _set(d, "loss_swapped", d["loss"] + 5),
    ),
    Claim(
        CH6,
        "the norm of $M - M^\\top$ sits near its generic value $\\sqrt2\\,\\lVert M\\rVert$ in "
        "trained and untrained models alike",
        "the asymmetry table, trained and untrained rows "
        "(min, mean, max over every head; near: within 0.06 of √2)",
        ch6,
        check_ch6_generic,
        lambda d: _set(d, "asym_trained", [0.5] * 8),
    ),
    Claim(
        CH6,
        "both sit next to $\\sqrt2$",
        "the asymmetry table, trained and untrained rows",
        ch6,
        check_ch6_generic,
    ),
    Claim(
        CH6,
        "exchanging query and key costs the trained model about as much, within the spread "
        "of the five draws",
        "the table of loss rises",
        ch6,
        check_ch6_exchange,
    ),
    Claim(
        CH6,
        "every head stays in the band of a generic matrix, as at distance 0",
        "the explorer's second line (every head, distances 0 to 15)",
        ch6,
        lambda d: _assert(_near_sqrt2(d["asym_distances"])),
    ),
    Claim(
        CH6,
        "no head's form comes near symmetric at any distance from 0 to 15",
        "the explorer's second line (every head of both layers, distances 0 to 15; near "
        "symmetric: an asymmetry near 0, here every value above 1)",
        ch6,
        lambda d: _assert(len(d["asym_distances"]) == 8 * 16 and min(d["asym_distances"]) > 1),
        lambda d: _set(d, "asym_distances", [*d["asym_distances"][1:], 0.05]),
    ),
    Claim(
        CH6,
        "its weights are heaviest on the line just below the diagonal, which holds on average "
        "the share the first line prints, less than half of them",
        "the explorer's first line and its head's attention weights (the fibonacci prompt; "
        "each line's mean weight, offsets 0 to S − 1)",
        ch6_lines,
        check_ch6_previous_line,
        _self_heavy,
    ),
    Claim(
        CH6,
        "Whatever training did to the forms, it left this ratio at its generic value",
        "the asymmetry table's trained row against √2 (every head; within 0.06)",
        ch6,
        check_ch6_generic,
        lambda d: _set(d, "asym_trained", [1.0] * 8),
    ),
    # ---------------------------------------------------------------- chapter 7
    Claim(
        CH7,
        "give the model's own tensors to rounding error",
        "the checks of Steps 1 to 5 (layer 0, head 0; A_P relative to its largest entry)",
        ch7,
        lambda d: _assert(max(d["step_errors"].values()) < 1e-4),
        lambda d: _set(d, "step_errors", {"A": 0.1}),
    ),
    Claim(
        CH7,
        "Exponents of modulus below 1 pull every entry towards 1 on a logarithmic scale, so "
        "$A_P$ spans far fewer powers of ten than $A_{LM}$; a sizeable minority of its entries, "
        "not most of them, lies within 10 % of 1",
        "Step 4's prediction check: the range of P, the powers of ten of A_LM and A_P and the "
        "share within 10 % of 1 (every layer and head; far fewer: under a third; a sizeable "
        "minority: 20 % to 60 %)",
        ch7,
        check_ch7_compression,
        lambda d: _set(d, "near_one", 0.8),
    ),
    Claim(
        CH7,
        "in this model a sizeable minority of the entries lies within 10% of 1, not most of them",
        "Step 4's share of entries within 10% of 1",
        ch7,
        check_ch7_minority,
        lambda d: _set(d, "near_one", 0.05),
    ),
    Claim(
        CH7,
        "Training has spread the exponents out from their initial scale",
        "Step 4's line trained P: std against the initial std",
        ch7,
        lambda d: _assert(d["P_std"] > d["P_init_std"]),
    ),
    Claim(
        CH7,
        "$A_{LM}$ is entrywise positive, never below its floor $10^{-9}$, and every head's "
        "Perron eigenvector is positive",
        "Step 3's smallest entry and the eigenpair table (every layer and head)",
        ch7,
        lambda d: _assert(d["A_LM_min"] >= 0.999e-9 and min(d["pf_min_v"]) > 0),
        lambda d: _set(d, "pf_min_v", [-1.0]),
    ),
    Claim(
        CH7,
        "every other eigenvalue is smaller in modulus than $\\rho$",
        "the eigenpair table's last column",
        ch7,
        lambda d: _assert(all(d["pf_agrees"]) and max(d["pf_gap"]) < 1),
    ),
    Claim(
        CH7,
        "the PLDR-LLM computes the same logits as the GPT with the same weights, to rounding error",
        "the line PLDR-LLM with G_LM = I vs GPT",
        ch7,
        lambda d: _assert(d["sdpa_diff"] < 1e-4),
    ),
    Claim(
        CH7,
        "No head's $G_{LM}$ is the same for every prompt: its order parameter stays above 0 "
        "in every head.",
        "the explorer's line of the order parameter over the heads (five prompts, every head)",
        ch7,
        lambda d: _assert(min(d["g_order"]) > 0.1 and min(d["g_order_rms"]) > 0.01),
        lambda d: _set(d, "g_order", [0.0]),
    ),
    # ---------------------------------------------------------------- chapter 8
    Claim(
        CH8,
        "PLGA's per-head tensors and metric learner give the PLDR-LLM more parameters than "
        "the GPT, and all three train stably, the validation losses following the training "
        "losses without turning up",
        "the recipe table and the loss curves (every validation "
        "point of the three shipped runs; the training loss smoothed over 50 steps never "
        "0.1 nats above its running minimum)",
        ch8_states,
        check_ch8_stable,
    ),
    Claim(
        CH8,
        "the training losses fall, with the same wiggles of up to 0.2 nats in all three (the "
        "three runs read the same batches in the same order), and the validation losses follow "
        "them without turning up.",
        "the loss curves (the training loss smoothed over 50 steps, as drawn: its largest rise "
        "above its running minimum, and the step of that rise, in each run; the recipes' seed, "
        "batch and corpus)",
        ch8_states,
        check_ch8_wiggles,
    ),
    Claim(
        CH8,
        "The GPT's two losses agree exactly; a full pass flatters each PLDR-LLM slightly, "
        "because its density sees the later tokens of the block; measured as a decoder meets "
        "the text, the PLDR-LLM is the worse of the two models at this size",
        "the table of the two losses (checked on the first 4 validation blocks)",
        ch8_losses,
        check_ch8_modes,
        lambda d: _set(d, "GPT", {"full pass": 9.0, "generation": 9.0}),
    ),
    Claim(
        CH8,
        "here it flatters both, by less than 0.01 nats/token",
        "the full − gen. column",
        ch8_losses,
        check_ch8_small_flattery,
    ),
    Claim(
        CH8,
        "It is small next to the gap between the models",
        "the full − gen. column against the line PLDR-LLM − GPT (small: under a fifth)",
        ch8_losses,
        check_ch8_small_flattery,
        lambda d: _set(d, "GPT", {**d["GPT"], "generation": d["PLDR-LLM"]["generation"]}),
    ),
    Claim(
        CH8,
        "the PLDR-LLM is the worse of the two at this size",
        "the line PLDR-LLM − GPT",
        ch8_losses,
        check_ch8_modes,
    ),
    Claim(
        CH8,
        "a byte-fallback piece that does not complete a character is shown as <0x..>, "
        "where plain decoding prints �",
        "the samples; checked on the piece <0xE2>",
        ch8_byte_piece,
        check_ch8_byte,
    ),
    Claim(
        CH8,
        "at every one of the shipped runs' 16 evaluations the GPT's lies 0.14 to 0.2 nats below "
        "the PLDR-LLM's, and from the second on the PLDR-LLM + DAG's lies between the two",
        "the loss curves' validation points (data/*/trainer_state.json, every evaluation)",
        ch8_states,
        check_ch8_validation_gaps,
        _gpt_evals_up,
    ),
    Claim(
        CH8,
        "at which two positions is the gap 0 for every model (exactly 0 at one of them, 0 up "
        "to float rounding at the other)",
        "the exercise's first printed line (the PLDR-LLM), checked for all three models on "
        "the first two validation blocks (up to float rounding: under 1e-5)",
        ch8_gap_by_position,
        check_ch8_gap_ends,
        lambda d: _set(d, "PLDR-LLM", [0.1, *d["PLDR-LLM"][1:]]),
    ),
    Claim(
        CH8,
        "Training with it lowers $\\ell(A_P)$",
        "the DAG table (means over layers, batch and heads, on the chapter's prompt)",
        ch8_dag,
        check_ch8_dag,
        lambda d: _set(d, "PLDR-LLM", {"A_P": 0.0}),
    ),
]


def _assert(condition: bool) -> None:
    assert condition


def _untrained_half(d):
    return {**d, "untrained": type(d["untrained"])(**{**vars(d["untrained"]), "order_rms": 1.5})}


CLAIMS += [
    # ---------------------------------------------------------------- chapter 9
    Claim(
        CH9,
        "the run of the learning-rate sweep whose order parameter ended lowest along training "
        "(rate 3e-3, warm-up 500), and the nearest run of the collapse hunt, the lowest of the "
        "hunt",
        "chapter 11's table rows (kvattn.course.hunt_report.SWEEP_BEST and HUNT_NEAREST), "
        "read on the shipped trajectories data/trajectories/sweep_* and data/collapse_hunt",
        records,
        check_choices,
        _move_ratio,
    ),
    Claim(
        CH9,
        "The trained model's order parameter is within a factor of 2 of the untrained model's",
        "the table at the top, order (RMS) column",
        ch9_table,
        check_ch9_same_level,
        _untrained_half,
    ),
    Claim(
        CH9,
        "Freezing the trained $G_{LM}$ at another input's value changes the loss by about 0 "
        "nats/token",
        "the frozen-G line of the measures table (about 0: under 0.01, and under "
        "a tenth of the G = I change)",
        ch9_table,
        check_ch9_frozen,
    ),
    Claim(
        CH9,
        "both read an order parameter above the study's threshold and a "
        "$\\sigma_2/\\sigma_1$ of $A$ above 0.5 in the least collapsed layer",
        "the table at the top, the two measured rows (each column the least collapsed layer's)",
        ch9_table,
        check_ch9_neither_collapsed,
    ),
    Claim(
        CH9,
        "in `pldr_tiny`'s other layer the rank-1 audit below reads just under 0.5",
        "the rank-1 audit table's trained rows (layer 1 in [0.45, 0.5), layer 0 above 0.5)",
        ch9_table,
        check_ch9_other_layer,
        _trained_rank_one,
    ),
    Claim(
        CH9,
        "ours changes from input to input by 0.1 to 0.2 of its own size in both layers, on "
        "code like its training text and on prose it never saw",
        "the order-parameter table's G_LM column (20 snippets of each kind, both layers)",
        ch9_table,
        check_ch9_fraction,
        lambda d: _set(d, "order", {"order": {("code", 0, "G_LM"): 0.5}}),
    ),
    Claim(
        CH9,
        "On this code the second costs under a tenth of the third: one cached $G$ keeps most "
        "of what the metric learner contributes.",
        "the three loss lines of the constant-G section (checked on the first 4 held-out blocks)",
        ch9_losses,
        check_ch9_small_share,
        lambda d: _set(d, "ablated", d["sdpa"]),
    ),
    Claim(
        CH9,
        "the entries of $G_{LM}$ take both signs, so the magnitude of their mean is much "
        "smaller than a typical entry",
        "the last line of the constant-G cell (RMS entry against "
        "|mean|; much smaller: under a tenth)",
        ch9_losses,
        check_ch9_both_signs,
    ),
    Claim(
        CH9,
        "its $G_{LM}$ ended below the study's threshold in both layers",
        "data/collapse_hunt's record of the nearest run (last probe and last quarter)",
        records,
        check_nearest_not_rank_one,
    ),
    Claim(
        CH9,
        "The hunt's nearest run took $\\gamma$ most of the way to 0 by learning alone: below "
        "0.02 in both layers, lowest in layer 1",
        "the γ table (kvattn.diagnostics.metric_norm of the shipped checkpoints)",
        ch9_norms,
        check_ch9_hunt_gamma,
        lambda d: _set(d, "hunt", {"gamma": [0.3, 0.3], "beta": [0.3, 0.3]}),
    ),
    Claim(
        CH9,
        "its $\\beta$ shrank as well, to the size of its $\\gamma$",
        "the γ table's last row (the size of: within a factor of 3, per layer)",
        ch9_norms,
        check_ch9_hunt_gamma,
    ),
    Claim(
        CH9,
        "Training left $\\gamma$ of pldr_tiny of the order of its initial value, 1, in both layers",
        "the γ table's trained row (of the order of 1: above 0.5)",
        ch9_norms,
        check_ch9_hunt_gamma,
    ),
    Claim(
        CH9,
        "not identical: it is not rank 1",
        "σ2/σ1 of A in the nearest run's record "
        "(data/collapse_hunt, last quarter, above 1e-3 in both layers)",
        records,
        check_nearest_not_rank_one,
    ),
    Claim(
        CH9,
        "the rerun of the nearest run (the nearest recipe's seed 2) met the study's threshold "
        "in both layers at step 1,000 with $\\gamma$ still at 0.10 and 0.21",
        "data/hunt_reruns/lr1e-2_wu500_seed2.json "
        "(the first probe below 1e-2 in both layers, and its metric_norm_scale)",
        records,
        check_seed2_at_1000,
        _lift_seed2,
    ),
    Claim(
        CH9,
        "layer 1's $G_{LM}$ stayed below the threshold from step 1,250 to the end while its "
        "$\\gamma$ went from 0.63 to 0.16, and the base run, whose layer-1 $\\gamma$ ended at "
        "about the same value, ended with an order parameter in that layer more than ten "
        "times higher",
        "data/hunt_reruns/metric_depth8.json and base.json (every probe from step 1,250; the "
        "end: the median of the last quarter; about the same: within 25 %)",
        records,
        check_depth8,
    ),
    Claim(
        CH9,
        "in the base run's two seeds and in the run on the smaller corpus, $\\gamma$ kept "
        "falling in both layers after step 2,000 while the order parameter of the least "
        "collapsed layer ended higher than it was at step 2,000",
        "data/hunt_reruns/base.json, base_seed2.json, corpus1.5M.json (every probe from step "
        "2,000; the end: the median of the last quarter)",
        records,
        check_gamma_falls_order_rises,
        _gamma_up,
    ),
    Claim(
        CH9,
        "of the five reruns that met the study's threshold in both layers, the rerun of the "
        "nearest run first did so with $\\gamma$ still at 0.10 or above and the other four with "
        "$\\gamma$ under 0.09 in both layers; the deep run's layer 1 stayed below the threshold "
        "with $\\gamma$ at 0.16 or above",
        "data/hunt_reruns (every rerun: the first probe below 1e-2 in both layers and its "
        "metric_norm_scale; metric_depth8 from step 1,250 to the end)",
        records,
        check_gamma_at_freeze,
        _lift_seed2,
    ),
    Claim(
        CH9,
        "these reruns show only that the deep run's invariance did not need a small $\\gamma$",
        "data/hunt_reruns/metric_depth8.json",
        records,
        check_depth8,
    ),
    Claim(
        CH9,
        "whose $G_{LM}$ ends below the study's threshold of input invariance by learning, "
        "with an $A$ near rank 1 but not exactly so, $\\sigma_2/\\sigma_1$ of 0.065 and 0.015 in "
        "its two layers at its last probe",
        "the nearest run's record in data/collapse_hunt (its last probe)",
        records,
        lambda d: (check_nearest_not_rank_one(d), check_nearest_last_probe(d)),
        _nearest_rank_one,
    ),
    Claim(
        CH9,
        "No course model reaches the published state in training, a $G_{LM}$ that does not "
        "change at all",
        "chapter 11's records (data/collapse_hunt, data/hunt_reruns, data/constant_rate: no "
        "order parameter of any probe is 0; data/metric_depth's 8-unit run: its last probe "
        "misses the published criterion)",
        lambda: {**records(), "depth": depth_run()},
        lambda d: (check_some_runs_freeze_none_exactly(d), check_depth_strict(d["depth"])),
    ),
    Claim(
        CH9,
        "its depth experiment finds a run that meets the course's strict criterion",
        "data/metric_depth/depth8_seed11.json, its last probe (kvattn.diagnostics."
        "collapse_reading, strict: met; published: not met)",
        depth_run,
        check_depth_strict,
        lambda r: _set(r, "A_sigma_ratio", [*r["A_sigma_ratio"][:-1], [0.5, 0.5]]),
    ),
    Claim(
        CH9,
        "changes from input to input by 0.1 to 0.2 of its own size in every layer, on code "
        "and on prose",
        "the order-parameter table's G_LM column",
        ch9_table,
        check_ch9_fraction,
    ),
    Claim(
        CH9,
        "its $A$ keeps all its directions (a median numerical rank of $d_k$ in the rank-1 audit)",
        "the rank-1 audit's median rank (trained, both layers, d_k = 32)",
        ch9_table,
        check_ch9_full_rank,
    ),
    Claim(
        CH9,
        "changes the loss by about 0 nats/token, under a tenth of what replacing it by "
        "$G = I$ costs, and leaves about 95 % of greedy next tokens unchanged on average",
        "the measures table's trained row (fast-build sizes: 3 donors, 4 blocks; about: "
        "within 2 points)",
        ch9_table,
        check_ch9_frozen_95,
        lambda d: _set(d, "measures", {"trained": {**d["measures"]["trained"], "agree": 0.5}}),
    ),
    Claim(
        CH9,
        "The untrained model reads an RMS order parameter within a factor of 2 of the "
        "trained one's (the table at the top).",
        "the table at the top",
        ch9_table,
        check_ch9_same_level,
    ),
    Claim(
        CH9,
        "in the order-parameter table the order parameter of $A_P$ is several times "
        "smaller than that of $A_{LM}$ in every layer, on code and on prose",
        "the order-parameter table (several: at least 3)",
        ch9_table,
        check_ch9_power_law,
    ),
    Claim(
        CH9,
        "Training left the metric learner's row maps responsive (a row-map gain far above "
        "the study's 0.1, near the untrained model's) and its LayerNorm scale $\\gamma$ of the "
        "order of its initial value, 1.",
        "the measures table's row-map gain and the γ table "
        "(far above: over 0.5; near: within a factor of 1.5)",
        ch9_table,
        check_ch9_responsive,
    ),
    Claim(
        CH9,
        "its $G_{LM}$ changes from input to input by a fraction of its own size, as much as "
        "at initialisation, and freezing it nonetheless costs the loss about 0 nats/token",
        "the table at the top and the measures table",
        ch9_table,
        lambda d: (check_ch9_fraction(d), check_ch9_same_level(d), check_ch9_frozen(d)),
    ),
    Claim(
        CH9,
        "The trained $G_{LM}$ changes between inputs by a fraction of its size, about as "
        "much as the untrained model's",
        "the table at the top and the first table",
        ch9_table,
        lambda d: (check_ch9_fraction(d), check_ch9_same_level(d)),
    ),
    Claim(
        CH9,
        "σ2/σ1 of $A$ fell with training but stayed far from 0, and the median rank far "
        "from 1: $A$ is not rank 1",
        "the rank-1 audit table (8 code snippets, both layers; far from 0: above 0.1)",
        ch9_table,
        check_ch9_audit,
        _trained_rank_one,
    ),
    Claim(
        CH9,
        "With a constant $G$ the three modes give identical tokens (asserted); on the "
        "trained model the KV + G cache is an approximation, and the block density lets a full "
        "pass see later tokens.",
        "the decoding-modes counts, the constant-G check and the look-ahead lines",
        ch9_decoding,
        check_ch9_modes,
        lambda d: _set(d, "differ", {"kv+g": [False] * 5}),
    ),
    Claim(
        CH9,
        "Freezing $G_{LM}$ costs about 0 nats/token, a small share of what $G = I$ costs; "
        "setting the metric learner's last LayerNorm scale to 0 collapses the model exactly, "
        "and it then reads an order parameter, a Δ loss and a row-map gain of 0 and keeps "
        "every greedy token.",
        "the measures table (trained and flattened rows)",
        ch9_table,
        lambda d: (check_ch9_frozen(d), check_ch9_flattened(d)),
    ),
    Claim(
        CH9,
        "flags a ratio (⚠) when fewer than three rounds fit in the budget or their middle "
        "half spans more than a fifth of the median",
        "the benchmark report's ⚠ lines (kvattn.benchmark.timing.flagged)",
        ch9_flags,
        check_ch9_flags,
        lambda d: _set(d, "wide", None),
    ),
    # ---------------------------------------------------------------- chapter 10
    Claim(
        CH10,
        "With RoPE the commutant residual of the normalised density falls as the block "
        "grows, but stays far from 0: RoPE's slow planes, and pairs of planes with close "
        "frequencies, turn less than once across the block",
        "the first figure (layer 0, 16 "
        "inputs, S = 4 to 128; far from 0: above 0.5) and the count of phases",
        ch10,
        check_ch10_twirl,
        lambda d: _set(d, "residual", {True: [0.9, 0.5, 0.01]}),
    ),
    Claim(
        CH10,
        "With RoPE the residual falls as the block grows, and below the curve without "
        "RoPE, but at the full block it is still far from 0.",
        "the first figure",
        ch10,
        check_ch10_below_without,
    ),
    Claim(
        CH10,
        "The spread of the density across inputs shrinks as the block grows, but far less "
        "than $\\sqrt{\\text{number of terms}}$",
        "the concentration figure (far less: under half the independent-terms factor)",
        ch10,
        check_ch10_concentration,
        lambda d: _set(d, "spread", [d["spread"][0], d["spread"][0] / 100]),
    ),
    Claim(
        CH10,
        "The metric learner passes the differences between inputs through almost "
        "unchanged; the stage that contracts them is the power law, because the learned "
        "exponents $P$ stay small, as they were at initialisation",
        "the contraction table and "
        "the exponents' lines (layer 0; almost unchanged: ratio above 0.9; small: |P| under "
        "0.5, spread within 1.5 times the initial one)",
        ch10,
        check_ch10_contraction,
        lambda d: _set(d, "trained", {**d["trained"], "A": 0.2}),
    ),
    Claim(
        CH10,
        "in this model the row $A$ stays close to 1, and the big step is elsewhere",
        "the contraction table",
        ch10,
        check_ch10_contraction,
    ),
    Claim(
        CH10,
        "the untrained model's ratio at $A_P$, printed above, is within a factor of 1.5 of "
        "the trained model's, so an untrained model already has this contraction",
        "the line untrained model: ratio … at A_P",
        ch10,
        check_ch10_untrained,
        lambda d: _set(d, "untrained", {"A_P": 1.0}),
    ),
    Claim(
        CH10,
        "$A_P$ is compressed towards 1, though not onto it",
        "the median |A_P − 1| line and the contraction table",
        ch10,
        check_ch10_not_onto,
    ),
    Claim(
        CH10,
        "the heads of layer 0 sit at the level of random matrices, and most heads of layer 1 "
        "below the collapsed model's median",
        "the residual table (16 inputs; at the level: within 0.02 of the random median)",
        ch10,
        check_ch10_heads,
        lambda d: _set(d, "G_residuals", [[0.5] * 4, [0.95] * 4]),
    ),
    Claim(
        CH10,
        "Some of our heads sit below the collapsed model's median",
        "the count of heads below 0.81",
        ch10,
        check_ch10_some_below,
    ),
    Claim(
        CH10,
        "The layer closer to the commutant carries several times more of its weight on the "
        "diagonal than a matrix with no preference",
        "the diagonal-share table against 1/d_k (several: at least 3)",
        ch10,
        check_ch10_diagonal,
    ),
    Claim(
        CH10,
        "their RMS is many times that mean",
        "the line RMS of its entries / |mean| and the two order parameters (many: over 5)",
        ch10,
        check_ch10_rms_over_mean,
    ),
    Claim(
        CH10,
        "the one strong contraction comes from small exponents rather than from the metric learner",
        "the contraction table",
        ch10,
        check_ch10_contraction,
    ),
    # ---------------------------------------------------------------- the introduction
    Claim(
        INTRO,
        "in some of our small training runs $G_{LM}$ ends below the training-dynamics "
        "study's threshold of input invariance, in none does it become exactly constant",
        "chapter 11's records (data/collapse_hunt, data/hunt_reruns, data/constant_rate)",
        records,
        check_some_runs_freeze_none_exactly,
    ),
    Claim(
        INTRO,
        "every chapter ends with at least three exercises",
        "the chapters' exercises",
        chapter_exercises,
        lambda d: _assert(all(c["exercises"] >= 3 for c in d.values())),
        lambda d: _set(d, "x", {"exercises": 2, "theorems_with_tests": []}),
    ),
    Claim(
        INTRO,
        "each theorem is followed by links to the library tests that check it numerically",
        "the chapters' theorems",
        chapter_exercises,
        lambda d: _assert(all(all(c["theorems_with_tests"]) for c in d.values())),
    ),
]
