// Matrix products for the tensor-core tests: bf16 and f16 operands (mma.sync
// tiles) and f32 ones (f32 FMAs).
func.func @bf16_matmul(%a: tensor<100x70xbf16>, %b: tensor<70x90xbf16>,
                       %c: tensor<100x90xf32>) -> tensor<100x90xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<100x70xbf16>, tensor<70x90xbf16>)
                     outs(%c : tensor<100x90xf32>) -> tensor<100x90xf32>
  return %r : tensor<100x90xf32>
}

func.func @f16_batch_matmul(%a: tensor<4x?x64xf16>, %b: tensor<4x64x?xf16>,
                            %c: tensor<4x?x?xf16>) -> tensor<4x?x?xf16> {
  %r = linalg.batch_matmul ins(%a, %b : tensor<4x?x64xf16>, tensor<4x64x?xf16>)
                           outs(%c : tensor<4x?x?xf16>) -> tensor<4x?x?xf16>
  return %r : tensor<4x?x?xf16>
}

func.func @f32_matmul(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>,
                      %c: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>)
                     outs(%c : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}

// Experts with bf16 tokens and weights: grouped GEMMs on tensor cores.
func.func @bf16_moe(%x: tensor<?x256xbf16>, %w: tensor<?x2xbf16>,
                    %idx: tensor<?x2xi32>, %up: tensor<8x256x128xbf16>,
                    %down: tensor<8x128x256xbf16>, %gate: tensor<8x256x128xbf16>)
    -> (tensor<?x256xbf16>, tensor<8xi64>) {
  %y, %load = seq.moe_ffn %x, %w, %idx, %up, %down gate_proj(%gate)
    {capacity_factor = 1.25 : f32}
    : (tensor<?x256xbf16>, tensor<?x2xbf16>, tensor<?x2xi32>, tensor<8x256x128xbf16>,
       tensor<8x128x256xbf16>, tensor<8x256x128xbf16>) -> (tensor<?x256xbf16>, tensor<8xi64>)
  return %y, %load : tensor<?x256xbf16>, tensor<8xi64>
}

// Attention with bf16 operands: tensor-core scores and P V.
func.func @bf16_attention(%q: tensor<2x?x8x64xbf16>, %k: tensor<2x?x2x64xbf16>,
                          %v: tensor<2x?x2x96xbf16>) -> tensor<2x?x8x96xbf16> {
  %o = seq.attention %q, %k, %v {causal = true}
    : (tensor<2x?x8x64xbf16>, tensor<2x?x2x64xbf16>, tensor<2x?x2x96xbf16>)
    -> tensor<2x?x8x96xbf16>
  return %o : tensor<2x?x8x96xbf16>
}

// Mamba-2 SSD with bf16 x, B and C: tensor-core chunk states, C B^T and G x.
func.func @bf16_ssd(%x: tensor<2x?x4x64xbf16>, %dt: tensor<2x?x4xbf16>, %a: tensor<4xf32>,
                    %b: tensor<2x?x1x128xbf16>, %c: tensor<2x?x1x128xbf16>)
    -> (tensor<2x?x4x64xbf16>, tensor<2x4x64x128xf32>) {
  %y, %last = seq.ssd %x, %dt, %a, %b, %c {dt_softplus = true}
    : (tensor<2x?x4x64xbf16>, tensor<2x?x4xbf16>, tensor<4xf32>, tensor<2x?x1x128xbf16>,
       tensor<2x?x1x128xbf16>) -> (tensor<2x?x4x64xbf16>, tensor<2x4x64x128xf32>)
  return %y, %last : tensor<2x?x4x64xbf16>, tensor<2x4x64x128xf32>
}

// Gated linear attention with bf16 q, k, v and a scalar decay per step and
// head: tensor-core chunk states, q' k'^T and G v.
func.func @bf16_linear_attention(%q: tensor<2x?x4x64xbf16>, %k: tensor<2x?x4x64xbf16>,
                                 %v: tensor<2x?x4x64xbf16>, %g: tensor<2x?x4xbf16>)
    -> (tensor<2x?x4x64xbf16>, tensor<2x4x64x64xf32>) {
  %o, %last = seq.linear_attention %q, %k, %v decay(%g)
    : (tensor<2x?x4x64xbf16>, tensor<2x?x4x64xbf16>, tensor<2x?x4x64xbf16>,
       tensor<2x?x4xbf16>) -> (tensor<2x?x4x64xbf16>, tensor<2x4x64x64xf32>)
  return %o, %last : tensor<2x?x4x64xbf16>, tensor<2x4x64x64xf32>
}
