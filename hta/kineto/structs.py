"""msgspec types describing the parts of a Kineto trace the loader reads.

Decoding straight into these typed structs skips every field we do not need without
allocating it, which is where most of the loader's speed and memory advantage over
decoding into dictionaries comes from. Defaults are sentinels (-1, NaN, "") rather than
``None`` so that each column converts to a NumPy array in one C-level call.
"""

from __future__ import annotations

import msgspec

NAN = float("nan")

#: Phases whose events go to the same table, so it keeps the file's order (both decoders).
PHASE_GROUP = {"I": "i", "f": "s", "t": "s"}

# ROCm writes some integers as strings ("0x0"); a few writers quote numbers.
IntLike = int | str | None
NumLike = int | float | str | None
NameLike = str | int | float | None


class Args(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` keys analyses need; every other key is skipped while decoding."""

    external_id: IntLike = msgspec.field(default=-1, name="External id")
    external_id_legacy: IntLike = msgspec.field(default=-1, name="external id")
    correlation: IntLike = -1
    stream: IntLike = -1
    device: IntLike = -1
    cbid: IntLike = -1
    cid: IntLike = -1
    graph_id: IntLike = msgspec.field(default=-1, name="graph id")
    # kernels
    grid: tuple[IntLike, ...] | str = ()
    block: tuple[IntLike, ...] | str = ()
    registers_per_thread: NumLike = msgspec.field(default=NAN, name="registers per thread")
    shared_memory: NumLike = msgspec.field(default=NAN, name="shared memory")
    blocks_per_sm: NumLike = msgspec.field(default=NAN, name="blocks per SM")
    warps_per_sm: NumLike = msgspec.field(default=NAN, name="warps per SM")
    occupancy_pct: NumLike = msgspec.field(default=NAN, name="est. achieved occupancy %")
    # memcpy / memset
    nbytes: NumLike = msgspec.field(default=NAN, name="bytes")
    size: NumLike = NAN  # copy size on ROCm runtime calls and MTIA DMA requests
    bandwidth_gbps: NumLike = msgspec.field(default=NAN, name="memory bandwidth (GB/s)")
    # collectives (record_param_comms ops and the NCCL kernels that copy their args)
    collective_name: NameLike = msgspec.field(default="", name="Collective name")
    dtype: NameLike = ""
    in_msg_nelems: NumLike = msgspec.field(default=NAN, name="In msg nelems")
    out_msg_nelems: NumLike = msgspec.field(default=NAN, name="Out msg nelems")
    group_size: NumLike = msgspec.field(default=NAN, name="Group size")
    pg_name: NameLike = msgspec.field(default="", name="Process Group Name")
    pg_desc: NameLike = msgspec.field(default="", name="Process Group Description")
    pg_ranks: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Process Group Ranks")
    seq: NumLike = msgspec.field(default=NAN, name="Seq")
    in_split: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="In split size")
    out_split: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Out split size")
    # CPU operators
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_dims_legacy: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    sequence_number: IntLike = msgspec.field(default=-1, name="Sequence number")
    fwd_thread_id: IntLike = msgspec.field(default=-1, name="Fwd thread id")
    # synchronization
    wait_on_stream: IntLike = -1
    wait_on_event_corr: IntLike = msgspec.field(
        default=-1, name="wait_on_cuda_event_record_corr_id"
    )
    # [memory] instant events
    addr: IntLike = msgspec.field(default=-1, name="Addr")
    mem_bytes: NumLike = msgspec.field(default=NAN, name="Bytes")
    total_allocated: NumLike = msgspec.field(default=NAN, name="Total Allocated")
    total_reserved: NumLike = msgspec.field(default=NAN, name="Total Reserved")
    device_type: IntLike = msgspec.field(default=-1, name="Device Type")
    device_id: IntLike = msgspec.field(default=-1, name="Device Id")
    # metadata events
    meta_name: NameLike = msgspec.field(default="", name="name")
    labels: NameLike = ""
    sort_index: IntLike = -1


EMPTY_ARGS = Args()


class Event(msgspec.Struct, gc=False):
    """One element of ``traceEvents``."""

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
