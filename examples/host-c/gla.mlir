// Gated linear attention (GLA: a log-decay per key channel) over 4 heads of
// 32 x 32 state, with a dynamic sequence length.
func.func @gla(%q: tensor<1x?x4x32xf32>, %k: tensor<1x?x4x32xf32>,
               %v: tensor<1x?x4x32xf32>, %g: tensor<1x?x4x32xf32>)
    -> (tensor<1x?x4x32xf32>, tensor<1x4x32x32xf32>) {
  %o, %last = seq.linear_attention %q, %k, %v decay(%g) {scale = 0.25 : f32}
      : (tensor<1x?x4x32xf32>, tensor<1x?x4x32xf32>, tensor<1x?x4x32xf32>,
         tensor<1x?x4x32xf32>) -> (tensor<1x?x4x32xf32>, tensor<1x4x32x32xf32>)
  return %o, %last : tensor<1x?x4x32xf32>, tensor<1x4x32x32xf32>
}

// The same for exactly 64 tokens: seqc-compile gives static shapes a typed
// entry point (one float pointer per tensor).
func.func @gla64(%q: tensor<1x64x4x32xf32>, %k: tensor<1x64x4x32xf32>,
                 %v: tensor<1x64x4x32xf32>, %g: tensor<1x64x4x32xf32>)
    -> (tensor<1x64x4x32xf32>, tensor<1x4x32x32xf32>) {
  %o, %last = seq.linear_attention %q, %k, %v decay(%g) {scale = 0.25 : f32}
      : (tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>,
         tensor<1x64x4x32xf32>) -> (tensor<1x64x4x32xf32>, tensor<1x4x32x32xf32>)
  return %o, %last : tensor<1x64x4x32xf32>, tensor<1x4x32x32xf32>
}
