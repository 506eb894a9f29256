"""What the benchmark counts rather than times: peak memory, FLOPs, kernel calls, and the FLOP/s
of one large matrix product that the models' achieved FLOP/s are compared with.

* :class:`TensorMemory` adds up the storages of the tensors alive at once, on any device;
  ``_peak_memory`` uses it (or, on CUDA, the allocator's statistics) for one call's peak in MiB
  with what the model holds resident;
* :class:`KernelCalls` counts the operators a call runs, views excluded; ``_step_counts`` gives
  a training step's FLOPs (PyTorch's FLOP counter) and kernel calls;
* :func:`matmul_rate` measures the device's practical peak FLOP/s.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from .._checks import check_int
from .timing import _check_device, _sync, _timed


class TensorMemory(TorchDispatchMode):
    """Peak bytes of tensor storage alive at once while the mode is active, on any device.

    Every storage that an operation returns is counted once (views and in-place results share
    it) from its creation until it is freed, and so is every storage of the ``resident`` tensors
    given (those made before, such as weights, gradients and optimiser state) from the start
    until it is freed; ``peak`` is the largest total seen, ``live`` the total now. Storages that
    existed before and are not in ``resident`` are not counted. Allocator caching and
    fragmentation are not seen: on CUDA the allocator's own statistics say more.
    """

    def __init__(self, resident: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen: set[tuple[str, int]] = set()
        for t in resident:
            self._track(t)

    def _track(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key = (str(t.device), storage.data_ptr())
        nbytes = storage.nbytes()
        if nbytes == 0 or key in self._seen:
            return
        self._seen.add(key)
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._free, key, nbytes)

    def _free(self, key: tuple[str, int], nbytes: int) -> None:
        self._seen.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out


class KernelCalls(TorchDispatchMode):
    """Counts the ATen operators that run while the mode is active, views excluded: a view only
    relabels a storage, every other operator is a kernel call of its own. Each call pays a fixed
    cost (dispatch, and on a GPU a launch) whatever its size, which the FLOP counter does not
    see; a model of many small operations can spend more time on calls than on arithmetic.
    ``calls`` is the count so far.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.calls += 1
        return func(*args, **(kwargs or {}))


def _peak_memory(
    model: torch.nn.Module,
    fn: Callable[[], object],
    device: torch.device,
    optimizer: torch.optim.Optimizer | None = None,
) -> float:
    """Peak memory of ``fn()`` in MiB attributable to ``model``: what is resident when the call
    starts (its parameters, buffers and gradients, and ``optimizer``'s state on ``device``, for
    AdamW two moments per parameter), for as long as it stays alive, plus what the call
    allocates (saved activations, new gradients, temporaries). A training step frees the last
    step's gradients only after its forward pass, so both sets can be alive at once, as in
    training. CUDA: the allocator's statistics; elsewhere :class:`TensorMemory`."""
    state = []
    if optimizer is not None:
        state = [
            t
            for s in optimizer.state.values()
            for t in s.values()
            if torch.is_tensor(t) and t.device.type == device.type  # not foreach's CPU steps
        ]
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    resident = [*model.parameters(), *model.buffers(), *grads, *state]
    if device.type == "cuda":
        own = TensorMemory(resident).live  # each storage once, as counted on the CPU
        _sync(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        _sync(device)
        return (own + torch.cuda.max_memory_allocated(device) - before) / 2**20
    with TensorMemory(resident) as memory:
        fn()
    return memory.peak / 2**20


def matmul_rate(
    device: torch.device, dtype: torch.dtype = torch.float32, *, n: int | None = None
) -> float:
    """FLOP/s of one large ``n × n`` matrix product on ``device`` in ``dtype``: the practical peak
    that the models' achieved FLOP/s are compared with. The fastest of 10 products after a
    warm-up (a peak: load only ever slows a product down).

    ``n`` defaults to 1024 on the CPU and 8192 on a GPU (large enough to reach the device's
    matrix-unit speed, small enough to take well under a second each).

    Raises
    ------
    TypeError
        ``device`` not a ``torch.device``, ``dtype`` not a floating dtype, ``n`` not an int.
    ValueError
        ``n`` < 1, or a device that this machine does not have.
    """
    _check_device(device)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    if n is None:
        n = 1024 if device.type == "cpu" else 8192
    check_int("n", n, low=1, typed=True)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    times = [_timed(lambda: a @ b, device) for _ in range(11)]
    return 2 * n**3 / min(times[1:])  # the first is the warm-up


def _step_counts(step: Callable[[], object]) -> tuple[int, int]:
    """FLOPs of one call of ``step`` as PyTorch's FLOP counter sees them (matrix products and
    attention, forward and backward; element-wise work is not counted), and its kernel calls
    (:class:`KernelCalls`). The counted call is the second: the first also creates what the
    optimiser keeps for every parameter, work that a training step does not repeat."""
    step()
    with FlopCounterMode(display=False) as counter, KernelCalls() as calls:
        step()
    return counter.get_total_flops(), calls.calls
