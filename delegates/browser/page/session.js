// tflkit browser harness, the WebDriver-session transport: for a browser that cannot reach the
// machine that serves the job (a phone in a device farm). The host (webdriver_device.py) opens
// a secure page (file:///), runs this file through WebDriver's execute, pushes every file the page
// needs (session.json, the job, LiteRT.js, harness.js) in base64 chunks with tflkitStore.put,
// then tflkitStore.start() runs harness.js as usual. What the page posts waits in an outbox that
// the host drains with tflkitStore.take, in chunks of at most MAX bytes.
(() => {
  const files = new Map();  // path -> [Uint8Array, ...] as pushed
  const outbox = [];  // {path, bytes, sent}

  function decode(b64) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(b64);
    const text = atob(b64);
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }

  function encode(bytes) {
    if (bytes.toBase64) return bytes.toBase64();
    let text = '';
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(text);
  }

  function bytesOf(path) {
    const parts = files.get(path);
    if (!parts) throw new Error(`GET ${path}: the host pushed no such file`);
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const part of parts) {
      out.set(part, at);
      at += part.length;
    }
    return out;
  }

  const textOf = (path) => new TextDecoder().decode(bytesOf(path));
  const blobUrl = (data, type) => URL.createObjectURL(new Blob([data], {type}));

  self.tflkitTransport = {
    async post(path, body, isJson) {
      const bytes = isJson ? new TextEncoder().encode(JSON.stringify(body)) :
          new Uint8Array(body);  // a copy: the caller may reuse its buffer
      outbox.push({path, bytes, sent: 0});
    },
    async getJson(path) {
      return JSON.parse(textOf(path));
    },
    async getBytes(path) {
      return bytesOf(path);
    },
    async loadLiteRt(load) {
      // LiteRT.js from blob URLs: its one bare import rewritten to the pushed wasm-utils, and its
      // Emscripten glue told where the pushed .wasm is (locateFile; the '#name.js' suffix makes
      // LiteRT.js take the URL as the glue file itself).
      const utils = blobUrl(bytesOf('litertjs/wasm-utils/dist/index.js'), 'text/javascript');
      const core = textOf('litertjs/core/dist/index.js')
          .replaceAll('"@litertjs/wasm-utils"', JSON.stringify(utils));
      const L = await import(blobUrl(core, 'text/javascript'));
      const name = load.threads ? 'litert_wasm_threaded_internal' : 'litert_wasm_jspi_internal';
      const wasm = blobUrl(bytesOf(`litertjs/core/wasm/${name}.wasm`), 'application/wasm');
      self.Module = {locateFile: () => wasm};
      const glue = blobUrl(bytesOf(`litertjs/core/wasm/${name}.js`), 'text/javascript');
      await L.loadLiteRt(`${glue}#${name}.js`, load);
      return L;
    },
  };

  self.tflkitStore = {
    put(path, b64, first) {
      if (first) files.set(path, []);
      files.get(path).push(decode(b64));
      return true;
    },
    start() {
      document.title = 'tflkit browser harness';
      document.body.innerHTML = '<h1>tflkit browser harness</h1><p>Status: ' +
          '<code id="status">starting</code></p><pre id="log"></pre>';
      import(blobUrl(bytesOf('harness.js'), 'text/javascript')).catch((e) => {
        self.tflkitTransport.post('event', {type: 'fatal', error: `harness.js: ${e}`}, true);
      });
      return true;
    },
    take(max) {
      const chunks = [];
      let budget = max;
      while (outbox.length && budget > 0) {
        const item = outbox[0];
        const end = Math.min(item.bytes.length, item.sent + budget);
        chunks.push({path: item.path, offset: item.sent, total: item.bytes.length,
          data: encode(item.bytes.subarray(item.sent, end))});
        budget -= end - item.sent;
        item.sent = end;
        if (item.sent >= item.bytes.length) outbox.shift();
        else break;
      }
      return chunks;
    },
  };
  return true;
})();
