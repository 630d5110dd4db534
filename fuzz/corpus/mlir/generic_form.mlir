func.func @f(%a: tensor<2x?x3xf32>, %b: tensor<2x?x3xf32>) -> (tensor<2x?x3xf32>, tensor<2x3xf32>) {
  %h, %l = "seq.linear_scan"(%a, %b) : (tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> (tensor<2x?x3xf32>, tensor<2x3xf32>)
  %r = seq.associative_scan %a, %b : (tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> (tensor<2x?x3xf32>, tensor<2x?x3xf32>) {
  ^bb0(%x0: f32, %y0: f32, %x1: f32, %y1: f32):
    %m = arith.mulf %x0, %x1 : f32
    %s = arith.addf %y0, %y1 : f32
    seq.yield %m, %s : f32, f32
  }
  return %h, %l : tensor<2x?x3xf32>, tensor<2x3xf32>
}
