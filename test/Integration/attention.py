# seq.attention against float64 softmax attention: causal and not, sliding
# windows, grouped-query heads, more keys than queries (a KV cache: queries
# aligned to the end), more queries than keys (queries that see no key output
# 0), T = 1 decode, default and explicit scale.
# RUN: %python %s
import numpy as np
from refs import attention
from seqc_testing import Checker, f32, func, mlir_type, rng, run_seqc, seq_op, type_of

c = Checker()


def case(Bs, T, S, H, Hkv, K, V, causal=True, window=0, scale=None, seed=0):
    r = rng(seed)
    q = f32(r.standard_normal((Bs, T, H, K)))
    k = f32(r.standard_normal((Bs, S, Hkv, K)))
    v = f32(r.standard_normal((Bs, S, Hkv, V)))
    attrs = [f"causal = {str(causal).lower()}", f"window = {window} : i64"]
    if scale is not None:
        attrs.append(f"scale = {scale} : f32")
    tout = mlir_type([Bs, T, H, V])
    line = seq_op("o", "attention", ["%q", "%k", "%v"], [], ", ".join(attrs),
                  [type_of(q), type_of(k), type_of(v)], [tout])
    # The GPU kernel keeps V <= 128 accumulators: wider V takes the host
    # (with a remark), on purpose in the V = 130 case.
    (o,) = run_seqc(func([("q", type_of(q)), ("k", type_of(k)), ("v", type_of(v))], [line],
                         [("%o", tout)]), [q, k, v], gpu_strict=V <= 128)
    c.close(f"B={Bs} T={T} S={S} H={H} Hkv={Hkv} K={K} V={V} causal={causal} window={window} "
            f"scale={scale}", o, attention(q, k, v, causal, window, scale))


c.run("causal", lambda: case(2, 16, 16, 4, 4, 8, 8))
c.run("non-causal", lambda: case(1, 9, 13, 2, 1, 5, 3, causal=False, seed=1))
c.run("gqa + kv cache", lambda: case(2, 7, 23, 6, 2, 8, 4, seed=2))
c.run("window", lambda: case(1, 31, 31, 2, 2, 4, 4, window=5, seed=3))
c.run("window + cache", lambda: case(1, 4, 20, 2, 1, 4, 6, window=3, scale=0.3, seed=4))
c.run("more queries than keys", lambda: case(1, 10, 4, 1, 1, 3, 2, seed=5))
c.run("decode T=1", lambda: case(3, 1, 17, 4, 2, 16, 8, seed=6))
c.run("non-causal window", lambda: case(1, 8, 8, 1, 1, 4, 4, causal=False, window=2, seed=7))
# Several tiles of queries, keys, head and V channels in the GPU kernel
# (32 x 32 tiles, V tiles of 64), partial tiles at every edge.
c.run("tiles", lambda: case(1, 100, 150, 4, 2, 40, 70, seed=8))
c.run("tiles + window", lambda: case(1, 100, 100, 2, 2, 33, 65, window=37, seed=9))
c.run("non-causal tiles", lambda: case(1, 70, 45, 2, 1, 33, 20, causal=False, seed=10))
c.run("V = 130 (beyond the GPU accumulator)", lambda: case(1, 5, 5, 1, 1, 4, 130, seed=11))
c.finish()
