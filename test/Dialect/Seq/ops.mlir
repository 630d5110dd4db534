// Round trip of every seq op and every optional group, written as in the SPEC:
// the custom form prints back unchanged (defaults elided), printing is a
// fixpoint, and the generic form parses back to the same custom form.
// RUN: seqc-opt %s | FileCheck %s
// RUN: seqc-opt %s | seqc-opt | FileCheck %s
// RUN: seqc-opt %s --mlir-print-op-generic | seqc-opt | FileCheck %s
// RUN: seqc-opt %s > %t.1.mlir && seqc-opt %t.1.mlir > %t.2.mlir && diff %t.1.mlir %t.2.mlir

// CHECK-LABEL: func @linear_scan
func.func @linear_scan(%a: tensor<2x16x8xf32>, %b: tensor<2x16x8xf32>, %h0: tensor<2x8xf32>,
                       %a4: tensor<2x16x4x3xf32>, %ad: tensor<?x?xf32>) {
  // CHECK: seq.linear_scan %{{.*}}, %{{.*}} init(%{{.*}}) : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  %h, %last = seq.linear_scan %a, %b init(%h0) {reverse = false}
    : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  // CHECK: seq.linear_scan %{{.*}}, %{{.*}} {reverse = true} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  %h2, %last2 = seq.linear_scan %a, %b {reverse = true}
    : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  // Several trailing state dimensions.
  // CHECK: seq.linear_scan {{.*}} -> (tensor<2x16x4x3xf32>, tensor<2x4x3xf32>)
  %h3, %last3 = seq.linear_scan %a4, %a4
    : (tensor<2x16x4x3xf32>, tensor<2x16x4x3xf32>) -> (tensor<2x16x4x3xf32>, tensor<2x4x3xf32>)
  // Rank 2 (no state dimension) and dynamic sizes.
  // CHECK: seq.linear_scan {{.*}} : (tensor<?x?xf32>, tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>)
  %h4, %last4 = seq.linear_scan %ad, %ad
    : (tensor<?x?xf32>, tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>)
  // Attributes with a dialect prefix are allowed (unknown undotted ones are
  // errors: invalid.mlir).
  // CHECK: seq.linear_scan {{.*}} {foo.bar = 1 : i64, seq.note = "kept"} :
  %h5, %last5 = seq.linear_scan %a, %b {seq.note = "kept", foo.bar = 1 : i64}
    : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// CHECK-LABEL: func @associative_scan
func.func @associative_scan(%x0: tensor<4x64xf32>, %x1: tensor<4x64xf32>, %m: tensor<3x5x7xi32>) {
  // CHECK: seq.associative_scan %{{.*}}, %{{.*}} : (tensor<4x64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  // CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
  // CHECK: seq.yield %{{.*}}, %{{.*}} : f32, f32
  %r0, %r1 = seq.associative_scan %x0, %x1 {dim = 1 : i64, reverse = false}
    : (tensor<4x64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  ^bb0(%p0: f32, %p1: f32, %n0: f32, %n1: f32):
    %a = arith.mulf %p0, %n0 : f32
    %t = arith.mulf %n0, %p1 : f32
    %b = arith.addf %t, %n1 : f32
    seq.yield %a, %b : f32, f32
  }
  // A running max of integers along dim 2, in reverse.
  // CHECK: seq.associative_scan %{{.*}} {dim = 2 : i64, reverse = true} : (tensor<3x5x7xi32>) -> tensor<3x5x7xi32>
  %r2 = seq.associative_scan %m {dim = 2 : i64, reverse = true}
    : (tensor<3x5x7xi32>) -> (tensor<3x5x7xi32>) {
  ^bb0(%p: i32, %n: i32):
    %mx = arith.maxsi %p, %n : i32
    seq.yield %mx : i32
  }
  return
}

// CHECK-LABEL: func @selective_scan
func.func @selective_scan(%u: tensor<2x32x64xf32>, %delta: tensor<2x32x64xf32>, %A: tensor<64x16xf32>,
                          %B: tensor<2x32x2x16xf32>, %C: tensor<2x32x2x16xf32>, %D: tensor<64xf32>,
                          %z: tensor<2x32x64xf32>, %db: tensor<64xf32>, %h0: tensor<2x64x16xf32>) {
  // CHECK: seq.selective_scan %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip(%{{.*}}) gate(%{{.*}}) delta_bias(%{{.*}}) init(%{{.*}}) {delta_softplus = true} : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>, tensor<64xf32>, tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x64x16xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  %y, %last = seq.selective_scan %u, %delta, %A, %B, %C skip(%D) gate(%z) delta_bias(%db) init(%h0)
    {delta_softplus = true, discretization = #seq.discretization<zoh_euler>}
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>,
       tensor<64xf32>, tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x64x16xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  // CHECK: seq.selective_scan %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {discretization = #seq.discretization<zoh>} :
  %y2, %last2 = seq.selective_scan %u, %delta, %A, %B, %C {discretization = #seq.discretization<zoh>}
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>)
      -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  // Each optional group alone.
  // CHECK: seq.selective_scan %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gate(%{{.*}}) :
  %y3, %l3 = seq.selective_scan %u, %delta, %A, %B, %C gate(%z)
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>,
       tensor<2x32x64xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  // CHECK: seq.selective_scan %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} delta_bias(%{{.*}}) :
  %y4, %l4 = seq.selective_scan %u, %delta, %A, %B, %C delta_bias(%db)
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>,
       tensor<64xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  // CHECK: seq.selective_scan %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip(%{{.*}}) init(%{{.*}}) :
  %y5, %l5 = seq.selective_scan %u, %delta, %A, %B, %C skip(%D) init(%h0)
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>,
       tensor<64xf32>, tensor<2x64x16xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  return
}

// CHECK-LABEL: func @ssd
func.func @ssd(%x: tensor<2x64x4x16xf32>, %dt: tensor<2x64x4xf32>, %A: tensor<4xf32>,
               %B: tensor<2x64x1x32xf32>, %C: tensor<2x64x1x32xf32>, %D: tensor<4xf32>,
               %z: tensor<2x64x4x16xf32>, %db: tensor<4xf32>, %h0: tensor<2x4x16x32xf32>,
               %xb: tensor<1x?x4x16xbf16>, %dtb: tensor<1x?x4xbf16>, %Bb: tensor<1x?x2x32xbf16>) {
  // CHECK: seq.ssd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip(%{{.*}}) gate(%{{.*}}) dt_bias(%{{.*}}) init(%{{.*}}) {chunk_size = 64 : i64, dt_softplus = true} : (tensor<2x64x4x16xf32>, tensor<2x64x4xf32>, tensor<4xf32>, tensor<2x64x1x32xf32>, tensor<2x64x1x32xf32>, tensor<4xf32>, tensor<2x64x4x16xf32>, tensor<4xf32>, tensor<2x4x16x32xf32>) -> (tensor<2x64x4x16xf32>, tensor<2x4x16x32xf32>)
  %y, %last = seq.ssd %x, %dt, %A, %B, %C skip(%D) gate(%z) dt_bias(%db) init(%h0)
    {dt_softplus = true, chunk_size = 64 : i64}
    : (tensor<2x64x4x16xf32>, tensor<2x64x4xf32>, tensor<4xf32>, tensor<2x64x1x32xf32>, tensor<2x64x1x32xf32>,
       tensor<4xf32>, tensor<2x64x4x16xf32>, tensor<4xf32>, tensor<2x4x16x32xf32>) -> (tensor<2x64x4x16xf32>, tensor<2x4x16x32xf32>)
  // CHECK: seq.ssd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x64x4x16xf32>
  %y2, %last2 = seq.ssd %x, %dt, %A, %B, %C {chunk_size = 0 : i64}
    : (tensor<2x64x4x16xf32>, tensor<2x64x4xf32>, tensor<4xf32>, tensor<2x64x1x32xf32>, tensor<2x64x1x32xf32>)
      -> (tensor<2x64x4x16xf32>, tensor<2x4x16x32xf32>)
  // bf16 data with f32 parameters and an f32 state; dynamic T.
  // CHECK: seq.ssd {{.*}} : (tensor<1x?x4x16xbf16>, tensor<1x?x4xbf16>, tensor<4xf32>, tensor<1x?x2x32xbf16>, tensor<1x?x2x32xbf16>) -> (tensor<1x?x4x16xbf16>, tensor<1x4x16x32xf32>)
  %y3, %last3 = seq.ssd %xb, %dtb, %A, %Bb, %Bb
    : (tensor<1x?x4x16xbf16>, tensor<1x?x4xbf16>, tensor<4xf32>, tensor<1x?x2x32xbf16>, tensor<1x?x2x32xbf16>)
      -> (tensor<1x?x4x16xbf16>, tensor<1x4x16x32xf32>)
  return
}

// CHECK-LABEL: func @semiseparable_mask
func.func @semiseparable_mask(%la: tensor<2x4x64xf32>, %l1: tensor<?xf32>) {
  // CHECK: seq.semiseparable_mask %{{.*}} : (tensor<2x4x64xf32>) -> tensor<2x4x64x64xf32>
  %L = seq.semiseparable_mask %la : (tensor<2x4x64xf32>) -> (tensor<2x4x64x64xf32>)
  // CHECK: seq.semiseparable_mask %{{.*}} : (tensor<?xf32>) -> tensor<?x?xf32>
  %L1 = seq.semiseparable_mask %l1 : (tensor<?xf32>) -> (tensor<?x?xf32>)
  return
}

// CHECK-LABEL: func @linear_attention
func.func @linear_attention(%q: tensor<2x32x4x16xf32>, %k: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>,
                            %g: tensor<2x32x4xf32>, %gh: tensor<4xf32>, %gk: tensor<2x32x4x16xf32>,
                            %S0: tensor<2x4x16x8xf32>) {
  // CHECK: seq.linear_attention %{{.*}}, %{{.*}}, %{{.*}} decay(%{{.*}}) init(%{{.*}}) {feature_map = #seq.feature_map<elu_plus_one>} : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  %o, %last = seq.linear_attention %q, %k, %v decay(%g) init(%S0)
    {feature_map = #seq.feature_map<elu_plus_one>, causal = true, normalize = false, scale = 1.0 : f32, eps = 1.0e-06 : f32}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4xf32>, tensor<2x4x16x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  // Per-head (RetNet) and per-key (GLA) decays.
  // CHECK: seq.linear_attention %{{.*}}, %{{.*}}, %{{.*}} decay(%{{.*}}) {scale = 2.500000e-01 : f32} : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<4xf32>)
  %o2, %l2 = seq.linear_attention %q, %k, %v decay(%gh) {scale = 0.25 : f32}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<4xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  // CHECK: seq.linear_attention %{{.*}}, %{{.*}}, %{{.*}} decay(%{{.*}}) {chunk_size = 16 : i64} : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4x16xf32>)
  %o3, %l3 = seq.linear_attention %q, %k, %v decay(%gk) {chunk_size = 16 : i64}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4x16xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  // RWKV-6: a per-key decay and the bonus.
  // CHECK: seq.linear_attention %{{.*}}, %{{.*}}, %{{.*}} decay(%{{.*}}) bonus(%{{.*}}) init(%{{.*}}) : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4x16xf32>, tensor<4x16xf32>, tensor<2x4x16x8xf32>)
  %u = tensor.empty() : tensor<4x16xf32>
  %o5, %l5 = seq.linear_attention %q, %k, %v decay(%gk) bonus(%u) init(%S0)
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4x16xf32>, tensor<4x16xf32>, tensor<2x4x16x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  // Non-causal, normalized, ReLU features.
  // CHECK: seq.linear_attention %{{.*}}, %{{.*}}, %{{.*}} {causal = false, eps = 1.000000e-03 : f32, feature_map = #seq.feature_map<relu>, normalize = true}
  %o4, %l4 = seq.linear_attention %q, %k, %v {feature_map = #seq.feature_map<relu>, causal = false, normalize = true, eps = 1.0e-3 : f32}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// CHECK-LABEL: func @random_features
func.func @random_features(%x: tensor<2x32x4x16xf32>, %omega: tensor<16x24xf32>) {
  // CHECK: seq.random_features %{{.*}}, %{{.*}} : (tensor<2x32x4x16xf32>, tensor<16x24xf32>) -> tensor<2x32x4x24xf32>
  %phi = seq.random_features %x, %omega {kind = #seq.random_features<positive>}
    : (tensor<2x32x4x16xf32>, tensor<16x24xf32>) -> (tensor<2x32x4x24xf32>)
  // CHECK: seq.random_features %{{.*}}, %{{.*}} {kind = #seq.random_features<trigonometric>} : (tensor<2x32x4x16xf32>, tensor<16x24xf32>) -> tensor<2x32x4x48xf32>
  %phi2 = seq.random_features %x, %omega {kind = #seq.random_features<trigonometric>}
    : (tensor<2x32x4x16xf32>, tensor<16x24xf32>) -> (tensor<2x32x4x48xf32>)
  return
}

// CHECK-LABEL: func @attention
func.func @attention(%q: tensor<2x16x8x64xf32>, %k: tensor<2x48x2x64xf32>, %v: tensor<2x48x2x32xf32>) {
  // CHECK: seq.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f32} : (tensor<2x16x8x64xf32>, tensor<2x48x2x64xf32>, tensor<2x48x2x32xf32>) -> tensor<2x16x8x32xf32>
  %o = seq.attention %q, %k, %v {causal = true, window = 0 : i64, scale = 0.125 : f32}
    : (tensor<2x16x8x64xf32>, tensor<2x48x2x64xf32>, tensor<2x48x2x32xf32>) -> (tensor<2x16x8x32xf32>)
  // CHECK: seq.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = false, window = 8 : i64} :
  %o2 = seq.attention %q, %k, %v {causal = false, window = 8 : i64}
    : (tensor<2x16x8x64xf32>, tensor<2x48x2x64xf32>, tensor<2x48x2x32xf32>) -> (tensor<2x16x8x32xf32>)
  return
}

// CHECK-LABEL: func @causal_conv1d
func.func @causal_conv1d(%x: tensor<2x32x64xf32>, %w: tensor<64x4xf32>, %b: tensor<64xf32>, %s0: tensor<2x64x3xf32>) {
  // CHECK: seq.causal_conv1d %{{.*}}, %{{.*}} bias(%{{.*}}) init(%{{.*}}) {activation = #seq.activation<silu>} : (tensor<2x32x64xf32>, tensor<64x4xf32>, tensor<64xf32>, tensor<2x64x3xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x3xf32>)
  %y, %last = seq.causal_conv1d %x, %w bias(%b) init(%s0) {activation = #seq.activation<silu>}
    : (tensor<2x32x64xf32>, tensor<64x4xf32>, tensor<64xf32>, tensor<2x64x3xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x3xf32>)
  // CHECK: seq.causal_conv1d %{{.*}}, %{{.*}} : (tensor<2x32x64xf32>, tensor<64x4xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x3xf32>)
  %y2, %last2 = seq.causal_conv1d %x, %w {activation = #seq.activation<none>}
    : (tensor<2x32x64xf32>, tensor<64x4xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x3xf32>)
  return
}

// CHECK-LABEL: func @route
func.func @route(%logits: tensor<32x8xf32>, %eb: tensor<8xf32>, %eps: tensor<32x8xf32>, %nl: tensor<32x8xf32>) {
  // CHECK: seq.route %{{.*}} bias(%{{.*}}) noise(%{{.*}}, %{{.*}}) {aux_loss_coef = 0.00999999977 : f32, k = 2 : i64} : (tensor<32x8xf32>, tensor<8xf32>, tensor<32x8xf32>, tensor<32x8xf32>) -> (tensor<32x2xf32>, tensor<32x2xi32>, tensor<f32>)
  %w, %idx, %aux = seq.route %logits bias(%eb) noise(%eps, %nl)
    {k = 2 : i64, score = #seq.score<softmax_topk>, normalize = false, routed_scale = 1.0 : f32, aux_loss_coef = 0.01 : f32}
    : (tensor<32x8xf32>, tensor<8xf32>, tensor<32x8xf32>, tensor<32x8xf32>) -> (tensor<32x2xf32>, tensor<32x2xi32>, tensor<f32>)
  // CHECK: seq.route %{{.*}} bias(%{{.*}}) {k = 6 : i64, normalize = true, routed_scale = 2.500000e+00 : f32, score = #seq.score<sigmoid>} : (tensor<32x8xf32>, tensor<8xf32>) -> (tensor<32x6xf32>, tensor<32x6xi32>, tensor<f32>)
  %w2, %idx2, %aux2 = seq.route %logits bias(%eb) {k = 6 : i64, score = #seq.score<sigmoid>, normalize = true, routed_scale = 2.5 : f32}
    : (tensor<32x8xf32>, tensor<8xf32>) -> (tensor<32x6xf32>, tensor<32x6xi32>, tensor<f32>)
  // CHECK: seq.route %{{.*}} noise(%{{.*}}, %{{.*}}) {k = 1 : i64, score = #seq.score<softmax>} : (tensor<32x8xf32>, tensor<32x8xf32>, tensor<32x8xf32>)
  %w3, %idx3, %aux3 = seq.route %logits noise(%eps, %nl) {k = 1 : i64, score = #seq.score<softmax>}
    : (tensor<32x8xf32>, tensor<32x8xf32>, tensor<32x8xf32>) -> (tensor<32x1xf32>, tensor<32x1xi32>, tensor<f32>)
  return
}

// CHECK-LABEL: func @moe_ffn
func.func @moe_ffn(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %idx: tensor<32x2xi32>,
                   %wu: tensor<8x16x24xf32>, %wd: tensor<8x24x16xf32>, %wg: tensor<8x16x24xf32>) {
  // CHECK: seq.moe_ffn %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gate_proj(%{{.*}}) {capacity_factor = 1.250000e+00 : f32} : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x16x24xf32>, tensor<8x24x16xf32>, tensor<8x16x24xf32>) -> (tensor<32x16xf32>, tensor<8xi64>)
  %y, %load = seq.moe_ffn %x, %w, %idx, %wu, %wd gate_proj(%wg)
    {activation = #seq.activation<silu>, capacity_factor = 1.25 : f32}
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x16x24xf32>, tensor<8x24x16xf32>, tensor<8x16x24xf32>)
      -> (tensor<32x16xf32>, tensor<8xi64>)
  // CHECK: seq.moe_ffn %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = #seq.activation<gelu>} : (tensor<32x16xf32>
  %y2, %load2 = seq.moe_ffn %x, %w, %idx, %wu, %wd {activation = #seq.activation<gelu>}
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x16x24xf32>, tensor<8x24x16xf32>)
      -> (tensor<32x16xf32>, tensor<8xi64>)
  return
}

// CHECK-LABEL: func @delta_rule
func.func @delta_rule(%q: tensor<2x32x2x16xf32>, %v: tensor<2x32x4x8xf32>, %beta: tensor<2x32x4xf32>,
                      %gk: tensor<2x32x4x16xf32>, %S0: tensor<2x4x16x8xf32>) {
  // Gated DeltaNet with grouped value heads (HV = 4, H = 2).
  // CHECK: seq.delta_rule %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} decay(%{{.*}}) init(%{{.*}}) {qk_l2norm = true, scale = 2.500000e-01 : f32} : (tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4xf32>, tensor<2x32x4xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  %o, %last = seq.delta_rule %q, %q, %v, %beta decay(%beta) init(%S0)
    {qk_l2norm = true, scale = 0.25 : f32, eps = 1.0e-06 : f32}
    : (tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4xf32>, tensor<2x32x4xf32>, tensor<2x4x16x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  // KDA's per-key decay; DeltaNet without one.
  // CHECK: seq.delta_rule %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} decay(%{{.*}}) {chunk_size = 64 : i64} : (tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4xf32>, tensor<2x32x4x16xf32>)
  %o2, %l2 = seq.delta_rule %q, %q, %v, %beta decay(%gk) {chunk_size = 64 : i64}
    : (tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4xf32>, tensor<2x32x4x16xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  // CHECK: seq.delta_rule %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4xf32>) -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  %o3, %l3 = seq.delta_rule %q, %q, %v, %beta
    : (tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// CHECK-LABEL: func @generalized_delta_rule
func.func @generalized_delta_rule(%q: tensor<1x16x2x8xf32>, %v: tensor<1x16x2x4xf32>, %S0: tensor<1x2x8x4xf32>) {
  // CHECK: seq.generalized_delta_rule %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} decay(%{{.*}}) init(%{{.*}}) {scale = 5.000000e-01 : f32} : (tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x16x2x4xf32>, tensor<1x2x8x4xf32>)
  %o, %last = seq.generalized_delta_rule %q, %q, %v, %q, %q decay(%q) init(%S0) {scale = 0.5 : f32}
    : (tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x2x8x4xf32>)
      -> (tensor<1x16x2x4xf32>, tensor<1x2x8x4xf32>)
  return
}

// Packed batches and checkpoints (SPEC section 1), and ssd's mamba_ssm
// parity attributes.
// CHECK-LABEL: func @packed
func.func @packed(%x: tensor<1x?x4x16xf32>, %dt: tensor<1x?x4xf32>, %A: tensor<4xf32>,
                  %B: tensor<1x?x1x32xf32>, %D: tensor<4x16xf32>, %h0: tensor<?x4x16x32xf32>,
                  %cu: tensor<?xi32>, %q: tensor<1x?x8x64xf32>, %k: tensor<1x?x2x64xf32>,
                  %cuk: tensor<?xi32>, %a: tensor<1x?x6xf32>) {
  // CHECK: seq.ssd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip(%{{.*}}) init(%{{.*}}) segments(%{{.*}}) {checkpoint_every = 64 : i64, dt_max = 1.000000e-01 : f32, dt_min = 1.000000e-03 : f32} : (tensor<1x?x4x16xf32>, tensor<1x?x4xf32>, tensor<4xf32>, tensor<1x?x1x32xf32>, tensor<1x?x1x32xf32>, tensor<4x16xf32>, tensor<?x4x16x32xf32>, tensor<?xi32>) -> (tensor<1x?x4x16xf32>, tensor<?x4x16x32xf32>, tensor<?x?x4x16x32xf32>)
  %y, %last, %ck = seq.ssd %x, %dt, %A, %B, %B skip(%D) init(%h0) segments(%cu)
      {checkpoint_every = 64 : i64, dt_min = 0.001 : f32, dt_max = 0.1 : f32}
    : (tensor<1x?x4x16xf32>, tensor<1x?x4xf32>, tensor<4xf32>, tensor<1x?x1x32xf32>, tensor<1x?x1x32xf32>,
       tensor<4x16xf32>, tensor<?x4x16x32xf32>, tensor<?xi32>)
      -> (tensor<1x?x4x16xf32>, tensor<?x4x16x32xf32>, tensor<?x?x4x16x32xf32>)
  // CHECK: seq.attention %{{.*}}, %{{.*}}, %{{.*}} segments(%{{.*}}) kv_segments(%{{.*}}) : (tensor<1x?x8x64xf32>, tensor<1x?x2x64xf32>, tensor<1x?x2x64xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<1x?x8x64xf32>
  %o = seq.attention %q, %k, %k segments(%cu) kv_segments(%cuk)
    : (tensor<1x?x8x64xf32>, tensor<1x?x2x64xf32>, tensor<1x?x2x64xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<1x?x8x64xf32>
  // CHECK: seq.linear_scan %{{.*}}, %{{.*}} segments(%{{.*}}) {checkpoint_every = 8 : i64, reverse = true}
  %h, %l, %c = seq.linear_scan %a, %a segments(%cu) {reverse = true, checkpoint_every = 8 : i64}
    : (tensor<1x?x6xf32>, tensor<1x?x6xf32>, tensor<?xi32>) -> (tensor<1x?x6xf32>, tensor<?x6xf32>, tensor<?x?x6xf32>)
  // CHECK: seq.associative_scan %{{.*}} segments(%{{.*}}) : (tensor<1x?x6xf32>, tensor<?xi32>) -> tensor<1x?x6xf32>
  %m = seq.associative_scan %a segments(%cu) : (tensor<1x?x6xf32>, tensor<?xi32>) -> tensor<1x?x6xf32> {
  ^bb0(%p: f32, %n: f32):
    %r = arith.maximumf %p, %n : f32
    seq.yield %r : f32
  }
  return
}
