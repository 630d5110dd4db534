// The Mamba-2 layer of examples/host-cpp/layer.mlir, written for a server
// that batches requests continuously (main.cpp):
//
//   @prefill_packed  the prompts of S new requests in ONE call: B = 1, the
//                    prompts back to back along T, `cu` (S + 1 offsets, the
//                    layout of flash-attention's cu_seqlens) says where each
//                    starts. No state crosses a boundary, so this equals S
//                    separate prefills, without padding every prompt to the
//                    longest and without S small calls. The conv and SSM
//                    states come back with one row per sequence.
//   @step            one token of each of the B running sequences (T = 1),
//                    from the states of the previous call: the decode loop.
//   @prefill         one sequence alone (B = 1, no segments): what main.cpp
//                    checks the batched calls against.
//
// T, S and B are dynamic: one compiled module serves any mix of requests.
//   d_model 32, d_inner 64 = 4 heads x 16, d_state 16, conv width 4;
//   the conv runs over xBC = (x, B, C): 64 + 16 + 16 = 96 channels.
// Weights (the same for every function, matrices laid out [in, out]):
//   w_in 32x164 (z 64 | xBC 96 | dt 4), conv_w 96x4, dt_bias 4, A 4, D 4,
//   w_out 64x32.
//
// The three functions repeat the mixer with a static 1 for B or T rather
// than share one B x T function, so each one's shapes say what it is for.
// (Sharing it needs an expand_shape of rows into B x T with two dynamic
// sizes in one group, which MLIR 22's expand-strided-metadata crashed on;
// seq-relax-expand-shape handles it now.)

// The row-wise parts, shared by every function: they see B*T rows and do
// not care how the rows are grouped into sequences.

// rows u -> (z, xBC, dt) = split(u W_in)
func.func private @in_proj(%u: tensor<?x32xf32>, %w_in: tensor<32x164xf32>)
    -> (tensor<?x64xf32>, tensor<?x96xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %u, %c0 : tensor<?x32xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : tensor<?x164xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x164xf32>) -> tensor<?x164xf32>
  %p = linalg.matmul ins(%u, %w_in : tensor<?x32xf32>, tensor<32x164xf32>)
      outs(%f : tensor<?x164xf32>) -> tensor<?x164xf32>
  %z = tensor.extract_slice %p[0, 0] [%n, 64] [1, 1] : tensor<?x164xf32> to tensor<?x64xf32>
  %xbc = tensor.extract_slice %p[0, 64] [%n, 96] [1, 1] : tensor<?x164xf32> to tensor<?x96xf32>
  %dt = tensor.extract_slice %p[0, 160] [%n, 4] [1, 1] : tensor<?x164xf32> to tensor<?x4xf32>
  return %z, %xbc, %dt : tensor<?x64xf32>, tensor<?x96xf32>, tensor<?x4xf32>
}

// rows of the conv's output -> (x, B, C)
func.func private @split_xbc(%xbc: tensor<?x96xf32>)
    -> (tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %xbc, %c0 : tensor<?x96xf32>
  %x = tensor.extract_slice %xbc[0, 0] [%n, 64] [1, 1] : tensor<?x96xf32> to tensor<?x64xf32>
  %b = tensor.extract_slice %xbc[0, 64] [%n, 16] [1, 1] : tensor<?x96xf32> to tensor<?x16xf32>
  %c = tensor.extract_slice %xbc[0, 80] [%n, 16] [1, 1] : tensor<?x96xf32> to tensor<?x16xf32>
  return %x, %b, %c : tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}

// rows y -> y W_out
func.func private @out_proj(%y: tensor<?x64xf32>, %w_out: tensor<64x32xf32>)
    -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %y, %c0 : tensor<?x64xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : tensor<?x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %o = linalg.matmul ins(%y, %w_out : tensor<?x64xf32>, tensor<64x32xf32>)
      outs(%f : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %o : tensor<?x32xf32>
}

// S sequences packed along T (B = 1), sequence s being steps cu[s] ..
// cu[s+1]-1, each starting from its own row of the states (zeros for a new
// request; a saved state would resume one, e.g. the next chunk of a long
// prompt). Returns every step's output and each sequence's final states.
func.func @prefill_packed(%u: tensor<1x?x32xf32> {seq.name = "u"},
                          %cu: tensor<?xi32> {seq.name = "cu"},
                          %conv_state: tensor<?x96x3xf32> {seq.name = "conv_state"},
                          %ssm_state: tensor<?x4x16x16xf32> {seq.name = "ssm_state"},
                          %w_in: tensor<32x164xf32> {seq.name = "w_in"},
                          %conv_w: tensor<96x4xf32> {seq.name = "conv_w"},
                          %dt_bias: tensor<4xf32> {seq.name = "dt_bias"},
                          %A: tensor<4xf32> {seq.name = "A"},
                          %D: tensor<4xf32> {seq.name = "D"},
                          %w_out: tensor<64x32xf32> {seq.name = "w_out"})
    -> (tensor<1x?x32xf32>, tensor<?x96x3xf32>, tensor<?x4x16x16xf32>) {
  %c1 = arith.constant 1 : index
  %t = tensor.dim %u, %c1 : tensor<1x?x32xf32>
  %u2 = tensor.collapse_shape %u [[0, 1], [2]] : tensor<1x?x32xf32> into tensor<?x32xf32>
  %z2, %xbc2, %dt2 = func.call @in_proj(%u2, %w_in)
      : (tensor<?x32xf32>, tensor<32x164xf32>) -> (tensor<?x64xf32>, tensor<?x96xf32>, tensor<?x4xf32>)
  %xbc = tensor.expand_shape %xbc2 [[0, 1], [2]] output_shape [1, %t, 96]
      : tensor<?x96xf32> into tensor<1x?x96xf32>
  // segments(%cu): each sequence's conv window starts from its own row of
  // %conv_state, never from the previous sequence's last tokens.
  %conv, %conv_last = seq.causal_conv1d %xbc, %conv_w init(%conv_state) segments(%cu)
      {activation = #seq.activation<silu>}
      : (tensor<1x?x96xf32>, tensor<96x4xf32>, tensor<?x96x3xf32>, tensor<?xi32>)
      -> (tensor<1x?x96xf32>, tensor<?x96x3xf32>)
  %conv2 = tensor.collapse_shape %conv [[0, 1], [2]] : tensor<1x?x96xf32> into tensor<?x96xf32>
  %x2, %b2, %c2 = func.call @split_xbc(%conv2)
      : (tensor<?x96xf32>) -> (tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>)
  %x = tensor.expand_shape %x2 [[0, 1], [2, 3]] output_shape [1, %t, 4, 16]
      : tensor<?x64xf32> into tensor<1x?x4x16xf32>
  %B = tensor.expand_shape %b2 [[0, 1], [2, 3]] output_shape [1, %t, 1, 16]
      : tensor<?x16xf32> into tensor<1x?x1x16xf32>
  %C = tensor.expand_shape %c2 [[0, 1], [2, 3]] output_shape [1, %t, 1, 16]
      : tensor<?x16xf32> into tensor<1x?x1x16xf32>
  %dt = tensor.expand_shape %dt2 [[0, 1], [2]] output_shape [1, %t, 4]
      : tensor<?x4xf32> into tensor<1x?x4xf32>
  %z = tensor.expand_shape %z2 [[0, 1], [2, 3]] output_shape [1, %t, 4, 16]
      : tensor<?x64xf32> into tensor<1x?x4x16xf32>
  // The same segments: the SSM state restarts from %ssm_state[s] at cu[s].
  %y, %ssm_last = seq.ssd %x, %dt, %A, %B, %C skip(%D) gate(%z) dt_bias(%dt_bias)
      init(%ssm_state) segments(%cu) {dt_softplus = true}
      : (tensor<1x?x4x16xf32>, tensor<1x?x4xf32>, tensor<4xf32>, tensor<1x?x1x16xf32>,
         tensor<1x?x1x16xf32>, tensor<4xf32>, tensor<1x?x4x16xf32>, tensor<4xf32>,
         tensor<?x4x16x16xf32>, tensor<?xi32>)
      -> (tensor<1x?x4x16xf32>, tensor<?x4x16x16xf32>)
  %y2 = tensor.collapse_shape %y [[0, 1], [2, 3]] : tensor<1x?x4x16xf32> into tensor<?x64xf32>
  %o2 = func.call @out_proj(%y2, %w_out) : (tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
  %o = tensor.expand_shape %o2 [[0, 1], [2]] output_shape [1, %t, 32]
      : tensor<?x32xf32> into tensor<1x?x32xf32>
  return %o, %conv_last, %ssm_last
      : tensor<1x?x32xf32>, tensor<?x96x3xf32>, tensor<?x4x16x16xf32>
}

// One decode step of B running sequences (T = 1, no segments): row b of
// each state is sequence b's. B changes as requests finish and new ones
// join; nothing recompiles.
func.func @step(%u: tensor<?x1x32xf32> {seq.name = "u"},
                %conv_state: tensor<?x96x3xf32> {seq.name = "conv_state"},
                %ssm_state: tensor<?x4x16x16xf32> {seq.name = "ssm_state"},
                %w_in: tensor<32x164xf32> {seq.name = "w_in"},
                %conv_w: tensor<96x4xf32> {seq.name = "conv_w"},
                %dt_bias: tensor<4xf32> {seq.name = "dt_bias"},
                %A: tensor<4xf32> {seq.name = "A"},
                %D: tensor<4xf32> {seq.name = "D"},
                %w_out: tensor<64x32xf32> {seq.name = "w_out"})
    -> (tensor<?x1x32xf32>, tensor<?x96x3xf32>, tensor<?x4x16x16xf32>) {
  %c0 = arith.constant 0 : index
  %b = tensor.dim %u, %c0 : tensor<?x1x32xf32>
  %u2 = tensor.collapse_shape %u [[0, 1], [2]] : tensor<?x1x32xf32> into tensor<?x32xf32>
  %z2, %xbc2, %dt2 = func.call @in_proj(%u2, %w_in)
      : (tensor<?x32xf32>, tensor<32x164xf32>) -> (tensor<?x64xf32>, tensor<?x96xf32>, tensor<?x4xf32>)
  %xbc = tensor.expand_shape %xbc2 [[0, 1], [2]] output_shape [%b, 1, 96]
      : tensor<?x96xf32> into tensor<?x1x96xf32>
  %conv, %conv_last = seq.causal_conv1d %xbc, %conv_w init(%conv_state)
      {activation = #seq.activation<silu>}
      : (tensor<?x1x96xf32>, tensor<96x4xf32>, tensor<?x96x3xf32>)
      -> (tensor<?x1x96xf32>, tensor<?x96x3xf32>)
  %conv2 = tensor.collapse_shape %conv [[0, 1], [2]] : tensor<?x1x96xf32> into tensor<?x96xf32>
  %x2, %b2, %c2 = func.call @split_xbc(%conv2)
      : (tensor<?x96xf32>) -> (tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>)
  %x = tensor.expand_shape %x2 [[0, 1], [2, 3]] output_shape [%b, 1, 4, 16]
      : tensor<?x64xf32> into tensor<?x1x4x16xf32>
  %B = tensor.expand_shape %b2 [[0, 1], [2, 3]] output_shape [%b, 1, 1, 16]
      : tensor<?x16xf32> into tensor<?x1x1x16xf32>
  %C = tensor.expand_shape %c2 [[0, 1], [2, 3]] output_shape [%b, 1, 1, 16]
      : tensor<?x16xf32> into tensor<?x1x1x16xf32>
  %dt = tensor.expand_shape %dt2 [[0, 1], [2]] output_shape [%b, 1, 4]
      : tensor<?x4xf32> into tensor<?x1x4xf32>
  %z = tensor.expand_shape %z2 [[0, 1], [2, 3]] output_shape [%b, 1, 4, 16]
      : tensor<?x64xf32> into tensor<?x1x4x16xf32>
  %y, %ssm_last = seq.ssd %x, %dt, %A, %B, %C skip(%D) gate(%z) dt_bias(%dt_bias)
      init(%ssm_state) {dt_softplus = true}
      : (tensor<?x1x4x16xf32>, tensor<?x1x4xf32>, tensor<4xf32>, tensor<?x1x1x16xf32>,
         tensor<?x1x1x16xf32>, tensor<4xf32>, tensor<?x1x4x16xf32>, tensor<4xf32>,
         tensor<?x4x16x16xf32>)
      -> (tensor<?x1x4x16xf32>, tensor<?x4x16x16xf32>)
  %y2 = tensor.collapse_shape %y [[0, 1], [2, 3]] : tensor<?x1x4x16xf32> into tensor<?x64xf32>
  %o2 = func.call @out_proj(%y2, %w_out) : (tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
  %o = tensor.expand_shape %o2 [[0, 1], [2]] output_shape [%b, 1, 32]
      : tensor<?x32xf32> into tensor<?x1x32xf32>
  return %o, %conv_last, %ssm_last
      : tensor<?x1x32xf32>, tensor<?x96x3xf32>, tensor<?x4x16x16xf32>
}

// One sequence alone (B = 1, no segments), from given states: the
// reference main.cpp checks the batched calls against.
func.func @prefill(%u: tensor<1x?x32xf32> {seq.name = "u"},
                   %conv_state: tensor<1x96x3xf32> {seq.name = "conv_state"},
                   %ssm_state: tensor<1x4x16x16xf32> {seq.name = "ssm_state"},
                   %w_in: tensor<32x164xf32> {seq.name = "w_in"},
                   %conv_w: tensor<96x4xf32> {seq.name = "conv_w"},
                   %dt_bias: tensor<4xf32> {seq.name = "dt_bias"},
                   %A: tensor<4xf32> {seq.name = "A"},
                   %D: tensor<4xf32> {seq.name = "D"},
                   %w_out: tensor<64x32xf32> {seq.name = "w_out"})
    -> (tensor<1x?x32xf32>, tensor<1x96x3xf32>, tensor<1x4x16x16xf32>) {
  %c1 = arith.constant 1 : index
  %t = tensor.dim %u, %c1 : tensor<1x?x32xf32>
  %u2 = tensor.collapse_shape %u [[0, 1], [2]] : tensor<1x?x32xf32> into tensor<?x32xf32>
  %z2, %xbc2, %dt2 = func.call @in_proj(%u2, %w_in)
      : (tensor<?x32xf32>, tensor<32x164xf32>) -> (tensor<?x64xf32>, tensor<?x96xf32>, tensor<?x4xf32>)
  %xbc = tensor.expand_shape %xbc2 [[0, 1], [2]] output_shape [1, %t, 96]
      : tensor<?x96xf32> into tensor<1x?x96xf32>
  %conv, %conv_last = seq.causal_conv1d %xbc, %conv_w init(%conv_state)
      {activation = #seq.activation<silu>}
      : (tensor<1x?x96xf32>, tensor<96x4xf32>, tensor<1x96x3xf32>)
      -> (tensor<1x?x96xf32>, tensor<1x96x3xf32>)
  %conv2 = tensor.collapse_shape %conv [[0, 1], [2]] : tensor<1x?x96xf32> into tensor<?x96xf32>
  %x2, %b2, %c2 = func.call @split_xbc(%conv2)
      : (tensor<?x96xf32>) -> (tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>)
  %x = tensor.expand_shape %x2 [[0, 1], [2, 3]] output_shape [1, %t, 4, 16]
      : tensor<?x64xf32> into tensor<1x?x4x16xf32>
  %B = tensor.expand_shape %b2 [[0, 1], [2, 3]] output_shape [1, %t, 1, 16]
      : tensor<?x16xf32> into tensor<1x?x1x16xf32>
  %C = tensor.expand_shape %c2 [[0, 1], [2, 3]] output_shape [1, %t, 1, 16]
      : tensor<?x16xf32> into tensor<1x?x1x16xf32>
  %dt = tensor.expand_shape %dt2 [[0, 1], [2]] output_shape [1, %t, 4]
      : tensor<?x4xf32> into tensor<1x?x4xf32>
  %z = tensor.expand_shape %z2 [[0, 1], [2, 3]] output_shape [1, %t, 4, 16]
      : tensor<?x64xf32> into tensor<1x?x4x16xf32>
  %y, %ssm_last = seq.ssd %x, %dt, %A, %B, %C skip(%D) gate(%z) dt_bias(%dt_bias)
      init(%ssm_state) {dt_softplus = true}
      : (tensor<1x?x4x16xf32>, tensor<1x?x4xf32>, tensor<4xf32>, tensor<1x?x1x16xf32>,
         tensor<1x?x1x16xf32>, tensor<4xf32>, tensor<1x?x4x16xf32>, tensor<4xf32>,
         tensor<1x4x16x16xf32>)
      -> (tensor<1x?x4x16xf32>, tensor<1x4x16x16xf32>)
  %y2 = tensor.collapse_shape %y [[0, 1], [2, 3]] : tensor<1x?x4x16xf32> into tensor<?x64xf32>
  %o2 = func.call @out_proj(%y2, %w_out) : (tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
  %o = tensor.expand_shape %o2 [[0, 1], [2]] output_shape [1, %t, 32]
      : tensor<?x32xf32> into tensor<1x?x32xf32>
  return %o, %conv_last, %ssm_last
      : tensor<1x?x32xf32>, tensor<1x96x3xf32>, tensor<1x4x16x16xf32>
}
