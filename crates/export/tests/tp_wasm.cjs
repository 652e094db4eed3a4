#!/usr/bin/env node
// Runs Perfetto's trace processor compiled to WebAssembly (trace_processor.wasm, the build the
// Perfetto UI uses) as a byte pipe: TraceProcessorRpcStream requests on stdin, responses on
// stdout. It is the transport half of tests/perfetto_check.py's fallback for machines that
// cannot download the native trace_processor_shell; the protocol (framing, sequence numbers,
// query results) is handled in Python by the `perfetto` package's own RPC client.
//
// The .wasm talks to its host through a small set of Emscripten imports; this file provides
// just enough of them for an in-memory trace processor (no file system, no threads): clocks,
// heap growth, stderr, and failing stubs for file syscalls.
//
// usage: node tp_wasm.cjs path/to/trace_processor.wasm
'use strict';

const fs = require('fs');

const wasmPath = process.argv[2];
if (!wasmPath) {
  process.stderr.write('usage: node tp_wasm.cjs TRACE_PROCESSOR_WASM\n');
  process.exit(2);
}

const REQ_BUF_SIZE = 32 * 1024 * 1024; // what the Perfetto UI's wasm bridge uses
const ENOSYS = 52; // Emscripten/WASI errno values
const EBADF = 8;

let memory = null;
const u8 = () => new Uint8Array(memory.buffer);
const dv = () => new DataView(memory.buffer);
const cstr = (ptr) => {
  if (!ptr) return '';
  const m = u8();
  let end = ptr;
  while (m[end]) end++;
  return Buffer.from(m.subarray(ptr, end)).toString('utf8');
};

let stderrLine = '';
const writeStderr = (bytes) => {
  stderrLine += Buffer.from(bytes).toString('utf8');
  const nl = stderrLine.lastIndexOf('\n');
  if (nl >= 0) {
    process.stderr.write(stderrLine.slice(0, nl + 1));
    stderrLine = stderrLine.slice(nl + 1);
  }
};

const fail = (what) => {
  throw new Error(`trace_processor.wasm: ${what}`);
};

const setTm = (ptr, d, utc) => {
  const v = dv();
  const get = (f) => (utc ? d[`getUTC${f}`]() : d[`get${f}`]());
  const year = get('FullYear');
  const start = utc ? Date.UTC(year, 0, 1) : new Date(year, 0, 1).getTime();
  const yday = Math.floor((d.getTime() - start) / 86400000);
  const fields = [get('Seconds'), get('Minutes'), get('Hours'), get('Date'), get('Month'),
    year - 1900, get('Day'), yday, 0];
  fields.forEach((x, i) => v.setInt32(ptr + 4 * i, x, true));
  v.setInt32(ptr + 36, utc ? 0 : -d.getTimezoneOffset() * 60, true); // tm_gmtoff
  v.setUint32(ptr + 40, 0, true); // tm_zone: none
};

const env = {
  emscripten_get_now: () => performance.now(),
  emscripten_date_now: () => Date.now(),
  emscripten_get_heap_max: () => 4 * 1024 * 1024 * 1024 - 65536,
  emscripten_resize_heap: (requested) => {
    const need = (requested >>> 0) - memory.buffer.byteLength;
    if (need <= 0) return 1;
    try {
      memory.grow(Math.ceil(need / 65536));
      return 1;
    } catch (e) {
      return 0;
    }
  },
  emscripten_err: (ptr) => writeStderr(Buffer.from(cstr(ptr) + '\n')),
  __assert_fail: (cond, file, line, func) =>
    fail(`assertion failed: ${cstr(cond)} at ${cstr(file)}:${line} ${cstr(func)}`),
  _abort_js: () => fail('abort() called'),
  _tzset_js: (timezone, daylight, stdName, dstName) => {
    const v = dv();
    v.setInt32(timezone, 0, true);
    v.setInt32(daylight, 0, true);
    u8().set(Buffer.from('UTC\0'), stdName);
    u8().set(Buffer.from('UTC\0'), dstName);
  },
  _gmtime_js: (t, tmPtr) => setTm(tmPtr, new Date(Number(t) * 1000), true),
  _localtime_js: (t, tmPtr) => setTm(tmPtr, new Date(Number(t) * 1000), true),
  _timegm_js: (tmPtr) => {
    const v = dv();
    const g = (i) => v.getInt32(tmPtr + 4 * i, true);
    return BigInt(Math.floor(Date.UTC(g(5) + 1900, g(4), g(3), g(2), g(1), g(0)) / 1000));
  },
  _mmap_js: () => -ENOSYS,
  _munmap_js: () => -ENOSYS,
};
// Every file-system syscall fails: the trace comes in through the RPC, not from a file.
for (const name of ['fcntl64', 'ioctl', 'faccessat', 'fchmod', 'chmod', 'fchown32', 'openat',
  'fstat64', 'stat64', 'newfstatat', 'lstat64', 'ftruncate64', 'getcwd', 'mkdirat',
  'readlinkat', 'rmdir', 'unlinkat', 'utimensat']) {
  env[`__syscall_${name}`] = () => -ENOSYS;
}

const wasi = {
  fd_write: (fd, iov, iovcnt, pnum) => {
    const v = dv();
    let written = 0;
    for (let i = 0; i < iovcnt; i++) {
      const ptr = v.getUint32(iov + 8 * i, true);
      const len = v.getUint32(iov + 8 * i + 4, true);
      if (fd === 1 || fd === 2) writeStderr(u8().slice(ptr, ptr + len)); // stdout is the RPC pipe
      written += len;
    }
    v.setUint32(pnum, written, true);
    return 0;
  },
  fd_read: () => EBADF,
  fd_close: () => 0,
  fd_seek: () => EBADF,
  fd_sync: () => 0,
  fd_fdstat_get: (fd, buf) => {
    if (fd > 2) return EBADF;
    const v = dv();
    v.setUint8(buf, 2); // character device
    v.setUint16(buf + 2, 0, true);
    v.setBigUint64(buf + 8, 0n, true);
    v.setBigUint64(buf + 16, 0n, true);
    return 0;
  },
  clock_time_get: (id, precision, out) => {
    const ns = id === 0 ? BigInt(Date.now()) * 1000000n : process.hrtime.bigint();
    dv().setBigUint64(out, ns, true);
    return 0;
  },
  environ_sizes_get: (count, size) => {
    dv().setUint32(count, 0, true);
    dv().setUint32(size, 0, true);
    return 0;
  },
  environ_get: () => 0,
};

// A wasm function can only be put into a funcref table if it is a wasm function, so the
// JS reply callback is wrapped in a tiny module that imports it with the signature
// void(i32 ptr, i32 len) and exports it again (what Emscripten's addFunction does).
const wrapReply = (fn) => {
  const bytes = new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    0x01, 0x06, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x00, // type 0: (i32, i32) -> ()
    0x02, 0x07, 0x01, 0x01, 0x6d, 0x01, 0x66, 0x00, 0x00, // import "m" "f" : type 0
    0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00, // export "f" = func 0
  ]);
  const inst = new WebAssembly.Instance(new WebAssembly.Module(bytes), { m: { f: fn } });
  return inst.exports.f;
};

const tpModule = new WebAssembly.Module(fs.readFileSync(wasmPath));
const instance = new WebAssembly.Instance(tpModule, { env, wasi_snapshot_preview1: wasi });
const ex = instance.exports;
memory = ex.memory;
ex.emscripten_stack_init();
ex.__wasm_call_ctors();

let closed = false;
const onReply = (ptr, len) => {
  if (ptr === 0 && len === 0) {
    // The trace processor asks to disconnect (after a fatal RPC error it has already sent).
    closed = true;
    process.stdout.end();
    return;
  }
  if (!closed) process.stdout.write(Buffer.from(u8().subarray(ptr >>> 0, (ptr >>> 0) + len)));
};
const table = ex.__indirect_function_table;
const replyIndex = table.grow(1);
table.set(replyIndex, wrapReply(onReply));
const reqBuf = ex.trace_processor_rpc_init(replyIndex, REQ_BUF_SIZE) >>> 0;

process.stdin.on('data', (chunk) => {
  for (let off = 0; off < chunk.length && !closed; off += REQ_BUF_SIZE) {
    const part = chunk.subarray(off, Math.min(chunk.length, off + REQ_BUF_SIZE));
    u8().set(part, reqBuf);
    ex.trace_processor_on_rpc_request(part.length);
  }
});
process.stdin.on('end', () => {
  if (stderrLine) process.stderr.write(stderrLine + '\n');
  process.exit(0);
});
