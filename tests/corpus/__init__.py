"""The test model corpus: small generated ``.tflite`` models and real downloaded ones."""
