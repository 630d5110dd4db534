"""causal-conv1d's functions (`causal_conv1d_fn`, `causal_conv1d_update`) on
`seq.causal_conv1d`, with the peer's argument names, defaults and
(batch, dim, seqlen) layouts.

The peer's convolution is depthwise and causal:
`out[b,d,t] = act(bias[d] + sum_{j<W} weight[d,j] * x[b,d,t-W+1+j])`, inputs
before t = 0 taken from `initial_states` (oldest first) or zero, `act` SiLU
for activation "silu"/"swish". The final state is the last `W-1` inputs.
"""

import seqc

from . import _common
from ._common import (OpCall, assign, cast_like, check_rank, concat_last,
                      param_type, permute, required, seq_idx_offsets, to_f32)

__all__ = ["causal_conv1d_fn", "causal_conv1d_update"]

_ACTIVATIONS = {None: "none", "silu": "silu", "swish": "silu"}


# --------------------------------------------------------------------------
# causal_conv1d
# --------------------------------------------------------------------------


def _activation(activation):
    if activation not in _ACTIVATIONS:
        raise seqc.CallError(
            f"seqc.compat: activation must be None, 'silu' or 'swish', not "
            f"{activation!r}")
    return _ACTIVATIONS[activation]


def _conv_weights(weight, bias, dim, dtype):
    """Checks weight (dim x width) and bias (dim); returns the width."""
    _common.check_shape(weight, (dim, None), "weight")
    param_type(weight, "weight", dtype)
    if weight.shape[1] < 1:
        raise seqc.CallError("seqc.compat: weight must have width >= 1")
    if bias is not None:
        _common.check_shape(bias, (dim,), "bias")
        param_type(bias, "bias", dtype)
    return weight.shape[1]


def _run_conv(x_btd, weight, bias, init, cu, activation, dtype):
    """seq.causal_conv1d on x (batch x T x dim, a view): returns
    (y batch x T x dim, last batch x dim x W-1 f32)."""
    batch, _, dim = x_btd.shape
    width = weight.shape[1]
    call = OpCall("causal_conv1d")
    call.operand(None, "x", x_btd, (batch, None, dim), dtype)
    call.operand(None, "w", weight, weight.shape,
                 _common.element_type(weight, "weight"))
    if bias is not None:
        call.operand("bias", "b", bias, bias.shape,
                     _common.element_type(bias, "bias"))
    states = None if cu is not None else batch
    if init is not None:
        call.operand("init", "s0", init, (states, dim, width - 1), "f32")
    if cu is not None:
        call.operand("segments", "cu", cu, (None,), "i32")
    if activation != "none":
        call.attr(f"activation = #seq.activation<{activation}>")
    return call(((batch, None, dim), dtype), ((states, dim, width - 1), "f32"))


def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None,
                     return_final_states=False, final_states_out=None,
                     activation=None):
    """causal_conv1d's `causal_conv1d_fn`: x (batch, dim, seqlen), weight
    (dim, width), bias (dim,), initial_states (batch, dim, width-1), the
    inputs before t = 0, oldest first; activation None, "silu" or "swish".
    Returns out (batch, dim, seqlen) in x's dtype, and with
    return_final_states (out, final_states): the last width-1 inputs
    (batch, dim, width-1) in x's dtype, written into final_states_out when
    given. seq_idx (1, seqlen) restarts the convolution where the sequence
    index changes (sequences packed in order); as in the peer it takes no
    initial or final states."""
    act = _activation(activation)
    x = required(x, "x")
    weight = required(weight, "weight")
    bias = _common.host(bias, "bias")
    check_rank(x, (3,), "x", "batch x dim x seqlen")
    batch, dim, length = x.shape
    dtype = _common.element_type(x, "x")
    width = _conv_weights(weight, bias, dim, dtype)
    cu = None
    if seq_idx is not None:
        if initial_states is not None or return_final_states:
            raise seqc.CallError(
                "seqc.compat: causal_conv1d_fn takes no initial_states and "
                "returns no final states with seq_idx (as causal_conv1d)")
        cu = seq_idx_offsets(seq_idx, length)
    init = None
    if initial_states is not None:
        init = _common.host(initial_states, "initial_states")
        _common.check_shape(init, (batch, dim, width - 1), "initial_states")
        _common.element_type(init, "initial_states")
        init = to_f32(init)
    y, last = _run_conv(permute(x, 0, 2, 1), weight, bias, init, cu, act,
                        dtype)
    out = permute(y, 0, 2, 1)
    if not return_final_states:
        return out
    if final_states_out is None:
        return out, cast_like(last, x)
    final = _common.host(final_states_out, "final_states_out")
    _common.check_shape(final, (batch, dim, width - 1), "final_states_out")
    _common.element_type(final, "final_states_out")
    assign(final, last)
    return out, final_states_out


def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None,
                         cache_seqlens=None, conv_state_indices=None):
    """causal_conv1d's `causal_conv1d_update`, a decoding step: x (batch,
    dim) or (batch, dim, seqlen) new inputs, conv_state (batch, dim,
    state_len >= width-1) the previous inputs, oldest first, updated in
    place to the last state_len inputs; weight (dim, width), bias (dim,).
    Returns out in x's shape and dtype. The circular-buffer forms
    (cache_seqlens, conv_state_indices) are not supported."""
    if cache_seqlens is not None or conv_state_indices is not None:
        raise NotImplementedError(
            "seqc.compat: causal_conv1d_update's cache_seqlens and "
            "conv_state_indices are not supported")
    act = _activation(activation)
    x = required(x, "x")
    state = required(conv_state, "conv_state")
    weight = required(weight, "weight")
    bias = _common.host(bias, "bias")
    check_rank(x, (2, 3), "x", "batch x dim or batch x dim x seqlen")
    steps = x if x.ndim == 3 else x[:, :, None]
    batch, dim, length = steps.shape
    dtype = _common.element_type(x, "x")
    width = _conv_weights(weight, bias, dim, dtype)
    _common.check_shape(state, (batch, dim, None), "conv_state")
    _common.element_type(state, "conv_state")
    state_len = state.shape[2]
    if state_len < width - 1:
        raise seqc.CallError(
            f"seqc.compat: conv_state holds {state_len} inputs, fewer than "
            f"width - 1 = {width - 1}")
    window = to_f32(state[:, :, state_len - (width - 1):])
    y, last = _run_conv(permute(steps, 0, 2, 1), weight, bias, window, None,
                        act, dtype)
    _shift_state(state, steps, last, width)
    out = permute(y, 0, 2, 1)
    return out if x.ndim == 3 else out[:, :, 0]


def _shift_state(state, steps, last, width):
    """conv_state <- the last state_len entries of (conv_state, steps): the
    newest width-1 are seq's `last`, older ones move on the host."""
    state_len, length = state.shape[2], steps.shape[2]
    older = state_len - (width - 1)
    if older:
        assign(state[:, :, :older],
               concat_last(state, steps)[:, :, length:length + older])
    assign(state[:, :, older:], last)
