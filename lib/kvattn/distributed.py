"""Where a pre-training process runs: its device, and PyTorch DDP when launched by ``torchrun``.

DDP is on when the launcher's variables (:data:`DDP_VARIABLES`) say so; every set-up error names
the variables that turned it on. The rendezvous waits at most :data:`DDP_TIMEOUT_S` seconds
(``KVATTN_DDP_TIMEOUT_S``), so a process whose peers never come fails instead of hanging.
"""

from __future__ import annotations

import datetime
import math
import os
import sys

import torch
import torch.distributed as dist

#: The device types pre-training computes on. ``"meta"`` holds shapes without data (a run on it
#: fails only after the tokenizer is trained, with "unsupported scalarType"), and the rest of
#: torch's back-ends have no DDP backend or autocast choice here.
COMPUTE_DEVICES = ("cpu", "cuda", "mps")


class RendezvousError(RuntimeError):
    """The DDP processes did not meet: a peer never came within the hang limit, or the
    rendezvous failed otherwise. The message says why and lists the variables that turned DDP
    on."""


def parse_device(requested: object) -> torch.device | None:
    """The config's ``device`` as a :class:`torch.device` (``None`` for ``"auto"``), checked
    without asking what this machine has: a config written for a GPU machine reads anywhere.

    Raises
    ------
    ValueError
        ``requested`` is neither ``"auto"`` nor a torch device, or its type is not one of
        :data:`COMPUTE_DEVICES`.
    """
    if requested == "auto":
        return None
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be 'auto' or a torch device such as 'cpu' or 'cuda', got {requested!r}"
        ) from None
    if device.type not in COMPUTE_DEVICES:
        why = "'meta' tensors hold no data" if device.type == "meta" else "not supported here"
        raise ValueError(
            f"device {requested!r} cannot train a model ({why}); use 'auto' or a device of type "
            "'cpu', 'cuda' or 'mps'"
        )
    return device


def select_device(
    requested: str, local_rank: int, world: int, cuda_available: bool
) -> torch.device:
    """The device of the process with ``local_rank`` (of ``world`` processes) for the config's
    ``device``: ``"auto"`` is ``cuda:<local_rank>`` when CUDA is available, else the CPU;
    ``"cuda"`` is ``cuda:<local_rank>`` (one GPU per process, as DDP's
    ``device_ids=[local_rank]`` expects); any other device of :data:`COMPUTE_DEVICES` is taken as
    given.

    Raises
    ------
    ValueError
        A device :func:`parse_device` refuses (``"meta"``), CUDA or MPS requested but not
        available, or a fixed CUDA index such as ``"cuda:1"`` with more
        than one process (every process would share one GPU).
    """
    device = parse_device(requested)
    if device is None:
        return torch.device(f"cuda:{local_rank}" if cuda_available else "cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {requested!r} was requested but MPS is not available")
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


#: The longest hang limit ``KVATTN_DDP_TIMEOUT_S`` may set, in seconds (about 116 days): far
#: beyond any run, and far inside what the process group accepts (gloo refuses 1e13 s, Python's
#: timedelta 8.64e13 s, and 1e300 s overflowed with "Python int too large to convert to C int").
MAX_DDP_TIMEOUT_S = 1e7


def _environment() -> str:
    """The DDP variables as the environment has them, e.g. ``WORLD_SIZE='2', RANK unset``."""
    return ", ".join(
        f"{name}={os.environ[name]!r}" if name in os.environ else f"{name} unset"
        for name in DDP_VARIABLES
    )


def _ddp_error(problem: str) -> str:
    """``problem``, then the variables that turned DDP on, as the environment has them: DDP starts
    from the environment alone, so a stray ``WORLD_SIZE`` is otherwise hard to spot."""
    return (
        f"{problem}. DDP is on because the environment sets WORLD_SIZE ({_environment()}); "
        "launch with torchrun, which sets them all, or unset WORLD_SIZE to train in one process"
    )


def _env_number(
    name: str, default: str, kind: type, low: float, ddp: bool = True, high: float = math.inf
) -> float:
    """The environment variable ``name`` (``default`` when unset) as an int >= ``low``, or a
    finite float > ``low``, at most ``high``; the error names DDP's variables if ``ddp``."""
    text = os.environ.get(name, default)
    try:
        value = kind(text)
    except ValueError:
        value = math.nan
    problem = None
    if not (math.isfinite(value) and (value >= low if kind is int else value > low)):
        what = f"an int >= {low}" if kind is int else f"a finite number > {low:g}"
        problem = f"the environment variable {name} must be {what}, got {text!r}"
    elif value > high:
        problem = f"the environment variable {name} must be at most {high:g}, got {text!r}"
    if problem is not None:
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
    processes; before it waits, the process says on stderr what it waits for and for how long.
    Under ``torchrun`` the CUDA device is made current before the process group
    starts, and the backend follows the chosen device (NCCL for CUDA, else gloo).

    Without DDP (``WORLD_SIZE`` unset or 1) this process is the only one, so ``RANK`` and
    ``LOCAL_RANK`` must be unset or 0: several processes started with ranks but no world size
    would each train alone, all writing the same output folder.

    Raises
    ------
    ValueError
        Before the process group starts: a DDP variable that is not a number in range
        (``KVATTN_DDP_TIMEOUT_S`` at most :data:`MAX_DDP_TIMEOUT_S`), ``RANK`` or ``LOCAL_RANK``
        other than 0 without DDP, a device :func:`select_device` refuses, an incomplete DDP
        environment, or a ``batch_size`` not divisible by the number of processes.
    RendezvousError
        The processes did not meet (a :class:`RuntimeError`).
    """

    world = _env_number("WORLD_SIZE", "1", int, low=1)
    local_rank = _env_number("LOCAL_RANK", "0", int, low=0, ddp=world > 1)
    cuda = torch.cuda.is_available()
    if world == 1:
        if local_rank != 0 or _env_number("RANK", "0", int, low=0, ddp=False) != 0:
            raise ValueError(
                f"the environment gives this process a rank ({_environment()}) but no DDP "
                "world: without WORLD_SIZE > 1 a run is one process of rank 0, and processes "
                "started like this would each train alone and write the same out_dir; launch "
                "with torchrun, which sets WORLD_SIZE, or unset RANK and LOCAL_RANK"
            )
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
        timeout_s = _env_number(
            "KVATTN_DDP_TIMEOUT_S", str(DDP_TIMEOUT_S), float, low=0, high=MAX_DDP_TIMEOUT_S
        )
        # said before the wait, on stderr: a peer that never comes is otherwise a silent hang
        print(
            f"kvattn: DDP rank {os.environ['RANK']} of {world} waits for the other "
            f"{world - 1} process(es) at {os.environ['MASTER_ADDR']}:"
            f"{os.environ['MASTER_PORT']}, at most {timeout_s:g} s (KVATTN_DDP_TIMEOUT_S)",
            file=sys.stderr,
            flush=True,
        )
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
            kind = ValueError if isinstance(err, ValueError) else RendezvousError
            raise kind(_ddp_error(problem)) from err
    return dist.get_rank(), world, device, started
