# seq.route against numpy: the three scores, normalize, routed_scale, the
# selection bias, noisy top-k, ties to the lower index, k = E, and the aux loss
# (with uniform routing giving exactly aux_loss_coef).
# RUN: %python %s
import numpy as np
from refs import route
from seqc_testing import Checker, f32, func, mlir_type, rng, run_seqc, seq_op, type_of

c = Checker()


def case(T, E, k, score="softmax_topk", bias=False, noise=False, normalize=False,
         routed_scale=1.0, coef=0.01, logits=None, seed=0):
    r = rng(seed)
    lg = f32(r.standard_normal((T, E))) if logits is None else logits
    eb = f32(r.standard_normal(E) * 0.5)
    eps = f32(r.standard_normal((T, E)))
    nl = f32(r.standard_normal((T, E)))
    args, inputs, opt = [("l", type_of(lg))], [lg], []
    if bias:
        args.append(("eb", type_of(eb)))
        inputs.append(eb)
        opt.append(("bias", ["%eb"]))
    if noise:
        args += [("eps", type_of(eps)), ("nl", type_of(nl))]
        inputs += [eps, nl]
        opt.append(("noise", ["%eps", "%nl"]))
    attrs = (f"k = {k} : i64, score = #seq.score<{score}>, normalize = {str(normalize).lower()}, "
             f"routed_scale = {routed_scale} : f32, aux_loss_coef = {coef} : f32")
    out = [mlir_type([T, k]), mlir_type([T, k], "i32"), "tensor<f32>"]
    line = seq_op("r", "route", ["%l"], opt, attrs, [t for _, t in args], out)
    w, idx, aux = run_seqc(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1]), ("%r#2", out[2])]),
                           inputs)
    rw, ridx, raux = route(lg, k, eb if bias else None, (eps, nl) if noise else None, score,
                           normalize, routed_scale, coef)
    tag = f"T={T} E={E} k={k} score={score} bias={bias} noise={noise} normalize={normalize}"
    c.equal("indices " + tag, idx, ridx)
    c.close("weights " + tag, w, rw)
    c.close("aux " + tag, aux, raux)
    return idx, aux


c.run("softmax_topk", lambda: case(16, 8, 2))
c.run("softmax gathered", lambda: case(13, 6, 3, score="softmax", seed=1))
c.run("sigmoid normalize scale", lambda: case(11, 8, 4, score="sigmoid", bias=True, normalize=True,
                                              routed_scale=2.5, seed=2))
c.run("noisy", lambda: case(9, 5, 2, noise=True, seed=3))
c.run("noisy + bias", lambda: case(7, 7, 1, noise=True, bias=True, score="softmax", seed=4))
c.run("k = E", lambda: case(5, 4, 4, seed=5))
# More tokens than one GPU block's threads (256).
c.run("many tokens", lambda: case(600, 16, 4, noise=True, bias=True, seed=6))


def ties():
    lg = f32(np.zeros((4, 6)))
    lg[1, 2] = lg[1, 4] = 1.0
    idx, _ = case(4, 6, 3, logits=lg)
    c.equal("ties: all-equal row picks 0, 1, 2", idx[0], np.array([0, 1, 2], np.int32))
    c.equal("ties: equal maxima in index order", idx[1], np.array([2, 4, 0], np.int32))


def uniform_aux():
    # Every token equally likely for every expert and first choices spread
    # evenly: aux == aux_loss_coef.
    T, E = 8, 4
    lg = f32(np.zeros((T, E)))
    for t in range(T):
        lg[t, t % E] = 1e-3
    _, aux = case(T, E, 1, logits=lg, coef=0.01)
    c.close("uniform routing gives aux = coef", aux, 0.01, tol=1e-4)


c.run("ties", ties)
c.run("uniform aux", uniform_aux)
c.finish()
