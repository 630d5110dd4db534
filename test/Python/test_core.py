"""seqc's Python package: compile, call, zero-copy arguments and results,
errors, the compile cache, weights and the graph API."""

import json
import struct

import numpy as np
import pytest
import torch

import seqc
from seqc.graph import Graph

SCAN = """
func.func @main(%a: tensor<2x?x3xf32>, %b: tensor<2x?x3xf32>)
    -> (tensor<2x?x3xf32>, tensor<2x3xf32>) {
  %h, %last = seq.linear_scan %a, %b
      : (tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> (tensor<2x?x3xf32>, tensor<2x3xf32>)
  return %h, %last : tensor<2x?x3xf32>, tensor<2x3xf32>
}
func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""

SEGMENTED = """
func.func @main(%a: tensor<1x?x2xf32>, %b: tensor<1x?x2xf32>, %cu: tensor<3xi32>)
    -> (tensor<1x?x2xf32>, tensor<2x2xf32>) {
  %h, %last = seq.linear_scan %a, %b segments(%cu)
      : (tensor<1x?x2xf32>, tensor<1x?x2xf32>, tensor<3xi32>) -> (tensor<1x?x2xf32>, tensor<2x2xf32>)
  return %h, %last : tensor<1x?x2xf32>, tensor<2x2xf32>
}
"""


def scan_reference(a, b):
    """h_t = a_t h_{t-1} + b_t in float64 along axis 1."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    h = np.zeros_like(a)
    state = np.zeros((a.shape[0],) + a.shape[2:])
    for t in range(a.shape[1]):
        state = a[:, t] * state + b[:, t]
        h[:, t] = state
    return h, state


@pytest.fixture(scope="module")
def scan():
    return seqc.compile(SCAN)


def random(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def test_numpy_in_numpy_out(scan):
    a, b = random((2, 37, 3), 1), random((2, 37, 3), 2)
    h, last = scan.main(a, b)
    assert isinstance(h, np.ndarray) and h.dtype == np.float32
    ref_h, ref_last = scan_reference(a, b)
    np.testing.assert_allclose(h, ref_h, atol=1e-5)
    np.testing.assert_allclose(last, ref_last, atol=1e-5)


def test_one_result_is_returned_as_is(scan):
    y = scan.twice(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(y, [0, 2, 4, 6])
    assert scan["twice"] is scan.twice
    assert sorted(scan.functions) == ["main", "twice"]


def test_dynamic_length_one_compile(scan):
    for T in (1, 5, 64, 200):
        a, b = random((2, T, 3), T), random((2, T, 3), T + 1)
        h, _ = scan.main(a, b)
        np.testing.assert_allclose(h, scan_reference(a, b)[0], atol=1e-5)


def test_torch_in_torch_out(scan):
    a, b = random((2, 9, 3), 3), random((2, 9, 3), 4)
    h, last = scan.main(torch.from_numpy(a), torch.from_numpy(b))
    assert isinstance(h, torch.Tensor) and h.dtype == torch.float32
    np.testing.assert_allclose(h.numpy(), scan_reference(a, b)[0], atol=1e-5)


def test_any_strides_are_read_in_place(scan):
    # [2, T, 3] views of [3, T, 2] and [T, 2, 3] buffers: no contiguous copy.
    base = random((3, 11, 2), 5)
    a = base.transpose(2, 1, 0)
    b = torch.from_numpy(random((11, 2, 3), 6)).permute(1, 0, 2)
    assert not a.flags["C_CONTIGUOUS"] and not b.is_contiguous()
    h, _ = scan.main(torch.from_numpy(np.ascontiguousarray(a)), b)
    ref = scan_reference(a, b.numpy())[0]
    np.testing.assert_allclose(h.numpy(), ref, atol=1e-5)
    h2, _ = scan.main(a, np.ascontiguousarray(b.numpy()))
    np.testing.assert_allclose(h2, ref, atol=1e-5)


def test_results_alias_seqcs_buffer(scan):
    h, _ = scan.main(random((2, 4, 3)), random((2, 4, 3), 1))
    owner = h.base
    assert isinstance(owner, seqc.Tensor)
    assert owner.address == h.ctypes.data
    assert owner.address % 64 == 0
    # The same buffer through DLPack: a write on either side is seen by the
    # other (no copy was made).
    t = torch.utils.dlpack.from_dlpack(owner)
    assert t.data_ptr() == owner.address
    h[0, 0, 0] = 42.0
    assert t[0, 0, 0].item() == 42.0
    t[1, 3, 2] = -7.0
    assert h[1, 3, 2] == -7.0
    del owner, h
    assert t[0, 0, 0].item() == 42.0  # torch keeps the buffer alive


def test_torch_results_keep_their_buffer_alive(scan):
    h, last = scan.main(torch.ones(2, 3, 3), torch.ones(2, 3, 3))
    del last
    import gc
    gc.collect()
    np.testing.assert_allclose(h[:, -1].numpy(), np.full((2, 3), 3.0))


def test_bf16_through_torch():
    # bf16 steps, an f32 state (SPEC section 1).
    m = seqc.compile(SCAN.replace("f32", "bf16").replace("2x3xbf16", "2x3xf32"))
    a = torch.rand(2, 20, 3).to(torch.bfloat16)
    b = torch.rand(2, 20, 3).to(torch.bfloat16)
    h, last = m.main(a, b)
    assert h.dtype == torch.bfloat16
    ref = scan_reference(a.float().numpy(), b.float().numpy())[0]
    err = np.sqrt(np.mean((h.float().numpy() - ref) ** 2) / np.mean(ref ** 2))
    assert err <= 1e-2


def test_wrong_dtype_is_a_type_error(scan):
    with pytest.raises(TypeError, match=r"main: argument 0 .*float64"):
        scan.main(np.zeros((2, 3, 3)), np.zeros((2, 3, 3)))
    with pytest.raises(TypeError, match="has dtype int32, but the function "
                       "takes float32"):
        scan.main(np.zeros((2, 3, 3), np.int32), np.zeros((2, 3, 3), np.int32))
    with pytest.raises(TypeError, match="is a list"):
        scan.main([1.0], [2.0])
    big = np.zeros((2, 3, 3), ">f4")
    with pytest.raises(TypeError, match="is big-endian"):
        scan.main(big, big)
    with pytest.raises(seqc.ArgumentTypeError):
        scan.main(torch.zeros(2, 3, 3, dtype=torch.float64),
                  torch.zeros(2, 3, 3, dtype=torch.float64))


def test_tensors_that_require_grad(scan):
    a = torch.rand(2, 5, 3, requires_grad=True)
    b = torch.rand(2, 5, 3)
    with pytest.raises(TypeError, match="requires grad: seqc computes no "
                       "gradients"):
        scan.main(a, b)
    with torch.no_grad():
        h, _ = scan.main(a, b)
    ref = scan_reference(a.detach().numpy(), b.numpy())[0]
    np.testing.assert_allclose(h.numpy(), ref, atol=1e-5)


def test_negative_strides_and_empty_sequences(scan):
    a, b = random((2, 9, 3), 1), random((2, 9, 3), 2)
    h, _ = scan.main(a[:, ::-1], b[:, ::-1])
    np.testing.assert_allclose(h, scan_reference(a[:, ::-1], b[:, ::-1])[0],
                               atol=1e-5)
    h, last = scan.main(np.zeros((2, 0, 3), np.float32),
                        np.zeros((2, 0, 3), np.float32))
    assert h.shape == (2, 0, 3)
    np.testing.assert_array_equal(last, 0)


def test_wrong_shape_is_a_value_error_with_seqcs_message(scan):
    with pytest.raises(ValueError) as info:
        scan.main(random((2, 5, 3)), random((2, 6, 3)))
    assert isinstance(info.value, seqc.CallError)
    assert "dimension 1 (T) of b is 6 but a has 5" in str(info.value)
    with pytest.raises(ValueError, match="2"):
        scan.main(random((3, 5, 3)), random((3, 5, 3)))
    with pytest.raises(ValueError, match="argument"):
        scan.main(random((2, 5, 3)))


def test_run_time_check_is_a_value_error():
    m = seqc.compile(SEGMENTED)
    a, b = random((1, 6, 2)), random((1, 6, 2), 1)
    h, last = m.main(a, b, np.array([0, 2, 6], np.int32))
    np.testing.assert_allclose(last[1], scan_reference(a[:, 2:], b[:, 2:])[1][0],
                               atol=1e-5)
    with pytest.raises(ValueError, match=r"segments must not decrease"):
        m.main(a, b, np.array([0, 4, 2], np.int32))
    with pytest.raises(ValueError, match=r"segments must end at the packed "
                       r"length 6"):
        m.main(a, b, np.array([0, 2, 9], np.int32))


def test_compile_errors_carry_seqcs_diagnostics():
    with pytest.raises(seqc.CompileError, match="'nonsense' is unknown"):
        seqc.compile("func.func @main() { nonsense }")
    with pytest.raises(seqc.CompileError, match="last"):
        seqc.compile(SCAN.replace("-> (tensor<2x?x3xf32>, tensor<2x3xf32>)\n  return",
                                  "-> (tensor<2x?x3xf32>, tensor<2x4xf32>)\n  return"))
    with pytest.raises(ValueError, match="unknown target"):
        seqc.compile(SCAN, target="tpu")
    with pytest.raises(TypeError):
        seqc.compile(42)
    with pytest.raises(seqc.Error):
        seqc.compile("/no/such/file.mlir")


def test_repeated_compiles_come_from_the_cache():
    text = SCAN.replace("@twice", "@twice_cached")
    first = seqc.compile(text)
    second = seqc.compile(text)
    assert first.cache_status in ("compiled", "disk")
    assert second.cache_status == "memory"


def test_compile_a_path(tmp_path):
    path = tmp_path / "scan.mlir"
    path.write_text(SCAN)
    for source in (path, str(path)):
        m = seqc.compile(source)
        np.testing.assert_array_equal(m.twice(np.ones(4, np.float32)), 2)


def test_reference_and_strict_options(scan):
    a, b = random((2, 7, 3)), random((2, 7, 3), 1)
    ref = seqc.compile(SCAN, reference=True)
    np.testing.assert_allclose(ref.main(a, b)[0], scan.main(a, b)[0],
                               atol=1e-5)
    strict = seqc.compile(SCAN, strict=True)
    np.testing.assert_allclose(strict.main(a, b)[0], scan.main(a, b)[0],
                               atol=1e-5)


def test_function_signature(scan):
    fn = scan.main
    assert [i[1:] for i in fn.inputs] == [("float32", [2, -1, 3]),
                                          ("float32", [2, -1, 3])]
    assert [o[2] for o in fn.outputs] == [[2, -1, 3], [2, 3]]


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_load_weights(tmp_path):
    w = random((3, 4))
    np.savez(tmp_path / "w.npz", w=w, idx=np.arange(5, dtype=np.int32))
    weights = seqc.load_weights(tmp_path / "w.npz")
    np.testing.assert_array_equal(weights["w"], w)
    np.testing.assert_array_equal(weights["idx"], np.arange(5))

    bf = torch.randn(2, 3).to(torch.bfloat16)
    write_safetensors(tmp_path / "w.safetensors", {
        "f": ("F32", [3, 4], w.tobytes()),
        "b": ("BF16", [2, 3], bf.view(torch.int16).numpy().tobytes())})
    t = seqc.load_weights(tmp_path / "w.safetensors", framework="torch")
    assert t["b"].dtype == torch.bfloat16 and torch.equal(t["b"], bf)
    np.testing.assert_array_equal(t["f"].numpy(), w)
    with pytest.raises(TypeError, match="'b' is bf16"):
        seqc.load_weights(tmp_path / "w.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(seqc.WeightsError, match="bad.safetensors"):
        seqc.load_weights(tmp_path / "bad.safetensors")


PROJECTION = """
func.func @main(%x: tensor<?x64xf32>, %w: tensor<64x40xf32> {seq.name = "w"})
    -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%m) : tensor<?x40xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x40xf32>) -> tensor<?x40xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x64xf32>, tensor<64x40xf32>)
      outs(%f : tensor<?x40xf32>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
"""


def test_bind_weights(tmp_path):
    w = random((64, 40), seed=3)
    x = random((5, 64), seed=4)
    np.savez(tmp_path / "w.npz", w=w)
    m = seqc.compile(PROJECTION, bind_weights=tmp_path / "w.npz")
    fn = m["main"]
    assert [i[0] for i in fn.inputs] == ["arg0"]  # w is no argument
    np.testing.assert_allclose(fn(x), x.astype(np.float64) @ w, rtol=1e-5,
                               atol=1e-5)
    # Other weights are other code, not the cached module.
    np.savez(tmp_path / "w2.npz", w=2 * w)
    np.testing.assert_allclose(
        seqc.compile(PROJECTION, bind_weights=tmp_path / "w2.npz")["main"](x),
        2 * (x.astype(np.float64) @ w), rtol=1e-5, atol=1e-5)
    np.savez(tmp_path / "bad.npz", v=w)
    with pytest.raises(seqc.CompileError, match="bound weight 'v' names no"):
        seqc.compile(PROJECTION, bind_weights=tmp_path / "bad.npz")


def ssd_reference(x, dt, A, B, C):
    """Mamba-2 per step in float64 (SPEC 2.4, softplus on dt, one group)."""
    x, dt, B, C = (v.astype(np.float64) for v in (x, dt, B, C))
    dt = np.log1p(np.exp(dt))
    _, T, H, P = x.shape
    N = B.shape[-1]
    h = np.zeros((H, P, N))
    y = np.zeros_like(x)
    for t in range(T):
        a = np.exp(dt[0, t] * A)
        h = a[:, None, None] * h + dt[0, t][:, None, None] * np.einsum(
            "hp,n->hpn", x[0, t], B[0, t, 0])
        y[0, t] = np.einsum("hpn,n->hp", h, C[0, t, 0])
    return y, h


def test_graph_api_builds_a_model_with_dynamic_length():
    g = Graph()
    f = g.function("main")
    x = f.arg("x", [1, "T", 4, 8])
    dt = f.arg("dt", [1, "T", 4])
    A = f.arg("A", [4])
    B = f.arg("B", [1, "T", 1, 16])
    C = f.arg("C", [1, "T", 1, 16])
    y, last = f.ssd(x, dt, A, B, C, dt_softplus=True)
    f.ret(y, last)
    m = g.compile()
    for T in (1, 70):
        args = [random((1, T, 4, 8), 1), random((1, T, 4), 2),
                -np.linspace(0.5, 2, 4).astype(np.float32),
                random((1, T, 1, 16), 3), random((1, T, 1, 16), 4)]
        got_y, got_last = m.main(*args)
        ref_y, ref_last = ssd_reference(*args)
        np.testing.assert_allclose(got_y, ref_y, atol=1e-4)
        np.testing.assert_allclose(got_last[0], ref_last, atol=1e-4)


def test_graph_api_glue_and_packed_sequences():
    g = Graph()
    f = g.function("main")
    u = f.arg("u", ["T", 6])
    w = f.arg("w", [6, 6])
    cu = f.arg("cu", [3], dtype="i32")
    a = f.sigmoid(f.matmul(u, w))
    a3 = f.expand(a, [[0, 1], [2]], [1, "T", 6])
    b3 = f.expand(u, [[0, 1], [2]], [1, "T", 6])
    h, last = f.linear_scan(a3, b3, segments=cu)
    f.ret(h, last)
    m = g.compile()
    uv, wv = random((9, 6), 7), random((6, 6), 8)
    h, last = m.main(uv, wv, np.array([0, 4, 9], np.int32))
    av = 1 / (1 + np.exp(-(uv.astype(np.float64) @ wv)))
    for s, (lo, hi) in enumerate([(0, 4), (4, 9)]):
        ref_h, ref_last = scan_reference(av[None, lo:hi], uv[None, lo:hi])
        np.testing.assert_allclose(h[0, lo:hi], ref_h[0], atol=1e-5)
        np.testing.assert_allclose(last[s], ref_last[0], atol=1e-5)
    assert last.shape == (2, 6)


def test_graph_without_return_is_an_error():
    g = Graph()
    g.function("main").arg("x", [2])
    with pytest.raises(ValueError, match="no ret"):
        g.text()


def graph_with(build):
    """A one-function graph whose body `build(f)` returns the results."""
    g = Graph()
    f = g.function("main")
    f.ret(*build(f))
    return g


def test_graph_api_derives_every_seq_ops_result_types():
    # Each op's result types are derived from its operands; seqc's verifier
    # checks them against the op's shape signature when it compiles.
    def scan_ops(f):
        u = f.arg("u", [1, "T", 6])
        A = f.arg("A", [6, 4])
        B = f.arg("B", [1, "T", 1, 4])
        w = f.arg("w", [6, 4])
        y, last = f.selective_scan(u, u, A, B, B, delta_softplus=True,
                                   discretization="zoh")
        c, hist = f.causal_conv1d(u, w, activation="silu")
        return y, last, c, hist

    def attention_ops(f):
        q = f.arg("q", [1, "T", 4, 8])
        v = f.arg("v", [1, "T", 4, 16])
        beta = f.arg("beta", [1, "T", 4])
        cu = f.arg("cu", [3], dtype="i32")
        o1, s1 = f.linear_attention(q, q, v, decay=beta, segments=cu,
                                    scale=0.5)
        o2, s2 = f.delta_rule(q, q, v, beta, decay=beta, qk_l2norm=True,
                              scale=0.35)
        o3, s3 = f.generalized_delta_rule(q, q, v, q, q, scale=0.35)
        o4 = f.attention(q, q, v, causal=True)
        return o1, s1, o2, s2, o3, s3, o4

    def checkpointed(f):
        a = f.arg("a", [2, 8, 3])
        h, last, checkpoints = f.linear_scan(a, a, checkpoint_every=4)
        return h, last, checkpoints

    T = 10
    m = graph_with(scan_ops).compile()
    y, last, c, hist = m.main(random((1, T, 6)), -np.abs(random((6, 4))),
                              random((1, T, 1, 4)), random((6, 4)))
    assert (y.shape, last.shape, c.shape, hist.shape) == (
        (1, T, 6), (1, 6, 4), (1, T, 6), (1, 6, 3))

    m = graph_with(attention_ops).compile()
    q, v = random((1, T, 4, 8)), random((1, T, 4, 16))
    beta = -np.abs(random((1, T, 4)))
    outs = m.main(q, v, beta, np.array([0, 4, T], np.int32))
    assert [o.shape for o in outs] == [
        (1, T, 4, 16), (2, 4, 8, 16), (1, T, 4, 16), (1, 4, 8, 16),
        (1, T, 4, 16), (1, 4, 8, 16), (1, T, 4, 16)]

    m = graph_with(checkpointed).compile()
    a = random((2, 8, 3))
    h, last, checkpoints = m.main(a)
    np.testing.assert_allclose(checkpoints[:, 0], scan_reference(
        a[:, :4], a[:, :4])[1], atol=1e-5)
    np.testing.assert_allclose(checkpoints[:, 1], last, atol=1e-6)
