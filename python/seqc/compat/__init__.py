"""The peers' functions on seqc's kernels: `mamba_ssm`, `causal_conv1d` and
`fla` (flash-linear-attention) under their own names, argument names,
defaults and layouts, so that swapping one import runs a model on the CPU.

Each function builds the seq op that computes it, compiles it once per
combination of dtypes, ranks, static sizes and options (T, the sequence
length, stays dynamic: one compile serves every length) and calls it on the
caller's tensors in place. PyTorch tensors in, PyTorch tensors out; numpy
arrays work too.
"""
