"""The model blocks of seqc's examples, as MLIR, at any size.

Every block is a pre-norm residual layer, `h + Mixer(RMSNorm(h))`, written
as a private function (@<kind>_layer) that takes the hidden states [1, T, D]
(T dynamic), the layer's recurrent states and its weights, and returns the
new hidden states and states. A block file has two public functions:

  @main(u, weights...)             the whole sequence from zero states
  @step(u, states..., weights...)  continues from given states (one token
                                   or a chunk of a prompt)
  @packed(u, cu, weights...)       S sequences packed along T (B = 1, cu the
                                   S + 1 offsets, as flash-attention's
                                   cu_seqlens), each from zero states

so a host prefills with @main (or many prompts at once with @packed) and
decodes with @step; step-by-step == whole and packed == each sequence alone
are tests. @packed runs the layer's packed variant (@<kind>_layer_packed):
every seq op with a state, and attention, takes `segments(%cu)`, so nothing
crosses a boundary; the states it returns have S rows (a KV cache is packed
like u, sequence s at steps cu[s] .. cu[s+1]-1). Weights are bound by name (seq.name), with
matrices laid out [in, out] (y = x W). See examples/README.md.
"""
import math
import os
import sys

# seqc.graph, the Python package's graph builder, loaded from the source
# tree as a plain module (no built extension needed to emit MLIR).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python", "seqc"))
from graph import Function, _float  # noqa: E402

W_CONV = 4


class Weights:
    """Declares a layer function's weight arguments: (seq.name suffix, shape)."""

    def __init__(self, fn, prefix):
        self.fn = fn
        self.prefix = prefix
        self.names = []

    def __call__(self, name, shape):
        hint = "w_" + name.replace(".", "_")
        v = self.fn.arg(hint, shape, self.prefix + name)
        self.names.append((name, shape))
        return v


# -- layer functions ----------------------------------------------------------
# Each returns (Function, [state shapes], [weight (name, shape)]). The
# function's arguments are (h, *states, *weights); results (h, *states) and,
# for MoE layers, the aux loss and expert load. With packed=True a layer with
# state is its packed variant (named <name>_packed): arguments (h, cu,
# *weights), cu the S + 1 offsets of the sequences packed along T; every
# seq op with a state starts from zero with `segments(%cu)` and returns S
# rows of state (state shapes then start with "S").


def _packed_args(f, packed):
    """The offsets argument of a packed layer (None otherwise)."""
    return f.arg("cu", ["S1"], dtype="i32") if packed else None


def _layer_name(name, packed):
    return name + "_packed" if packed else name


def mamba1_layer(D, d_state=16, expand=2, name="mamba1_layer", packed=False):
    """Mamba (Gu & Dao 2023): in-projection to x and z, causal conv + SiLU,
    x-projection to (dt, B, C), dt-projection, selective scan with skip D and
    gate silu(z), out-projection; pre-norm and residual."""
    E, N = expand * D, d_state
    R = math.ceil(D / 16)
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    B0 = "S" if packed else 1
    conv0 = None if packed else f.arg("conv_state", [1, E, W_CONV - 1])
    ssm0 = None if packed else f.arg("ssm_state", [1, E, N])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    w_in = w("mixer.in_proj.weight", [D, 2 * E])
    conv_w = w("mixer.conv1d.weight", [E, W_CONV])
    conv_b = w("mixer.conv1d.bias", [E])
    w_x = w("mixer.x_proj.weight", [E, R + 2 * N])
    w_dt = w("mixer.dt_proj.weight", [R, E])
    dt_b = w("mixer.dt_proj.bias", [E])
    A_log = w("mixer.A_log", [E, N])
    Dskip = w("mixer.D", [E])
    w_out = w("mixer.out_proj.weight", [E, D])
    f.bind_dim("T", h, 1)

    f.comment("pre-norm, in-projection, split into x and z")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    xz = f.matmul(xn, w_in)
    x, z = f.cols(xz, 0, E), f.cols(xz, E, E)
    f.comment("depthwise causal conv, carrying the last W-1 inputs, then SiLU")
    xc, conv1 = f.op("causal_conv1d", [f.to_seq(x), conv_w],
                     [([1, "T", E], "f32"), ([B0, E, W_CONV - 1], "f32")],
                     optional=[("bias", conv_b), ("init", conv0), ("segments", cu)])
    xc = f.silu(xc)
    f.comment("x-projection to (dt, B, C); dt-projection")
    xc2 = f.from_seq(xc)
    xdbl = f.matmul(xc2, w_x)
    dt = f.matmul(f.cols(xdbl, 0, R), w_dt)
    B = f.expand(f.cols(xdbl, R, N), [[0, 1], [2, 3]], [1, "T", 1, N])
    C = f.expand(f.cols(xdbl, R + N, N), [[0, 1], [2, 3]], [1, "T", 1, N])
    A = f.neg_exp(A_log)
    f.comment("selective scan of softplus(dt + bias) with skip D, gated by silu(z)")
    delta = f.softplus_bias(f.to_seq(dt), dt_b)
    y, ssm1 = f.op("selective_scan", [xc, delta, A, B, C],
                   [([1, "T", E], "f32"), ([B0, E, N], "f32")],
                   optional=[("skip", Dskip), ("init", ssm0), ("segments", cu)])
    y = f.silu_mul(f.to_seq(z), y)
    f.comment("out-projection and residual")
    out = f.add(h2, f.matmul(f.from_seq(y), w_out))
    f.ret(f.to_seq(out), conv1, ssm1)
    return f, [[B0, E, W_CONV - 1], [B0, E, N]], w.names


def mamba2_layer(D, d_state=64, headdim=32, expand=2, name="mamba2_layer", packed=False):
    """Mamba-2 (Dao & Gu 2024): in-projection to (z, x, B, C, dt), causal
    conv + SiLU over (x, B, C), SSD with dt bias, softplus and skip D, gated
    RMSNorm (norm(y * silu(z))), out-projection; pre-norm and residual."""
    E, N, P = expand * D, d_state, headdim
    H = E // P
    CD = E + 2 * N
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    B0 = "S" if packed else 1
    conv0 = None if packed else f.arg("conv_state", [1, CD, W_CONV - 1])
    ssm0 = None if packed else f.arg("ssm_state", [1, H, P, N])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    w_in = w("mixer.in_proj.weight", [D, 2 * E + 2 * N + H])
    conv_w = w("mixer.conv1d.weight", [CD, W_CONV])
    conv_b = w("mixer.conv1d.bias", [CD])
    dt_b = w("mixer.dt_bias", [H])
    A_log = w("mixer.A_log", [H])
    Dskip = w("mixer.D", [H])
    gnorm_w = w("mixer.norm.weight", [E])
    w_out = w("mixer.out_proj.weight", [E, D])
    f.bind_dim("T", h, 1)

    f.comment("pre-norm, in-projection, split into z, xBC and dt")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    zxbcdt = f.matmul(xn, w_in)
    z = f.cols(zxbcdt, 0, E)
    xbc = f.cols(zxbcdt, E, CD)
    dt = f.cols(zxbcdt, E + CD, H)
    f.comment("causal conv over x, B and C, then SiLU")
    conv, conv1 = f.op("causal_conv1d", [f.to_seq(xbc), conv_w],
                       [([1, "T", CD], "f32"), ([B0, CD, W_CONV - 1], "f32")],
                       optional=[("bias", conv_b), ("init", conv0), ("segments", cu)])
    conv2 = f.from_seq(f.silu(conv))
    x = f.to_seq(f.cols(conv2, 0, E), P)
    B = f.to_seq(f.cols(conv2, E, N), N)
    C = f.to_seq(f.cols(conv2, E + N, N), N)
    A = f.neg_exp(A_log)
    f.comment("SSD of softplus(dt + dt_bias) with skip D, gated by silu(z)")
    y, ssm1 = f.op("ssd", [x, f.softplus_bias(f.to_seq(dt), dt_b), A, B, C],
                   [([1, "T", H, P], "f32"), ([B0, H, P, N], "f32")],
                   optional=[("skip", Dskip), ("init", ssm0), ("segments", cu)])
    y = f.silu_mul(f.to_seq(z, P), y)
    f.comment("gated RMSNorm (the gate is applied above), out-projection, residual")
    yn = f.rmsnorm(f.from_seq(y), gnorm_w)
    out = f.add(h2, f.matmul(yn, w_out))
    f.ret(f.to_seq(out), conv1, ssm1)
    return f, [[B0, CD, W_CONV - 1], [B0, H, P, N]], w.names


def gla_layer(D, heads=4, name="gla_layer", packed=False):
    """Gated linear attention (Yang et al. 2023): q, k (D/2) and v (D)
    projections, a per-key-channel log-decay logsigmoid(x W_gk + b) / 16,
    recurrent state per head, per-head RMSNorm of the output gated by
    silu(x W_g), out-projection; pre-norm and residual."""
    dk, dv = D // 2, D
    K, V = dk // heads, dv // heads
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    B0 = "S" if packed else 1
    S0 = None if packed else f.arg("state", [1, heads, K, V])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    wq = w("attn.q_proj.weight", [D, dk])
    wk = w("attn.k_proj.weight", [D, dk])
    wv = w("attn.v_proj.weight", [D, dv])
    wgk = w("attn.gk_proj.weight", [D, dk])
    bgk = w("attn.gk_proj.bias", [dk])
    wg = w("attn.g_proj.weight", [D, dv])
    onorm_w = w("attn.g_norm.weight", [V])
    wo = w("attn.o_proj.weight", [dv, D])
    f.bind_dim("T", h, 1)

    f.comment("pre-norm and projections")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    q, k, v = f.matmul(xn, wq), f.matmul(xn, wk), f.matmul(xn, wv)
    f.comment("log-decay: logsigmoid(x W_gk + b) / 16 = -softplus(-(.)) / 16")
    gk = f.map(lambda n: ([
        "%x = arith.addf %a0, %a1 : f32",
        "%zero = arith.constant 0.0 : f32",
        "%one = arith.constant 1.0 : f32",
        "%c = arith.constant 0.0625 : f32",
        "%lo = arith.minimumf %x, %zero : f32",
        "%ab = math.absf %x : f32",
        "%na = arith.negf %ab : f32",
        "%e = math.exp %na : f32",
        "%l = math.log1p %e : f32",
        "%ls = arith.subf %lo, %l : f32",
        "%y = arith.mulf %ls, %c : f32"], "%y"),
        f.matmul(xn, wgk), bgk, kinds=["full", "col"])
    o, S1 = f.op("linear_attention",
                 [f.to_seq(q, K), f.to_seq(k, K), f.to_seq(v, V)],
                 [([1, "T", heads, V], "f32"), ([B0, heads, K, V], "f32")],
                 optional=[("decay", f.to_seq(gk, K)), ("init", S0), ("segments", cu)],
                 attrs=f"scale = {_float(K ** -0.5)} : f32")
    f.comment("per-head RMSNorm, gated by silu(x W_g)")
    oh = f.collapse(o, [[0, 1, 2], [3]], ["TH", V])
    f.bind_dim("TH", oh, 0)
    on = f.expand(f.rmsnorm(oh, onorm_w), [[0, 1], [2]], ["T", heads, V])
    on2 = f.collapse(on, [[0], [1, 2]], ["T", dv])
    gated = f.silu_mul(f.matmul(xn, wg), on2)
    out = f.add(h2, f.matmul(gated, wo))
    f.ret(f.to_seq(out), S1)
    return f, [[B0, heads, K, V]], w.names


def gdn_layer(D, heads=2, v_heads=4, name="gdn_layer", packed=False):
    """Gated DeltaNet as Qwen3-Next's linear-attention layer (Yang et al.
    2024): in-projections to (q, k, v, z) and (b, a), one causal conv
    (width 4, no bias) + SiLU over the (q, k, v) channels, beta = sigmoid(b),
    log-decay g = -exp(A_log) softplus(a + dt_bias) per value head,
    seq.delta_rule with L2-normed q, k and scale K^-1/2 (value head j reads
    key head j / (HV / H)), per-head RMSNorm (eps 1e-6) gated by silu(z),
    out-projection; pre-norm and residual."""
    H, HV = heads, v_heads
    K = V = D // 4
    dk, dv = H * K, HV * V
    CD = 2 * dk + dv
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    B0 = "S" if packed else 1
    conv0 = None if packed else f.arg("conv_state", [1, CD, W_CONV - 1])
    S0 = None if packed else f.arg("state", [1, HV, K, V])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    w_qkvz = w("linear_attn.in_proj_qkvz.weight", [D, CD + dv])
    w_ba = w("linear_attn.in_proj_ba.weight", [D, 2 * HV])
    conv_w = w("linear_attn.conv1d.weight", [CD, W_CONV])
    dt_b = w("linear_attn.dt_bias", [HV])
    A_log = w("linear_attn.A_log", [HV])
    onorm_w = w("linear_attn.norm.weight", [V])
    w_out = w("linear_attn.out_proj.weight", [dv, D])
    f.bind_dim("T", h, 1)

    f.comment("pre-norm, in-projections: (q, k, v, z) and (b, a)")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    qkvz = f.matmul(xn, w_qkvz)
    ba = f.matmul(xn, w_ba)
    f.comment("causal conv over q, k and v, then SiLU")
    conv, conv1 = f.op("causal_conv1d", [f.to_seq(f.cols(qkvz, 0, CD)), conv_w],
                       [([1, "T", CD], "f32"), ([B0, CD, W_CONV - 1], "f32")],
                       optional=[("init", conv0), ("segments", cu)])
    conv2 = f.from_seq(f.silu(conv))
    q = f.to_seq(f.cols(conv2, 0, dk), K)
    k = f.to_seq(f.cols(conv2, dk, dk), K)
    v = f.to_seq(f.cols(conv2, 2 * dk, dv), V)
    f.comment("beta = sigmoid(b), log-decay -exp(A_log) * softplus(a + dt_bias)")
    beta = f.to_seq(f.sigmoid(f.cols(ba, 0, HV)))
    g = f.to_seq(f.decay_softplus(f.cols(ba, HV, HV), dt_b, A_log))
    o, S1 = f.op("delta_rule", [q, k, v, beta],
                 [([1, "T", HV, V], "f32"), ([B0, HV, K, V], "f32")],
                 optional=[("decay", g), ("init", S0), ("segments", cu)],
                 attrs=f"qk_l2norm = true, scale = {_float(K ** -0.5)} : f32")
    f.comment("per-head RMSNorm gated by silu(z), out-projection, residual")
    on = f.unheads(f.rmsnorm(f.heads(o, V), onorm_w, eps=1e-6), "T", dv)
    gated = f.silu_mul(f.cols(qkvz, CD, dv), on)
    out = f.add(h2, f.matmul(gated, w_out))
    f.ret(f.to_seq(out), conv1, S1)
    return f, [[B0, CD, W_CONV - 1], [B0, HV, K, V]], w.names


def kda_layer(D, heads=4, name="kda_layer", packed=False):
    """Kimi Delta Attention (Kimi Linear, 2025), as fla's KimiDeltaAttention:
    q, k, v projections, each with its causal conv (width 4, no bias) +
    SiLU, a per-key-channel log-decay g = -exp(A_log[head]) softplus(x F_0
    F_1 + dt_bias) through the low-rank f_proj, beta = sigmoid(x W_b),
    seq.delta_rule with L2-normed q, k and scale K^-1/2, per-head RMSNorm
    (eps 1e-6) gated by sigmoid(x G_0 G_1 + b), out-projection; pre-norm
    and residual."""
    H = heads
    K = V = D // 4
    dk, dv = H * K, H * V
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    B0 = "S" if packed else 1
    convs0 = [None if packed else f.arg(f"{c}_conv_state", [1, n, W_CONV - 1])
              for c, n in (("q", dk), ("k", dk), ("v", dv))]
    S0 = None if packed else f.arg("state", [1, H, K, V])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    wq = w("attn.q_proj.weight", [D, dk])
    wk = w("attn.k_proj.weight", [D, dk])
    wv = w("attn.v_proj.weight", [D, dv])
    conv_ws = [w(f"attn.{c}_conv1d.weight", [n, W_CONV])
               for c, n in (("q", dk), ("k", dk), ("v", dv))]
    wf0 = w("attn.f_proj.0.weight", [D, V])
    wf1 = w("attn.f_proj.1.weight", [V, dk])
    wb = w("attn.b_proj.weight", [D, H])
    A_log = w("attn.A_log", [H])
    dt_b = w("attn.dt_bias", [dk])
    wg0 = w("attn.g_proj.0.weight", [D, V])
    wg1 = w("attn.g_proj.1.weight", [V, dv])
    bg1 = w("attn.g_proj.1.bias", [dv])
    onorm_w = w("attn.o_norm.weight", [V])
    wo = w("attn.o_proj.weight", [dv, D])
    f.bind_dim("T", h, 1)

    f.comment("pre-norm; q, k, v projections, each through its causal conv + SiLU")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    qkv, convs1 = [], []
    for wm, cw, c0, n, P in zip((wq, wk, wv), conv_ws, convs0, (dk, dk, dv), (K, K, V)):
        y, c1 = f.op("causal_conv1d", [f.to_seq(f.matmul(xn, wm)), cw],
                     [([1, "T", n], "f32"), ([B0, n, W_CONV - 1], "f32")],
                     optional=[("init", c0), ("segments", cu)])
        qkv.append(f.to_seq(f.from_seq(f.silu(y)), P))
        convs1.append(c1)
    f.comment("per-key log-decay -exp(A_log[head]) * softplus(x F_0 F_1 + dt_bias); beta")
    g = f.to_seq(f.decay_softplus(f.matmul(f.matmul(xn, wf0), wf1), dt_b, A_log, per_col=K), K)
    beta = f.to_seq(f.sigmoid(f.matmul(xn, wb)))
    o, S1 = f.op("delta_rule", qkv + [beta],
                 [([1, "T", H, V], "f32"), ([B0, H, K, V], "f32")],
                 optional=[("decay", g), ("init", S0), ("segments", cu)],
                 attrs=f"qk_l2norm = true, scale = {_float(K ** -0.5)} : f32")
    f.comment("per-head RMSNorm gated by sigmoid(x G_0 G_1 + b), out-projection, residual")
    on = f.unheads(f.rmsnorm(f.heads(o, V), onorm_w, eps=1e-6), "T", dv)
    gate = f.map(lambda n: (["%x = arith.addf %a0, %a1 : f32"], "%x"),
                 f.matmul(f.matmul(xn, wg0), wg1), bg1, kinds=["full", "col"])
    gated = f.sigmoid_mul(gate, on)
    out = f.add(h2, f.matmul(gated, wo))
    f.ret(f.to_seq(out), *convs1, S1)
    return f, [[B0, dk, W_CONV - 1], [B0, dk, W_CONV - 1], [B0, dv, W_CONV - 1],
               [B0, H, K, V]], w.names


def _token_shift(f, xn, x0):
    """RWKV's token shift of the rows xn [T, D] with the previous token x0
    [1, D]: (x_{t-1} - x_t, the last row as the next shift state)."""
    T, D = xn.shape
    cat = f.concat(x0, xn, 0, ["T1", D])
    prev = f.rows(cat, 0, T)
    return f.sub(prev, xn), f.rows(cat, T, 1)


def _token_shift_packed(f, xn, cu):
    """The token shift of _token_shift within each of the sequences packed
    in xn [T, D] (offsets cu), each from a zero previous token: a width-2
    seq.causal_conv1d with taps (1, 0) gives x_{t-1} and, as its state, each
    sequence's last token [S, D] (0 for an empty one), and `segments` keeps
    the shift from crossing a boundary."""
    T, D = xn.shape
    taps = f.concat(f.full([D, 1], 1.0), f.full([D, 1], 0.0), 1, [D, 2])
    prev, last = f.op("causal_conv1d", [f.to_seq(xn), taps],
                      [([1, T, D], "f32"), (["S", D, 1], "f32")],
                      optional=[("segments", cu)])
    return f.sub(f.from_seq(prev), xn), f.collapse(last, [[0], [1, 2]], ["S", D])


def _lerp(f, x, xx, mu, m=None):
    """x + xx * mu (mu [D]), or x + xx * (mu + m) with m [T, D]."""
    if m is None:
        return f.map(lambda n: (["%d = arith.mulf %a1, %a2 : f32",
                                 "%y = arith.addf %a0, %d : f32"], "%y"),
                     x, xx, mu, kinds=["full", "full", "col"])
    return f.map(lambda n: (["%c = arith.addf %a2, %a3 : f32",
                             "%d = arith.mulf %a1, %c : f32",
                             "%y = arith.addf %a0, %d : f32"], "%y"),
                 x, xx, mu, m, kinds=["full", "full", "col", "full"])


def rwkv7_layer(D, heads=4, name="rwkv7_layer", packed=False):
    """RWKV-7 "Goose" time mixing (Peng et al. 2025), as the reference
    code's first layer (no value residual): token shift with a learned mix
    per projection (r, w, k, v, a, g), r / k / v projections, log-decay
    -exp(-softplus(-(w0 + tanh(x W_1) W_2)) - 0.5), in-context rate
    a = sigmoid(a0 + x A_1 A_2), kappa^ = l2norm(k * k_k) per head,
    k <- k * (1 + (a - 1) * k_a), seq.generalized_delta_rule with
    a = -kappa^ and b = kappa^ * a, GroupNorm per head (eps 64e-5), the
    bonus (sum(r * k * r_k) per head) v, output gate sigmoid(x G_1) G_2,
    out-projection; pre-norm (RMSNorm) and residual."""
    H = heads
    K = D // H
    Rw = Ra = D // 8
    Rg = D // 4
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    B0 = "S" if packed else 1
    x0 = None if packed else f.arg("shift_state", [1, D])
    S0 = None if packed else f.arg("state", [1, H, K, K])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    mu = {c: w(f"att.x_{c}", [D]) for c in "rwkvag"}
    wr = w("att.receptance.weight", [D, D])
    wk = w("att.key.weight", [D, D])
    wv = w("att.value.weight", [D, D])
    w0 = w("att.w0", [D])
    w1 = w("att.w1", [D, Rw])
    w2 = w("att.w2", [Rw, D])
    a0 = w("att.a0", [D])
    a1 = w("att.a1", [D, Ra])
    a2 = w("att.a2", [Ra, D])
    g1 = w("att.g1", [D, Rg])
    g2 = w("att.g2", [Rg, D])
    k_k = w("att.k_k", [D])
    k_a = w("att.k_a", [D])
    r_k = w("att.r_k", [H, K])
    lnx_w = w("att.ln_x.weight", [D])
    lnx_b = w("att.ln_x.bias", [D])
    wo = w("att.output.weight", [D, D])
    f.bind_dim("T", h, 1)

    f.comment("pre-norm; token shift (the shift state is the previous token) and mixes")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    xx, x1 = _token_shift_packed(f, xn, cu) if packed else _token_shift(f, xn, x0)
    xm = {c: _lerp(f, xn, xx, mu[c]) for c in "rwkvag"}
    r = f.matmul(xm["r"], wr)
    k = f.matmul(xm["k"], wk)
    v = f.matmul(xm["v"], wv)
    f.comment("log-decay -exp(w), w = -softplus(-(w0 + tanh(x W_1) W_2)) - 0.5")
    wl = f.map(lambda n: (["%s = arith.addf %a0, %a1 : f32",
                           "%ns = arith.negf %s : f32",
                           "%c = arith.constant 20.0 : f32",
                           "%big = arith.cmpf ogt, %ns, %c : f32",
                           "%e = math.exp %ns : f32",
                           "%l = math.log1p %e : f32",
                           "%sp = arith.select %big, %ns, %l : f32",
                           "%half = arith.constant 0.5 : f32",
                           "%nsp = arith.negf %sp : f32",
                           "%w = arith.subf %nsp, %half : f32",
                           "%ew = math.exp %w : f32",
                           "%y = arith.negf %ew : f32"], "%y"),
               f.matmul(f.tanh(f.matmul(xm["w"], w1)), w2), w0, kinds=["full", "col"])
    f.comment("in-context rate a, kappa^ = l2norm(k * k_k) per head, k * (1 + (a - 1) k_a)")
    a = f.sigmoid_bias(f.matmul(f.matmul(xm["a"], a1), a2), a0)
    kk = f.unheads(f.l2norm(f.heads(f.mul_col(k, k_k), K)), "T", D)
    k2 = f.map(lambda n: (["%one = arith.constant 1.0 : f32",
                           "%am = arith.subf %a1, %one : f32",
                           "%t = arith.mulf %am, %a2 : f32",
                           "%s = arith.addf %one, %t : f32",
                           "%y = arith.mulf %a0, %s : f32"], "%y"),
               k, a, k_a, kinds=["full", "full", "col"])
    f.comment("S_t = diag(exp(g_t)) S + outer(kappa^ a, -kappa^^T S) + outer(k, v)")
    o, S1 = f.op("generalized_delta_rule",
                 [f.to_seq(r, K), f.to_seq(k2, K), f.to_seq(v, K),
                  f.to_seq(f.neg(kk), K), f.to_seq(f.mul(kk, a), K)],
                 [([1, "T", H, K], "f32"), ([B0, H, K, K], "f32")],
                 optional=[("decay", f.to_seq(wl, K)), ("init", S0), ("segments", cu)])
    f.comment("GroupNorm per head, the bonus (r . (k * r_k)) v per head")
    on = f.groupnorm(f.from_seq(o), H, lnx_w, lnx_b, eps=64e-5)
    rk = f.map(lambda n: (["%m = arith.mulf %a0, %a1 : f32",
                           "%y = arith.mulf %m, %a2 : f32"], "%y"),
               r, k2, f.collapse(r_k, [[0, 1]], [D]), kinds=["full", "full", "col"])
    rks = f.rowsum(f.heads(rk, K), [], "%a0")
    bonus = f.unheads(f.generic([(f.heads(v, K), "full"), (rks, "row")], ["TH", K],
                                lambda n: (["%y = arith.mulf %a0, %a1 : f32"], "%y")),
                      "T", D)
    f.comment("output gate sigmoid(x G_1) G_2, out-projection, residual")
    gate = f.matmul(f.sigmoid(f.matmul(xm["g"], g1)), g2)
    y = f.mul(f.add(on, bonus), gate)
    out = f.add(h2, f.matmul(y, wo))
    f.ret(f.to_seq(out), x1, S1)
    return f, [[B0, D], [B0, H, K, K]], w.names


def rwkv6_layer(D, heads=4, name="rwkv6_layer", packed=False):
    """RWKV-6 "Finch" time mixing (Peng et al. 2024): data-dependent token
    shift (ddlerp: x + xx * (mu_c + tanh((x + xx mu_x) M_1)_c M_2[c]) for
    c in w, k, v, r, g), r / k / v projections, gate silu(x W_g), per-key
    log-decay -exp(time_decay + tanh(x D_1) D_2), seq.linear_attention
    with the decay and the bonus u (time_faaaa), GroupNorm per head (eps
    64e-5), gated, out-projection; pre-norm (RMSNorm) and residual."""
    H = heads
    K = D // H
    Rm, Rd = D // 8, D // 4
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    B0 = "S" if packed else 1
    x0 = None if packed else f.arg("shift_state", [1, D])
    S0 = None if packed else f.arg("state", [1, H, K, K])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    maa_x = w("att.time_maa_x", [D])
    maa = {c: w(f"att.time_maa_{c}", [D]) for c in "wkvrg"}
    maa_w1 = w("att.time_maa_w1", [D, 5 * Rm])
    maa_w2 = w("att.time_maa_w2", [5, Rm, D])
    decay = w("att.time_decay", [D])
    dw1 = w("att.time_decay_w1", [D, Rd])
    dw2 = w("att.time_decay_w2", [Rd, D])
    u = w("att.time_faaaa", [H, K])
    wr = w("att.receptance.weight", [D, D])
    wk = w("att.key.weight", [D, D])
    wv = w("att.value.weight", [D, D])
    wg = w("att.gate.weight", [D, D])
    lnx_w = w("att.ln_x.weight", [D])
    lnx_b = w("att.ln_x.bias", [D])
    wo = w("att.output.weight", [D, D])
    f.bind_dim("T", h, 1)

    f.comment("pre-norm; token shift (the shift state is the previous token), ddlerp")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    xx, x1 = _token_shift_packed(f, xn, cu) if packed else _token_shift(f, xn, x0)
    lora = f.tanh(f.matmul(_lerp(f, xn, xx, maa_x), maa_w1))
    xm = {}
    for i, c in enumerate("wkvrg"):
        m = f.matmul(f.cols(lora, i * Rm, Rm), f.slab(maa_w2, i))
        xm[c] = _lerp(f, xn, xx, maa[c], m)
    r = f.matmul(xm["r"], wr)
    k = f.matmul(xm["k"], wk)
    v = f.matmul(xm["v"], wv)
    f.comment("per-key log-decay -exp(time_decay + tanh(x D_1) D_2)")
    wl = f.map(lambda n: (["%s = arith.addf %a0, %a1 : f32",
                           "%e = math.exp %s : f32",
                           "%y = arith.negf %e : f32"], "%y"),
               f.matmul(f.tanh(f.matmul(xm["w"], dw1)), dw2), decay, kinds=["full", "col"])
    o, S1 = f.op("linear_attention", [f.to_seq(r, K), f.to_seq(k, K), f.to_seq(v, K)],
                 [([1, "T", H, K], "f32"), ([B0, H, K, K], "f32")],
                 optional=[("decay", f.to_seq(wl, K)), ("bonus", u), ("init", S0),
                           ("segments", cu)])
    f.comment("GroupNorm per head, gated by silu(x W_g), out-projection, residual")
    on = f.groupnorm(f.from_seq(o), H, lnx_w, lnx_b, eps=64e-5)
    y = f.silu_mul(f.matmul(xm["g"], wg), on)
    out = f.add(h2, f.matmul(y, wo))
    f.ret(f.to_seq(out), x1, S1)
    return f, [[B0, D], [B0, H, K, K]], w.names


def performer_layer(D, heads=4, features=64, name="performer_layer", carried=True,
                    packed=False):
    """Performer (Choromanski et al. 2021): FAVOR+ positive random features
    of q / K^(1/4) and k / K^(1/4), causal normalized linear attention,
    out-projection; pre-norm and residual. With `carried`, the normalizer is
    computed as a second linear attention over a column of ones so its state
    (sum of phi(k)) is carried like S (the op's `normalize` cannot take an
    init); otherwise the op normalizes itself (whole sequences). packed
    (with carried): both from zero per sequence, returning S rows of each."""
    K = D // heads
    M = features
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    B0 = "S" if packed else 1
    S0 = Z0 = None
    if carried and not packed:
        S0 = f.arg("state", [1, heads, M, K])
        Z0 = f.arg("normalizer", [1, heads, M, 1])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    wq = w("attn.q_proj.weight", [D, D])
    wk = w("attn.k_proj.weight", [D, D])
    wv = w("attn.v_proj.weight", [D, D])
    omega = w("attn.omega", [K, M])
    wo = w("attn.o_proj.weight", [D, D])
    f.bind_dim("T", h, 1)

    f.comment("pre-norm, projections, positive random features")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    s = K ** -0.25
    phis = []
    for wm in (wq, wk):
        qk = f.to_seq(f.scale(f.matmul(xn, wm), s), K)
        (phi,) = f.op("random_features", [qk, omega], [([1, "T", heads, M], "f32")],
                      attrs="kind = #seq.random_features<positive>")
        phis.append(phi)
    v = f.to_seq(f.matmul(xn, wv), K)
    f.comment("causal linear attention, normalized")
    if carried:
        num, S1 = f.op("linear_attention", [phis[0], phis[1], v],
                       [([1, "T", heads, K], "f32"), ([B0, heads, M, K], "f32")],
                       optional=[("init", S0), ("segments", cu)])
        ones = f.full([1, "T", heads, 1], 1.0)
        den, Z1 = f.op("linear_attention", [phis[0], phis[1], ones],
                       [([1, "T", heads, 1], "f32"), ([B0, heads, M, 1], "f32")],
                       optional=[("init", Z0), ("segments", cu)])
        den3 = f.collapse(den, [[0], [1], [2, 3]], [1, "T", heads])
        o4 = f.generic([(num, "full"), (den3, "row")], [1, "T", heads, K], lambda n: ([
            "%eps = arith.constant 1.0e-06 : f32",
            "%d = arith.addf %a1, %eps : f32",
            "%y = arith.divf %a0, %d : f32"], "%y"))
        o = f.from_seq(o4)
    else:
        o4, _ = f.op("linear_attention", [phis[0], phis[1], v],
                     [([1, "T", heads, K], "f32"), ([1, heads, M, K], "f32")],
                     attrs="normalize = true")
        o = f.from_seq(o4)
    out = f.add(h2, f.matmul(o, wo))
    if carried:
        f.ret(f.to_seq(out), S1, Z1)
        return f, [[B0, heads, M, K], [B0, heads, M, 1]], w.names
    f.ret(f.to_seq(out))
    return f, [], w.names


def _kv_cache(f, kc, vc, k, v, cu):
    """The keys and values attention reads, which the layer returns as its
    cache: the cache extended by this chunk's; packed (cu), this chunk's
    alone (each sequence's cache is its own steps, laid out like u)."""
    if cu is not None:
        return k, v
    K = k.shape[3]
    return (f.concat(kc, k, 1, [1, "S2", k.shape[2], K]),
            f.concat(vc, v, 1, [1, "S2", v.shape[2], K]))


def attention_layer(D, heads=4, kv_heads=2, name="attention_layer", packed=False):
    """Grouped-query causal softmax attention with a KV cache (no positional
    encoding, as in Jamba); pre-norm and residual. The cache [1, S, Hkv, K]
    (S dynamic, 0 to start) is extended by the new keys and values. packed:
    no cache in; each sequence attends to its own keys (`segments`) and the
    keys and values, packed like h, are the caches returned."""
    K = D // heads
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    kc = None if packed else f.arg("k_cache", [1, "S", kv_heads, K])
    vc = None if packed else f.arg("v_cache", [1, "S", kv_heads, K])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    wq = w("attn.q_proj.weight", [D, D])
    wk = w("attn.k_proj.weight", [D, kv_heads * K])
    wv = w("attn.v_proj.weight", [D, kv_heads * K])
    wo = w("attn.o_proj.weight", [D, D])
    f.bind_dim("T", h, 1)
    f.comment("pre-norm, projections" + ("" if packed else ", the KV cache extended by this chunk"))
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    q = f.to_seq(f.matmul(xn, wq), K)
    k = f.to_seq(f.matmul(xn, wk), K)
    v = f.to_seq(f.matmul(xn, wv), K)
    k_all, v_all = _kv_cache(f, kc, vc, k, v, cu)
    (o,) = f.op("attention", [q, k_all, v_all], [([1, "T", heads, K], "f32")],
                optional=[("segments", cu)], attrs="causal = true")
    out = f.add(h2, f.matmul(f.from_seq(o), wo))
    f.ret(f.to_seq(out), k_all, v_all)
    return f, [k_all.shape, v_all.shape] if packed else [[1, "S", kv_heads, K]] * 2, w.names


def gated_attention_layer(D, heads=4, kv_heads=2, name="gated_attention_layer",
                          packed=False):
    """Qwen3-Next's gated attention without its partial RoPE: grouped-query
    causal softmax attention over a KV cache, per-head RMSNorm (eps 1e-6) of
    q and k, the output gated by sigmoid(x W_gate) (Qwen3-Next's q_proj
    interleaves this gate with q per head; here it is its own projection);
    pre-norm and residual. The cache [1, S, Hkv, K] (S dynamic, 0 to start)
    holds the normed keys. packed: as attention_layer's."""
    K = D // heads
    f = Function(_layer_name(name, packed), private=True)
    h = f.arg("h", [1, "T", D])
    cu = _packed_args(f, packed)
    kc = None if packed else f.arg("k_cache", [1, "S", kv_heads, K])
    vc = None if packed else f.arg("v_cache", [1, "S", kv_heads, K])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    wq = w("attn.q_proj.weight", [D, D])
    wgate = w("attn.gate_proj.weight", [D, D])
    wk = w("attn.k_proj.weight", [D, kv_heads * K])
    wv = w("attn.v_proj.weight", [D, kv_heads * K])
    qn_w = w("attn.q_norm.weight", [K])
    kn_w = w("attn.k_norm.weight", [K])
    wo = w("attn.o_proj.weight", [D, D])
    f.bind_dim("T", h, 1)
    f.comment("pre-norm, projections, q and k normed per head" +
              ("" if packed else ", the KV cache extended"))
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    q = f.matmul(xn, wq)
    q = f.to_seq(f.unheads(f.rmsnorm(f.heads(q, K), qn_w, eps=1e-6), "T", D), K)
    k = f.matmul(xn, wk)
    kT = f.collapse(f.expand(k, [[0], [1, 2]], ["T", kv_heads, K]), [[0, 1], [2]], ["TKV", K])
    f.bind_dim("TKV", kT, 0)
    kn = f.collapse(f.expand(f.rmsnorm(kT, kn_w, eps=1e-6), [[0, 1], [2]], ["T", kv_heads, K]),
                    [[0], [1, 2]], ["T", kv_heads * K])
    k = f.to_seq(kn, K)
    v = f.to_seq(f.matmul(xn, wv), K)
    k_all, v_all = _kv_cache(f, kc, vc, k, v, cu)
    (o,) = f.op("attention", [q, k_all, v_all], [([1, "T", heads, K], "f32")],
                optional=[("segments", cu)], attrs="causal = true")
    f.comment("output gate sigmoid(x W_gate), out-projection, residual")
    gated = f.sigmoid_mul(f.matmul(xn, wgate), f.from_seq(o))
    out = f.add(h2, f.matmul(gated, wo))
    f.ret(f.to_seq(out), k_all, v_all)
    return f, [k_all.shape, v_all.shape] if packed else [[1, "S", kv_heads, K]] * 2, w.names


def mlp_layer(D, hidden, name="mlp_layer"):
    """A SwiGLU feed-forward layer; pre-norm and residual."""
    f = Function(name, private=True)
    h = f.arg("h", [1, "T", D])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    wg = w("mlp.gate_proj.weight", [D, hidden])
    wu = w("mlp.up_proj.weight", [D, hidden])
    wd = w("mlp.down_proj.weight", [hidden, D])
    f.bind_dim("T", h, 1)
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    out = f.add(h2, f.swiglu_ffn(xn, wg, wu, wd))
    f.ret(f.to_seq(out))
    return f, [], w.names


def moe_layer(D, experts, hidden, k=2, router="softmax", capacity_factor=1.25,
              shared_hidden=None, name="moe_layer"):
    """A mixture-of-experts feed-forward layer: a router (softmax top-k with
    a load-balancing aux loss, or DeepSeek-style sigmoid scores with a
    selection bias, normalized and scaled), capacity-limited SwiGLU experts,
    one always-on shared SwiGLU expert; pre-norm and residual. Returns
    (h, aux, load)."""
    f = Function(name, private=True)
    h = f.arg("h", [1, "T", D])
    w = Weights(f, "")
    norm_w = w("norm.weight", [D])
    wr = w("moe.router.weight", [D, experts])
    bias = w("moe.router.bias", [experts]) if router == "sigmoid" else None
    wg = w("moe.experts.gate_proj", [experts, D, hidden])
    wu = w("moe.experts.up_proj", [experts, D, hidden])
    wd = w("moe.experts.down_proj", [experts, hidden, D])
    sh = shared_hidden or hidden
    sg = w("moe.shared.gate_proj.weight", [D, sh])
    su = w("moe.shared.up_proj.weight", [D, sh])
    sd = w("moe.shared.down_proj.weight", [sh, D])
    f.bind_dim("T", h, 1)
    f.comment("pre-norm and routing")
    h2 = f.from_seq(h)
    xn = f.rmsnorm(h2, norm_w)
    logits = f.matmul(xn, wr)
    if router == "softmax":
        attrs = f"k = {k} : i64, aux_loss_coef = 0.01 : f32"
    else:
        attrs = (f"k = {k} : i64, score = #seq.score<sigmoid>, normalize = true, "
                 "routed_scale = 2.5 : f32")
    wts, idx, aux = f.op("route", [logits],
                         [(["T", k], "f32"), (["T", k], "i32"), ([], "f32")],
                         optional=[("bias", bias)], attrs=attrs)
    f.comment("routed experts with capacity, a shared expert, residual")
    y, load = f.op("moe_ffn", [xn, wts, idx, wu, wd],
                   [(["T", D], "f32"), ([experts], "i64")],
                   optional=[("gate_proj", wg)],
                   attrs=f"capacity_factor = {_float(capacity_factor)} : f32")
    shared = f.swiglu_ffn(xn, sg, su, sd)
    out = f.add(f.add(h2, y), shared)
    f.ret(f.to_seq(out), aux, load)
    return f, [], w.names


# -- files ---------------------------------------------------------------------


def _zero_states(f, shapes):
    out = []
    for s in shapes:
        if "S" in s:  # an empty KV cache
            z = f.empty([0 if d == "S" else d for d in s])
            out.append(f.cast(z, s))
        else:
            out.append(f.full(s, 0.0))
    return out


def _packed_entry(D, layer, weights):
    """@packed(u, cu, weights): the packed layer function `layer` from zero
    states."""
    f = Function("packed")
    u = f.arg("u", [1, "T", D], "u")
    cu = f.arg("cu", ["S1"], "cu", dtype="i32")
    ws = [f.arg("w_" + n.replace(".", "_"), s, n) for n, s in weights]
    f.ret(*f.call(layer, [u, cu] + ws))
    return f


def single_block(make_layer, D, header):
    """@main and @step around one stateful layer function, @packed around
    its packed variant; make_layer(packed=...) builds them."""
    fn, states, weights = make_layer(packed=False)
    packed, _, _ = make_layer(packed=True)
    funcs = [fn, packed]
    for public in ("main", "step"):
        f = Function(public)
        u = f.arg("u", [1, "T", D], "u")
        st = [f.arg(sv.name[1:], s, sv.name[1:])
              for (sv, _), s in zip(fn.args[1:], states)] if public == "step" else None
        ws = [f.arg("w_" + n.replace(".", "_"), s, n) for n, s in weights]
        f.bind_dim("T", u, 1)
        if st is None:
            st = _zero_states(f, states)
        res = f.call(fn, [u] + st + ws)
        f.ret(*res)
        funcs.append(f)
    funcs.append(_packed_entry(D, packed, weights))
    return header + "\n".join(fn.text() for fn in funcs), funcs


def performer_block(D, header, **kw):
    """@main with the op's own normalization; @step and @packed with the
    carried one."""
    whole, _, weights = performer_layer(D, carried=False, name="performer_whole", **kw)
    step, states, _ = performer_layer(D, carried=True, name="performer_step", **kw)
    packed, _, _ = performer_layer(D, carried=True, name="performer", packed=True, **kw)
    funcs = [whole, step, packed]
    for public, layer in (("main", whole), ("step", step)):
        f = Function(public)
        u = f.arg("u", [1, "T", D], "u")
        st = [f.arg(sv.name[1:], s, sv.name[1:])
              for (sv, _), s in zip(step.args[1:], states)] if public == "step" else []
        ws = [f.arg("w_" + n.replace(".", "_"), s, n) for n, s in weights]
        f.bind_dim("T", u, 1)
        f.ret(*f.call(layer, [u] + st + ws))
        funcs.append(f)
    funcs.append(_packed_entry(D, packed, weights))
    return header + "\n".join(fn.text() for fn in funcs), funcs


def moe_block(D, header, experts=8, hidden=None, k=2):
    """@main: softmax top-2 with an aux loss; @deepseek: sigmoid + bias."""
    hidden = hidden or 2 * D
    funcs = []
    for public, router in (("main", "softmax"), ("deepseek", "sigmoid")):
        fn, _, weights = moe_layer(D, experts, hidden, k=k, router=router,
                                   name=f"moe_{router}_layer")
        f = Function(public)
        u = f.arg("u", [1, "T", D], "u")
        ws = [f.arg("w_" + n.replace(".", "_"), s, n) for n, s in weights]
        f.ret(*f.call(fn, [u] + ws))
        funcs += [fn, f]
    return header + "\n".join(fn.text() for fn in funcs), funcs


def hybrid_layout(n_layers=8, attn_period=8, attn_offset=4, moe_period=2, moe_offset=1):
    """Jamba's layout: attention in 1 of every 8 layers (offset 4), Mamba(-2)
    in the others; MoE feed-forward every other layer (offset 1), dense
    SwiGLU in the rest."""
    return [("attention" if i % attn_period == attn_offset else "mamba2",
             "moe" if i % moe_period == moe_offset else "mlp") for i in range(n_layers)]


def hybrid_stack(D, header=None, n_layers=8, experts=4, hidden=None, heads=4, kv_heads=2,
                 d_state=64, headdim=32):
    hidden = hidden or 2 * D
    m2, m2_states, m2_w = mamba2_layer(D, d_state=d_state, headdim=headdim)
    at, at_states, at_w = attention_layer(D, heads=heads, kv_heads=kv_heads)
    ml, _, ml_w = mlp_layer(D, hidden)
    mo, _, mo_w = moe_layer(D, experts, hidden, k=2, capacity_factor=0.0)
    m2p, _, _ = mamba2_layer(D, d_state=d_state, headdim=headdim, packed=True)
    atp, _, _ = attention_layer(D, heads=heads, kv_heads=kv_heads, packed=True)
    layout = hybrid_layout(n_layers)
    funcs = [m2, at, ml, mo, m2p, atp]
    for public in ("main", "step", "packed"):
        f = Function(public)
        u = f.arg("u", [1, "T", D], "u")
        cu = f.arg("cu", ["S1"], "cu", dtype="i32") if public == "packed" else None
        states = []
        for i, (mixer, _) in enumerate(layout):
            shapes = m2_states if mixer == "mamba2" else at_states
            names = ["conv_state", "ssm_state"] if mixer == "mamba2" else ["k_cache", "v_cache"]
            if public == "step":
                states.append([f.arg(f"l{i}_{n}", s, f"layers.{i}.{n}")
                               for n, s in zip(names, shapes)])
            else:
                states.append(None)
        wargs = []
        for i, (mixer, ffn) in enumerate(layout):
            mw = m2_w if mixer == "mamba2" else at_w
            fw = ml_w if ffn == "mlp" else mo_w
            wargs.append((
                [f.arg(f"l{i}_m_" + n.replace(".", "_"), s, f"layers.{i}.{n}") for n, s in mw],
                [f.arg(f"l{i}_f_" + n.replace(".", "_"), s, f"layers.{i}.ffn.{n}") for n, s in fw]))
        final_w = f.arg("w_final_norm", [D], "final_norm.weight")
        f.bind_dim("T", u, 1)
        x = u
        aux = None
        new_states = []
        for i, (mixer, ffn) in enumerate(layout):
            if cu is not None:  # packed: zero states, the offsets instead
                layer = m2p if mixer == "mamba2" else atp
                st = [cu]
            else:
                layer = m2 if mixer == "mamba2" else at
                st = states[i]
                if st is None:
                    st = _zero_states(f, m2_states if mixer == "mamba2" else at_states)
            res = f.call(layer, [x] + st + wargs[i][0], label=f"layers.{i}.{mixer}")
            x = res[0]
            new_states += res[1:]
            if ffn == "mlp":
                (x,) = f.call(ml, [x] + wargs[i][1], label=f"layers.{i}.mlp")
            else:
                x, a, _ = f.call(mo, [x] + wargs[i][1], label=f"layers.{i}.moe")
                aux = a if aux is None else f.add(aux, a)
        x2 = f.from_seq(x)
        out = f.to_seq(f.rmsnorm(x2, final_w))
        f.ret(out, aux, *new_states)
        funcs.append(f)
    return header + "\n".join(fn.text() for fn in funcs), funcs


def qwen3next_layout(n_layers=4, attn_period=4):
    """Qwen3-Next's layout: 3 Gated DeltaNet layers then 1 gated attention
    layer, repeated; a MoE feed-forward in every layer."""
    return [("attention" if i % attn_period == attn_period - 1 else "gdn", "moe")
            for i in range(n_layers)]


def qwen3next_stack(D, header=None, n_layers=4, experts=8, hidden=None, heads=4, kv_heads=2):
    hidden = hidden or D // 2
    gd, gd_states, gd_w = gdn_layer(D)
    at, at_states, at_w = gated_attention_layer(D, heads=heads, kv_heads=kv_heads)
    mo, _, mo_w = moe_layer(D, experts, hidden, k=2, capacity_factor=0.0, shared_hidden=hidden)
    gdp, _, _ = gdn_layer(D, packed=True)
    atp, _, _ = gated_attention_layer(D, heads=heads, kv_heads=kv_heads, packed=True)
    layout = qwen3next_layout(n_layers)
    kinds = {"gdn": (gd, gd_states, gd_w, ["conv_state", "state"], gdp),
             "attention": (at, at_states, at_w, ["k_cache", "v_cache"], atp)}
    funcs = [gd, at, mo, gdp, atp]
    for public in ("main", "step", "packed"):
        f = Function(public)
        u = f.arg("u", [1, "T", D], "u")
        cu = f.arg("cu", ["S1"], "cu", dtype="i32") if public == "packed" else None
        states = []
        for i, (mixer, _) in enumerate(layout):
            _, shapes, _, names, _ = kinds[mixer]
            states.append([f.arg(f"l{i}_{n}", s, f"layers.{i}.{n}")
                           for n, s in zip(names, shapes)] if public == "step" else None)
        wargs = []
        for i, (mixer, _) in enumerate(layout):
            mw = kinds[mixer][2]
            wargs.append((
                [f.arg(f"l{i}_m_" + n.replace(".", "_"), s, f"layers.{i}.{n}") for n, s in mw],
                [f.arg(f"l{i}_f_" + n.replace(".", "_"), s, f"layers.{i}.ffn.{n}")
                 for n, s in mo_w]))
        final_w = f.arg("w_final_norm", [D], "final_norm.weight")
        f.bind_dim("T", u, 1)
        x = u
        aux = None
        new_states = []
        for i, (mixer, _) in enumerate(layout):
            layer, shapes, _, _, packed_layer = kinds[mixer]
            if cu is not None:  # packed: zero states, the offsets instead
                layer, st = packed_layer, [cu]
            else:
                st = states[i] if states[i] is not None else _zero_states(f, shapes)
            res = f.call(layer, [x] + st + wargs[i][0], label=f"layers.{i}.{mixer}")
            x = res[0]
            new_states += res[1:]
            x, a, _ = f.call(mo, [x] + wargs[i][1], label=f"layers.{i}.moe")
            aux = a if aux is None else f.add(aux, a)
        out = f.to_seq(f.rmsnorm(f.from_seq(x), final_w))
        f.ret(out, aux, *new_states)
        funcs.append(f)
    return header + "\n".join(fn.text() for fn in funcs), funcs
