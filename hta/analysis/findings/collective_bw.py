"""Finding: collectives far below the bandwidth of the link between the GPUs.

``collective_bw`` (job; one finding per rank, collective operation and process group)
    From :func:`hta.analysis.collectives.collective_performance` on every selected rank.
    A call's *transfer time* is its kernel time minus the time it waited for a late peer
    (``waited_ns`` of :func:`hta.analysis.stragglers.match_collectives`: a late peer is
    the stragglers finding's problem, not the link's); its *transfer bus bandwidth* is
    ``msg_bytes × bus factor / transfer time``. A call is *slow* when

    * its message is at least :data:`MIN_MSG_BYTES` (smaller ones are bound by latency,
      not bandwidth: their cure is fewer, larger calls);
    * its transfer bus bandwidth is under :data:`FAR_BELOW` of the link's bandwidth per
      direction (:mod:`hta.analysis.interconnect`, from the rank's device name, or the
      ``link_gbps`` the caller passes);
    * its process group stays inside one node: every rank of the group (from the trace's
      ``distributedInfo``) in the same block of :data:`GPUS_PER_NODE` ranks, or a job
      of at most that many ranks. Groups that span nodes run over the network, which the
      trace does not describe; they are checked only with ``link_gbps``.

    **Saving**, per slow call: the transfer time minus the time the same bytes take at
    :data:`ATTAINABLE` of the link's bandwidth (NCCL tests reach 70-90 % on large
    messages; half is a cautious target), at most the part of the call during which no
    computation ran (``exposed(us)``): a faster collective hidden under computation saves
    nothing. A finding sums its calls.

    A call is judged only when it moves bytes over the bus (a group of one rank does not)
    and at least one other rank of its instance is loaded
    (otherwise the wait for late peers could not be taken out, and a rank that arrives
    early would look slow); with one rank loaded the rule logs so once.

    Silent where no call has a message size (collective args not recorded); the check
    then logs once why and how to record them (:data:`NO_ARGS_NOTE`).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd

from hta.analysis import collectives as coll
from hta.analysis.findings.base import Finding, FindingRule, analysis_window
from hta.analysis.findings.claims import Claim
from hta.analysis.findings.rule_tools import fmt_steps, fmt_time, step_tuple
from hta.analysis.interconnect import Link, link_for_device
from hta.analysis.select import rank_numbers
from hta.analysis.stragglers import match_collectives
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.job import Job
from hta.model.runner import RankWork, remembered, run_one, visit_key
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)

MIN_MSG_BYTES = 4 << 20
FAR_BELOW = 0.25
ATTAINABLE = 0.5
GPUS_PER_NODE = 8
#: Columns of :func:`rank_links`.
LINK_COLUMNS = ["rank", "device", "link", "link_gbps", "window_start", "window_ns",
                "world_size", "node_local"]
LINKS = Columns.typed(LINK_COLUMNS)
NAMED_CALLS = 2
NO_ARGS_NOTE = (
    "collective bandwidth: no communication kernel carries a message size, so no "
    "bandwidth was checked. Recent PyTorch versions record them with the NCCL process "
    "group (record_param_comms args 'In msg nelems', 'dtype', 'Group size'); profile "
    "with record_shapes=True.")
ONE_RANK_NOTE = (
    "collective bandwidth: one rank loaded; a collective's time includes the wait for "
    "peers that arrive late, which only the other ranks' traces show, so no bandwidth was "
    "judged. Load two or more ranks of the job.")
ADVICE = (
    "Find out why the link is slow for these calls: check the topology NCCL uses "
    "(NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,GRAPH: are the GPUs joined by NVLink/xGMI "
    "or only PCIe/the host?), that NCCL_P2P_DISABLE/NCCL_SHM_DISABLE and NCCL_ALGO/"
    "NCCL_PROTO are not forcing a slow path, and that the GPU's communication kernels get "
    "enough channels and SMs (NCCL_MIN_NCHANNELS; computation running next to them "
    "competes for SMs and memory bandwidth). Compare with nccl-tests on the same nodes "
    "at the same message size. If the group spans nodes, pass link_gbps with the "
    "network's bandwidth per GPU instead.")


def check_collective_bw(trace: Trace, selection: Selection, link_gbps: float | None = None
                        ) -> list[Finding]:
    """``collective_bw``: per rank, operation and process group, the slow calls
    (module docstring); ``link_gbps`` overrides the link bandwidth of every rank."""
    perf, info = _rank_inputs(trace, selection)
    if not len(perf):
        return []
    if not np.isfinite(perf["msg_bytes"].to_numpy(float)).any():
        logger.info(NO_ARGS_NOTE)
        return []
    if len(rank_numbers(trace, selection)) < 2:
        logger.info(ONE_RANK_NOTE)
        return []
    calls = slow_calls(perf, info, link_gbps)
    if not link_gbps and info["link_gbps"].isna().any():
        logger.info("collective bandwidth: no link bandwidth known for the device(s) %s; "
                    "pass link_gbps (collective_bw_rule)",
                    sorted(set(info.loc[info["link_gbps"].isna(), "device"])))
    found = []
    windows = info.set_index("rank")
    for (rank, op, group), part in calls.groupby(["rank", "collective", "process_group"],
                                                 sort=True):
        saving = int(part["saving_ns"].sum())
        if saving <= 0:
            continue
        w = windows.loc[rank]
        # The time it claims, on its rank: inside each slow call, its saving. Taken
        # before the rank's own findings, so comm_exposed does not count it again.
        claim = Claim(part["start_ns"].to_numpy(np.int64), part["end_ns"].to_numpy(np.int64),
                      part["saving_ns"].to_numpy(np.float64))
        steps = step_tuple(part["iteration"].to_numpy())
        found.append(Finding((int(rank),), steps, _evidence(part, w), saving,
                             int(w["window_ns"]), subject=f"{op} on {_label(str(group))}",
                             rank_claims={int(rank): claim}))
    return found


def inputs_visit(selected: list[int], iters: list[int] | None
                 ) -> tuple[Hashable, RankWork]:
    """The key and the work of :func:`_rank_inputs` on the ``selected`` ranks."""
    return visit_key("collective_bw", selected, iters), RANK_TABLES.work(iters)


def job_inputs(selected: list[int], iters: list[int] | None
               ) -> list[tuple[Hashable, RankWork]]:
    """The rule's per-rank inputs, read ahead (:attr:`FindingRule.inputs`)."""
    return [inputs_visit(selected, iters)]


def _rank_inputs(trace: Job, selection: Selection
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The collective performance table and :func:`rank_links` of the ranks, in one pass
    over them (each rank is read once, where it is; kept for the job,
    :func:`hta.model.runner.remembered`)."""
    ranks = rank_numbers(trace, selection)
    key, work = inputs_visit(ranks, selection.iteration_list)
    return remembered(trace, key, lambda: run_one(trace, work, Selection.of(ranks)))


def _rank_tables(rank: RankTrace, iterations: list[int] | None
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One rank's :func:`~hta.analysis.collectives.collective_performance` rows and its
    row of :func:`rank_links`."""
    return coll.rank_collective_rows(rank, iterations), rank_link(rank, iterations)


def rank_links(trace: Trace, selection: Selection) -> pd.DataFrame:
    """Per rank: ``rank``, ``device``, ``link`` (name), ``link_gbps``, ``window_start``,
    ``window_ns``, ``world_size`` and ``node_local`` (process group names whose ranks
    lie in one node, comma-separated; ``*`` for all when the job fits in one node)."""
    return RANK_LINK.run(trace, selection)


def rank_link(rank: RankTrace, iterations: list[int] | None) -> pd.DataFrame:
    """One rank's row of :func:`rank_links`: its device, link and analysis window."""
    return pd.DataFrame([_link_row(rank, iterations)], columns=LINK_COLUMNS)


#: :func:`rank_links`, declared (its steps come first; each rank read whole).
RANK_LINK = Analysis("Links", rank_link, LINKS, steps=PER_STEP)
#: The rule's inputs of a rank, both tables in one pass over it.
RANK_TABLES = Analysis("Collective bandwidth", _rank_tables, (coll.PERFORMANCE, LINKS),
                       steps=PER_STEP)


def _link_row(rt: RankTrace, iterations: list[int] | None) -> dict:
    meta = rt.meta
    devices = meta.get("device_properties") or [{}]
    device = str(devices[0].get("name", "")) if isinstance(devices[0], dict) else ""
    link: Link | None = link_for_device(device)
    start, end = analysis_window(rt, iterations)
    world = int(meta.get("world_size") or 0)
    return {"rank": rt.rank, "device": device, "link": link.name if link else "",
            "link_gbps": link.gbps if link else np.nan, "window_start": start,
            "window_ns": end - start, "world_size": world,
            "node_local": _node_local(meta, world)}


def _node_local(meta: dict, world: int) -> str:
    """The process groups of the rank's job whose ranks lie in one node (``*``: all)."""
    if 0 < world <= GPUS_PER_NODE:
        return "*"
    groups = meta.get("process_groups") or []
    names = [str(g.get("pg_name")) for g in groups if isinstance(g, dict)
             and g.get("ranks") and len({int(r) // GPUS_PER_NODE for r in g["ranks"]}) == 1]
    return ",".join(names)


def slow_calls(perf: pd.DataFrame, info: pd.DataFrame,
               link_gbps: float | None = None) -> pd.DataFrame:
    """The slow calls of :func:`collective_performance`'s table (module docstring), with
    ``waited_ns``, ``transfer_ns``, ``transfer_busbw`` (GB/s), ``link_gbps``, ``link``,
    ``saving_ns`` and ``window_start``."""
    p = perf.reset_index(drop=True).copy()
    p["waited_ns"], p["peers_seen"] = _waited(p)
    p["transfer_ns"] = (p["end_ns"] - p["start_ns"] - p["waited_ns"]).clip(lower=1)
    factor = coll.bus_factors(p["collective"].to_numpy(), p["group_size"].to_numpy(float))
    p["bus_bytes"] = p["msg_bytes"] * factor
    p["transfer_busbw"] = p["bus_bytes"] / p["transfer_ns"]
    i = info.set_index("rank")
    p["link"] = p["rank"].map(i["link"])
    p["window_start"] = p["rank"].map(i["window_start"])
    if link_gbps:
        p["link_gbps"] = float(link_gbps)
        p["link"] = "link_gbps given"
        local = np.ones(len(p), bool)
    else:
        p["link_gbps"] = p["rank"].map(i["link_gbps"]).astype(float)
        pg = p["process_group"].astype(str).str.split(" ", n=1).str[0]
        allowed = p["rank"].map(i["node_local"]).fillna("").astype(str)
        groups, allows = pg.tolist(), allowed.tolist()  # (a Series yields item by item)
        local = np.array([a == "*" or g in a.split(",") for g, a in zip(groups, allows)])
    seen = p["peers_seen"].to_numpy() >= 2
    slow = (local & seen & (p["msg_bytes"] >= MIN_MSG_BYTES) & (p["bus_bytes"] > 0)
            & (p["transfer_busbw"] < FAR_BELOW * p["link_gbps"]))
    p = p[slow.fillna(False).to_numpy(bool)].copy()
    target = p["bus_bytes"] / (ATTAINABLE * p["link_gbps"])  # ns at the attainable rate
    gain = (p["transfer_ns"] - target).clip(lower=0)
    p["saving_ns"] = np.minimum(gain, p["exposed(us)"] * 1e3).fillna(0).astype(np.int64)
    return p


def _waited(p: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per call: the time it waited for a late peer (0 where it matched none) and how
    many ranks of the selection ran the same collective instance."""
    kernels = pd.DataFrame({
        "rank": p["rank"], "process_group": p["process_group"], "process_group_desc": "",
        "seq": p["seq"], "name": p["collective"], "kernel": p["kernel"],
        "stream": p["stream"], "iteration": p["iteration"], "start_ns": p["start_ns"],
        "end_ns": p["end_ns"], "in_msg_nelems": p["in_msg_nelems"],
        "direction": p.get("direction", ""),
        "peer": p.get("peer", -1)})
    arrivals = match_collectives(kernels)
    key = ["rank", "stream", "start_ns"]
    waited = arrivals[key + ["waited_ns", "participants"]].drop_duplicates(key)
    merged = p[key].merge(waited, on=key, how="left")
    return (merged["waited_ns"].fillna(0).to_numpy(np.int64),
            merged["participants"].fillna(1).to_numpy(np.int64))


def _label(group: str) -> str:
    return group if group.startswith("stream ") else f"process group {group}"


def _evidence(part: pd.DataFrame, w: pd.Series) -> str:
    """Counts, bandwidths against the link, and the calls that lose the most."""
    link = f"{part['link'].iloc[0]}, {part['link_gbps'].iloc[0]:,.0f} GB/s per direction"
    if w["device"]:
        link = f"{w['device']}: {link}"
    busbw = part["bus_bytes"].sum() / part["transfer_ns"].sum()
    waits = f"kernel time less {fmt_time(part['waited_ns'].sum())} waiting for late peers"
    if part["link"].iloc[0] == "link_gbps given":
        where = ""
    elif w["world_size"] and w["world_size"] <= GPUS_PER_NODE:
        where = (f"; a job of {int(w['world_size'])} ranks is taken to fit in one node of "
                 f"{GPUS_PER_NODE} GPUs")
    else:
        where = f"; the group's ranks lie in one block of {GPUS_PER_NODE} ranks (one node)"
    top = part.sort_values("saving_ns", ascending=False, kind="stable").head(NAMED_CALLS)
    named = "; ".join(
        f"{coll.kernel_label(c['kernel'])} in step {int(c['iteration'])} at "
        f"{fmt_time(int(c['start_ns']) - int(c['window_start']))} into the window, "
        f"{c['msg_bytes'] / 2**20:,.1f} MiB in {fmt_time(c['transfer_ns'])} "
        f"({c['transfer_busbw']:,.1f} GB/s)" for c in top.to_dict("records"))
    return (
        f"{len(part)} {part['collective'].iloc[0]} calls of at least "
        f"{MIN_MSG_BYTES >> 20} MiB on {_label(str(part['process_group'].iloc[0]))} in "
        f"{fmt_steps(part['iteration'].tolist())} reached a bus bandwidth of "
        f"{busbw:,.1f} GB/s over their transfer time ({waits}), under {FAR_BELOW:.0%} of "
        f"the link ({link}{where}); most lost: {named} "
        f"(collective performance table: busbw(GB/s), exposed(us))."
    )


def collective_bw_rule(link_gbps: float | None = None) -> FindingRule:
    """The ``collective_bw`` rule, comparing with ``link_gbps`` (GB/s per direction) on
    every rank and process group when given, for ``find(trace, rules=[...])``."""
    rule = RULES[0]
    if not link_gbps:
        return rule
    return replace(rule, check=partial(check_collective_bw, link_gbps=float(link_gbps)))


def slow_collectives(trace: Job, selection: Selection = EVERYTHING,
                     link_gbps: float | None = None) -> pd.DataFrame:
    """The calls the rule judges slow, one row each (:func:`slow_calls`'s table)."""
    perf, info = _rank_inputs(trace, selection)
    if not len(perf):
        return perf
    return slow_calls(perf, info, link_gbps).reset_index(drop=True)


RULES: list[FindingRule] = [
    FindingRule(
        id="collective_bw",
        title="Collectives far below the link's bandwidth",
        section="collectives",
        advice=ADVICE,
        saving=(f"Per slow call (message of {MIN_MSG_BYTES >> 20} MiB or more, transfer bus "
                f"bandwidth under {FAR_BELOW:.0%} of the link's): its transfer time minus "
                f"the time at {ATTAINABLE:.0%} of the link's bandwidth, at most the part of "
                "the call with no computation running; summed over the calls."),
        check=check_collective_bw,
        scope="job",
        tags=("communication",),
        inputs=job_inputs,
    ),
]
