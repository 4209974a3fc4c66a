"""One training step of the generated job, built from the primitives."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from hta.synthetic.catalog import (
    _BATCH,
    _CHUNK_EVENTS,
    _DATALOADER,
    _GRAPH_ID,
    _HIDDEN,
    _K_ADD,
    _K_ALLGATHER,
    _K_ALLREDUCE,
    _K_GEMM_DGRAD,
    _K_GEMM_FWD,
    _K_GEMM_WGRAD,
    _K_GRAPH,
    _K_LOSS_BWD,
    _K_LOSS_FWD,
    _K_RELU,
    _K_THRESHOLD_BWD,
    _LAYERS_PER_BUCKET,
    _MEMCPY_NAMES,
    _MEMSET_NAME,
    COMPUTE_STREAM,
    COPY_STREAM,
    NCCL_STREAM,
    _Kernel,
)
from hta.synthetic.primitives import _Open, _Primitives

#: What the forward pass hands the backward: fwd->bwd flow ids, relu and linear seq numbers.
_FlowsAndSeqs = tuple[list[int], list[int], list[int]]


class _Pieces(_Primitives):
    """Composite pieces of a step: simple ops, collectives."""

    # --- composite pieces -------------------------------------------------------------------

    def _simple(
        self,
        outer: str,
        inner: str,
        dims: list[Any],
        types: list[str],
        k: _Kernel,
        dur: int,
        seq: bool = False,
    ) -> tuple[_Open, int]:
        """``outer > inner > cudaLaunchKernel -> k``; return the outer op token (closed)."""
        tok_o, _ = self._op(outer, dims, types, seq)
        tok_i, ext = self._op(inner, dims, types)
        self._launch(k, ext, dur)
        self._end(tok_i)
        self._end(tok_o)
        return tok_o, ext

    def _collective(
        self,
        coll: str,
        ann: str,
        dtype: str,
        elem: int,
        n_in: int,
        n_out: int,
        k: _Kernel,
        api: str,
    ) -> None:
        cargs: dict[str, Any] = {
            "Collective name": coll,
            "dtype": dtype,
            "In msg nelems": n_in,
            "Out msg nelems": n_out,
            "Group size": self.world_size,
            "In split size": "[]",
            "Out split size": "[]",
            "Process Group Name": "0",
            "Process Group Description": "default_pg",
            "Process Group Ranks": self.pg_ranks,
            "Seq": self.coll_seq,
        }
        self.coll_seq += 1
        ext = self._next_ext()
        tok = self._begin(
            "cpu_op",
            "record_param_comms",
            {
                "External id": ext,
                **cargs,
                "Rank": self.rank,
                "Global rank start": 0,
                "Global rank stride": 1,
            },
        )
        ext_a = self._next_ext()
        tok_a = self._begin("user_annotation", ann, {"External id": ext_a})
        self._wait(ext_a, NCCL_STREAM, COMPUTE_STREAM)
        ws = self.world_size
        nbytes = max(n_in, n_out) * elem
        dur = self._jitter(9_000 + nbytes * 2 * (ws - 1) // (ws * 45), 0.05)
        start = self._launch(k, ext_a, dur, NCCL_STREAM, api, cargs)
        self._span(
            "gpu_user_annotation",
            ann,
            start,
            start + dur,
            {"External id": ext_a},
            self.device,
            NCCL_STREAM,
        )
        self._end(tok_a)
        self._end(tok)



class _StepBuilder(_Pieces):
    """One training step: forward, loss, backward with bucketed all-reduces, optimizer."""

    # --- the training step ------------------------------------------------------------------

    def _step(self, step: int) -> Iterator[list[dict[str, Any]]]:
        """The events of step ``step`` (yielded in chunks): data loading and batch upload,
        zero_grad, forward, loss, backward with bucketed all-reduces, the optimizer's
        CUDA-graph replay, metrics, then the ``ProfilerStep`` span around them. Each phase
        is a method below, called in the order its events happen (so the random draws,
        and hence the files, do not depend on how the phases are split)."""
        self._switch(self.tid_main)
        step_start = self.now
        step_ext = self._next_ext()
        addr_in = self._load_batch_and_zero_grad()
        fwd_flows, seq_relu, seq_lin = yield from self._forward()
        seq_loss = self._loss()
        yield from self._backward(seq_loss, fwd_flows, seq_relu, seq_lin)
        self._optimizer_step()
        self._metrics(addr_in)
        self.now += self._u(1_000, 5_000)
        self._span(
            "user_annotation",
            f"ProfilerStep#{step + 1}",
            step_start,
            self.now,
            {"External id": step_ext},
        )
        self.now += self._u(5_000, 30_000)
        yield self._flush()


    def _load_batch_and_zero_grad(self) -> int:
        """Host-bound data loading, the batch's upload, and zero_grad's memset; returns
        the batch's address (freed at the end of the step)."""
        h, b = _HIDDEN, _BATCH
        layer_bytes = b * h * 4

        # host-bound data loading: the GPU is idle (previous step ended with a sync)
        t = self.now
        self.now += self._u(400_000, 1_500_000)
        self._span("user_annotation", _DATALOADER, t, self.now, {"External id": self._next_ext()})
        self.now += self._u(2_000, 8_000)

        # batch upload on the copy stream; the compute stream waits for it
        addr_in = self.addr_base + 0x4000_0000
        self._memory(addr_in, layer_bytes)
        dims = [[b, h], []]
        tok1, _ = self._op("aten::to", dims, ["float", "ScalarType"])
        tok2, _ = self._op("aten::_to_copy", dims, ["float", "ScalarType"])
        tok3, ext = self._op("aten::copy_", [[b, h], [b, h], []], ["float", "float", "Scalar"])
        self._copy(
            "gpu_memcpy",
            _MEMCPY_NAMES["HtoD"],
            ext,
            layer_bytes,
            self._jitter(layer_bytes // 22),
            COPY_STREAM,
        )
        self._end(tok3)
        self._end(tok2)
        self._end(tok1)
        self._wait(None, COMPUTE_STREAM, COPY_STREAM)

        # zero_grad -> one memset of the flat gradient buffer
        ext_z = self._next_ext()
        tok_z = self._begin(
            "user_annotation", "Optimizer.zero_grad#SGD.zero_grad", {"External id": ext_z}
        )
        grad_bytes = min(self.param_bytes, 256 * 1024 * 1024)
        tok, ext = self._op("aten::zero_", [[grad_bytes // 4]], ["float"])
        self._copy(
            "gpu_memset",
            _MEMSET_NAME,
            ext,
            grad_bytes,
            self._jitter(grad_bytes // 1_300 + 1_000),
            COMPUTE_STREAM,
        )
        self._end(tok)
        self._end(tok_z)
        return addr_in

    def _forward(self) -> Generator[list[dict[str, Any]], None, _FlowsAndSeqs]:
        """The layers' forward ops and kernels; returns the fwd->bwd flow ids and the
        sequence numbers of the relu and linear ops, per layer."""
        h, b = _HIDDEN, _BATCH
        layer_bytes = b * h * 4

        # forward
        fwd_flows: list[int] = []
        seq_relu: list[int] = []
        seq_lin: list[int] = []
        extras_q, extras_r = divmod(self.extras, self.layers)
        for layer in range(self.layers):
            tok_l, _ = self._op(
                "aten::linear", [[b, h], [h, h], [h]], ["float", "float", "float"], seq=True
            )
            seq_lin.append(self.seqno)
            fid = self.flow_id
            self.flow_id += 1
            fwd_flows.append(fid)
            self.events.append(
                {
                    "ph": "s",
                    "id": fid,
                    "pid": self.pid,
                    "tid": self.tid,
                    "ts": tok_l[0]["ts"],
                    "cat": "fwdbwd",
                    "name": "fwdbwd",
                }
            )
            tok_a, ext = self._op(
                "aten::addmm",
                [[h], [b, h], [h, h], [], []],
                ["float", "float", "float", "Scalar", "Scalar"],
            )
            self._launch(_K_GEMM_FWD, ext, self._jitter(27_000))
            self._end(tok_a)
            self._end(tok_l)
            if not self.zero_done:  # exactly one zero-duration kernel in the trace
                relu_dur = 0
                self.zero_done = True
            else:
                relu_dur = self._u(2_400, 3_600)
            self._simple(
                "aten::relu", "aten::clamp_min", [[b, h]], ["float"], _K_RELU, relu_dur, seq=True
            )
            seq_relu.append(self.seqno)
            self._memory(self.addr_base + layer * layer_bytes, layer_bytes)
            for _ in range(extras_q + (1 if layer < extras_r else 0)):
                tok_e, ext = self._op("aten::add", [[h], [h], []], ["float", "float", "Scalar"])
                self._launch(_K_ADD, ext, self._u(380, 1_400))  # sub-microsecond
                self._end(tok_e)
            if self.open_ops == 0 and len(self.events) >= _CHUNK_EVENTS:
                yield self._flush()
        return fwd_flows, seq_relu, seq_lin

    def _loss(self) -> int:
        """The loss op and its kernel; returns its sequence number."""
        h, b = _HIDDEN, _BATCH

        self._simple(
            "aten::mse_loss",
            "aten::mean",
            [[b, h], [b, h], []],
            ["float", "float", "Scalar"],
            _K_LOSS_FWD,
            self._jitter(6_000),
            seq=True,
        )
        return self.seqno

    def _backward(self, seq_loss: int, fwd_flows: list[int], seq_relu: list[int],
                  seq_lin: list[int]) -> Iterator[list[dict[str, Any]]]:
        """Backward on the autograd thread, with DDP-style bucketed all-reduces."""
        h, b = _HIDDEN, _BATCH
        layer_bytes = b * h * 4

        # backward on the autograd thread; DDP-style bucketed all-reduce on the NCCL stream
        self._switch(self.tid_bwd, self.now + self._u(5_000, 15_000))
        self._backward_node(
            "MseLossBackward0",
            seq_loss,
            "aten::mse_loss_backward",
            [[], [b, h], [b, h], []],
            ["float", "float", "float", "Scalar"],
            _K_LOSS_BWD,
            self._jitter(4_000),
        )
        in_bucket = 0
        bucket_elems = 0
        bucket_cap = 1
        for layer in reversed(range(self.layers)):
            self._backward_node(
                "ReluBackward0",
                seq_relu[layer],
                "aten::threshold_backward",
                [[b, h], [b, h], []],
                ["float", "float", "Scalar"],
                _K_THRESHOLD_BWD,
                self._u(3_000, 4_200),
            )
            self._addmm_backward(seq_lin[layer], fwd_flows[layer])
            self._memory(self.addr_base + layer * layer_bytes, -layer_bytes)
            in_bucket += 1
            bucket_elems += h * h + h
            if in_bucket == bucket_cap or layer == 0:
                self._collective(
                    "allreduce",
                    "nccl:all_reduce",
                    "Float",
                    4,
                    bucket_elems,
                    bucket_elems,
                    _K_ALLREDUCE,
                    "cudaLaunchKernel",
                )
                in_bucket = 0
                bucket_elems = 0
                bucket_cap = _LAYERS_PER_BUCKET
            if self.open_ops == 0 and len(self.events) >= _CHUNK_EVENTS:
                yield self._flush()

    def _addmm_backward(self, seq: int, flow_id: int) -> None:
        """One linear layer's backward node (ends the layer's fwd->bwd flow): the input
        and weight gradient GEMMs."""
        h, b = _HIDDEN, _BATCH
        ext_ev = self._next_ext()
        tok_ev = self._begin(
            "cpu_op",
            "autograd::engine::evaluate_function: AddmmBackward0",
            {"External id": ext_ev, "Sequence number": seq, "Fwd thread id": 1},
        )
        self.events.append(
            {
                "ph": "f",
                "id": flow_id,
                "pid": self.pid,
                "tid": self.tid,
                "ts": tok_ev[0]["ts"],
                "cat": "fwdbwd",
                "name": "fwdbwd",
                "bp": "e",
            }
        )
        ext_n = self._next_ext()
        tok_n = self._begin(
            "cpu_op",
            "AddmmBackward0",
            {
                "External id": ext_n,
                "Sequence number": seq,
                "Fwd thread id": 1,
                "Input Dims": [[b, h]],
                "Input type": ["float"],
            },
        )
        tok_m, ext = self._op("aten::mm", [[b, h], [h, h]], ["float", "float"])
        self._launch(_K_GEMM_DGRAD, ext, self._jitter(26_000))
        self._end(tok_m)
        tok_m, ext = self._op("aten::mm", [[h, b], [b, h]], ["float", "float"])
        self._launch(_K_GEMM_WGRAD, ext, self._jitter(28_000), api="cudaLaunchKernelExC")
        self._end(tok_m)
        self._end(tok_n)
        self._end(tok_ev)

    def _optimizer_step(self) -> None:
        """The optimizer: one CUDA-graph replay after the gradient all-reduces."""
        # optimizer: one CUDA-graph replay, after the gradient all-reduces finished
        self._switch(self.tid_main, self.now + self._u(3_000, 10_000))  # main waited in backward
        ext_o = self._next_ext()
        tok_o = self._begin("user_annotation", "Optimizer.step#SGD.step", {"External id": ext_o})
        self._wait(ext_o, COMPUTE_STREAM, NCCL_STREAM)
        corr, t0 = self._runtime("cudaGraphLaunch", ext_o, self._u(8_000, 20_000), True)
        not_before = t0 + self._u(2_000, 6_000)
        g_start = g_end = 0
        for node, k in enumerate(_K_GRAPH):
            start = self._gpu_start(COMPUTE_STREAM, not_before)
            dur = self._jitter(9_000 if node else 4_000)
            args = self._kernel_args(k, ext_o, COMPUTE_STREAM, corr)
            args["graph id"] = _GRAPH_ID
            args["graph node id"] = 4_294_967_296 + node
            self._gpu_event("kernel", k.name, COMPUTE_STREAM, start, dur, args, corr)
            if node == 0:
                g_start = start
            g_end = start + dur
        self._span(
            "gpu_user_annotation",
            "Optimizer.step#SGD.step",
            g_start,
            g_end,
            {"External id": ext_o},
            self.device,
            COMPUTE_STREAM,
        )
        self._end(tok_o)

    def _metrics(self, addr_in: int) -> None:
        """Metrics: an all-gather, a DtoD snapshot, a blocking ``.item()``; frees the batch."""
        h, b = _HIDDEN, _BATCH
        layer_bytes = b * h * 4

        # metrics: all-gather of an int8 flag vector, a DtoD snapshot, a blocking .item()
        self._collective(
            "allgather",
            "nccl:all_gather",
            "Char",
            1,
            8,
            8 * self.world_size,
            _K_ALLGATHER,
            "cudaLaunchKernelExC",
        )
        tok1, _ = self._op("aten::clone", [[h, h], []], ["float", ""])
        tok2, ext = self._op("aten::copy_", [[h, h], [h, h], []], ["float", "float", "Scalar"])
        self._copy(
            "gpu_memcpy",
            _MEMCPY_NAMES["DtoD"],
            ext,
            h * h * 4,
            self._jitter(h * h * 4 // 600),
            COMPUTE_STREAM,
        )
        self._end(tok2)
        self._end(tok1)
        self._wait(None, COMPUTE_STREAM, NCCL_STREAM)
        tok1, _ = self._op("aten::item", [[]], ["float"])
        tok2, ext = self._op("aten::_local_scalar_dense", [[]], ["float"])
        self._copy(
            "gpu_memcpy", _MEMCPY_NAMES["DtoH"], ext, 4, self._u(1_100, 2_600), COMPUTE_STREAM
        )
        sync_end = max(
            self.now + self._u(800, 2_000), self.stream_free[COMPUTE_STREAM] + self._u(1_000, 4_000)
        )
        self._runtime("cudaStreamSynchronize", ext, sync_end - self.now, False)
        self._end(tok2)
        self._end(tok1)
        self._memory(addr_in, -layer_bytes)

    def _backward_node(
        self, node: str, seq: int, op: str, dims: list[Any], types: list[str], k: _Kernel, dur: int
    ) -> None:
        ext = self._next_ext()
        tok_ev = self._begin(
            "cpu_op",
            f"autograd::engine::evaluate_function: {node}",
            {"External id": ext, "Sequence number": seq, "Fwd thread id": 1},
        )
        ext = self._next_ext()
        tok_n = self._begin(
            "cpu_op",
            node,
            {
                "External id": ext,
                "Sequence number": seq,
                "Fwd thread id": 1,
                "Input Dims": dims[:1],
                "Input type": types[:1],
            },
        )
        tok, ext = self._op(op, dims, types)
        self._launch(k, ext, dur)
        self._end(tok)
        self._end(tok_n)
        self._end(tok_ev)

    def _flush(self) -> list[dict[str, Any]]:
        out = self.events
        self.events = []
        return out
