// One Mamba-2 layer with explicit states, twice: @prefill over a 32-token
// prompt and @step for one token. Both take the conv and SSM states (zeros
// to start) and return the new ones, so a host can decode token by token.
//   d_model 32, d_inner 64 = 4 heads x 16, d_state 16, conv width 4.

#map_rows = affine_map<(t, c) -> (t, c)>

func.func @prefill(%u: tensor<1x32x32xf32>, %conv_state: tensor<1x96x3xf32>,
                   %ssm_state: tensor<1x4x16x16xf32>,
                   %w_in: tensor<32x164xf32>, %conv_w: tensor<96x4xf32>,
                   %dt_bias: tensor<4xf32>, %A: tensor<4xf32>, %D: tensor<4xf32>,
                   %w_out: tensor<64x32xf32>)
    -> (tensor<1x32x32xf32>, tensor<1x96x3xf32>, tensor<1x4x16x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %u2 = tensor.collapse_shape %u [[0, 1], [2]] : tensor<1x32x32xf32> into tensor<32x32xf32>
  %e0 = tensor.empty() : tensor<32x164xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<32x164xf32>) -> tensor<32x164xf32>
  %p = linalg.matmul ins(%u2, %w_in : tensor<32x32xf32>, tensor<32x164xf32>) outs(%f0 : tensor<32x164xf32>) -> tensor<32x164xf32>
  %z2 = tensor.extract_slice %p[0, 0] [32, 64] [1, 1] : tensor<32x164xf32> to tensor<32x64xf32>
  %xbc2 = tensor.extract_slice %p[0, 64] [32, 96] [1, 1] : tensor<32x164xf32> to tensor<32x96xf32>
  %dt2 = tensor.extract_slice %p[0, 160] [32, 4] [1, 1] : tensor<32x164xf32> to tensor<32x4xf32>
  %xbc = tensor.expand_shape %xbc2 [[0, 1], [2]] output_shape [1, 32, 96] : tensor<32x96xf32> into tensor<1x32x96xf32>
  %conv, %conv_last = seq.causal_conv1d %xbc, %conv_w init(%conv_state) {activation = #seq.activation<silu>}
      : (tensor<1x32x96xf32>, tensor<96x4xf32>, tensor<1x96x3xf32>) -> (tensor<1x32x96xf32>, tensor<1x96x3xf32>)
  %x3 = tensor.extract_slice %conv[0, 0, 0] [1, 32, 64] [1, 1, 1] : tensor<1x32x96xf32> to tensor<1x32x64xf32>
  %x = tensor.expand_shape %x3 [[0], [1], [2, 3]] output_shape [1, 32, 4, 16] : tensor<1x32x64xf32> into tensor<1x32x4x16xf32>
  %b3 = tensor.extract_slice %conv[0, 0, 64] [1, 32, 16] [1, 1, 1] : tensor<1x32x96xf32> to tensor<1x32x16xf32>
  %B = tensor.expand_shape %b3 [[0], [1], [2, 3]] output_shape [1, 32, 1, 16] : tensor<1x32x16xf32> into tensor<1x32x1x16xf32>
  %c3 = tensor.extract_slice %conv[0, 0, 80] [1, 32, 16] [1, 1, 1] : tensor<1x32x96xf32> to tensor<1x32x16xf32>
  %C = tensor.expand_shape %c3 [[0], [1], [2, 3]] output_shape [1, 32, 1, 16] : tensor<1x32x16xf32> into tensor<1x32x1x16xf32>
  %dt = tensor.expand_shape %dt2 [[0, 1], [2]] output_shape [1, 32, 4] : tensor<32x4xf32> into tensor<1x32x4xf32>
  %z = tensor.expand_shape %z2 [[0, 1], [2, 3]] output_shape [1, 32, 4, 16] : tensor<32x64xf32> into tensor<1x32x4x16xf32>
  %y, %ssm_last = seq.ssd %x, %dt, %A, %B, %C skip(%D) gate(%z) dt_bias(%dt_bias) init(%ssm_state) {dt_softplus = true}
      : (tensor<1x32x4x16xf32>, tensor<1x32x4xf32>, tensor<4xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>,
         tensor<4xf32>, tensor<1x32x4x16xf32>, tensor<4xf32>, tensor<1x4x16x16xf32>) -> (tensor<1x32x4x16xf32>, tensor<1x4x16x16xf32>)
  %y2 = tensor.collapse_shape %y [[0, 1], [2, 3]] : tensor<1x32x4x16xf32> into tensor<32x64xf32>
  %e1 = tensor.empty() : tensor<32x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %o2 = linalg.matmul ins(%y2, %w_out : tensor<32x64xf32>, tensor<64x32xf32>) outs(%f1 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %o = tensor.expand_shape %o2 [[0, 1], [2]] output_shape [1, 32, 32] : tensor<32x32xf32> into tensor<1x32x32xf32>
  return %o, %conv_last, %ssm_last : tensor<1x32x32xf32>, tensor<1x96x3xf32>, tensor<1x4x16x16xf32>
}

func.func @step(%u: tensor<1x1x32xf32>, %conv_state: tensor<1x96x3xf32>,
                %ssm_state: tensor<1x4x16x16xf32>,
                %w_in: tensor<32x164xf32>, %conv_w: tensor<96x4xf32>,
                %dt_bias: tensor<4xf32>, %A: tensor<4xf32>, %D: tensor<4xf32>,
                %w_out: tensor<64x32xf32>)
    -> (tensor<1x1x32xf32>, tensor<1x96x3xf32>, tensor<1x4x16x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %u2 = tensor.collapse_shape %u [[0, 1], [2]] : tensor<1x1x32xf32> into tensor<1x32xf32>
  %e0 = tensor.empty() : tensor<1x164xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<1x164xf32>) -> tensor<1x164xf32>
  %p = linalg.matmul ins(%u2, %w_in : tensor<1x32xf32>, tensor<32x164xf32>) outs(%f0 : tensor<1x164xf32>) -> tensor<1x164xf32>
  %z2 = tensor.extract_slice %p[0, 0] [1, 64] [1, 1] : tensor<1x164xf32> to tensor<1x64xf32>
  %xbc2 = tensor.extract_slice %p[0, 64] [1, 96] [1, 1] : tensor<1x164xf32> to tensor<1x96xf32>
  %dt2 = tensor.extract_slice %p[0, 160] [1, 4] [1, 1] : tensor<1x164xf32> to tensor<1x4xf32>
  %xbc = tensor.expand_shape %xbc2 [[0, 1], [2]] output_shape [1, 1, 96] : tensor<1x96xf32> into tensor<1x1x96xf32>
  %conv, %conv_last = seq.causal_conv1d %xbc, %conv_w init(%conv_state) {activation = #seq.activation<silu>}
      : (tensor<1x1x96xf32>, tensor<96x4xf32>, tensor<1x96x3xf32>) -> (tensor<1x1x96xf32>, tensor<1x96x3xf32>)
  %x3 = tensor.extract_slice %conv[0, 0, 0] [1, 1, 64] [1, 1, 1] : tensor<1x1x96xf32> to tensor<1x1x64xf32>
  %x = tensor.expand_shape %x3 [[0], [1], [2, 3]] output_shape [1, 1, 4, 16] : tensor<1x1x64xf32> into tensor<1x1x4x16xf32>
  %b3 = tensor.extract_slice %conv[0, 0, 64] [1, 1, 16] [1, 1, 1] : tensor<1x1x96xf32> to tensor<1x1x16xf32>
  %B = tensor.expand_shape %b3 [[0], [1], [2, 3]] output_shape [1, 1, 1, 16] : tensor<1x1x16xf32> into tensor<1x1x1x16xf32>
  %c3 = tensor.extract_slice %conv[0, 0, 80] [1, 1, 16] [1, 1, 1] : tensor<1x1x96xf32> to tensor<1x1x16xf32>
  %C = tensor.expand_shape %c3 [[0], [1], [2, 3]] output_shape [1, 1, 1, 16] : tensor<1x1x16xf32> into tensor<1x1x1x16xf32>
  %dt = tensor.expand_shape %dt2 [[0, 1], [2]] output_shape [1, 1, 4] : tensor<1x4xf32> into tensor<1x1x4xf32>
  %z = tensor.expand_shape %z2 [[0, 1], [2, 3]] output_shape [1, 1, 4, 16] : tensor<1x64xf32> into tensor<1x1x4x16xf32>
  %y, %ssm_last = seq.ssd %x, %dt, %A, %B, %C skip(%D) gate(%z) dt_bias(%dt_bias) init(%ssm_state) {dt_softplus = true}
      : (tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<4xf32>, tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>,
         tensor<4xf32>, tensor<1x1x4x16xf32>, tensor<4xf32>, tensor<1x4x16x16xf32>) -> (tensor<1x1x4x16xf32>, tensor<1x4x16x16xf32>)
  %y2 = tensor.collapse_shape %y [[0, 1], [2, 3]] : tensor<1x1x4x16xf32> into tensor<1x64xf32>
  %e1 = tensor.empty() : tensor<1x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x32xf32>) -> tensor<1x32xf32>
  %o2 = linalg.matmul ins(%y2, %w_out : tensor<1x64xf32>, tensor<64x32xf32>) outs(%f1 : tensor<1x32xf32>) -> tensor<1x32xf32>
  %o = tensor.expand_shape %o2 [[0, 1], [2]] output_shape [1, 1, 32] : tensor<1x32xf32> into tensor<1x1x32xf32>
  return %o, %conv_last, %ssm_last : tensor<1x1x32xf32>, tensor<1x96x3xf32>, tensor<1x4x16x16xf32>
}
