// The other op families for the CUDA pipeline's PTX test (cuda-ptx.test).
func.func @main(%q: tensor<2x100x4x64xf32>, %k: tensor<2x100x2x64xf32>, %v: tensor<2x100x2x64xf32>,
                %lq: tensor<2x100x4x64xf32>, %lk: tensor<2x100x4x64xf32>, %lv: tensor<2x100x4x64xf32>,
                %g3: tensor<2x100x4xf32>, %g4: tensor<2x100x4x64xf32>,
                %x: tensor<2x100x64xf32>, %w: tensor<64x4xf32>, %cb: tensor<64xf32>,
                %logits: tensor<100x8xf32>, %xm: tensor<100x64xf32>, %wu: tensor<8x64x96xf32>,
                %wd: tensor<8x96x64xf32>, %wg: tensor<8x64x96xf32>,
                %la: tensor<2x4x100xf32>, %om: tensor<64x32xf32>)
    -> (tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>,
        tensor<2x100x64xf32>, tensor<100x64xf32>, tensor<f32>, tensor<2x4x100x100xf32>, tensor<2x100x64xf32>,
        tensor<2x100x4x32xf32>, tensor<2x64x3xf32>) {
  %o = seq.attention %q, %k, %v {causal = true, window = 50 : i64} : (tensor<2x100x4x64xf32>, tensor<2x100x2x64xf32>, tensor<2x100x2x64xf32>) -> tensor<2x100x4x64xf32>
  %lo, %ls = seq.linear_attention %lq, %lk, %lv decay(%g3) : (tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4xf32>) -> (tensor<2x100x4x64xf32>, tensor<2x4x64x64xf32>)
  %go, %gs = seq.linear_attention %lq, %lk, %lv decay(%g4) : (tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>) -> (tensor<2x100x4x64xf32>, tensor<2x4x64x64xf32>)
  %no, %ns = seq.linear_attention %lq, %lk, %lv {feature_map = #seq.feature_map<elu_plus_one>, normalize = true, causal = false} : (tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>) -> (tensor<2x100x4x64xf32>, tensor<2x4x64x64xf32>)
  %y, %cs = seq.causal_conv1d %x, %w bias(%cb) {activation = #seq.activation<silu>} : (tensor<2x100x64xf32>, tensor<64x4xf32>, tensor<64xf32>) -> (tensor<2x100x64xf32>, tensor<2x64x3xf32>)
  %rw, %ri, %aux = seq.route %logits {k = 2 : i64} : (tensor<100x8xf32>) -> (tensor<100x2xf32>, tensor<100x2xi32>, tensor<f32>)
  %my, %load = seq.moe_ffn %xm, %rw, %ri, %wu, %wd gate_proj(%wg) {capacity_factor = 1.25 : f32} : (tensor<100x64xf32>, tensor<100x2xf32>, tensor<100x2xi32>, tensor<8x64x96xf32>, tensor<8x96x64xf32>, tensor<8x64x96xf32>) -> (tensor<100x64xf32>, tensor<8xi64>)
  %mask = seq.semiseparable_mask %la : (tensor<2x4x100xf32>) -> tensor<2x4x100x100xf32>
  %s:2 = seq.associative_scan %x, %x {dim = 1 : i64} : (tensor<2x100x64xf32>, tensor<2x100x64xf32>) -> (tensor<2x100x64xf32>, tensor<2x100x64xf32>) {
  ^bb0(%p0: f32, %p1: f32, %n0: f32, %n1: f32):
    %m = arith.maximumf %p0, %n0 : f32
    %a = arith.addf %p1, %n1 : f32
    seq.yield %m, %a : f32, f32
  }
  %phi = seq.random_features %lq, %om : (tensor<2x100x4x64xf32>, tensor<64x32xf32>) -> tensor<2x100x4x32xf32>
  return %o, %lo, %go, %no, %y, %my, %aux, %mask, %s#0, %phi, %cs : tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>, tensor<2x100x64xf32>, tensor<100x64xf32>, tensor<f32>, tensor<2x4x100x100xf32>, tensor<2x100x64xf32>, tensor<2x100x4x32xf32>, tensor<2x64x3xf32>
}
