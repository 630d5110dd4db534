// An SSD layer for test/Integration/compile-once.test (A = -exp(A_log):
// stable whatever --random-inputs draws).
func.func @main(%x: tensor<1x256x4x16xf32>, %dt: tensor<1x256x4xf32>, %A_log: tensor<4xf32>,
                %B: tensor<1x256x1x16xf32>, %C: tensor<1x256x1x16xf32>)
    -> (tensor<1x256x4x16xf32>, tensor<1x4x16x16xf32>) {
  %e = math.exp %A_log : tensor<4xf32>
  %A = arith.negf %e : tensor<4xf32>
  %y, %l = seq.ssd %x, %dt, %A, %B, %C {dt_softplus = true}
    : (tensor<1x256x4x16xf32>, tensor<1x256x4xf32>, tensor<4xf32>, tensor<1x256x1x16xf32>, tensor<1x256x1x16xf32>)
      -> (tensor<1x256x4x16xf32>, tensor<1x4x16x16xf32>)
  return %y, %l : tensor<1x256x4x16xf32>, tensor<1x4x16x16xf32>
}
