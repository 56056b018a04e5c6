"""LiteRT-LM ``.litertlm`` bundles: the file format, inspect/check over its TFLite sections, the
LiteRT-LM engine as a runner, and validate/rewrite of a bundle."""
