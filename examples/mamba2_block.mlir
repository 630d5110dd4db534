// A Mamba-2 block (Dao & Gu, "Transformers are SSMs", 2024) at small scale:
// d_model = 128, d_inner = 256 = 8 heads x 32, d_state = 64, one B/C group,
// conv width 4, a sequence of 256 tokens.
//
//   zxbcdt = u W_in                                  (in-projection)
//   xBC    = silu(causal_conv1d(xBC) + b)            (conv over x, B and C)
//   y      = ssd(x, dt, A = -exp(A_log), B, C) with dt_bias, softplus, skip D,
//            gated by silu(z)
//   out    = rmsnorm(y) * norm_w  W_out               (out-projection)
//
// Run it:  seqc-run examples/mamba2_block.mlir --random-inputs --print --bench 10

#map_rows = affine_map<(t, c) -> (t, c)>
#map_bcast = affine_map<(t, c) -> (c)>
#map_row = affine_map<(t, c) -> (t)>
#map_1d = affine_map<(h) -> (h)>

func.func @main(%u: tensor<1x256x128xf32> {seq.name = "u"},
                %w_in: tensor<128x648xf32> {seq.name = "in_proj.weight"},
                %conv_w: tensor<384x4xf32> {seq.name = "conv1d.weight"},
                %conv_b: tensor<384xf32> {seq.name = "conv1d.bias"},
                %dt_bias: tensor<8xf32> {seq.name = "dt_bias"},
                %A_log: tensor<8xf32> {seq.name = "A_log"},
                %D: tensor<8xf32> {seq.name = "D"},
                %norm_w: tensor<256xf32> {seq.name = "norm.weight"},
                %w_out: tensor<256x128xf32> {seq.name = "out_proj.weight"})
    -> (tensor<1x256x128xf32>, tensor<1x8x32x64xf32>) {
  %zero = arith.constant 0.0 : f32

  // In-projection, scaled by 1/sqrt(d_model) so random weights keep unit size.
  %u2 = tensor.collapse_shape %u [[0, 1], [2]] : tensor<1x256x128xf32> into tensor<256x128xf32>
  %e0 = tensor.empty() : tensor<256x648xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<256x648xf32>) -> tensor<256x648xf32>
  %mm = linalg.matmul ins(%u2, %w_in : tensor<256x128xf32>, tensor<128x648xf32>)
                      outs(%f0 : tensor<256x648xf32>) -> tensor<256x648xf32>
  %inv_sqrt_d = arith.constant 0.0883883476 : f32
  %zxbcdt = linalg.generic {indexing_maps = [#map_rows, #map_rows],
                            iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<256x648xf32>) outs(%e0 : tensor<256x648xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.mulf %v, %inv_sqrt_d : f32
    linalg.yield %s : f32
  } -> tensor<256x648xf32>

  // Split into z (256), xBC (256 + 64 + 64) and dt (8).
  %z2 = tensor.extract_slice %zxbcdt[0, 0] [256, 256] [1, 1] : tensor<256x648xf32> to tensor<256x256xf32>
  %xbc2 = tensor.extract_slice %zxbcdt[0, 256] [256, 384] [1, 1] : tensor<256x648xf32> to tensor<256x384xf32>
  %dt2 = tensor.extract_slice %zxbcdt[0, 640] [256, 8] [1, 1] : tensor<256x648xf32> to tensor<256x8xf32>

  // Depthwise causal conv over x, B and C with SiLU.
  %xbc = tensor.expand_shape %xbc2 [[0, 1], [2]] output_shape [1, 256, 384]
      : tensor<256x384xf32> into tensor<1x256x384xf32>
  %conv, %conv_state = seq.causal_conv1d %xbc, %conv_w bias(%conv_b)
      {activation = #seq.activation<silu>}
      : (tensor<1x256x384xf32>, tensor<384x4xf32>, tensor<384xf32>)
        -> (tensor<1x256x384xf32>, tensor<1x384x3xf32>)

  %x3 = tensor.extract_slice %conv[0, 0, 0] [1, 256, 256] [1, 1, 1]
      : tensor<1x256x384xf32> to tensor<1x256x256xf32>
  %x = tensor.expand_shape %x3 [[0], [1], [2, 3]] output_shape [1, 256, 8, 32]
      : tensor<1x256x256xf32> into tensor<1x256x8x32xf32>
  %b3 = tensor.extract_slice %conv[0, 0, 256] [1, 256, 64] [1, 1, 1]
      : tensor<1x256x384xf32> to tensor<1x256x64xf32>
  %c3 = tensor.extract_slice %conv[0, 0, 320] [1, 256, 64] [1, 1, 1]
      : tensor<1x256x384xf32> to tensor<1x256x64xf32>
  %B = tensor.expand_shape %b3 [[0], [1], [2, 3]] output_shape [1, 256, 1, 64]
      : tensor<1x256x64xf32> into tensor<1x256x1x64xf32>
  %C = tensor.expand_shape %c3 [[0], [1], [2, 3]] output_shape [1, 256, 1, 64]
      : tensor<1x256x64xf32> into tensor<1x256x1x64xf32>
  %dt = tensor.expand_shape %dt2 [[0, 1], [2]] output_shape [1, 256, 8]
      : tensor<256x8xf32> into tensor<1x256x8xf32>
  %z = tensor.expand_shape %z2 [[0, 1], [2, 3]] output_shape [1, 256, 8, 32]
      : tensor<256x256xf32> into tensor<1x256x8x32xf32>

  // A = -exp(A_log): negative decay rates.
  %eA = tensor.empty() : tensor<8xf32>
  %A = linalg.generic {indexing_maps = [#map_1d, #map_1d], iterator_types = ["parallel"]}
      ins(%A_log : tensor<8xf32>) outs(%eA : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %ex = math.exp %v : f32
    %neg = arith.negf %ex : f32
    linalg.yield %neg : f32
  } -> tensor<8xf32>

  // The selective state-space layer, gated by silu(z).
  %y, %ssm_state = seq.ssd %x, %dt, %A, %B, %C skip(%D) gate(%z) dt_bias(%dt_bias)
      {dt_softplus = true}
      : (tensor<1x256x8x32xf32>, tensor<1x256x8xf32>, tensor<8xf32>, tensor<1x256x1x64xf32>,
         tensor<1x256x1x64xf32>, tensor<8xf32>, tensor<1x256x8x32xf32>, tensor<8xf32>)
        -> (tensor<1x256x8x32xf32>, tensor<1x8x32x64xf32>)

  // RMSNorm over d_inner, then the out-projection.
  %y2 = tensor.collapse_shape %y [[0, 1], [2, 3]] : tensor<1x256x8x32xf32> into tensor<256x256xf32>
  %eS = tensor.empty() : tensor<256xf32>
  %fS = linalg.fill ins(%zero : f32) outs(%eS : tensor<256xf32>) -> tensor<256xf32>
  %sumsq = linalg.generic {indexing_maps = [#map_rows, #map_row],
                           iterator_types = ["parallel", "reduction"]}
      ins(%y2 : tensor<256x256xf32>) outs(%fS : tensor<256xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<256xf32>
  %inv_n = arith.constant 0.00390625 : f32
  %eps = arith.constant 1.0e-5 : f32
  %eN = tensor.empty() : tensor<256x256xf32>
  %normed = linalg.generic {indexing_maps = [#map_rows, #map_row, #map_bcast, #map_rows],
                            iterator_types = ["parallel", "parallel"]}
      ins(%y2, %sumsq, %norm_w : tensor<256x256xf32>, tensor<256xf32>, tensor<256xf32>)
      outs(%eN : tensor<256x256xf32>) {
  ^bb0(%v: f32, %ss: f32, %g: f32, %o: f32):
    %mean = arith.mulf %ss, %inv_n : f32
    %var = arith.addf %mean, %eps : f32
    %r = math.rsqrt %var : f32
    %n = arith.mulf %v, %r : f32
    %w = arith.mulf %n, %g : f32
    linalg.yield %w : f32
  } -> tensor<256x256xf32>
  %e1 = tensor.empty() : tensor<256x128xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<256x128xf32>) -> tensor<256x128xf32>
  %out2 = linalg.matmul ins(%normed, %w_out : tensor<256x256xf32>, tensor<256x128xf32>)
                        outs(%f1 : tensor<256x128xf32>) -> tensor<256x128xf32>
  %out = tensor.expand_shape %out2 [[0, 1], [2]] output_shape [1, 256, 128]
      : tensor<256x128xf32> into tensor<1x256x128xf32>
  return %out, %ssm_state : tensor<1x256x128xf32>, tensor<1x8x32x64xf32>
}
