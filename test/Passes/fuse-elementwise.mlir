// Elementwise glue around seq ops is folded into them.
// RUN: seqc-opt %s --seq-fuse-elementwise --canonicalize | FileCheck %s

#id3 = affine_map<(b, t, c) -> (b, t, c)>
#last3 = affine_map<(b, t, c) -> (c)>
#id4 = affine_map<(b, t, h, p) -> (b, t, h, p)>

// softplus(dt + bias) before, y * silu(z) after: dt_bias, dt_softplus, gate.
// CHECK-LABEL: func @ssd_glue
// CHECK-SAME: (%[[X:.*]]: tensor<1x8x2x4xf32>, %[[DT:.*]]: tensor<1x8x2xf32>, %{{.*}}: tensor<2xf32>, %[[BIAS:.*]]: tensor<2xf32>, %{{.*}}: tensor<1x8x1x3xf32>, %[[Z:.*]]: tensor<1x8x2x4xf32>)
// CHECK-NOT: linalg.generic
// CHECK: %[[Y:.*]], %{{.*}} = seq.ssd %[[X]], %[[DT]], %{{.*}}, %{{.*}}, %{{.*}} gate(%[[Z]]) dt_bias(%[[BIAS]]) {dt_softplus = true}
// CHECK-NOT: linalg.generic
// CHECK: return %[[Y]]
func.func @ssd_glue(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>, %A: tensor<2xf32>, %bias: tensor<2xf32>,
                    %B: tensor<1x8x1x3xf32>, %z: tensor<1x8x2x4xf32>) -> tensor<1x8x2x4xf32> {
  %e3 = tensor.empty() : tensor<1x8x2xf32>
  %sp = linalg.generic {indexing_maps = [#id3, #last3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dt, %bias : tensor<1x8x2xf32>, tensor<2xf32>) outs(%e3 : tensor<1x8x2xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %e = math.exp %s : f32
    %l = math.log1p %e : f32
    linalg.yield %l : f32
  } -> tensor<1x8x2xf32>
  %y, %last = seq.ssd %x, %sp, %A, %B, %B
      : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>, tensor<1x8x1x3xf32>, tensor<1x8x1x3xf32>)
        -> (tensor<1x8x2x4xf32>, tensor<1x2x4x3xf32>)
  %e4 = tensor.empty() : tensor<1x8x2x4xf32>
  %g = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y, %z : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>) outs(%e4 : tensor<1x8x2x4xf32>) {
  ^bb0(%yv: f32, %zv: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %zv : f32
    %ex = math.exp %n : f32
    %den = arith.addf %one, %ex : f32
    %sig = arith.divf %one, %den : f32
    %silu = arith.mulf %zv, %sig : f32
    %r = arith.mulf %yv, %silu : f32
    linalg.yield %r : f32
  } -> tensor<1x8x2x4xf32>
  return %g : tensor<1x8x2x4xf32>
}

// silu after the conv becomes its activation.
// CHECK-LABEL: func @conv_silu
// CHECK: %[[Y:.*]], %{{.*}} = seq.causal_conv1d %{{.*}}, %{{.*}} {activation = #seq.activation<silu>}
// CHECK-NOT: linalg.generic
// CHECK: return %[[Y]]
func.func @conv_silu(%x: tensor<1x8x6xf32>, %w: tensor<6x4xf32>) -> tensor<1x8x6xf32> {
  %y, %l = seq.causal_conv1d %x, %w : (tensor<1x8x6xf32>, tensor<6x4xf32>) -> (tensor<1x8x6xf32>, tensor<1x6x3xf32>)
  %e = tensor.empty() : tensor<1x8x6xf32>
  %s = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x8x6xf32>) outs(%e : tensor<1x8x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %v : f32
    %ex = math.exp %n : f32
    %den = arith.addf %one, %ex : f32
    %r = arith.divf %v, %den : f32
    linalg.yield %r : f32
  } -> tensor<1x8x6xf32>
  return %s : tensor<1x8x6xf32>
}

// elu + 1 on both q and k becomes the feature map; on q alone it stays.
// CHECK-LABEL: func @feature_map
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x2x3xf32>, %[[K:.*]]: tensor<1x4x2x3xf32>
// CHECK: seq.linear_attention %[[Q]], %[[K]], %{{.*}} {feature_map = #seq.feature_map<elu_plus_one>}
func.func @feature_map(%q: tensor<1x4x2x3xf32>, %k: tensor<1x4x2x3xf32>, %v: tensor<1x4x2x5xf32>) -> tensor<1x4x2x5xf32> {
  %e = tensor.empty() : tensor<1x4x2x3xf32>
  %q1 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<1x4x2x3xf32>) outs(%e : tensor<1x4x2x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %c = arith.cmpf ogt, %a, %zero : f32
    %p = arith.addf %a, %one : f32
    %x = math.exp %a : f32
    %r = arith.select %c, %p, %x : f32
    linalg.yield %r : f32
  } -> tensor<1x4x2x3xf32>
  %k1 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<1x4x2x3xf32>) outs(%e : tensor<1x4x2x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %c = arith.cmpf ogt, %a, %zero : f32
    %p = arith.addf %a, %one : f32
    %x = math.exp %a : f32
    %r = arith.select %c, %p, %x : f32
    linalg.yield %r : f32
  } -> tensor<1x4x2x3xf32>
  %o, %s = seq.linear_attention %q1, %k1, %v
      : (tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x5xf32>) -> (tensor<1x4x2x5xf32>, tensor<1x2x3x5xf32>)
  return %o : tensor<1x4x2x5xf32>
}

// A consumer that is not y * silu(z) stays.
// CHECK-LABEL: func @not_a_gate
// CHECK: seq.ssd
// CHECK-NOT: gate(
// CHECK: linalg.generic
func.func @not_a_gate(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>, %A: tensor<2xf32>,
                      %B: tensor<1x8x1x3xf32>, %z: tensor<1x8x2x4xf32>) -> tensor<1x8x2x4xf32> {
  %y, %last = seq.ssd %x, %dt, %A, %B, %B
      : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>, tensor<1x8x1x3xf32>, tensor<1x8x1x3xf32>)
        -> (tensor<1x8x2x4xf32>, tensor<1x2x4x3xf32>)
  %e4 = tensor.empty() : tensor<1x8x2x4xf32>
  %g = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y, %z : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>) outs(%e4 : tensor<1x8x2x4xf32>) {
  ^bb0(%yv: f32, %zv: f32, %o: f32):
    %r = arith.mulf %yv, %zv : f32
    linalg.yield %r : f32
  } -> tensor<1x8x2x4xf32>
  return %g : tensor<1x8x2x4xf32>
}

// y * silu(y): the gate would be the op's own result; it stays a generic.
// CHECK-LABEL: func @self_gate
// CHECK: seq.ssd
// CHECK-NOT: gate(
// CHECK: linalg.generic
func.func @self_gate(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>, %A: tensor<2xf32>,
                     %B: tensor<1x8x1x3xf32>) -> tensor<1x8x2x4xf32> {
  %y, %last = seq.ssd %x, %dt, %A, %B, %B
      : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>, tensor<1x8x1x3xf32>, tensor<1x8x1x3xf32>)
        -> (tensor<1x8x2x4xf32>, tensor<1x2x4x3xf32>)
  %e4 = tensor.empty() : tensor<1x8x2x4xf32>
  %g = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x8x2x4xf32>) outs(%e4 : tensor<1x8x2x4xf32>) {
  ^bb0(%yv: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %yv : f32
    %ex = math.exp %n : f32
    %den = arith.addf %one, %ex : f32
    %sig = arith.divf %one, %den : f32
    %silu = arith.mulf %yv, %sig : f32
    %r = arith.mulf %yv, %silu : f32
    linalg.yield %r : f32
  } -> tensor<1x8x2x4xf32>
  return %g : tensor<1x8x2x4xf32>
}

// Look-alikes with the comparison the wrong way round are other functions:
// x < 0 ? x + 1 : exp(x) is not elu + 1, and x < 20 ? x : log1p(exp(x)) is
// not softplus. Both stay generics.
// CHECK-LABEL: func @wrong_comparisons
// CHECK: linalg.generic
// CHECK: seq.ssd
// CHECK-NOT: dt_softplus
// CHECK: linalg.generic
// CHECK: seq.linear_attention
// CHECK-NOT: feature_map
func.func @wrong_comparisons(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>, %A: tensor<2xf32>,
                             %B: tensor<1x8x1x3xf32>, %q: tensor<1x4x2x3xf32>,
                             %v: tensor<1x4x2x5xf32>) -> (tensor<1x8x2x4xf32>, tensor<1x4x2x5xf32>) {
  %e3 = tensor.empty() : tensor<1x8x2xf32>
  %sp = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dt : tensor<1x8x2xf32>) outs(%e3 : tensor<1x8x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.constant 20.0 : f32
    %c = arith.cmpf olt, %a, %t : f32
    %e = math.exp %a : f32
    %l = math.log1p %e : f32
    %r = arith.select %c, %a, %l : f32
    linalg.yield %r : f32
  } -> tensor<1x8x2xf32>
  %y, %last = seq.ssd %x, %sp, %A, %B, %B
      : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>, tensor<1x8x1x3xf32>, tensor<1x8x1x3xf32>)
        -> (tensor<1x8x2x4xf32>, tensor<1x2x4x3xf32>)
  %e = tensor.empty() : tensor<1x4x2x3xf32>
  %q1 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<1x4x2x3xf32>) outs(%e : tensor<1x4x2x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %c = arith.cmpf olt, %a, %zero : f32
    %p = arith.addf %a, %one : f32
    %ex = math.exp %a : f32
    %r = arith.select %c, %p, %ex : f32
    linalg.yield %r : f32
  } -> tensor<1x4x2x3xf32>
  %o, %s = seq.linear_attention %q1, %q1, %v
      : (tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x5xf32>) -> (tensor<1x4x2x5xf32>, tensor<1x2x3x5xf32>)
  return %y, %o : tensor<1x8x2x4xf32>, tensor<1x4x2x5xf32>
}
