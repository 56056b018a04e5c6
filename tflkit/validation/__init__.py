"""``validate``: runners x inputs -> comparisons (:mod:`tflkit.validation.run`, wiring
:mod:`~tflkit.validation.runners`, :mod:`~tflkit.validation.noise` and
:mod:`~tflkit.validation.verdicts`); the input sets (:mod:`tflkit.validation.inputs`), the
``.tflite`` reference, and localization of where a runner parts from the CPU."""
