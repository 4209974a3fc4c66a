"""msgspec types describing the parts of a Kineto trace the loader reads.

Decoding straight into these typed structs skips every field we do not need without
allocating it, which is where most of the loader's speed and memory advantage over
decoding into dictionaries comes from. Defaults are sentinels (-1, NaN, "") rather than
``None`` so that each column converts to a NumPy array in one C-level call.
"""

from __future__ import annotations

import msgspec

from hta.kineto.schema import RAW_KEYS

#: The JSON name of each field of :class:`Args` and :class:`Event`: the schema's raw keys.
_ARG_KEYS = {field: raw.key for field, raw in RAW_KEYS.items() if raw.in_args}
_EVENT_KEYS = {field: raw.key for field, raw in RAW_KEYS.items() if not raw.in_args}

NAN = float("nan")

#: Phases whose events go to the same table, so it keeps the file's order (both decoders).
PHASE_GROUP = {"I": "i", "f": "s", "t": "s"}

# ROCm writes some integers as strings ("0x0"); a few writers quote numbers.
IntLike = int | str | None
NumLike = int | float | str | None
NameLike = str | int | float | None


class Args(msgspec.Struct, frozen=True, gc=False, rename=_ARG_KEYS):
    """The ``args`` keys analyses need; every other key is skipped while decoding. The
    JSON name of each field is its raw key in :data:`hta.kineto.schema.RAW_KEYS`."""

    external_id: IntLike = -1
    external_id_legacy: IntLike = -1
    correlation: IntLike = -1
    stream: IntLike = -1
    device: IntLike = -1
    cbid: IntLike = -1
    cid: IntLike = -1
    graph_id: IntLike = -1
    # kernels
    grid: tuple[IntLike, ...] | str = ()
    block: tuple[IntLike, ...] | str = ()
    registers_per_thread: NumLike = NAN
    shared_memory: NumLike = NAN
    blocks_per_sm: NumLike = NAN
    warps_per_sm: NumLike = NAN
    occupancy_pct: NumLike = NAN
    # memcpy / memset
    nbytes: NumLike = NAN
    size: NumLike = NAN  # copy size on ROCm runtime calls and MTIA DMA requests
    bandwidth_gbps: NumLike = NAN
    # collectives (record_param_comms ops and the NCCL kernels that copy their args)
    collective_name: NameLike = ""
    dtype: NameLike = ""
    in_msg_nelems: NumLike = NAN
    out_msg_nelems: NumLike = NAN
    group_size: NumLike = NAN
    pg_name: NameLike = ""
    pg_desc: NameLike = ""
    pg_ranks: msgspec.Raw = msgspec.Raw()
    seq: NumLike = NAN
    in_split: msgspec.Raw = msgspec.Raw()
    out_split: msgspec.Raw = msgspec.Raw()
    # CPU operators
    input_dims: msgspec.Raw = msgspec.Raw()
    input_dims_legacy: msgspec.Raw = msgspec.Raw()
    input_type: msgspec.Raw = msgspec.Raw()
    concrete_inputs: msgspec.Raw = msgspec.Raw()
    sequence_number: IntLike = -1
    fwd_thread_id: IntLike = -1
    # synchronization
    wait_on_stream: IntLike = -1
    wait_on_event_corr: IntLike = -1
    # [memory] instant events
    addr: IntLike = -1
    mem_bytes: NumLike = NAN
    total_allocated: NumLike = NAN
    total_reserved: NumLike = NAN
    device_type: IntLike = -1
    device_id: IntLike = -1
    # metadata events
    meta_name: NameLike = ""
    labels: NameLike = ""
    sort_index: IntLike = -1


EMPTY_ARGS = Args()


class Event(msgspec.Struct, gc=False, rename=_EVENT_KEYS):
    """One element of ``traceEvents`` (JSON names: :data:`hta.kineto.schema.RAW_KEYS`)."""

    ph: str = ""
    cat: NameLike = ""
    name: NameLike = ""
    pid: IntLike = -1
    tid: IntLike = -1
    ts: msgspec.Raw = msgspec.Raw()
    dur: NumLike = NAN
    id: IntLike = -1
    bp: str = ""
    s: str = ""
    args: Args = EMPTY_ARGS


class CounterEvent(msgspec.Struct, gc=False):
    """A ``C`` (counter) event, whose ``args`` are free-form series."""

    ph: str = ""
    name: NameLike = ""
    cat: NameLike = ""
    pid: IntLike = -1
    tid: IntLike = -1
    ts: msgspec.Raw = msgspec.Raw()
    args: dict = msgspec.field(default_factory=dict)
