"""The spec beyond test_kernel.py: golden replays, the runtime on the device, symbolic shapes, multi-reduce kernels,
the search, the teaching output, the defects found by trying to break it, and the fuzzers. A package, so that
`from corpus import ...` names these modules whichever folder pytest or a script starts from."""
