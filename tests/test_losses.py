"""The training losses (kvattn.losses): what they refuse, and that refusing changes no value.

The identities of the DAG regulariser are checked in test_diagnostics.py, next to the NOTEARS
function it shares its computation with."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kvattn import losses


def _logits_targets(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, 5, generator=gen), torch.randint(1, 5, (2, 3), generator=gen)


def test_lm_cross_entropy_is_the_masked_mean_for_good_input():
    """The checks change no value: bit for bit the cross-entropy over the non-pad targets, for
    int64 and int32 targets and an integer pad_id of any kind."""
    logits, targets = _logits_targets()
    targets[0, 1] = 0
    kept = targets != 0
    expected = F.cross_entropy(logits[kept], targets[kept])
    assert torch.equal(losses.lm_cross_entropy(logits, targets), expected)
    assert torch.equal(losses.lm_cross_entropy(logits, targets.int()), expected)
    assert torch.equal(losses.lm_cross_entropy(logits, targets, np.int64(0)), expected)
    targets[1, 2] = 3
    kept = targets != 3
    assert torch.equal(
        losses.lm_cross_entropy(logits, targets, pad_id=3),
        F.cross_entropy(logits[kept], targets[kept]),
    )


def test_lm_cross_entropy_refuses_float_targets():
    """Audit T30: float targets 1.7 were truncated to 1 by .long() and gave a loss."""
    logits, targets = _logits_targets()
    with pytest.raises(
        TypeError,
        match=r"^targets must be an int64 \(or int32\) tensor of token ids, got "
        r"torch\.float32$",
    ):
        losses.lm_cross_entropy(logits, targets.float() + 0.7)
    with pytest.raises(TypeError, match=r"targets must be .* got list$"):
        losses.lm_cross_entropy(logits, targets.tolist())
    with pytest.raises(
        TypeError, match=r"^logits must be a floating-point tensor, got torch\.int64"
    ):
        losses.lm_cross_entropy(targets[..., None].expand(2, 3, 5), targets)


def test_lm_cross_entropy_refuses_shapes_that_do_not_fit():
    """Audit T31, T32: targets [2, 4] for logits [2, 3, 5] and 2-D logits failed inside
    F.cross_entropy with messages about flattened batch sizes (6 vs 8, 'For 1D input')."""
    logits, targets = _logits_targets()
    with pytest.raises(
        ValueError,
        match=r"^logits must have shape \[B, S, V\] and targets \[B, S\] \(B, S, V >= 1\), got "
        r"logits \(2, 3, 5\) and targets \(2, 4\)$",
    ):
        losses.lm_cross_entropy(logits, torch.randint(1, 5, (2, 4)))
    with pytest.raises(ValueError, match=r"got logits \(6, 5\) and targets \(6,\)$"):
        losses.lm_cross_entropy(logits.view(6, 5), targets.view(6))
    with pytest.raises(ValueError, match=r"got logits \(0, 3, 5\) and targets \(0, 3\)$"):
        losses.lm_cross_entropy(logits[:0], targets[:0])


def test_lm_cross_entropy_refuses_a_pad_id_that_is_not_an_int():
    """Audit T33: pad_id=True failed in torch naming 'ignore_index', not pad_id."""
    logits, targets = _logits_targets()
    for bad in (True, 0.0, "0"):
        with pytest.raises(TypeError, match=rf"^pad_id must be an int, got {type(bad).__name__}$"):
            losses.lm_cross_entropy(logits, targets, pad_id=bad)


def test_lm_cross_entropy_refuses_targets_that_are_all_padding():
    """Audit T35: every target = pad gave nan (a mean over no target); g_substitution and
    collapse_measures already refused it, the loss did not."""
    logits, _ = _logits_targets()
    with pytest.raises(ValueError, match=r"^every target is pad_id = 0: no loss to average$"):
        losses.lm_cross_entropy(logits, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"every target is pad_id = 4"):
        losses.lm_cross_entropy(logits, torch.full((2, 3), 4), pad_id=4)
    one = torch.zeros(2, 3, dtype=torch.long)
    one[1, 2] = 2  # one real target is enough
    assert torch.equal(
        losses.lm_cross_entropy(logits, one), F.cross_entropy(logits[1, 2:], one[1, 2:])
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dag_losses_refuse_half_precision(dtype):
    """Audit D100, D101: dag_loss of a bfloat16 or float16 matrix returned nan or inf (matrix_exp
    in half precision), with no error; float32 and float64 give the same finite value."""
    M = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    expected = losses.dag_loss(M.double())
    assert torch.isfinite(expected)
    torch.testing.assert_close(losses.dag_loss(M), expected.float())
    for f in (losses.dag_loss, losses.log_trace_expm_squared):
        with pytest.raises(
            TypeError,
            match=rf"^M must be float32 or float64 \(matrix_exp is not accurate in half "
            rf"precision: pass M\.float\(\)\), got {dtype}$",
        ):
            f(M.to(dtype))


def test_a_training_step_can_skip_the_check_that_reads_the_targets():
    """check_targets=False: the same loss with targets, and no host synchronisation to read them
    (a packed training batch always has targets; all padding then gives nan, which stops a run)."""
    logits = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([[1, 2, 0], [4, 0, 6]])
    assert torch.equal(
        losses.lm_cross_entropy(logits, targets, check_targets=False),
        losses.lm_cross_entropy(logits, targets),
    )
    assert losses.lm_cross_entropy(logits, torch.zeros_like(targets), check_targets=False).isnan()


def test_lm_cross_entropy_refuses_a_pad_id_beyond_int64():
    """Audit NL01: pad_id=2**70 passed the int check and failed in torch with 'int too big to
    convert', not naming pad_id. Ids are int64: a pad_id outside it is refused by name; the
    int64 bounds themselves still work."""
    logits, targets = _logits_targets()
    for bad in (2**70, 2**63, -(2**63) - 1):
        with pytest.raises(ValueError, match=rf"^pad_id must be an int64 id .*, got {bad}$"):
            losses.lm_cross_entropy(logits, targets, pad_id=bad)
    expected = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    for edge in (2**63 - 1, -(2**63)):
        assert torch.equal(losses.lm_cross_entropy(logits, targets, pad_id=edge), expected)


def test_lm_cross_entropy_takes_check_targets_as_a_bool_only():
    """Audit NL02: check_targets='no' was taken as True (any truthy value), 0 as False."""
    logits = torch.randn(2, 3, 5)
    for bad in ("no", 0, 1, None):
        with pytest.raises(
            TypeError, match=rf"^check_targets must be a bool, got {type(bad).__name__}$"
        ):
            losses.lm_cross_entropy(logits, torch.zeros(2, 3, dtype=torch.long), check_targets=bad)


def test_lm_cross_entropy_names_meta_targets_when_it_must_read_them():
    """Audit NL04: meta tensors failed in torch's internals ('Tensor.item() cannot be called on
    meta tensors'). The check that reads the targets refuses them by name; without it, the loss
    is computed on shapes as torch does (a meta scalar)."""
    logits, targets = _logits_targets()
    with pytest.raises(ValueError, match=r"^targets are on the meta device, which holds no values"):
        losses.lm_cross_entropy(logits.to("meta"), targets.to("meta"))
    loss = losses.lm_cross_entropy(logits.to("meta"), targets.to("meta"), check_targets=False)
    assert loss.device.type == "meta" and loss.shape == ()
