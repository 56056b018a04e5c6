"""``tflkit doctor``: what this machine has for tflkit, and the command that brings each missing
piece.

:func:`tflkit.doctor.survey.survey` looks (nothing is installed, fetched or changed): tflkit and
the runtimes (:mod:`.python_side`), the GPU accelerator through the probe in a child process and
the Vulkan/Mesa stack under it (:mod:`.gpu_side`), the browser harness, the converter
environments and the configured devices (:mod:`.tools`). Each finding is an :class:`.items.Item`.
"""
