"""The browser devices: a device job run by LiteRT.js in a browser, as a device of ``device run``
and ``device validate`` (harness kind ``browser``, ``android_harness/PROTOCOL.md``).

The runtime they drive (the page, its server, Chromium, LiteRT.js's provisioning, the job and
its result folder) is ``tflkit.delegates.browser``, with the device job protocol
(``tflkit.delegates.device_protocol``); here are the devices and their transports:

- ``device``: ``--device browser[:ADAPTER]``, this machine's headless Chromium;
- ``remote``: ``--device adb:SERIAL --via browser`` and ``--device url``, a browser tflkit does
  not launch here;
- ``webdriver`` and ``webdriver_device``: ``--device webdriver:URL``, the browser of a W3C
  WebDriver session;
- ``__main__``: ``python -m tflkit.harness.browser run JOB_DIR RESULT_DIR``.

Nothing heavy is imported here.
"""
