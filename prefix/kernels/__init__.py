"""Native kernels, compiled on first use with the system C compiler and cached."""
