# A chunked op whose output nothing reads (a function returning only its
# `last`, as sequence parallelism's runs for a rank's own state and
# transition are) runs only its state's phases on the CPU
# (ChunkedForm::outputUsed): ssd with groups of heads (the shared scores
# kernel is skipped too), linear attention with a normalizer, the gated
# delta rule (its chunk transition still runs); the recurrences of linear
# attention and the delta rules update their state alone. Each `last`
# equals float64 numpy, on every pipeline, over several chunks and a ragged
# last one.
# RUN: %python %s
import numpy as np
import refs
from seqc_testing import Checker, f32, func, rng, run_seqc, seq_op, type_of

c = Checker()
r = rng(31)


def t(*shape):
    return "tensor<" + "".join(f"{s}x" for s in shape) + "f32>"


def last_only(op, operands, optional, y_type, last_type, attrs=""):
    """A function of one op that returns only its state."""
    arrays = [a for _, a in operands + optional]
    args = [(f"a{i}", type_of(a)) for i, a in enumerate(arrays)]
    names = [f"%a{i}" for i in range(len(args))]
    required = names[:len(operands)]
    opt = [(kw, [n]) for (kw, _), n in zip(optional, names[len(operands):])]
    body = [seq_op("r", op, required, opt, attrs, [ty for _, ty in args],
                   [y_type, last_type])]
    return func(args, body, [("%r#1", last_type)]), arrays


def check(name, mlir, inputs, want):
    def body():
        got = run_seqc(mlir, inputs)
        c.close(f"{name}: last vs float64", got[0], want, 1e-4)
    c.run(name, body)


B, T = 2, 45
# ssd: 4 heads in 2 groups (shared q k^T), skip, gate and init, chunks of 16.
H, G, P, N = 4, 2, 3, 8
x = f32(r.standard_normal((B, T, H, P)))
dt = f32(r.uniform(0.1, 0.8, (B, T, H)))
A = f32(-r.uniform(0.5, 1.5, H))
Bm = f32(r.standard_normal((B, T, G, N)))
Cm = f32(r.standard_normal((B, T, G, N)))
D = f32(r.standard_normal(H))
z = f32(r.standard_normal((B, T, H, P)))
h0 = f32(r.standard_normal((B, H, P, N)))
mlir, ins = last_only("ssd", [("", x), ("", dt), ("", A), ("", Bm), ("", Cm)],
                      [("skip", D), ("gate", z), ("init", h0)],
                      t(B, T, H, P), t(B, H, P, N), "chunk_size = 16")
check("ssd groups", mlir, ins, refs.ssd(x, dt, A, Bm, Cm, D, z, None, h0)[1])

def linear_attention_case(name, H, K, V, decay_of, attrs=""):
    """Linear attention with init and the decay decay_of(shape of q)."""
    q = f32(r.standard_normal((B, T, H, K)))
    k = f32(r.standard_normal((B, T, H, K)))
    v = f32(r.standard_normal((B, T, H, V)))
    g = decay_of((B, T, H, K))
    S0 = f32(r.standard_normal((B, H, K, V)))
    mlir, ins = last_only("linear_attention", [("", q), ("", k), ("", v)],
                          [("decay", g), ("init", S0)], t(B, T, H, V),
                          t(B, H, K, V), attrs)
    check(name, mlir, ins, refs.linear_attention(q, k, v, g, S0)[1])


def per_step(shape):
    return f32(-r.uniform(0.05, 0.5, shape[:3]))


# linear attention with a per-step decay and init, chunks of 16.
linear_attention_case("linear_attention", 2, 8, 5, per_step, "chunk_size = 16")

def delta_rule_case(name, H, HV, K, V, decay_of, attrs):
    """The delta rule with qk_l2norm, init and the decay decay_of(shape of
    v with K last); returns its q, k, beta, decay and init."""
    q = f32(r.standard_normal((B, T, H, K)))
    k = f32(r.standard_normal((B, T, H, K)))
    v = f32(r.standard_normal((B, T, HV, V)))
    beta = f32(r.uniform(0.1, 0.9, (B, T, HV)))
    g = decay_of((B, T, HV, K))
    S0 = f32(r.standard_normal((B, HV, K, V)))
    mlir, ins = last_only("delta_rule", [("", q), ("", k), ("", v), ("", beta)],
                          [("decay", g), ("init", S0)], t(B, T, HV, V),
                          t(B, HV, K, V), "qk_l2norm = true" + attrs)
    check(name, mlir, ins,
          refs.delta_rule(q, k, v, beta, g, S0, qk_l2norm=True)[1])
    return q, k, v, beta, g, S0


# Gated DeltaNet: two value heads per key head, chunks of 16.
delta_rule_case("delta_rule gated", 1, 2, 8, 5,
                lambda shape: f32(-r.uniform(0.01, 0.3, shape[:3])),
                ", chunk_size = 16")

# The recurrences update the state alone. Linear attention with a scalar
# decay, its recurrence forced (a state-only op is chunked unasked), whose
# state is kept as c U with its decay deferred: odd T (the last step
# alone), and a run of steep steps that makes it fold c into U.
def steep(shape):
    g = per_step(shape)
    g[:, 10:14] = -40.0
    return g


linear_attention_case("linear_attention recurrent", 2, 8, 20, steep,
                      "seq.plan = #seq.plan<recurrent>")
# Per-key decay (GLA): the CPU's general recurrence.
linear_attention_case("linear_attention per-key recurrent", 2, 8, 20,
                      lambda shape: f32(-r.uniform(0.05, 0.5, shape)))

# The delta rule's recurrence (its plan for a small state), with qk_l2norm
# (the query's norm is not needed) and a per-key decay, and the generalized
# delta rule's on the same operands.
q, k, v, beta, gk, S0 = delta_rule_case(
    "delta_rule recurrent", 2, 2, 8, 5,
    lambda shape: f32(-r.uniform(0.01, 0.3, shape)), "")
H, K, V = 2, 8, 5
kk = k / np.linalg.norm(k, axis=-1, keepdims=True)
a = f32(-kk)
b = f32(kk * beta[..., None])
mlir, ins = last_only("generalized_delta_rule",
                      [("", q), ("", k), ("", v), ("", a), ("", b)],
                      [("decay", gk), ("init", S0)], t(B, T, H, V),
                      t(B, H, K, V))
check("generalized_delta_rule recurrent", mlir, ins,
      refs.generalized_delta_rule(q, k, v, a, b, gk, S0)[1])

c.finish()
