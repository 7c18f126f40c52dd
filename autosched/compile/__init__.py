"""Build: compile rendered source (C compiler, NVRTC, Triton) into kernels a runner can call."""
