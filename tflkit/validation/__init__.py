"""``validate``: one pipeline for every subject (:mod:`tflkit.validation.pipeline`): a ``.tflite``
(:mod:`~tflkit.validation.tflite_subject`, wiring :mod:`~tflkit.validation.runners`,
:mod:`~tflkit.validation.noise` and :mod:`~tflkit.validation.verdicts`), its KV-cache program
(:mod:`~tflkit.validation.steps`) and a ``.litertlm`` bundle
(:mod:`~tflkit.validation.bundle_subject`); the input sets (:mod:`tflkit.validation.inputs`), the
``.tflite`` reference, and localization of where a runner parts from the CPU."""
