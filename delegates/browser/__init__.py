"""The LiteRT.js runtime: run a device job with LiteRT.js in a real Chromium (WebGPU and Wasm).

One job folder in (``tflkit.delegates.device_protocol``), one result folder out, as the Linux and
Android harnesses write them (``android_harness/PROTOCOL.md``, harness kind ``browser``). The
``validate`` runners ``webgpu-fp16``, ``webgpu-fp32`` and ``wasm`` (``tflkit.delegates.litert_js``)
run it in a child (``tflkit.delegates._browser_worker``); the browser *devices* (``--device
browser``, ``url``, ``webdriver:URL``) are ``tflkit.harness.browser``'s.

- ``provision``: fetches the pinned ``@litertjs/core`` and ``@litertjs/wasm-utils`` with npm into
  the user's cache, once (nothing comes from a CDN at run time);
- ``page/``: the page (``index.html`` + ``harness.js`` + ``session.js``) that runs the job in the
  browser;
- ``server``: a one-job HTTP server on 127.0.0.1 with a secret token in every path;
- ``chromium``: Chromium driven by Playwright, with the flags that give each WebGPU adapter;
- ``page_run``: one session of the page in a browser, followed until it is done;
- ``result``: the page's records as the protocol's result folder;
- ``job``: :func:`~tflkit.delegates.browser.job.run_browser_job`, which ties them together, and
  :func:`~tflkit.delegates.browser.job.write_browser_job`;
- ``errors``: its errors (exit code 4 in the CLI).

Nothing heavy is imported here.
"""
