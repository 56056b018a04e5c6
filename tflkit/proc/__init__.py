"""Child processes: spawning in a session of their own with a timeout, interrupts, the CPU smoke
run, and the environment a child touching the GPU needs."""
