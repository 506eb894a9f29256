"""Where a pre-training process runs: its device, and PyTorch DDP when launched by ``torchrun``.

DDP is on when the launcher's variables (:data:`DDP_VARIABLES`) say so; every set-up error names
the variables that turned it on. The rendezvous waits at most :data:`DDP_TIMEOUT_S` seconds
(``KVATTN_DDP_TIMEOUT_S``), so a process whose peers never come fails instead of hanging.
"""

from __future__ import annotations

import datetime
import math
import os

import torch
import torch.distributed as dist


def select_device(
    requested: str, local_rank: int, world: int, cuda_available: bool
) -> torch.device:
    """The device of the process with ``local_rank`` (of ``world`` processes) for the config's
    ``device``: ``"auto"`` is ``cuda:<local_rank>`` when CUDA is available, else the CPU;
    ``"cuda"`` is ``cuda:<local_rank>`` (one GPU per process, as DDP's
    ``device_ids=[local_rank]`` expects); anything else is taken as given.

    Raises
    ------
    ValueError
        CUDA requested but not available, or a fixed CUDA index such as ``"cuda:1"`` with more
        than one process (every process would share one GPU).
    """
    if requested == "auto":
        return torch.device(f"cuda:{local_rank}" if cuda_available else "cpu")
    device = torch.device(requested)
    if device.type == "cuda":
        if not cuda_available:
            raise ValueError(f"device {requested!r} was requested but CUDA is not available")
        if device.index is None:
            return torch.device(f"cuda:{local_rank}")
        if world > 1:
            raise ValueError(
                f"device {requested!r} names one GPU for all {world} processes; use 'cuda' or "
                "'auto' (each process takes cuda:LOCAL_RANK)"
            )
    return device


#: The environment variables that turn DDP on (``WORLD_SIZE`` > 1) and place this process in it;
#: ``torchrun`` sets them all. Every error of the DDP set-up lists them with their values.
DDP_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


#: Seconds the DDP processes wait for each other, at the rendezvous and in every collective,
#: before they fail instead of hanging: a hang limit, generous for a busy machine (NCCL's own
#: default; gloo's is 30 minutes). The environment variable ``KVATTN_DDP_TIMEOUT_S`` overrides it.
DDP_TIMEOUT_S = 600.0


def _ddp_error(problem: str) -> str:
    """``problem``, then the variables that turned DDP on, as the environment has them: DDP starts
    from the environment alone, so a stray ``WORLD_SIZE`` is otherwise hard to spot."""
    values = ", ".join(
        f"{name}={os.environ[name]!r}" if name in os.environ else f"{name} unset"
        for name in DDP_VARIABLES
    )
    return (
        f"{problem}. DDP is on because the environment sets WORLD_SIZE ({values}); launch with "
        "torchrun, which sets them all, or unset WORLD_SIZE to train in one process"
    )


def _env_number(name: str, default: str, kind: type, low: float, ddp: bool = True) -> float:
    """The environment variable ``name`` (``default`` when unset) as an int >= ``low``, or a
    finite float > ``low``; the error names DDP's variables if ``ddp``."""
    text = os.environ.get(name, default)
    try:
        value = kind(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and (value >= low if kind is int else value > low)):
        what = f"an int >= {low}" if kind is int else f"a finite number > {low:g}"
        problem = f"the environment variable {name} must be {what}, got {text!r}"
        raise ValueError(_ddp_error(problem) if ddp else problem)
    return value


def setup_distributed(
    requested_device: str, batch_size: int
) -> tuple[int, int, torch.device, bool]:
    """(rank, world size, this process's device, whether this call started the process group).

    With ``WORLD_SIZE`` > 1, the environment, the device and ``batch_size`` (divisible by the
    number of processes) are checked before the process group starts, and every error names the
    variables that turned DDP on (:data:`DDP_VARIABLES`). The rendezvous and the collectives
    wait at most :data:`DDP_TIMEOUT_S` seconds (``KVATTN_DDP_TIMEOUT_S``) for the other
    processes. Under ``torchrun`` the CUDA device is made current before the process group
    starts, and the backend follows the chosen device (NCCL for CUDA, else gloo)."""

    world = _env_number("WORLD_SIZE", "1", int, low=1)
    local_rank = _env_number("LOCAL_RANK", "0", int, low=0, ddp=world > 1)
    cuda = torch.cuda.is_available()
    if world == 1:
        return 0, 1, select_device(requested_device, local_rank, 1, cuda), False
    try:
        device = select_device(requested_device, local_rank, world, cuda)
    except ValueError as err:
        raise ValueError(_ddp_error(str(err))) from None
    if batch_size % world:
        raise ValueError(
            _ddp_error(f"batch_size {batch_size} is not divisible by {world} processes")
        )
    if device.type == "cuda":
        torch.cuda.set_device(device)
    started = not dist.is_initialized()
    if started:
        missing = [
            name for name in ("RANK", "MASTER_ADDR", "MASTER_PORT") if name not in os.environ
        ]
        if missing:
            raise ValueError(_ddp_error(f"DDP also needs {', '.join(missing)}"))
        if _env_number("RANK", "0", int, low=0) >= world:
            raise ValueError(_ddp_error("RANK must be below WORLD_SIZE"))
        timeout_s = _env_number("KVATTN_DDP_TIMEOUT_S", str(DDP_TIMEOUT_S), float, low=0)
        try:
            dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo",
                timeout=datetime.timedelta(seconds=timeout_s),
            )
        except (ValueError, dist.DistError) as err:
            # torch's first line says what failed; the rest can be a C++ stack
            reason = (str(err).strip() or repr(err)).splitlines()[0]
            problem = (
                f"the DDP rendezvous failed: {reason} (the processes wait for each other at "
                f"most {timeout_s:g} s; the environment variable KVATTN_DDP_TIMEOUT_S sets it)"
            )
            kind = ValueError if isinstance(err, ValueError) else RuntimeError
            raise kind(_ddp_error(problem)) from err
    return dist.get_rank(), world, device, started
