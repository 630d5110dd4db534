"""seqc.compile(..., bf16_products=...): the CPU's products of bf16
operands. "widen" and "amx-emulated" run everywhere; "dot" runs where the
CPU has AVX-512 BF16 and "amx" where it has AMX (each agreeing with float64
on the rounded operands), and each is a CompileError naming the feature
where the CPU lacks it; another value is a ValueError."""

import numpy as np
import pytest

import seqc

M, K, N = 70, 129, 45
TEXT = f"""
func.func @main(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32> {{
  %an = arith.truncf %a : tensor<{M}x{K}xf32> to tensor<{M}x{K}xbf16>
  %bn = arith.truncf %b : tensor<{K}x{N}xf32> to tensor<{K}x{N}xbf16>
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %z = arith.constant 0.0 : f32
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %r = linalg.matmul ins(%an, %bn : tensor<{M}x{K}xbf16>, tensor<{K}x{N}xbf16>)
         outs(%c : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  return %r : tensor<{M}x{N}xf32>
}}
"""


def has_dot():
    with open("/proc/cpuinfo") as f:
        return " avx512_bf16" in f.read()


def has_amx():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return " amx_tile" in flags and " amx_bf16" in flags


def rounded(x):
    """x rounded to bf16 (nearest even), as float64."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def inputs():
    r = np.random.default_rng(5)
    return (r.standard_normal((M, K)).astype(np.float32),
            r.standard_normal((K, N)).astype(np.float32))


def check(products):
    a, b = inputs()
    got = seqc.compile(TEXT, bf16_products=products, cache=False).main(a, b)
    ref = rounded(a) @ rounded(b)
    assert np.max(np.abs(got - ref)) <= 1e-5 * np.max(np.abs(ref))


def test_widen():
    check("widen")


def test_dot():
    if has_dot():
        check("dot")
    else:
        with pytest.raises(seqc.CompileError, match="avx512bf16"):
            seqc.compile(TEXT, bf16_products="dot", cache=False)


def test_amx_emulated():
    check("amx-emulated")


def test_amx():
    if has_amx():
        check("amx")
    else:
        with pytest.raises(seqc.CompileError, match="amx-tile"):
            seqc.compile(TEXT, bf16_products="amx", cache=False)


def test_unknown_value():
    with pytest.raises(ValueError, match="bf16_products 'tiles'"):
        seqc.compile(TEXT, bf16_products="tiles")
