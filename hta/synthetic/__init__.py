"""Synthetic PyTorch-profiler (Kineto) traces with exact, by-construction ground truth.

The generator models one data-parallel training job: every rank runs the same small MLP for
``steps`` iterations, so the structure (names, counts, collective arguments) is identical on
all ranks and only the OS pid/tid, the GPU index, memory addresses and the timings differ.

Each rank's trace follows the format that Kineto writes (see ``KINETO.md``):

* top level: ``schemaVersion``, ``deviceProperties`` (one A100-like entry), ``distributedInfo``
  (nccl, rank, world_size, pg_count, pg_config, nccl_version), profiler settings,
  ``displayTimeUnit`` ``"ns"``, ``baseTimeNanoseconds`` (relative mode only), ``traceEvents`` and
  ``traceName`` (last);
* a main CPU thread and an autograd thread (``pt_autograd_0``) with ``ProfilerStep#N``
  user annotations, nested ``cpu_op`` events (``aten::linear`` > ``aten::addmm``, ...) carrying
  ``External id``, ``Sequence number``, ``Input Dims`` and ``Input type``, and
  ``record_param_comms`` ops with the collective arguments;
* ``cuda_runtime`` calls (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cudaMemcpyAsync``,
  ``cudaMemsetAsync``, one ``cudaGraphLaunch`` per step whose correlation is shared by several
  graph kernels, ``cudaEventRecord``/``cudaStreamWaitEvent``, ``cudaStreamSynchronize`` per step
  and one final ``cudaDeviceSynchronize``), plus one trailing launch whose kernel fell outside
  the profiling window (an unlinked launch with an unmatched ``ac2g`` start);
* GPU events on ``pid = device``, ``tid = stream`` on three streams (compute ``7``, NCCL ``20``,
  copy ``24``): kernels with launch-configuration args, NCCL kernels with the collective args
  copied on them, ``gpu_memcpy`` (HtoD, DtoH, DtoD), ``gpu_memset`` and ``gpu_user_annotation``;
* ``ac2g`` and ``fwdbwd`` flow events, ``[memory]`` instant events, ``M`` metadata, a ``Trace``
  span (pid ``"Spans"``), an ``Iteration Start: PyTorch Profiler`` and a ``Record Window End``
  instant (pids ``"Traces"`` and ``""``).

The GPU timeline has host-bound idle gaps (data loading, synchronisation), gradient all-reduces
on the NCCL stream that overlap backward compute, back-to-back kernels that touch exactly,
sub-microsecond kernels and exactly one zero-duration kernel.  A GPU event never starts before
its launch call starts, and the kernels of one stream never overlap.

Time representation
-------------------
All times are built as integer nanoseconds.  In the returned dict every ``ts``/``dur`` is a
:class:`Microseconds`: a ``float`` holding the value in µs (the same double a JSON parser reads
from the file) that also remembers the exact integer ``ns``.  The writers format these values
with exactly three decimals (``519689.047``; ``1712195495519689.047`` in absolute mode), so the
text value times 1000 is the integer ns exactly, even at epoch scale where a double cannot hold
nanoseconds.  With ``relative_time=True`` (default) ``ts`` is relative to
``baseTimeNanoseconds``; otherwise ``ts`` is absolute epoch µs and there is no
``baseTimeNanoseconds`` key.

Size
----
``kernels_per_step`` (K, at least :data:`MIN_KERNELS_PER_STEP`) is the exact number of GPU
activities (kernels + memcpy + memset) per step.  A rank has about ``6.6 * K * steps`` events
(6.58 per GPU activity at K=40, 6.57 for large K, plus 24 per trace); :func:`events_per_rank_for`
gives the exact count and :func:`kernels_per_step_for_events` inverts it.  Writing streams the
events in chunks, so memory stays bounded for multi-million-event ranks.

Coupled jobs
------------
:func:`generate_coupled_job` / :func:`coupled_job` (:mod:`.coupled`) build jobs whose ranks
interact on one shared clock: data-parallel shapes where an all-reduce waits for the last rank
(``balanced``, ``slow_worker``, ``imbalance``, ``host``, ``slow_link``) and pipelines whose
stages wait for each other's sends (``gpipe``, ``1f1b``), with an exact ``truth/truth.json``
(stragglers and lags, per-step times, every kernel, pipeline bubbles).

Modules: :mod:`.catalog` (streams, kernels, sizing), :mod:`.timefmt` (exact µs times and the
JSON writer), :mod:`.primitives` / :mod:`.steps` / :mod:`.rank` (the rank builder, in layers),
:mod:`.writer` (ranks and jobs, in memory or to files), :mod:`.truth` (the ground truth),
:mod:`.coupled` (coupled jobs; with :mod:`.coupled_events`, :mod:`.coupled_pipeline` and
:mod:`.coupled_truth`), :mod:`.cli`.

CLI::

    python -m hta.synthetic OUT_DIR --ranks 4 --steps 3 --kernels-per-step 40 --seed 0 [--no-gzip]
    python -m hta.synthetic OUT_DIR --shape 1f1b --ranks 4 --steps 4 --micro-batches 8
"""

from hta.synthetic.catalog import (
    COMPUTE_STREAM,
    COPY_STREAM,
    GPU_CATS,
    LAUNCH_NAMES,
    MIN_KERNELS_PER_STEP,
    NCCL_STREAM,
    STREAMS,
    events_per_rank_for,
    kernels_per_step_for_events,
    step_plan,
)
from hta.synthetic.cli import main
from hta.synthetic.coupled import coupled_job, generate_coupled_job
from hta.synthetic.timefmt import Microseconds, dumps_trace, format_us
from hta.synthetic.truth import gpu_kind, summarize_truth
from hta.synthetic.writer import generate_job, generate_rank, iter_rank_chunks, write_rank

__all__ = [
    "COMPUTE_STREAM",
    "COPY_STREAM",
    "GPU_CATS",
    "LAUNCH_NAMES",
    "MIN_KERNELS_PER_STEP",
    "NCCL_STREAM",
    "STREAMS",
    "Microseconds",
    "coupled_job",
    "dumps_trace",
    "events_per_rank_for",
    "format_us",
    "generate_coupled_job",
    "generate_job",
    "generate_rank",
    "gpu_kind",
    "iter_rank_chunks",
    "kernels_per_step_for_events",
    "main",
    "step_plan",
    "summarize_truth",
    "write_rank",
]
