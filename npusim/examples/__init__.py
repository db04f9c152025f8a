"""Reference kernels written like the Ascend C samples: the demo, the tests and the benchmarks run them."""
