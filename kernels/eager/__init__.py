"""Generated eager element-wise kernels (see jitgrad.ops.gen_kernels)."""
