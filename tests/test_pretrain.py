"""Pre-training from the command line: config files, checkpoints, exact resume, non-finite loss,
DistributedDataParallel on two CPU processes, generation from a checkpoint."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import kvattn.train as T
from kvattn.checkpoint import load_pretrained
from kvattn.generate import generate_text
from kvattn.train import PretrainConfig, pretrain

TINY = {
    "model": {
        "hidden_size": 32,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "num_reslayerA": 1,
        "num_denseA": 1,
    },
    "vocab_size": 400,
    "block_size": 16,
    "batch_size": 4,
    "steps": 6,
    "lr": 1e-3,
    "warmup": 2,
    "eval_every": 3,
    "eval_blocks": 4,
    "checkpoint_every": 3,
    "seed": 3,
}


def config(tmp_path: Path, **overrides) -> PretrainConfig:
    return PretrainConfig(**{**TINY, "out_dir": str(tmp_path / "run"), **overrides})


def test_config_file_round_trip_and_unknown_keys(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**TINY, "out_dir": "x"}))
    cfg = PretrainConfig.from_file(path)
    assert cfg.block_size == 16 and cfg.betas == (0.9, 0.95) and cfg.eps == 1e-5
    path.write_text(json.dumps({**TINY, "learning_rate": 1e-3}))
    with pytest.raises(ValueError, match=r"unknown keys.*learning_rate"):
        PretrainConfig.from_file(path)
    with pytest.raises(ValueError, match="architecture"):
        PretrainConfig(architecture="llama")
    with pytest.raises(ValueError, match="dag"):
        PretrainConfig(dag=(0.1, 0.1))


def test_run_writes_a_published_checkpoint_and_loss_falls(tmp_path):
    result = pretrain(
        config(tmp_path, steps=12, eval_every=6, checkpoint_every=6, lr=3e-3), progress=False
    )
    ckpt = tmp_path / "run" / "checkpoint"
    assert sorted(p.name for p in ckpt.iterdir()) == [
        "config.json",
        "model.safetensors",
        "optimizer.safetensors",
        "tokenizer.model",
        "trainer_state.json",
    ]
    assert "decoder.dec_layers.0.mha1.plgatt_layer.Wlst" in load_file(ckpt / "model.safetensors")
    assert json.loads((ckpt / "trainer_state.json").read_text())["step"] == 12
    assert result.history.loss[-1] < result.history.loss[0]
    model = load_pretrained(ckpt)
    ids = torch.randint(4, 100, (1, 8))
    assert torch.equal(model(ids).logits, result.model.eval()(ids).logits)


def test_resume_reproduces_the_uninterrupted_run(tmp_path, monkeypatch):
    """Interrupt after the step-3 checkpoint, resume, and get the same loss curve bit for bit."""
    full = pretrain(config(tmp_path / "a"), progress=False)
    calls = {"n": 0}
    original = T.lm_cross_entropy

    def interrupting(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3 + 4 + 2:  # 3 steps, 4 evaluation blocks, then 2 more steps
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(T, "lm_cross_entropy", interrupting)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(tmp_path / "b"), progress=False)
    monkeypatch.setattr(T, "lm_cross_entropy", original)
    state = json.loads((tmp_path / "b" / "run" / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == 3
    resumed = pretrain(config(tmp_path / "b"), resume=True, progress=False)
    assert resumed.history.loss == full.history.loss
    assert resumed.history.evals == full.history.evals


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    original = T.lm_cross_entropy
    calls = {"n": 0}

    def exploding(*args, **kwargs):
        calls["n"] += 1
        loss = original(*args, **kwargs)
        return loss * float("nan") if calls["n"] > 3 + 4 + 1 else loss

    monkeypatch.setattr(T, "lm_cross_entropy", exploding)
    with pytest.raises(FloatingPointError, match="non-finite loss nan at step 4"):
        pretrain(config(tmp_path), progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    assert json.loads((ckpt / "trainer_state.json").read_text())["step"] == 3
    assert not (tmp_path / "run" / "checkpoint.tmp").exists()
    load_pretrained(ckpt)  # the kept checkpoint is complete


def test_dag_regulariser_enters_the_loss(tmp_path):
    plain = pretrain(config(tmp_path / "a", steps=1), progress=False)
    with_dag = pretrain(config(tmp_path / "b", steps=1, dag=(0.5, 0.0, 0.0)), progress=False)
    assert with_dag.history.loss[0] > plain.history.loss[0]


def test_command_line_train_and_generate(tmp_path):
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(
        json.dumps({**TINY, "out_dir": str(tmp_path / "run"), "architecture": "gpt"})
    )
    out = subprocess.run(
        [sys.executable, "-m", "kvattn.train", "--config", str(cfg_file), "--steps", "3"],
        capture_output=True,
        text=True,
        timeout=600,  # a hang limit, not a speed check
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "done: 3 steps" in out.stdout
    ckpt = tmp_path / "run" / "checkpoint"
    text = generate_text(ckpt, "The assert", max_new_tokens=5)
    assert text.startswith("The assert")
    gen = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvattn.generate",
            "--checkpoint",
            str(ckpt),
            "--prompt",
            "The assert",
            "--max-new-tokens",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=600,  # a hang limit, not a speed check
    )
    assert gen.returncode == 0 and gen.stdout.strip() == text.strip()
    with pytest.raises(ValueError, match="prompt is empty"):
        generate_text(ckpt, "")


def _run_pair(tmp_path: Path, **overrides) -> tuple[dict, dict, dict, dict]:
    """Train the same config in one process and in two (torchrun, gloo); return weights and
    trainer states."""
    results = []
    for name, launcher in [
        ("one", []),
        ("two", ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]),
    ]:
        cfg_file = tmp_path / f"{name}.json"
        cfg_file.write_text(
            json.dumps(
                {
                    **TINY,
                    "steps": 3,
                    "eval_every": 100,
                    "checkpoint_every": 100,
                    "out_dir": str(tmp_path / name),
                    **overrides,
                }
            )
        )
        cmd = [sys.executable, *launcher, "-m", "kvattn.train", "--config", str(cfg_file)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        # timeout: a hang limit, not a speed check
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        ckpt = tmp_path / name / "checkpoint"
        results.append(
            (
                load_file(ckpt / "model.safetensors"),
                json.loads((ckpt / "trainer_state.json").read_text())["history"],
            )
        )
    (w1, h1), (w2, h2) = results
    return w1, w2, h1, h2


def test_ddp_on_two_cpu_processes_matches_one_process_gpt(tmp_path):
    """Each process takes half of every step's batch; DDP averages the gradients, so after three
    steps the GPT's weights and the (all-reduced) losses equal a single-process run's."""
    w1, w2, h1, h2 = _run_pair(tmp_path, architecture="gpt")
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 1e-5
    assert h1["loss"] == pytest.approx(h2["loss"], abs=1e-5)


def test_ddp_on_two_cpu_processes_matches_one_process_pldr(tmp_path):
    """The same for a PLDR-LLM. At initialisation P ≈ 0, so A_P ≈ 1 and G_LM barely depends on the
    metric learner: its gradients are at the level of float32 rounding, which Adam (eps 1e-5)
    normalises into learning-rate-sized, run-dependent steps. With eps = 1e-2 that noise is
    damped and the two runs agree."""
    w1, w2, h1, h2 = _run_pair(tmp_path, eps=1e-2)
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 1e-4
    assert h1["loss"] == pytest.approx(h2["loss"], abs=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_autocast_on_cuda(tmp_path):
    result = pretrain(config(tmp_path, steps=3, device="cuda", bf16=True), progress=False)
    assert all(torch.isfinite(torch.tensor(result.history.loss)))
