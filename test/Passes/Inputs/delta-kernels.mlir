// The delta-rule family (SPEC 2.12, 2.13) and linear attention's bonus, in
// f32 and bf16, for strict-all-ops.test: Gated DeltaNet (HV = 2H), KDA,
// DeltaNet, the generalized rule (RWKV-7) and RWKV-6.
func.func @main(%q: tensor<1x100x2x64xf32>, %v: tensor<1x100x4x64xf32>, %beta: tensor<1x100x4xf32>,
                %gk: tensor<1x100x4x64xf32>, %S0: tensor<1x4x64x64xf32>,
                %r: tensor<1x100x4x64xf32>, %u: tensor<4x64xf32>,
                %qb: tensor<1x100x2x64xbf16>, %vb: tensor<1x100x4x64xbf16>, %bb: tensor<1x100x4xbf16>)
    -> (tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>,
        tensor<1x100x4x64xf32>, tensor<1x100x4x64xbf16>) {
  %o1, %s1 = seq.delta_rule %q, %q, %v, %beta decay(%beta) init(%S0) {qk_l2norm = true, scale = 0.125 : f32}
    : (tensor<1x100x2x64xf32>, tensor<1x100x2x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4xf32>, tensor<1x100x4xf32>, tensor<1x4x64x64xf32>)
      -> (tensor<1x100x4x64xf32>, tensor<1x4x64x64xf32>)
  %o2, %s2 = seq.delta_rule %q, %q, %v, %beta decay(%gk) {qk_l2norm = true}
    : (tensor<1x100x2x64xf32>, tensor<1x100x2x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4xf32>, tensor<1x100x4x64xf32>)
      -> (tensor<1x100x4x64xf32>, tensor<1x4x64x64xf32>)
  %o3, %s3 = seq.delta_rule %q, %q, %v, %beta
    : (tensor<1x100x2x64xf32>, tensor<1x100x2x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4xf32>)
      -> (tensor<1x100x4x64xf32>, tensor<1x4x64x64xf32>)
  %o4, %s4 = seq.generalized_delta_rule %r, %r, %r, %r, %r decay(%gk) init(%S0)
    : (tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x4x64x64xf32>)
      -> (tensor<1x100x4x64xf32>, tensor<1x4x64x64xf32>)
  %o5, %s5 = seq.linear_attention %r, %r, %r decay(%gk) bonus(%u)
    : (tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<4x64xf32>)
      -> (tensor<1x100x4x64xf32>, tensor<1x4x64x64xf32>)
  %o6, %s6 = seq.delta_rule %qb, %qb, %vb, %bb decay(%bb) {qk_l2norm = true}
    : (tensor<1x100x2x64xbf16>, tensor<1x100x2x64xbf16>, tensor<1x100x4x64xbf16>, tensor<1x100x4xbf16>, tensor<1x100x4xbf16>)
      -> (tensor<1x100x4x64xbf16>, tensor<1x4x64x64xf32>)
  return %o1, %o2, %o3, %o4, %o5, %o6 : tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xf32>, tensor<1x100x4x64xbf16>
}
