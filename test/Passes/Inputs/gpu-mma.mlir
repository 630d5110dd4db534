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
