"""Pre-training from the command line: config files, checkpoints, exact resume, non-finite loss,
DistributedDataParallel on two CPU processes, generation from a checkpoint."""

import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import kvattn.diagnostics as D
import kvattn.distributed as DIST
import kvattn.pretrain as T
import kvattn.pretrain.resume as RESUME
import kvattn.pretrain.run as RUN
from kvattn.checkpoint import load_pretrained
from kvattn.data import blocks, load_text
from kvattn.generate import generate_text
from kvattn.pretrain import PretrainConfig, pretrain

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
    for lr in (3e-2, 9.0):  # the collapse hunt's highest rate, and one just below the bound
        assert PretrainConfig(**{**TINY, "lr": lr}).lr == lr
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


def _interrupt_after_the_step_3_checkpoint(run: Path, monkeypatch) -> None:
    """Start the TINY run in ``run`` and stop it by KeyboardInterrupt during step 5, after the
    step-3 checkpoint (3 steps, 4 evaluation blocks, then 2 more steps)."""
    original = RUN.lm_cross_entropy
    calls = {"n": 0}

    def interrupting(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3 + 4 + 2:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(RUN, "lm_cross_entropy", interrupting)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(run), progress=False)
    monkeypatch.setattr(RUN, "lm_cross_entropy", original)


@pytest.mark.slow
def test_resume_reproduces_the_uninterrupted_run(tmp_path, monkeypatch):
    """Interrupt after the step-3 checkpoint, resume, and get the same loss curve bit for bit."""
    full = pretrain(config(tmp_path / "a"), progress=False)
    _interrupt_after_the_step_3_checkpoint(tmp_path / "b", monkeypatch)
    state = json.loads((tmp_path / "b" / "run" / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == 3
    resumed = pretrain(config(tmp_path / "b"), resume=True, progress=False)
    assert resumed.history.loss == full.history.loss
    assert resumed.history.evals == full.history.evals


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    original = RUN.lm_cross_entropy
    calls = {"n": 0}

    def exploding(*args, **kwargs):
        calls["n"] += 1
        loss = original(*args, **kwargs)
        return loss * float("nan") if calls["n"] > 3 + 4 + 1 else loss

    monkeypatch.setattr(RUN, "lm_cross_entropy", exploding)
    with pytest.raises(FloatingPointError, match="non-finite loss nan at step 4"):
        pretrain(config(tmp_path), progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    assert json.loads((ckpt / "trainer_state.json").read_text())["step"] == 3
    assert not (tmp_path / "run" / "checkpoint.tmp").exists()
    load_pretrained(ckpt)  # the kept checkpoint is complete


@pytest.mark.slow
def test_a_model_with_non_finite_logits_is_never_checkpointed(tmp_path):
    """At lr 9 one AdamW step leaves finite weights (about ±9) whose logits overflow: the step-1
    checkpoint is refused, naming the step and the rate, and the run it was to replace
    (overwrite) stays byte for byte (it used to be replaced by a model that only gives NaN)."""
    pretrain(config(tmp_path, steps=3), progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    with pytest.raises(
        FloatingPointError,
        match=r"non-finite logits after 1 steps \(step 0, lr 9\) although the parameters are "
        r"finite; not checkpointed, the last checkpoint stays; lower the learning rate",
    ):
        pretrain(
            config(tmp_path, steps=2, warmup=0, lr=9.0, checkpoint_every=1, overwrite=True),
            progress=False,
        )
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint"]


def test_training_steps_skip_the_loss_target_check_that_syncs(tmp_path, monkeypatch):
    """lm_cross_entropy's all-pad check reads the targets (a host sync per call on a GPU): the
    training steps skip it, since packed blocks always have targets; evaluations keep it."""
    original, calls = RUN.lm_cross_entropy, []

    def recording(*args, **kwargs):
        calls.append(kwargs.get("check_targets", True))
        return original(*args, **kwargs)

    monkeypatch.setattr(RUN, "lm_cross_entropy", recording)
    pretrain(config(tmp_path, steps=3, eval_every=3, eval_blocks=2), progress=False)
    assert calls == [False, False, False, True, True]  # 3 steps, then 2 validation blocks


@pytest.mark.slow
def test_dag_regulariser_enters_the_loss(tmp_path):
    plain = pretrain(config(tmp_path / "a", steps=1, warmup=1), progress=False)
    with_dag = pretrain(
        config(tmp_path / "b", steps=1, warmup=1, dag=(0.5, 0.0, 0.0)), progress=False
    )
    assert with_dag.history.loss[0] > plain.history.loss[0]


@pytest.mark.slow
def test_command_line_train_and_generate(tmp_path):
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(
        json.dumps({**TINY, "out_dir": str(tmp_path / "run"), "architecture": "gpt"})
    )
    out = subprocess.run(
        [sys.executable, "-m", "kvattn.pretrain", "--config", str(cfg_file), "--steps", "3"],
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
        cmd = [sys.executable, *launcher, "-m", "kvattn.pretrain", "--config", str(cfg_file)]
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


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_matches_one_process_gpt(tmp_path):
    """Each process takes half of every step's batch; DDP averages the gradients, so after three
    steps the GPT's weights and the (all-reduced) losses equal a single-process run's."""
    w1, w2, h1, h2 = _run_pair(tmp_path, architecture="gpt")
    assert max((w1[k].double() - w2[k].double()).abs().max().item() for k in w1) < 1e-5
    assert h1["loss"] == pytest.approx(h2["loss"], abs=1e-5)


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_matches_one_process_pldr(tmp_path):
    """The same for a PLDR-LLM. At initialisation P ≈ 0, so A_P ≈ 1 and G_LM barely depends on the
    metric learner: its gradients are at the level of float32 rounding, which Adam (eps 1e-5)
    normalises into learning-rate-sized, run-dependent steps. With eps = 1e-2 that noise is
    damped and the two runs agree to a small fraction of what the three steps move: measured
    1.2e-4 on a 2-core x86-64 CI machine (the rounding depends on the CPU's kernels), where a
    rank that trained on its half of the batch alone would differ by about 4e-3."""
    w1, w2, h1, h2 = _run_pair(tmp_path, eps=1e-2)
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 5e-4
    assert h1["loss"] == pytest.approx(h2["loss"], abs=1e-5)


#: What every DDP set-up error lists, in this order, with the values of the environment.
DDP_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_a_ddp_rendezvous_nobody_joins_fails_naming_the_environment(tmp_path):
    """WORLD_SIZE=2 RANK=0 in a single process used to wait forever for its peer; it now gives up
    after KVATTN_DDP_TIMEOUT_S (here 1 s) and says which variables turned DDP on, before any
    work, in one line without a traceback (a RendezvousError, which the command reports)."""
    port = _free_port()
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({**TINY, "out_dir": str(tmp_path / "run"), "device": "cpu"}))
    env = {k: v for k, v in os.environ.items() if k not in DDP_VARIABLES}
    env.update(
        WORLD_SIZE="2",
        RANK="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        KVATTN_DDP_TIMEOUT_S="1",
        OMP_NUM_THREADS="1",
    )
    out = subprocess.run(
        [sys.executable, "-m", "kvattn.pretrain", "--config", str(cfg_file)],
        capture_output=True,
        text=True,
        timeout=600,  # a hang limit, not a speed check
        env=env,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    error = out.stderr.strip().splitlines()[-1]
    assert error.startswith("python -m kvattn.pretrain: error: the DDP rendezvous failed: ")
    assert (
        "(the processes wait for each other at most 1 s; the environment variable "
        "KVATTN_DDP_TIMEOUT_S sets it). DDP is on because the environment sets WORLD_SIZE "
        f"(WORLD_SIZE='2', RANK='0', LOCAL_RANK unset, MASTER_ADDR='127.0.0.1', "
        f"MASTER_PORT='{port}'); launch with torchrun"
    ) in error
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("env", "device", "problem"),
    [
        ({"WORLD_SIZE": "2"}, "cpu", "DDP also needs RANK, MASTER_ADDR, MASTER_PORT"),
        ({"WORLD_SIZE": "two"}, "cpu", "WORLD_SIZE must be an int >= 1, got 'two'"),
        ({"WORLD_SIZE": "0"}, "cpu", "WORLD_SIZE must be an int >= 1, got '0'"),
        ({"WORLD_SIZE": "2", "LOCAL_RANK": "-1"}, "cpu", "LOCAL_RANK must be an int >= 0"),
        ({"WORLD_SIZE": "2", "RANK": "2"}, "cpu", "RANK must be below WORLD_SIZE"),
        ({"WORLD_SIZE": "2", "RANK": "1.0"}, "cpu", "RANK must be an int >= 0, got '1.0'"),
        ({"WORLD_SIZE": "3"}, "cpu", "batch_size 4 is not divisible by 3 processes"),
        ({"WORLD_SIZE": "2"}, "cuda:0", "device 'cuda:0' names one GPU for all 2 processes"),
        (
            {"WORLD_SIZE": "2", "KVATTN_DDP_TIMEOUT_S": "0"},
            "cpu",
            "KVATTN_DDP_TIMEOUT_S must be a finite number > 0, got '0'",
        ),
        (
            {"WORLD_SIZE": "2", "KVATTN_DDP_TIMEOUT_S": "inf"},
            "cpu",
            "KVATTN_DDP_TIMEOUT_S must be a finite number > 0, got 'inf'",
        ),
        (  # timedelta overflowed: "OverflowError: Python int too large to convert to C int"
            {"WORLD_SIZE": "2", "KVATTN_DDP_TIMEOUT_S": "1e300"},
            "cpu",
            "KVATTN_DDP_TIMEOUT_S must be at most 1e+07, got '1e300'",
        ),
    ],
)
def test_ddp_set_up_errors_name_the_variables_that_turned_it_on(
    tmp_path, monkeypatch, env, device, problem
):
    """Every DDP set-up error says which variables turned DDP on, with their values (with only
    WORLD_SIZE=2 set, it used to be torch's 'environment variable RANK expected'), before the
    process group starts or any work is done."""
    for name in (*DDP_VARIABLES, "KVATTN_DDP_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    if "RANK" in env or env["WORLD_SIZE"] == "3" or "KVATTN_DDP_TIMEOUT_S" in env:
        # a complete environment, so that only the problem under test stops the set-up (and a
        # regression waits 5 s for a peer, not forever)
        env = {"RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), **env}
        env.setdefault("KVATTN_DDP_TIMEOUT_S", "5")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the device check runs first
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))
    values = ", ".join(
        f"{name}={env[name]!r}" if name in env else f"{name} unset" for name in DDP_VARIABLES
    )
    with pytest.raises(ValueError) as err:
        pretrain(config(tmp_path, device=device), progress=False)
    assert problem in str(err.value)
    assert f". DDP is on because the environment sets WORLD_SIZE ({values}); " in str(err.value)
    assert not torch.distributed.is_initialized()
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "env",
    [
        {"WORLD_SIZE": "1", "RANK": "3"},
        {"RANK": "1"},
        {"WORLD_SIZE": "1", "LOCAL_RANK": "2"},
    ],
)
def test_a_rank_without_a_ddp_world_is_refused(tmp_path, monkeypatch, capsys, env):
    """WORLD_SIZE=1 with RANK=3 used to train as a single rank-0 process: several processes
    started that way would all write the same out_dir. It is refused before any work, naming
    the variables, and the command says so in one line."""
    for name in (*DDP_VARIABLES, "KVATTN_DDP_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))
    values = ", ".join(
        f"{name}={env[name]!r}" if name in env else f"{name} unset" for name in DDP_VARIABLES
    )
    expected = (
        f"the environment gives this process a rank ({values}) but no DDP world: without "
        "WORLD_SIZE > 1 a run is one process of rank 0, and processes started like this would "
        "each train alone and write the same out_dir; launch with torchrun, which sets "
        "WORLD_SIZE, or unset RANK and LOCAL_RANK"
    )
    with pytest.raises(ValueError) as err:
        pretrain(config(tmp_path), progress=False)
    assert str(err.value) == expected
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**TINY, "out_dir": str(tmp_path / "run")}))
    with pytest.raises(SystemExit) as exit_info:
        T.main(["--config", str(path)])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == f"python -m kvattn.pretrain: error: {expected}\n"
    assert not (tmp_path / "run").exists()


def test_one_process_needs_no_ddp_variables_and_rank_0_is_fine(monkeypatch):
    for name in DDP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert DIST.setup_distributed("cpu", 3) == (0, 1, torch.device("cpu"), False)
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert DIST.setup_distributed("cpu", 3) == (0, 1, torch.device("cpu"), False)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="environment variable RANK must be an int >= 0, got 'x'"):
        DIST.setup_distributed("cpu", 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_autocast_on_cuda(tmp_path):
    result = pretrain(config(tmp_path, steps=3, device="cuda", bf16=True), progress=False)
    assert all(torch.isfinite(torch.tensor(result.history.loss)))


# ---------------------------------------------------------------------------------------------
# Bad configs are refused at construction, before any work


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"model": {**TINY["model"], "hiden_size": 16}}, r"'hiden_size' \(did you mean"),
        ({"model": {**TINY["model"], "attention_bias": "false"}}, "attention_bias must be true"),
        ({"model": {**TINY["model"], "vocab_size": 50}}, "model must not set vocab_size"),
        ({"model": {**TINY["model"], "max_position_embeddings": 8}}, "smaller than block_size"),
        ({"lr": "0.001"}, "lr must be a positive finite number below 10, got '0.001'"),
        ({"lr": 0}, "lr must be a positive finite number below 10, got 0"),
        ({"lr": 1e39}, r"lr must be a positive finite number below 10, got 1e\+39"),
        ({"lr": 1e4}, "lr must be a positive finite number below 10, got 10000.0"),
        ({"lr": True}, "lr must be a positive finite number below 10, got True"),
        ({"betas": [0.9]}, r"betas must be two numbers in \[0, 1\), got \[0.9\]"),
        ({"betas": [0.9, 1.5]}, "betas must be two numbers"),
        ({"clip_value": -1}, "clip_value must be null .* got -1"),
        ({"clip_norm": -1}, "clip_norm must be null .* got -1"),
        ({"min_lr_ratio": -1}, r"min_lr_ratio must be a number in \[0, 1\], got -1"),
        ({"eps": 0}, "eps must be a positive"),
        ({"weight_decay": -0.1}, "weight_decay must be a finite number >= 0"),
        ({"warmup": -1}, "warmup must be an int >= 0, got -1"),
        ({"steps": "10"}, "steps must be an int >= 1, got '10'"),
        ({"val_every": 1}, "val_every must be an int >= 2"),
        ({"corpus_chars": 0}, "corpus_chars must be an int >= 1"),
        ({"bf16": "true"}, "bf16 must be true or false"),
        ({"overwrite": 1}, "overwrite must be true or false"),
        ({"device": "gpu"}, "device must be 'auto' or a torch device"),
        ({"dag": [0.1, -1, 0]}, "dag must be three non-negative"),
        ({"log_every": 0}, "log_every must be an int >= 1"),
        ({"probe_every": 0}, "probe_every must be an int >= 1, got 0"),
        ({"probe_every": 2.5}, "probe_every must be an int >= 1, got 2.5"),
        ({"probe_blocks": 1}, "probe_blocks must be an int >= 2, got 1"),
        ({"probe_blocks": True}, "probe_blocks must be an int >= 2, got True"),
        (
            {"architecture": "gpt", "probe_every": 2},
            "probe_every needs architecture 'pldrllm': a 'gpt' model has no G_LM",
        ),
        # each of these used to pass, then fail after the tokenizer was trained and out_dir made
        # (device meta: "unsupported scalarType"; a missing corpus file), or be silently ignored
        # (dag on a GPT) or never reach its peak rate (warm-up longer than the run)
        ({"device": "meta"}, r"device 'meta' cannot train a model \('meta' tensors hold no"),
        ({"device": "xla"}, r"device 'xla' cannot train a model \(not supported here\)"),
        (
            {"corpus": "no/such/corpus.txt"},
            r"corpus must be 'pydoc', 'stdlib', 'hf:NAME\[:SPLIT\[:COLUMN\]\]' or the path of a "
            r"text file, got 'no/such/corpus.txt': no file at /.*no/such/corpus\.txt",
        ),
        (
            {"architecture": "gpt", "dag": [0, 0, 0.1]},
            r"dag needs architecture 'pldrllm': a 'gpt' model has no A_LM, A_P or G_LM to "
            r"regularise, so dag=\[0, 0, 0.1\] would be ignored; set dag to \[0, 0, 0\]",
        ),
        (
            {"warmup": 7},
            "warmup must be at most steps, got warmup=7, steps=6: the learning rate would never "
            "reach its peak 0.001; shorten the warm-up",
        ),
    ],
)
def test_bad_config_fields_are_refused_before_any_work(tmp_path, monkeypatch, changes, match):
    """Each bad field fails when the config is read (naming the field, the value and what is
    allowed), not after tokenizer training or as an exploding loss."""
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**TINY, "out_dir": str(tmp_path / "run"), **changes}))
    with pytest.raises(ValueError, match=match):
        PretrainConfig.from_file(path)
    assert not (tmp_path / "run").exists()


def test_config_file_errors_name_the_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"c\.json is not valid JSON"):
        PretrainConfig.from_file(path)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        PretrainConfig.from_file(path)
    path.write_text(json.dumps({**TINY, "stpes": 5}))
    with pytest.raises(ValueError, match=r"'stpes' \(did you mean 'steps'\?\)"):
        PretrainConfig.from_file(path)
    # a folder used to raise IsADirectoryError; bytes that are not UTF-8 a message without the
    # file's name
    with pytest.raises(ValueError, match=f"^{tmp_path} is not a file: expected a JSON file"):
        PretrainConfig.from_file(tmp_path)
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(
        ValueError, match=r"c\.json is not UTF-8 text: byte 0xff at offset 0 \(invalid start byte"
    ):
        PretrainConfig.from_file(path)
    with pytest.raises(FileNotFoundError, match=r"^no config file at .*nothere\.json$"):
        PretrainConfig.from_file(tmp_path / "nothere.json")
    for gpt_without_dag in ({"architecture": "gpt"}, {"architecture": "gpt", "dag": [0, 0, 0]}):
        assert PretrainConfig(**{**TINY, **gpt_without_dag}).dag == (0, 0, 0)
    assert PretrainConfig(**{**TINY, "warmup": 6}).warmup == 6  # the peak at the last step
    assert PretrainConfig(**{**TINY, "device": "cpu:1"}).device == "cpu:1"


def test_command_line_reports_a_bad_config_without_a_traceback(tmp_path, capsys):
    """A misspelt key or a bad override exits 1 with one line saying why."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**TINY, "stpes": 5, "out_dir": str(tmp_path / "run")}))
    with pytest.raises(SystemExit) as exit_info:
        T.main(["--config", str(path)])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "error:" in err and "'stpes' (did you mean 'steps'?)" in err and "Traceback" not in err
    path.write_text(json.dumps({**TINY, "out_dir": str(tmp_path / "run")}))
    with pytest.raises(SystemExit) as exit_info:
        T.main(["--config", str(path), "--steps", "-3"])
    assert exit_info.value.code == 1 and "steps" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing was started


@pytest.mark.slow
def test_help_lists_every_config_field():
    out = subprocess.run(
        [sys.executable, "-m", "kvattn.pretrain", "--help"],
        capture_output=True,
        text=True,
        timeout=600,  # a hang limit, not a speed check
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for f in fields(PretrainConfig):
        assert f"  {f.name} ({f.type}, default " in out.stdout, f.name
        assert f.metadata["help"] in out.stdout
    assert "--overwrite" in out.stdout and "--resume" in out.stdout


# ---------------------------------------------------------------------------------------------
# Nothing is lost: existing runs, resumes, output folder, interrupted checkpoints


@pytest.mark.slow
def test_an_existing_run_is_refused_unless_resumed_or_overwritten(tmp_path, monkeypatch):
    pretrain(config(tmp_path, steps=3), progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    before = (ckpt / "model.safetensors").read_bytes()
    original = RUN.tokenize
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))
    with pytest.raises(FileExistsError, match="already holds a run; resume it"):
        pretrain(config(tmp_path, steps=3, seed=4), progress=False)
    assert (ckpt / "model.safetensors").read_bytes() == before
    with pytest.raises(ValueError, match="resume and overwrite exclude each other"):
        pretrain(config(tmp_path, overwrite=True), resume=True, progress=False)
    monkeypatch.setattr(RUN, "tokenize", original)
    replaced = pretrain(config(tmp_path, steps=3, seed=4, overwrite=True), progress=False)
    assert (ckpt / "model.safetensors").read_bytes() != before
    assert torch.equal(
        load_pretrained(ckpt).decoder.embedding.weight, replaced.model.decoder.embedding.weight
    )


@pytest.mark.slow
def test_command_line_overwrite_flag(tmp_path, capsys):
    """An existing run is refused with one line, exit status 1 and no traceback (it used to be a
    FileExistsError traceback), and replaced with --overwrite."""
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({**TINY, "steps": 2, "out_dir": str(tmp_path / "run")}))
    assert T.main(["--config", str(cfg_file)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        T.main(["--config", str(cfg_file), "--steps", "3"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and "Traceback" not in err
    assert err.endswith(
        "already holds a run; resume it (--resume), replace it (--overwrite, "
        "or overwrite: true in the config) or choose another out_dir\n"
    )
    assert err.startswith("python -m kvattn.pretrain: error: ")
    assert T.main(["--config", str(cfg_file), "--steps", "3", "--overwrite"]) == 0
    state = json.loads((tmp_path / "run" / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == 3 and state["config"]["overwrite"] is True
    with pytest.raises(SystemExit):
        T.main(["--config", str(cfg_file), "--resume", "--overwrite"])
    with pytest.raises(SystemExit):  # a bad override is refused with its reason, before any work
        T.main(["--config", str(cfg_file), "--steps", "0", "--overwrite"])
    assert "steps must be an int >= 1, got 0" in capsys.readouterr().err


def test_resume_without_a_checkpoint_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))
    with pytest.raises(FileNotFoundError, match="no checkpoint to resume"):
        pretrain(config(tmp_path), resume=True, progress=False)


def test_resume_with_a_changed_run_is_refused_and_names_the_fields(tmp_path, monkeypatch):
    pretrain(config(tmp_path, steps=3), progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    tokenizer = (ckpt / "tokenizer.model").read_bytes()
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))
    changed_model = {**TINY["model"], "num_hidden_layers": 3}
    with pytest.raises(ValueError, match=r"differs in model: checkpoint .*'num_hidden_layers': 2"):
        pretrain(config(tmp_path, model=changed_model), resume=True, progress=False)
    with pytest.raises(
        ValueError, match=r"corpus: checkpoint 'pydoc', now 'stdlib'; vocab_size: checkpoint 400"
    ):
        pretrain(config(tmp_path, corpus="stdlib", vocab_size=300), resume=True, progress=False)
    with pytest.raises(ValueError, match="it has done 3 steps, more than steps=2"):
        pretrain(config(tmp_path, steps=2), resume=True, progress=False)
    assert (ckpt / "tokenizer.model").read_bytes() == tokenizer
    assert json.loads((ckpt / "trainer_state.json").read_text())["step"] == 3


def test_unwritable_out_dir_fails_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="is not a writable folder"):
        pretrain(PretrainConfig(**{**TINY, "out_dir": str(blocker / "run")}), progress=False)


@pytest.mark.slow
def test_a_kill_between_the_checkpoint_moves_loses_nothing(tmp_path, monkeypatch):
    """Kill the run after the old checkpoint was moved aside and before the new one was moved in
    (the old code deleted the old one first, so a kill there lost the run); the next start
    recovers the complete new checkpoint and the resumed run matches the uninterrupted one."""
    full = pretrain(config(tmp_path / "a"), progress=False)
    original_rename = Path.rename

    def killed_rename(self, target):
        if self.name == "checkpoint.kvattn-staging" and Path(target).name == "checkpoint":
            if (Path(target).parent / "checkpoint.kvattn-replaced").exists():
                raise KeyboardInterrupt
        return original_rename(self, target)

    monkeypatch.setattr(Path, "rename", killed_rename)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(tmp_path / "b"), progress=False)  # the second checkpoint, at step 6
    monkeypatch.undo()
    run = tmp_path / "b" / "run"
    assert sorted(p.name for p in run.iterdir()) == [
        "checkpoint.kvattn-replaced",
        "checkpoint.kvattn-staging",
    ]
    resumed = pretrain(config(tmp_path / "b"), resume=True, progress=False)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint"]
    assert json.loads((run / "checkpoint" / "trainer_state.json").read_text())["step"] == 6
    assert resumed.history.loss == full.history.loss


def test_non_finite_parameters_are_never_checkpointed(tmp_path, monkeypatch):
    """A finite loss with a NaN gradient (sqrt at 0) makes the parameters NaN; the checkpoint
    after that step is refused, naming the step and the first non-finite parameter, and the last
    good checkpoint stays."""
    original = RUN.lm_cross_entropy
    calls = {"n": 0}

    def nan_gradient(logits, *args, **kwargs):
        calls["n"] += 1
        loss = original(logits, *args, **kwargs)
        if calls["n"] == 3 + 4 + 3:  # step 5, the last before the checkpoint at 6
            loss = loss + torch.sqrt(0.0 * logits.sum())
        return loss

    monkeypatch.setattr(RUN, "lm_cross_entropy", nan_gradient)
    with pytest.raises(
        FloatingPointError, match=r"non-finite parameter decoder\.\S+ after 6 steps \(step 5\)"
    ):
        pretrain(config(tmp_path), progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    assert json.loads((ckpt / "trainer_state.json").read_text())["step"] == 3
    model = load_pretrained(ckpt)
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.slow
def test_fused_adamw_follows_the_foreach_run_and_resumes_a_foreach_checkpoint(
    tmp_path, monkeypatch
):
    """``fused_adamw=True`` trains the same model to rounding (see
    test_compiled_training_follows_the_plain_run... for why 1e-3) with the fused kernel, and a
    run checkpointed with foreach resumes with it, its AdamW state carried over."""

    def saved_groups(run: Path) -> list[dict]:
        state = json.loads((run / "run" / "checkpoint" / "trainer_state.json").read_text())
        return state["param_groups"]

    plain = pretrain(config(tmp_path / "a"), progress=False)
    fused = pretrain(config(tmp_path / "b", fused_adamw=True), progress=False)
    assert fused.history.loss == pytest.approx(plain.history.loss, rel=1e-3)
    assert all(g["fused"] and not g["foreach"] for g in saved_groups(tmp_path / "b"))
    assert all(g["foreach"] and not g["fused"] for g in saved_groups(tmp_path / "a"))
    _interrupt_after_the_step_3_checkpoint(tmp_path / "c", monkeypatch)
    resumed = pretrain(config(tmp_path / "c", fused_adamw=True), resume=True, progress=False)
    assert resumed.history.loss[:3] == plain.history.loss[:3]
    assert resumed.history.loss == pytest.approx(plain.history.loss, rel=1e-3)
    assert all(g["fused"] for g in saved_groups(tmp_path / "c"))
    # the step counters went on from the checkpoint's 3 (a fresh optimiser would end at 3)
    _, state, _ = RESUME._load_training_state(tmp_path / "c" / "run" / "checkpoint")
    assert {float(s["step"]) for s in state["state"].values()} == {6.0}
    with pytest.raises(ValueError, match="fused_adamw must be true or false"):
        config(tmp_path, fused_adamw=1)


def test_resumed_optimizer_state_keeps_step_counters_on_the_cpu(tmp_path):
    """Optimizer state is read on the CPU whatever the device: load_state_dict moves the moments
    to the parameters' device and leaves the step counters on the CPU, as PyTorch expects."""
    pretrain(config(tmp_path, steps=3), progress=False)
    step, state, history = RESUME._load_training_state(tmp_path / "run" / "checkpoint")
    assert step == 3 and history.steps == [0, 1, 2]
    steps = [s["step"] for s in state["state"].values()]
    assert steps and all(t.device.type == "cpu" and t.ndim == 0 and float(t) == 3 for t in steps)
    moments = [s["exp_avg"] for s in state["state"].values()]
    assert all(t.device.type == "cpu" for t in moments)


@pytest.mark.parametrize(
    ("requested", "local_rank", "world", "cuda", "expected"),
    [
        ("auto", 1, 2, True, "cuda:1"),
        ("auto", 1, 2, False, "cpu"),
        ("cuda", 1, 2, True, "cuda:1"),  # not every rank on cuda:0
        ("cuda", 0, 1, True, "cuda:0"),
        ("cuda:1", 0, 1, True, "cuda:1"),
        ("cpu", 1, 2, True, "cpu"),
    ],
)
def test_each_process_picks_its_own_device(requested, local_rank, world, cuda, expected):
    assert DIST.select_device(requested, local_rank, world, cuda) == torch.device(expected)


def test_device_choices_that_cannot_work_are_refused(monkeypatch):
    with pytest.raises(ValueError, match="CUDA is not available"):
        DIST.select_device("cuda", 0, 1, False)
    with pytest.raises(ValueError, match="names one GPU for all 2 processes"):
        DIST.select_device("cuda:0", 1, 2, True)
    # 'meta' used to be taken as given, and the run failed after the tokenizer was trained
    with pytest.raises(ValueError, match=r"device 'meta' cannot train a model \('meta' tensors"):
        DIST.select_device("meta", 0, 1, True)
    with pytest.raises(ValueError, match=r"device must be 'auto' or a torch device .* got 'gpu'"):
        DIST.select_device("gpu", 0, 1, True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device 'mps' was requested but MPS is not available"):
        DIST.select_device("mps", 0, 1, False)


@pytest.mark.slow
def test_compiled_training_follows_the_plain_run_and_saves_a_plain_checkpoint(tmp_path, caplog):
    """``compile=True`` trains the same model: the losses agree with the plain run's to float
    rounding (compiled kernels fuse and reorder sums), the checkpoint has the plain names, and
    compiling splits no graph (dynamo logs a warning for every graph break)."""
    steps = dict(steps=3, eval_every=3, checkpoint_every=3)
    plain = pretrain(config(tmp_path / "a", **steps), progress=False)
    with caplog.at_level(logging.WARNING):
        compiled = pretrain(config(tmp_path / "b", compile=True, **steps), progress=False)
    assert not [r for r in caplog.records if "graph break" in r.getMessage().lower()]
    assert compiled.history.steps == plain.history.steps
    # AdamW's first steps divide each gradient by its own size, which turns rounding-level
    # differences of near-zero gradients into steps of up to 2 lr: agreement to 1e-3, not 1e-6.
    assert compiled.history.loss == pytest.approx(plain.history.loss, rel=1e-3)
    assert compiled.history.evals == pytest.approx(plain.history.evals, rel=1e-3)
    names = load_file(tmp_path / "b" / "run" / "checkpoint" / "model.safetensors")
    assert (
        names.keys()
        == load_file(tmp_path / "a" / "run" / "checkpoint" / "model.safetensors").keys()
    )
    assert compiled.model.__class__.__name__ == "PLDRLLM"
    with pytest.raises(ValueError, match="compile must be true or false"):
        config(tmp_path, compile="yes")


# Collapse measures recorded during training (issue 10)


@pytest.mark.slow
def test_probes_observe_the_run_without_changing_it(tmp_path):
    """With probe_every the losses, evaluations, final weights and the global random stream are
    those of the same run without it; the trajectories start before the first step, follow
    probe_every, end after the last step and are saved with the checkpoint."""
    plain = pretrain(config(tmp_path / "a"), progress=False)
    rng_plain = torch.get_rng_state()
    probed = pretrain(config(tmp_path / "b", probe_every=4), progress=False)
    assert torch.equal(torch.get_rng_state(), rng_plain)
    assert probed.history.loss == plain.history.loss
    assert probed.history.evals == plain.history.evals
    for (name, p), q in zip(
        plain.model.state_dict().items(), probed.model.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    assert (
        plain.probes is None
        and not (tmp_path / "a" / "run" / "checkpoint" / "probes.json").exists()
    )
    probes = probed.probes
    assert probes["step"] == [0, 4, 6] and probes["probe_blocks"] == 4
    for name in ("G_order_mean", "G_order_rms", "G_spread", "A_sigma_ratio", "A_row_spread"):
        assert len(probes[name]) == 3 and all(len(v) == 2 for v in probes[name])  # 2 layers
        assert all(len(h) == 2 for v in probes[f"{name}_heads"] for h in v)  # 2 heads
        assert all(0 < x < 100 for v in probes[name] for x in v), name
    assert probes["G_order_rms"][0] != probes["G_order_rms"][-1]  # the model moved
    assert all(0 < a <= 1 for a in probes["agreement"])
    assert D.load_probes(tmp_path / "b" / "run") == probes
    from kvattn.course.plots import collapse_trajectories

    assert len(collapse_trajectories(probes).data) == 5 * 2 + 3
    # what was measured is collapse_measures on the first probe_blocks validation blocks
    from kvattn.data import blocks, load_text, tokenize
    from kvattn.diagnostics import collapse_measures

    cfg = config(tmp_path / "b")
    data = tokenize(load_text(cfg.corpus), vocab_size=cfg.vocab_size, val_every=cfg.val_every)
    val = blocks(data.val, cfg.block_size)
    again = collapse_measures(probed.model, [b[None, :-1] for b in val[:4]], val[4:8])
    assert again.as_record()["G_order_mean"] == probes["G_order_mean"][-1]
    assert again.as_record()["delta_loss"] == probes["delta_loss"][-1]


@pytest.mark.slow
def test_resume_continues_the_probe_trajectories(tmp_path, monkeypatch):
    """Interrupted after the step-3 checkpoint (at the step-4 probe) and resumed, a run's
    trajectories equal the uninterrupted run's, in memory and in probes.json; a resume that
    changes the probes is refused."""
    import kvattn.diagnostics as D
    import kvattn.pretrain.run as P

    full = pretrain(config(tmp_path / "a", probe_every=2), progress=False)
    original = P.collapse_measures
    calls = {"n": 0}

    def interrupting(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # steps 0 and 2 are measured, then the checkpoint at 3, then step 4
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(P, "collapse_measures", interrupting)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(tmp_path / "b", probe_every=2), progress=False)
    monkeypatch.setattr(P, "collapse_measures", original)
    assert D.load_probes(tmp_path / "b" / "run")["step"] == [0, 2]
    with pytest.raises(ValueError, match="measured with probe_blocks=4, now 3"):
        pretrain(config(tmp_path / "b", probe_every=2, probe_blocks=3), resume=True, progress=False)
    resumed = pretrain(config(tmp_path / "b", probe_every=2), resume=True, progress=False)
    assert resumed.history.loss == full.history.loss
    assert resumed.probes == full.probes and resumed.probes["step"] == [0, 2, 4, 6]
    assert D.load_probes(tmp_path / "b" / "run") == D.load_probes(tmp_path / "a" / "run")


@pytest.mark.slow
def test_probes_need_enough_validation_blocks_and_a_readable_file(tmp_path, monkeypatch):
    """Probes the validation text cannot hold are refused before the tokenizer is trained when
    a bound on the token count decides it, else by the exact count after it; either way before
    out_dir is made (it used to be made first, and the refusal to come only after the
    tokenizer)."""
    original = RUN.tokenize
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))
    with pytest.raises(
        ValueError, match=r"probe_blocks=100000 needs 200000 validation blocks .* gives at most"
    ):
        pretrain(config(tmp_path, probe_every=2, probe_blocks=100_000), progress=False)
    monkeypatch.setattr(RUN, "tokenize", original)
    cfg = config(tmp_path, probe_every=2)
    text = load_text(cfg.corpus)
    data = original(text, vocab_size=cfg.vocab_size, val_every=cfg.val_every)
    n_val = len(blocks(data.val, cfg.block_size))
    RUN._check_probe_room(text, replace(cfg, probe_blocks=n_val // 2))  # the bound is no tighter
    RUN._check_probe_room(text, replace(cfg, probe_blocks=n_val // 2 + 1))  # undecided by it
    with pytest.raises(
        ValueError, match=rf"needs {2 * (n_val // 2 + 1)} .* the corpus gives {n_val}:"
    ):
        pretrain(replace(cfg, probe_blocks=n_val // 2 + 1), progress=False)
    assert not (tmp_path / "run").exists()
    with pytest.raises(FileNotFoundError, match=r"no probes\.json"):
        D.load_probes(tmp_path)
    (tmp_path / "probes.json").write_text(json.dumps({"step": [0], "G_order_mean": [[1.0]]}))
    with pytest.raises(ValueError, match="lacks the measures"):
        D.load_probes(tmp_path)


def test_a_vocabulary_too_small_for_the_tokenizer_is_refused_before_any_work(tmp_path):
    """The tokenizer needs 300 pieces (4 special, 256 bytes, some pieces); a smaller vocabulary
    used to pass the config and fail only when the tokenizer trained, after out_dir was made."""
    with pytest.raises(ValueError, match=r"vocab_size must be an int >= 300, got 299"):
        config(tmp_path, vocab_size=299)
    assert not (tmp_path / "run").exists()


def test_the_probe_bound_never_undercounts_the_tokens():
    """_check_probe_room refuses only what no tokenizer could tokenize into enough blocks: on
    text full of characters NFKC lengthens (ﷺ becomes 18 letters), whitespace, control
    characters, and the whole Basic Multilingual Plane, the bound is never below the true count
    of a small tokenizer (byte fallback everywhere)."""
    from kvattn.data import encode_documents, train_tokenizer

    text = load_text("pydoc", max_chars=120_000)
    tokenizer = train_tokenizer(text, 400)
    chars = [chr(i) for i in range(1, 0x10000) if not 0xD800 <= i < 0xE000]
    docs = ["".join(chars[i : i + 2000]) for i in range(0, len(chars), 2000)]
    docs += [
        "\ufdfa" * 50,
        "\u3000 \t\r x\x0b" * 20,
        "\x00\x01\x7f" * 9,
        "\ufb03" * 30,
        text[:5000],
    ]
    for doc in docs:
        cfg = replace(config(Path("/unused")), block_size=1, val_every=2, probe_every=1)
        ids = len(encode_documents(tokenizer, [doc]))
        assert ids >= 8  # room for probe_blocks = 2: four blocks of two ids
        # one held-out document: cfg sees ["x", doc] and holds out the second
        RUN._check_probe_room("x\n\n" + doc, replace(cfg, probe_blocks=ids // 4))
        with pytest.raises(ValueError, match="gives at most"):
            RUN._check_probe_room("x\n\n" + doc, replace(cfg, probe_blocks=10 * ids))


# ---------------------------------------------------------------------------------------------
# A resume finds a damaged checkpoint or a changed corpus before any work


def _tokenizer_must_not_train(monkeypatch) -> None:
    monkeypatch.setattr(RUN, "tokenize", lambda *a, **k: pytest.fail("tokenizer trained"))


def test_a_damaged_checkpoint_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """A corrupt trainer_state.json used to give a bare JSONDecodeError traceback, one without
    'config' a KeyError, a corrupt optimizer.safetensors a raw SafetensorError after the
    tokenizer was retrained. Each is refused before any work, naming the file; the command says
    so in one line."""
    pretrain(config(tmp_path, steps=3), progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    saved = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    state = json.loads(saved["trainer_state.json"])
    _tokenizer_must_not_train(monkeypatch)
    damages = [
        ("trainer_state.json", b"{not json", "its trainer_state.json is damaged: not valid JSON"),
        ("trainer_state.json", b"[1, 2]", "its trainer_state.json is damaged: it holds no JSON"),
        (
            "trainer_state.json",
            json.dumps({"step": 2}).encode(),
            "its trainer_state.json is damaged or was not written by kvattn.pretrain: no "
            "'param_groups'; no 'scalars'; no 'history'; no 'config'",
        ),
        (
            "trainer_state.json",
            json.dumps({**state, "step": "3"}).encode(),
            "not written by kvattn.pretrain: 'step' is a str",
        ),
        (
            "trainer_state.json",
            json.dumps({**state, "history": {"lost": []}}).encode(),
            r"not written by kvattn.pretrain: step 3, history keys \['lost'\]",
        ),
        (
            "optimizer.safetensors",
            b"garbage",
            "optimizer.safetensors is truncated or corrupted: Error while deserializing header",
        ),
        (
            "optimizer.safetensors",
            saved["optimizer.safetensors"][:-8],
            "optimizer.safetensors is truncated or corrupted",
        ),
        ("model.safetensors", b"", "model.safetensors is truncated or corrupted"),
        ("tokenizer.model", None, "it lacks tokenizer.model; the checkpoint is incomplete"),
    ]
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({**TINY, "steps": 6, "out_dir": str(tmp_path / "run")}))
    for name, damaged, message in damages:
        if damaged is None:
            (ckpt / name).unlink()
        else:
            (ckpt / name).write_bytes(damaged)
        with pytest.raises(ValueError, match=message):
            pretrain(config(tmp_path), resume=True, progress=False)
        with pytest.raises(SystemExit) as exit_info:
            T.main(["--config", str(cfg_file), "--resume"])
        err = capsys.readouterr().err
        assert exit_info.value.code == 1 and "Traceback" not in err and str(ckpt) in err
        (ckpt / name).write_bytes(saved[name])
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == saved


def test_a_resume_on_a_changed_corpus_is_refused_before_the_tokenizer(tmp_path, monkeypatch):
    """A corpus file changed under a run used to be found after the tokenizer was trained again,
    and blamed on "another sentencepiece version?". The checkpoint records the text's SHA-256,
    and a resume compares it first; a checkpoint made before the record falls back on the
    tokenizer, whose message now names the corpus."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(load_text("pydoc", max_chars=150_000))
    cfg = config(tmp_path, corpus=str(corpus), steps=3)
    pretrain(cfg, progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    state = json.loads((ckpt / "trainer_state.json").read_text())
    assert state["corpus_sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()
    corpus.write_text(corpus.read_text().replace("the", "teh"))
    original = RUN.tokenize
    _tokenizer_must_not_train(monkeypatch)
    with pytest.raises(
        ValueError,
        match=rf"the corpus '{corpus}' is not the text the run was trained on \(its SHA-256",
    ):
        pretrain(replace(cfg, steps=6), resume=True, progress=False)
    del state["corpus_sha256"]
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    monkeypatch.setattr(RUN, "tokenize", original)
    with pytest.raises(
        ValueError, match=r"differs from the checkpoint's tokenizer.model: the corpus"
    ):
        pretrain(replace(cfg, steps=6), resume=True, progress=False)


def test_a_symlinked_checkpoint_folder_is_updated_through_its_link(tmp_path):
    """pretrain swaps out_dir/checkpoint whole; when that folder is a symbolic link, the swap
    renamed the link (its target kept the old weights, a *.kvattn-replaced link was left)."""
    elsewhere = tmp_path / "disk" / "ckpt"
    elsewhere.mkdir(parents=True)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoint").symlink_to(elsewhere, target_is_directory=True)
    pretrain(config(tmp_path, overwrite=True), progress=False)
    link = tmp_path / "run" / "checkpoint"
    assert link.is_symlink() and link.resolve() == elsewhere.resolve()
    assert (elsewhere / "model.safetensors").is_file()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint"]
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["ckpt"]
