"""The browser harness: run a device job with LiteRT.js in a real Chromium (WebGPU and Wasm).

One job folder in (``tflkit.harness.protocol``), one result folder out, as the Linux and Android
harnesses write them (``android_harness/PROTOCOL.md``, harness kind ``browser``):

- ``provision``: fetches the pinned ``@litertjs/core`` and ``@litertjs/wasm-utils`` with npm into
  the user's cache, once (nothing comes from a CDN at run time);
- ``page/``: the page (``index.html`` + ``harness.js``) that runs the job in the browser;
- ``server``: a one-job HTTP server on 127.0.0.1 with a secret token in every path;
- ``chromium``: Chromium driven by Playwright, with the flags that give each WebGPU adapter;
- ``job``: :func:`~tflkit.harness.browser.job.run_browser_job`, which ties them together, and
  :func:`~tflkit.harness.browser.job.write_browser_job`;
- ``errors``: its errors (exit code 4 in the CLI).

Nothing heavy is imported here.
"""
