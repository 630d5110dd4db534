// Regions that use tensors from above (a table lookup in a linalg body, an
// associative_scan combiner reading a tensor) and an f64 matmul: no GPU kernel
// of seqc's can take them, so they keep the loop-based lowerings.
#id = affine_map<(d0) -> (d0)>
func.func @g(%idx: tensor<4xindex>, %tab: tensor<10xf32>) -> tensor<4xf32> {
  %cst = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]> : tensor<10xf32>
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%idx : tensor<4xindex>) outs(%e : tensor<4xf32>) {
  ^bb0(%i: index, %o: f32):
    %v = tensor.extract %cst[%i] : tensor<10xf32>
    %w = tensor.extract %tab[%i] : tensor<10xf32>
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

func.func @scan(%x: tensor<2x?x3xi32>, %t: tensor<4xi32>) -> tensor<2x?x3xi32> {
  %c0 = arith.constant 0 : index
  %s = seq.associative_scan %x {dim = 1 : i64} : (tensor<2x?x3xi32>) -> (tensor<2x?x3xi32>) {
  ^bb0(%p: i32, %n: i32):
    %e = tensor.extract %t[%c0] : tensor<4xi32>
    %a = arith.addi %p, %n : i32
    %b = arith.addi %a, %e : i32
    seq.yield %b : i32
  }
  return %s : tensor<2x?x3xi32>
}

func.func @mm(%a: tensor<4x8xf64>, %b: tensor<8x3xf64>, %c: tensor<4x3xf64>) -> tensor<4x3xf64> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf64>, tensor<8x3xf64>) outs(%c : tensor<4x3xf64>) -> tensor<4x3xf64>
  return %r : tensor<4x3xf64>
}
