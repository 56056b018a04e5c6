"""``validate``: runners x inputs -> comparisons (:mod:`tflkit.validation.run`); the input sets,
the ``.tflite`` reference, and localization of where a runner parts from the CPU."""
