"""The real GPU accelerator: the probe engine and its worker, the accelerator's log parser,
whether a GPU is available, the probe cache and crash bisection."""
