// tflkit browser harness: run one device job with LiteRT.js and post the result to the host.
//
// Served by delegates/browser/server.py next to LiteRT.js (./litertjs/) and the job
// (./job/); every URL is relative to this page, whose path carries the job's secret token.
// Protocol: android_harness/PROTOCOL.md (harness kind "browser"). The host tells this page what
// to run in ./session.json: the backends (webgpu_fp32, webgpu_fp16, wasm), the adapter's
// feature level, how to request the WebGPU device, and how many times to run each input set.
//
// What the page posts: ./event (JSON: hello, ready, backend_start, backend_done, done, fatal) and
// ./output/<session>/<backend>/<set>/<run>/<k> (the raw little-endian bytes of one output of one
// run). The host writes the result folder; the page never decides "ok" on numbers alone: any
// WebGPU error seen while a backend compiled or ran makes that backend run_error, because LiteRT.js
// keeps going with wrong outputs when a compute pipeline is invalid (WebGPU compatibility mode
// with a device that lacks the adapter's limits).

const STATUS = document.getElementById('status');
const LOG = document.getElementById('log');

// -- console capture: every line the page, LiteRT.js or its Wasm prints, tagged by backend ------
const consoleLines = [];
let currentBackend = null;
for (const level of ['log', 'info', 'warn', 'error', 'debug']) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    const text = args
      .map((a) => (typeof a === 'string' ? a : a instanceof Error ? String(a) : safeJson(a)))
      .join(' ')
      // LiteRT.js styles its own warnings with %c: drop the markers
      .replace(/%c/g, '');
    consoleLines.push({backend: currentBackend, level, text});
    original(...args);
  };
}

function safeJson(value) {
  try {
    return JSON.stringify(value);
  } catch (e) {
    return String(value);
  }
}

function show(text) {
  STATUS.textContent = text;
  LOG.textContent += text + '\n';
}

// How the page reaches the host: over HTTP, relative to this page (the job's server), unless a
// page driven through a WebDriver session alone installed window.tflkitTransport (session.js)
// before this module ran: then files come from what the host pushed and posts wait in an outbox
// the host drains.
const http = {
  async post(path, body, isJson) {
    const init = {method: 'POST', body: isJson ? JSON.stringify(body) : body};
    if (isJson) init.headers = {'Content-Type': 'application/json'};
    const response = await fetch(path, init);
    if (!response.ok) throw new Error(`POST ${path}: HTTP ${response.status}`);
  },
  async getJson(path) {
    const response = await fetch(path, {cache: 'no-store'});
    if (!response.ok) throw new Error(`GET ${path}: HTTP ${response.status}`);
    return response.json();
  },
  async getBytes(path) {
    const response = await fetch(path, {cache: 'no-store'});
    if (!response.ok) throw new Error(`GET ${path}: HTTP ${response.status}`);
    return new Uint8Array(await response.arrayBuffer());
  },
  async loadLiteRt(load) {
    const L = await import('./litertjs/core/dist/index.js');
    await L.loadLiteRt('./litertjs/core/wasm/', load);
    return L;
  },
};
const transport = self.tflkitTransport || http;

async function post(path, body, isJson = true) {
  return transport.post(path, body, isJson);
}

async function getJson(path) {
  return transport.getJson(path);
}

async function getBytes(path) {
  return transport.getBytes(path);
}

function oneLine(error) {
  const text = error && error.message ? error.message : String(error);
  return text.replace(/\s+/g, ' ').trim();
}

// -- dtypes -------------------------------------------------------------------------------------
// LiteRT element types (litert_model_types.h) -> NumPy names; the public JS API takes only the
// first three (float32, int32, uint8).
const ELEMENT_TYPES = {
  1: 'float32', 2: 'int32', 3: 'uint8', 4: 'int64', 5: 'string', 6: 'bool', 7: 'int16',
  8: 'complex64', 9: 'int8', 10: 'float16', 11: 'float64', 12: 'complex128', 13: 'uint64',
  14: 'resource', 15: 'variant', 16: 'uint32', 17: 'uint16', 18: 'int4', 19: 'bfloat16',
};
const PROTOCOL_DTYPES = new Set(
    ['int8', 'uint8', 'int16', 'int32', 'int64', 'bool', 'float16', 'float32']);
const JS_TYPED = {float32: Float32Array, int32: Int32Array, uint8: Uint8Array};
const HOST_MEMORY = 1;  // TensorBufferType.HOST_MEMORY

function bytesOf(typed) {
  return new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
}

// -- WebGPU: adapter, device, and every error the device reports -------------------------------
const gpu = {adapter: null, device: null, info: null, reason: null, errors: [], lost: null};

function gpuError(kind, message) {
  gpu.errors.push({backend: currentBackend, kind, message: String(message).trim()});
}

async function setUpWebGpu(session) {
  if (!('gpu' in navigator) || !navigator.gpu) {
    gpu.reason = 'this browser has no WebGPU (navigator.gpu is missing; a secure context and ' +
        '--enable-unsafe-webgpu are needed headless)';
    return;
  }
  const options = session.adapter.feature_level === 'compatibility' ?
      {featureLevel: 'compatibility'} : {};
  let adapter = await navigator.gpu.requestAdapter(options);
  if (session.adapter.feature_level === 'any' && (!adapter || adapter.info.isFallbackAdapter)) {
    // The browser's choice: a core adapter, unless it is missing or a software fallback and a
    // compatibility-mode one is a real GPU (phones without core WebGPU, ANGLE on GL).
    const compatible = await navigator.gpu.requestAdapter({featureLevel: 'compatibility'});
    if (compatible && (!adapter || !compatible.info.isFallbackAdapter)) adapter = compatible;
  }
  if (!adapter) {
    gpu.reason = `no WebGPU adapter (requestAdapter(${JSON.stringify(options)}) gave null)`;
    return;
  }
  const info = adapter.info || {};
  if (session.adapter.reject_fallback && info.isFallbackAdapter) {
    gpu.reason = `asked for the ${session.adapter.name} adapter, Chromium gave its fallback ` +
        `adapter (${info.architecture || info.description || 'SwiftShader'}) instead`;
    return;
  }
  const limits = {};
  for (const key in adapter.limits) limits[key] = adapter.limits[key];
  gpu.adapter = adapter;
  gpu.info = {
    vendor: info.vendor || '',
    architecture: info.architecture || '',
    device: info.device || '',
    description: info.description || '',
    is_fallback_adapter: Boolean(info.isFallbackAdapter),
    // compatibility-mode adapters lack 'core-features-and-limits'
    feature_level: adapter.features.has('core-features-and-limits') ? 'core' : 'compatibility',
    requested_feature_level: session.adapter.feature_level,
    shader_f16: adapter.features.has('shader-f16'),
    subgroups: adapter.features.has('subgroups'),
    features: [...adapter.features].sort(),
    adapter_limits: limits,
    webgpu_device: session.webgpu_device,
  };
  const wanted = ['shader-f16', 'subgroups'].filter((f) => adapter.features.has(f));
  let descriptor;
  if (session.webgpu_device === 'default-limits') {
    // Test-only: what a page that forgets the limits gets; in compatibility mode LiteRT.js then
    // builds pipelines the device refuses (256 invocations > 128) and returns wrong numbers.
    descriptor = {requiredFeatures: wanted};
  } else {
    descriptor = {requiredFeatures: wanted, requiredLimits: limits};
  }
  const device = await adapter.requestDevice(descriptor);
  device.addEventListener('uncapturederror', (event) => {
    gpuError('uncaptured', event.error && event.error.message);
  });
  device.lost.then((lost) => {
    gpu.lost = `${lost.reason}: ${lost.message}`;
    gpuError('device lost', gpu.lost);
  });
  const deviceLimits = {};
  for (const key in device.limits) deviceLimits[key] = device.limits[key];
  gpu.info.device_limits = deviceLimits;
  gpu.device = device;
}

const SCOPES = ['validation', 'out-of-memory', 'internal'];

function pushScopes() {
  if (!gpu.device) return;
  for (const scope of SCOPES) gpu.device.pushErrorScope(scope);
}

async function popScopes(stage) {
  if (!gpu.device) return;
  for (const scope of [...SCOPES].reverse()) {
    const error = await gpu.device.popErrorScope();
    if (error) gpuError(`${scope} (${stage})`, error.message);
  }
}

// -- one backend --------------------------------------------------------------------------------
const BACKENDS = {
  webgpu_fp32: {accelerator: 'webgpu', gpuOptions: {precision: 'fp32'}},
  webgpu_fp16: {accelerator: 'webgpu', gpuOptions: {precision: 'fp16'}},
  wasm: {accelerator: 'wasm'},
};

class Unavailable extends Error {}
class RunError extends Error {}

function vectorToArray(vector) {
  const out = [];
  for (let i = 0; i < vector.size(); i++) out.push(vector.get(i));
  vector.delete();
  return out;
}

// The public API: loadAndCompile, a signature runner, Tensor, data().
async function compileWithApi(L, bytes, options, signature) {
  const model = await L.loadAndCompile(bytes, options);
  const runner = signature == null ? model : model.signatures[signature];
  if (!runner) {
    model.delete();
    throw new RunError(`no signature ${JSON.stringify(signature)}; the model has ` +
        JSON.stringify(Object.keys(model.signatures)));
  }
  const inputs = runner.getInputDetails().map((d) => ({name: d.name, dtype: d.dtype}));
  const outputs = runner.getOutputDetails().map(
      (d) => ({name: d.name, dtype: d.dtype, shape: [...d.shape]}));
  return {
    path: 'api',
    fullyAccelerated: model.isFullyAccelerated,
    inputs,
    outputs,
    unreadable: {},
    async run(feed) {
      const tensors = {};
      for (const input of inputs) {
        tensors[input.name] = new L.Tensor(feed[input.name].typed, feed[input.name].shape);
      }
      try {
        const result = await runner.run(tensors);
        const values = [];
        for (const output of outputs) {
          const tensor = result[output.name];
          const shape = [...tensor.type.layout.dimensions];
          values.push({bytes: bytesOf(await tensor.data()), shape});
          tensor.delete();
        }
        return values;
      } finally {
        for (const tensor of Object.values(tensors)) tensor.delete();
      }
    },
    delete() {
      model.delete();
    },
  };
}

// The Wasm bindings under the public API (LiteRt.liteRtWasm, typed in @litertjs/core's .d.ts):
// the same compile and run, but tensors of any element type in host memory (int64, bool, int8,
// float16, ...) are written and read as raw bytes. Used only when the public API refuses the
// model's signature ("Element type INT64 is not supported.").
async function compileWithBindings(L, bytes, options, signature) {
  const liteRt = L.getGlobalLiteRt();
  const W = liteRt.liteRtWasm;
  const env = L.getDefaultEnvironment();
  const filled = {
    environment: env,
    accelerator: options.accelerator,
    cpuOptions: options.cpuOptions ?? {numThreads: W.getThreadCount()},
    gpuOptions: options.gpuOptions ?? {},
    webNNOptions: {},
  };
  const ptr = W._malloc(bytes.byteLength);
  W.HEAPU8.set(bytes, ptr);
  let wasmModel = null;
  let compiled = null;
  try {
    wasmModel = W.loadModel(env.liteRtEnvironment, ptr, bytes.byteLength);
    compiled = await W.compileModel(env.liteRtEnvironment, wasmModel, filled);
  } catch (e) {
    if (compiled) compiled.delete();
    if (wasmModel) wasmModel.delete();
    W._free(ptr);
    throw e;
  }
  let index = 0;
  const count = wasmModel.getNumSignatures();
  const keys = [];
  for (let i = 0; i < count; i++) {
    const sig = wasmModel.getSignature(i);
    keys.push(sig.key());
    sig.delete();
  }
  if (signature != null) {
    index = keys.indexOf(signature);
    if (index < 0) {
      compiled.delete();
      wasmModel.delete();
      W._free(ptr);
      throw new RunError(`no signature ${JSON.stringify(signature)}; the model has ` +
          JSON.stringify(keys));
    }
  }
  const sig = wasmModel.getSignature(index);
  const describe = (names, typeOf, requirementsOf) => names.map((name, i) => {
    const type = typeOf(index, i);
    const element = type.elementType().value;
    const layout = type.layout();
    const shape = vectorToArray(layout.dimensions());
    layout.delete();
    type.delete();
    const requirements = requirementsOf(index, i);
    const supported = vectorToArray(requirements.supportedTypes()).map((t) => t.value);
    requirements.delete();
    return {name, element, dtype: ELEMENT_TYPES[element] || `element type ${element}`, shape,
      supported};
  });
  const inputs = describe(
      vectorToArray(sig.inputNames()),
      (s, i) => wasmModel.getInputTensorType(s, i),
      (s, i) => compiled.getInputBufferRequirements(s, i));
  const outputs = describe(
      vectorToArray(sig.outputNames()),
      (s, i) => wasmModel.getOutputTensorType(s, i),
      (s, i) => compiled.getOutputBufferRequirements(s, i));
  sig.delete();
  const unreadable = {};
  for (const input of inputs) {
    if (!(input.dtype in JS_TYPED) && !input.supported.includes(HOST_MEMORY)) {
      compiled.delete();
      wasmModel.delete();
      W._free(ptr);
      throw new Unavailable(`input ${input.name} is ${input.dtype.toUpperCase()} and the ` +
          'accelerator wants it in GPU memory: LiteRT.js cannot write it');
    }
  }
  for (const output of outputs) {
    if (!PROTOCOL_DTYPES.has(output.dtype)) {
      unreadable[output.name] = `LiteRT.js output of ${output.dtype} is not in the protocol`;
    }
  }
  return {
    path: 'bindings',
    fullyAccelerated: compiled.isFullyAccelerated(),
    inputs,
    outputs,
    unreadable,
    async run(feed) {
      const buffers = [];
      const owned = [];
      try {
        for (const input of inputs) {
          const given = feed[input.name];
          if (input.dtype in JS_TYPED) {
            let tensor = new L.Tensor(given.typed, given.shape);
            owned.push(tensor);
            if (!input.supported.includes(tensor.getBufferType())) {
              tensor = await tensor.copyTo(input.supported[0]);
              owned.push(tensor);
            }
            buffers.push(tensor.liteRtTensorBuffer);
          } else {
            const type = wasmModel.getInputTensorType(index, inputs.indexOf(input));
            const buffer = W.LiteRtTensorBuffer.createManaged(
                env.liteRtEnvironment, W.LiteRtTensorBufferType.HOST_MEMORY, type,
                given.bytes.byteLength);
            type.delete();
            owned.push(buffer);
            const at = buffer.lock(W.LiteRtTensorBufferLockMode.WRITE);
            try {
              W.HEAPU8.set(given.bytes, at);
            } finally {
              buffer.unlock();
            }
            buffers.push(buffer);
          }
        }
        const results = await compiled.run(index, buffers);
        const values = [];
        for (let k = 0; k < results.length; k++) {
          const buffer = results[k];
          const output = outputs[k];
          const type = buffer.tensorType();
          const layout = type.layout();
          const shape = vectorToArray(layout.dimensions());
          layout.delete();
          type.delete();
          if (output.name in unreadable) {
            values.push(null);
          } else if (buffer.bufferType().value === HOST_MEMORY) {
            if (buffer.offset() !== 0 || buffer.size() < buffer.packedSize()) {
              unreadable[output.name] = 'strided or padded host buffer';
              values.push(null);
            } else {
              const at = buffer.lock(W.LiteRtTensorBufferLockMode.READ);
              try {
                values.push({bytes: W.HEAPU8.slice(at, at + buffer.packedSize()), shape});
              } finally {
                buffer.unlock();
              }
            }
          } else if (output.dtype in JS_TYPED) {
            const tensor = new L.Tensor(buffer, env);
            values.push({bytes: bytesOf(await tensor.data()), shape});
            tensor.delete();
            continue;  // the tensor owned the buffer
          } else {
            unreadable[output.name] = `Element type ${output.dtype.toUpperCase()} is not ` +
                'supported by LiteRT.js in GPU memory (float32, int32, uint8 only)';
            values.push(null);
          }
          buffer.delete();
        }
        return values;
      } finally {
        for (const item of owned.reverse()) item.delete();
      }
    },
    delete() {
      compiled.delete();
      wasmModel.delete();
      W._free(ptr);
    },
  };
}

const UNSUPPORTED_TYPE = /(Element type \S+|DType \S+|Typed array \S+) is not supported/;

async function runBackend(L, name, ctx) {
  const {session, job, model, feeds} = ctx;
  const record = {
    backend: name, status: 'ok', error: null, compile_seconds: null, warmup_seconds: [],
    run_seconds: [], fully_accelerated: null, io_path: null, api_error: null, outputs: [],
    unreadable: {}, runs: [], shapes: [], gpu_errors: [], console: [],
  };
  const spec = BACKENDS[name];
  const isGpu = spec.accelerator === 'webgpu';
  if (isGpu && !gpu.device) {
    record.status = 'unavailable';
    record.error = gpu.reason || 'no WebGPU device';
    return record;
  }
  const options = {...spec};
  if (session.wasm_build === 'threads') {
    options.cpuOptions = {numThreads: job.threads || navigator.hardwareConcurrency || 1};
  }
  const errorsBefore = gpu.errors.length;
  let compiled = null;
  let stage = 'compile';
  try {
    pushScopes();
    const start = performance.now();
    try {
      compiled = await compileWithApi(L, model, options, job.signature);
    } catch (e) {
      const match = UNSUPPORTED_TYPE.exec(oneLine(e));
      if (!match || e instanceof RunError) throw e;
      // The public API refuses the signature's dtypes: say so, then read them ourselves.
      record.api_error = oneLine(e);
      if (!session.raw_io) throw new Unavailable(oneLine(e));
      compiled = await compileWithBindings(L, model, options, job.signature);
    } finally {
      record.compile_seconds = (performance.now() - start) / 1000;
      await popScopes('compile');
    }
    record.io_path = compiled.path;
    record.fully_accelerated = isGpu ? Boolean(compiled.fullyAccelerated) : null;
    record.outputs = compiled.outputs.map((o) => ({name: o.name, dtype: o.dtype, shape: o.shape}));
    const wantNames = compiled.inputs.map((i) => i.name).sort();
    stage = 'run';
    for (let s = 0; s < feeds.length; s++) {
      const feed = feeds[s];
      const given = Object.keys(feed).sort();
      if (JSON.stringify(given) !== JSON.stringify(wantNames)) {
        throw new RunError(`input set ${s} gives ${JSON.stringify(given)}, the signature takes ` +
            JSON.stringify(wantNames));
      }
      for (const input of compiled.inputs) {
        if (feed[input.name].dtype !== input.dtype) {
          throw new RunError(`input ${input.name}: the job gives ${feed[input.name].dtype}, ` +
              `the model takes ${input.dtype}`);
        }
        if (!(input.dtype in JS_TYPED) && compiled.path === 'api') {
          throw new Unavailable(`Element type ${input.dtype.toUpperCase()} is not supported.`);
        }
      }
      const warmups = s === 0 ? session.warmup_runs : 0;
      const total = warmups + session.repeats;
      const times = [];
      for (let r = 0; r < total; r++) {
        pushScopes();
        const t0 = performance.now();
        let values;
        try {
          values = await compiled.run(feed);
        } finally {
          await popScopes(`set ${s} run ${r}`);
        }
        const seconds = (performance.now() - t0) / 1000;
        if (r < warmups) record.warmup_seconds.push(seconds);
        else times.push(seconds);
        const shapes = [];
        for (let k = 0; k < values.length; k++) {
          shapes.push(values[k] === null ? null : values[k].shape);
          if (values[k] === null) continue;
          await post(`output/${session.session}/${name}/${s}/${r}/${k}`, values[k].bytes, false);
        }
        if (r === total - 1) record.shapes.push(shapes);
      }
      record.run_seconds.push(times);
      record.runs.push(total);
    }
  } catch (e) {
    if (e instanceof Unavailable) {
      record.status = 'unavailable';
    } else if (stage === 'compile') {
      record.status = 'compile_error';
    } else {
      record.status = 'run_error';
    }
    record.error = oneLine(e);
  } finally {
    if (compiled) {
      record.unreadable = {...compiled.unreadable};
      try {
        compiled.delete();
      } catch (e) {
        console.warn(`tflkit: deleting the compiled model failed: ${oneLine(e)}`);
      }
    }
  }
  record.gpu_errors = gpu.errors.slice(errorsBefore);
  if (record.status === 'ok' && record.gpu_errors.length) {
    const first = record.gpu_errors[0];
    record.status = 'run_error';
    record.error = `WebGPU reported ${record.gpu_errors.length} error(s) while this backend ` +
        `compiled or ran, so its outputs cannot be trusted: ${first.kind}: ` +
        first.message.split('\n')[0];
  }
  return record;
}

// -- the job ------------------------------------------------------------------------------------
function feedFor(entry, bytes) {
  const ctor = JS_TYPED[entry.dtype];
  const typed = ctor ? new ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength /
      ctor.BYTES_PER_ELEMENT) : null;
  return {dtype: entry.dtype, shape: entry.shape, bytes, typed};
}

async function main() {
  const session = await getJson('session.json');
  const hello = {
    type: 'hello',
    session: session.session,
    user_agent: navigator.userAgent,
    cross_origin_isolated: self.crossOriginIsolated,
    hardware_concurrency: navigator.hardwareConcurrency,
  };
  await post('event', hello);
  show('fetching the job');
  const job = await getJson('job/job.json');
  const model = await getBytes('job/model');
  const feeds = [];
  for (let s = 0; s < job.input_sets.length; s++) {
    const feed = {};
    for (let k = 0; k < job.input_sets[s].length; k++) {
      const entry = job.input_sets[s][k];
      feed[entry.name] = feedFor(entry, await getBytes(`job/input/${s}/${k}`));
    }
    feeds.push(feed);
  }
  if (session.backends.some((b) => BACKENDS[b] && BACKENDS[b].accelerator === 'webgpu')) {
    show('requesting the WebGPU adapter');
    try {
      await setUpWebGpu(session);
    } catch (e) {
      gpu.reason = `WebGPU set-up failed: ${oneLine(e)}`;
    }
  }
  show('loading LiteRT.js');
  let L;
  try {
    const load = session.wasm_build === 'threads' ? {threads: true} : {jspi: true};
    L = await transport.loadLiteRt(load);
    if (gpu.device) L.setWebGpuDevice(gpu.device);
  } catch (e) {
    await post('event', {type: 'fatal', session: session.session,
      error: `LiteRT.js did not load: ${oneLine(e)}`, console: consoleLines});
    show('LiteRT.js did not load');
    return;
  }
  await post('event', {type: 'ready', session: session.session, gpu: gpu.info,
    webgpu_reason: gpu.reason, wasm_build: session.wasm_build});
  for (const name of session.backends) {
    show(`running ${name}`);
    currentBackend = name;
    const first = consoleLines.length;
    console.info(`tflkit: backend ${name} start`);
    await post('event', {type: 'backend_start', session: session.session, backend: name});
    let record;
    if (!(name in BACKENDS)) {
      record = {backend: name, status: 'unavailable',
        error: `the browser harness runs ${Object.keys(BACKENDS).join(', ')}`};
    } else {
      record = await runBackend(L, name, {session, job, model, feeds});
    }
    console.info(`tflkit: backend ${name} end`);
    record.console = consoleLines.slice(first).map((line) => `${line.level}: ${line.text}`);
    currentBackend = null;
    await post('event', {type: 'backend_done', session: session.session, record});
  }
  await post('event', {type: 'done', session: session.session});
  show('done');
}

main().catch(async (e) => {
  show(`failed: ${oneLine(e)}`);
  try {
    await post('event', {type: 'fatal', error: `the page failed: ${oneLine(e)}`});
  } catch (ignored) {
    // the host is gone: nothing to tell
  }
});
