// One case per verifier rule: every diagnostic names the operand and the
// dimension, and seqc-opt exits with status 1 (never a crash).
// RUN: seqc-opt %s -split-input-file -verify-diagnostics
// RUN: not seqc-opt %s -split-input-file 2>&1 | FileCheck %s --check-prefix=EXIT
// EXIT: error:

//===----------------------------------------------------------------------===//
// Shared dimensions, ranks and element types (the shape signature)
//===----------------------------------------------------------------------===//

func.func @ssd_time_mismatch(%x: tensor<2x8x4x16xf32>, %dt: tensor<2x9x4xf32>, %A: tensor<4xf32>,
                             %B: tensor<2x8x1x32xf32>, %C: tensor<2x8x1x32xf32>) {
  // expected-error @+1 {{'seq.ssd' op dimension 1 (T) of dt is 9 but x has 8}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %C
    : (tensor<2x8x4x16xf32>, tensor<2x9x4xf32>, tensor<4xf32>, tensor<2x8x1x32xf32>, tensor<2x8x1x32xf32>)
      -> (tensor<2x8x4x16xf32>, tensor<2x4x16x32xf32>)
  return
}

// -----

func.func @ssd_heads_not_multiple_of_groups(%x: tensor<2x8x4x16xf32>, %dt: tensor<2x8x4xf32>, %A: tensor<4xf32>,
                                            %B: tensor<2x8x3x32xf32>, %C: tensor<2x8x3x32xf32>) {
  // expected-error @+1 {{'seq.ssd' op H = 4 is not a multiple of G = 3 (H from dimension 2 of x, G from dimension 2 of B)}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %C
    : (tensor<2x8x4x16xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x3x32xf32>, tensor<2x8x3x32xf32>)
      -> (tensor<2x8x4x16xf32>, tensor<2x4x16x32xf32>)
  return
}

// -----

func.func @ssd_zero_groups(%x: tensor<2x8x4x16xf32>, %dt: tensor<2x8x4xf32>, %A: tensor<4xf32>,
                           %B: tensor<2x8x0x32xf32>, %C: tensor<2x8x0x32xf32>) {
  // expected-error @+1 {{'seq.ssd' op G must be at least 1, but dimension 2 (G) of B gives G = 0}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %C
    : (tensor<2x8x4x16xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x0x32xf32>, tensor<2x8x0x32xf32>)
      -> (tensor<2x8x4x16xf32>, tensor<2x4x16x32xf32>)
  return
}

// -----

func.func @ssd_state_shape(%x: tensor<2x8x4x16xf32>, %dt: tensor<2x8x4xf32>, %A: tensor<4xf32>,
                           %B: tensor<2x8x1x32xf32>, %C: tensor<2x8x1x32xf32>, %h0: tensor<2x4x32x16xf32>) {
  // expected-error @+1 {{'seq.ssd' op dimension 2 (P) of init is 32 but x has 16}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %C init(%h0)
    : (tensor<2x8x4x16xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x1x32xf32>, tensor<2x8x1x32xf32>,
       tensor<2x4x32x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x16x32xf32>)
  return
}

// -----

func.func @ssd_result_shape(%x: tensor<2x8x4x16xf32>, %dt: tensor<2x8x4xf32>, %A: tensor<4xf32>,
                            %B: tensor<2x8x1x32xf32>, %C: tensor<2x8x1x32xf32>) {
  // expected-error @+1 {{'seq.ssd' op dimension 3 (N) of last is 16 but B has 32}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %C
    : (tensor<2x8x4x16xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x1x32xf32>, tensor<2x8x1x32xf32>)
      -> (tensor<2x8x4x16xf32>, tensor<2x4x16x16xf32>)
  return
}

// -----

func.func @ssd_negative_chunk(%x: tensor<2x8x4x16xf32>, %dt: tensor<2x8x4xf32>, %A: tensor<4xf32>,
                              %B: tensor<2x8x1x32xf32>, %C: tensor<2x8x1x32xf32>) {
  // expected-error @+1 {{'seq.ssd' op chunk_size must be >= 0 (0: the compiler chooses), but is -4}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %C {chunk_size = -4 : i64}
    : (tensor<2x8x4x16xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x1x32xf32>, tensor<2x8x1x32xf32>)
      -> (tensor<2x8x4x16xf32>, tensor<2x4x16x32xf32>)
  return
}

// -----

func.func @ssd_state_not_f32(%x: tensor<2x8x4x16xbf16>, %dt: tensor<2x8x4xbf16>, %A: tensor<4xf32>,
                             %B: tensor<2x8x1x32xbf16>, %C: tensor<2x8x1x32xbf16>) {
  // expected-error @+1 {{'seq.ssd' op last must have element type f32 (states and scalar results stay f32), but has 'bf16'}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %C
    : (tensor<2x8x4x16xbf16>, tensor<2x8x4xbf16>, tensor<4xf32>, tensor<2x8x1x32xbf16>, tensor<2x8x1x32xbf16>)
      -> (tensor<2x8x4x16xbf16>, tensor<2x4x16x32xbf16>)
  return
}

// -----

func.func @ssd_mixed_data_types(%x: tensor<2x8x4x16xbf16>, %dt: tensor<2x8x4xf32>, %A: tensor<4xf32>,
                                %B: tensor<2x8x1x32xbf16>, %C: tensor<2x8x1x32xbf16>) {
  // expected-error @+1 {{'seq.ssd' op dt has element type 'f32' but x has 'bf16'}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %C
    : (tensor<2x8x4x16xbf16>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x1x32xbf16>, tensor<2x8x1x32xbf16>)
      -> (tensor<2x8x4x16xbf16>, tensor<2x4x16x32xf32>)
  return
}

// -----

func.func @linear_scan_rank(%a: tensor<16xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op a must have rank >= 2 (B x T x S...), but has rank 1}}
  %h, %l = seq.linear_scan %a, %a : (tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<f32>)
  return
}

// -----

func.func @linear_scan_b_rank(%a: tensor<2x16x8xf32>, %b: tensor<2x16xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op b must have rank 3 (B x T x S0) but has rank 2}}
  %h, %l = seq.linear_scan %a, %b : (tensor<2x16x8xf32>, tensor<2x16xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @linear_scan_state_dim(%a: tensor<2x16x8xf32>, %b: tensor<2x16x7xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op dimension 2 (S0) of b is 7 but a has 8}}
  %h, %l = seq.linear_scan %a, %b : (tensor<2x16x8xf32>, tensor<2x16x7xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @linear_scan_init_batch(%a: tensor<2x16x8xf32>, %h0: tensor<3x8xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op dimension 0 (B) of init is 3 but a has 2}}
  %h, %l = seq.linear_scan %a, %a init(%h0)
    : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<3x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @linear_scan_result(%a: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op dimension 1 (T) of h is 15 but a has 16}}
  %h, %l = seq.linear_scan %a, %a : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x15x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @linear_scan_int(%a: tensor<2x16x8xi32>) {
  // expected-error @+1 {{'seq.linear_scan' op a must have element type f32, f16 or bf16, but has 'i32'}}
  %h, %l = seq.linear_scan %a, %a : (tensor<2x16x8xi32>, tensor<2x16x8xi32>) -> (tensor<2x16x8xi32>, tensor<2x8xf32>)
  return
}

// -----

func.func @linear_scan_init_type(%a: tensor<2x16x8xf16>, %h0: tensor<2x8xf16>) {
  // expected-error @+1 {{'seq.linear_scan' op init must have element type f32 (states and scalar results stay f32), but has 'f16'}}
  %h, %l = seq.linear_scan %a, %a init(%h0)
    : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x8xf32>)
  return
}

// -----

func.func @unranked(%a: tensor<*xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op operand #0 must be ranked tensor of f32, f16 or bf16}}
  %h, %l = seq.linear_scan %a, %a : (tensor<*xf32>, tensor<*xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @selective_scan_groups(%u: tensor<2x32x64xf32>, %A: tensor<64x16xf32>, %B: tensor<2x32x3x16xf32>) {
  // expected-error @+1 {{'seq.selective_scan' op D = 64 is not a multiple of G = 3 (D from dimension 2 of u, G from dimension 2 of B)}}
  %y, %l = seq.selective_scan %u, %u, %A, %B, %B
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x3x16xf32>, tensor<2x32x3x16xf32>)
      -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  return
}

// -----

func.func @selective_scan_state_dim(%u: tensor<2x32x64xf32>, %A: tensor<64x8xf32>, %B: tensor<2x32x1x16xf32>) {
  // expected-error @+1 {{'seq.selective_scan' op dimension 3 (N) of B is 16 but A has 8}}
  %y, %l = seq.selective_scan %u, %u, %A, %B, %B
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x8xf32>, tensor<2x32x1x16xf32>, tensor<2x32x1x16xf32>)
      -> (tensor<2x32x64xf32>, tensor<2x64x8xf32>)
  return
}

// -----

func.func @selective_scan_skip(%u: tensor<2x32x64xf32>, %A: tensor<64x16xf32>, %B: tensor<2x32x1x16xf32>, %D: tensor<32xf32>) {
  // expected-error @+1 {{'seq.selective_scan' op dimension 0 (D) of skip is 32 but u has 64}}
  %y, %l = seq.selective_scan %u, %u, %A, %B, %B skip(%D)
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x1x16xf32>, tensor<2x32x1x16xf32>,
       tensor<32xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  return
}

// -----

func.func @selective_scan_gate(%u: tensor<2x32x64xf32>, %A: tensor<64x16xf32>, %B: tensor<2x32x1x16xf32>, %z: tensor<2x31x64xf32>) {
  // expected-error @+1 {{'seq.selective_scan' op dimension 1 (T) of gate is 31 but u has 32}}
  %y, %l = seq.selective_scan %u, %u, %A, %B, %B gate(%z)
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x1x16xf32>, tensor<2x32x1x16xf32>,
       tensor<2x31x64xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  return
}

// -----

func.func @selective_scan_delta_bias(%u: tensor<2x32x64xf32>, %A: tensor<64x16xf32>, %B: tensor<2x32x1x16xf32>, %db: tensor<2x64xf32>) {
  // expected-error @+1 {{'seq.selective_scan' op delta_bias must have rank 1 (D) but has rank 2}}
  %y, %l = seq.selective_scan %u, %u, %A, %B, %B delta_bias(%db)
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x1x16xf32>, tensor<2x32x1x16xf32>,
       tensor<2x64xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  return
}

// -----

func.func @selective_scan_param_type(%u: tensor<2x32x64xf32>, %A: tensor<64x16xf16>, %B: tensor<2x32x1x16xf32>) {
  // expected-error @+1 {{'seq.selective_scan' op A has element type 'f16' but u has 'f32' (parameters are f32 or the data type)}}
  %y, %l = seq.selective_scan %u, %u, %A, %B, %B
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf16>, tensor<2x32x1x16xf32>, tensor<2x32x1x16xf32>)
      -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  return
}

// -----

func.func @selective_scan_init(%u: tensor<2x32x64xf32>, %A: tensor<64x16xf32>, %B: tensor<2x32x1x16xf32>, %h0: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'seq.selective_scan' op dimension 1 (D) of init is 16 but u has 64}}
  %y, %l = seq.selective_scan %u, %u, %A, %B, %B init(%h0)
    : (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<64x16xf32>, tensor<2x32x1x16xf32>, tensor<2x32x1x16xf32>,
       tensor<2x16x64xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x16xf32>)
  return
}

// -----

func.func @mask_rank(%la: tensor<f32>) {
  // expected-error @+1 {{'seq.semiseparable_mask' op log_a must have rank >= 1 (... x T), but has rank 0}}
  %L = seq.semiseparable_mask %la : (tensor<f32>) -> (tensor<1x1xf32>)
  return
}

// -----

func.func @mask_shape(%la: tensor<4x64xf32>) {
  // expected-error @+1 {{'seq.semiseparable_mask' op dimension 2 (T) of mask is 32 but log_a has 64}}
  %L = seq.semiseparable_mask %la : (tensor<4x64xf32>) -> (tensor<4x64x32xf32>)
  return
}

//===----------------------------------------------------------------------===//
// linear_attention
//===----------------------------------------------------------------------===//

// -----

func.func @la_decay_rank(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>, %g: tensor<2x32xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op decay must have rank 1 (H), 3 (B x T x H) or 4 (B x T x H x K), but has rank 2}}
  %o, %l = seq.linear_attention %q, %q, %v decay(%g)
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_decay_heads(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op dimension 0 (H) of decay is 8 but q has 4}}
  %o, %l = seq.linear_attention %q, %q, %v decay(%g)
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_decay_per_key(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>, %g: tensor<2x32x4x8xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op dimension 3 (K) of decay is 8 but q has 16}}
  %o, %l = seq.linear_attention %q, %q, %v decay(%g)
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_decay_noncausal(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op decay requires causal = true}}
  %o, %l = seq.linear_attention %q, %q, %v decay(%g) {causal = false}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<4xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_bonus_normalize(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>, %u: tensor<4x16xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op bonus cannot be combined with normalize}}
  %o, %l = seq.linear_attention %q, %q, %v bonus(%u) {normalize = true}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<4x16xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_bonus_noncausal(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>, %u: tensor<4x16xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op bonus requires causal = true}}
  %o, %l = seq.linear_attention %q, %q, %v bonus(%u) {causal = false}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<4x16xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_bonus_shape(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>, %u: tensor<4x8xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op dimension 1 (K) of bonus is 8 but q has 16}}
  %o, %l = seq.linear_attention %q, %q, %v bonus(%u)
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<4x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_normalize_init(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>, %S0: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op normalize cannot be combined with init: the normalizer state is not carried}}
  %o, %l = seq.linear_attention %q, %q, %v init(%S0) {normalize = true}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_value_dim(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op dimension 3 (V) of o is 16 but v has 8}}
  %o, %l = seq.linear_attention %q, %q, %v
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>)
      -> (tensor<2x32x4x16xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_keys(%q: tensor<2x32x4x16xf32>, %k: tensor<2x32x4x12xf32>, %v: tensor<2x32x4x8xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op dimension 3 (K) of k is 12 but q has 16}}
  %o, %l = seq.linear_attention %q, %k, %v
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x12xf32>, tensor<2x32x4x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_chunk(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op chunk_size must be >= 0 (0: the compiler chooses), but is -1}}
  %o, %l = seq.linear_attention %q, %q, %v {chunk_size = -1 : i64}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

// -----

func.func @la_eps(%q: tensor<2x32x4x16xf32>, %v: tensor<2x32x4x8xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op eps must be >= 0}}
  %o, %l = seq.linear_attention %q, %q, %v {eps = -1.0 : f32}
    : (tensor<2x32x4x16xf32>, tensor<2x32x4x16xf32>, tensor<2x32x4x8xf32>)
      -> (tensor<2x32x4x8xf32>, tensor<2x4x16x8xf32>)
  return
}

//===----------------------------------------------------------------------===//
// random_features, attention, causal_conv1d
//===----------------------------------------------------------------------===//

// -----

func.func @rf_keys(%x: tensor<2x32x16xf32>, %omega: tensor<8x24xf32>) {
  // expected-error @+1 {{'seq.random_features' op dimension 0 (K) of omega is 8 but x has 16}}
  %phi = seq.random_features %x, %omega : (tensor<2x32x16xf32>, tensor<8x24xf32>) -> (tensor<2x32x24xf32>)
  return
}

// -----

func.func @rf_trig_width(%x: tensor<2x32x16xf32>, %omega: tensor<16x24xf32>) {
  // expected-error @+1 {{'seq.random_features' op dimension 2 (2M) of features is 24 but omega has M = 24, so it must be 48}}
  %phi = seq.random_features %x, %omega {kind = #seq.random_features<trigonometric>}
    : (tensor<2x32x16xf32>, tensor<16x24xf32>) -> (tensor<2x32x24xf32>)
  return
}

// -----

func.func @rf_rank(%x: tensor<f32>, %omega: tensor<16x24xf32>) {
  // expected-error @+1 {{'seq.random_features' op x must have rank >= 1 (... x K), but has rank 0}}
  %phi = seq.random_features %x, %omega : (tensor<f32>, tensor<16x24xf32>) -> (tensor<24xf32>)
  return
}

// -----

func.func @attn_gqa(%q: tensor<2x16x6x64xf32>, %k: tensor<2x48x4x64xf32>, %v: tensor<2x48x4x32xf32>) {
  // expected-error @+1 {{'seq.attention' op H = 6 is not a multiple of Hkv = 4 (H from dimension 2 of q, Hkv from dimension 2 of k)}}
  %o = seq.attention %q, %k, %v : (tensor<2x16x6x64xf32>, tensor<2x48x4x64xf32>, tensor<2x48x4x32xf32>) -> (tensor<2x16x6x32xf32>)
  return
}

// -----

func.func @attn_window(%q: tensor<2x16x8x64xf32>, %k: tensor<2x48x2x64xf32>, %v: tensor<2x48x2x32xf32>) {
  // expected-error @+1 {{'seq.attention' op window must be >= 0 (0: unlimited), but is -3}}
  %o = seq.attention %q, %k, %v {window = -3 : i64}
    : (tensor<2x16x8x64xf32>, tensor<2x48x2x64xf32>, tensor<2x48x2x32xf32>) -> (tensor<2x16x8x32xf32>)
  return
}

// -----

func.func @attn_keys_values(%q: tensor<2x16x8x64xf32>, %k: tensor<2x48x2x64xf32>, %v: tensor<2x40x2x32xf32>) {
  // expected-error @+1 {{'seq.attention' op dimension 1 (S) of v is 40 but k has 48}}
  %o = seq.attention %q, %k, %v : (tensor<2x16x8x64xf32>, tensor<2x48x2x64xf32>, tensor<2x40x2x32xf32>) -> (tensor<2x16x8x32xf32>)
  return
}

// -----

func.func @attn_head_dim(%q: tensor<2x16x8x64xf32>, %k: tensor<2x48x2x32xf32>, %v: tensor<2x48x2x32xf32>) {
  // expected-error @+1 {{'seq.attention' op dimension 3 (K) of k is 32 but q has 64}}
  %o = seq.attention %q, %k, %v : (tensor<2x16x8x64xf32>, tensor<2x48x2x32xf32>, tensor<2x48x2x32xf32>) -> (tensor<2x16x8x32xf32>)
  return
}

// -----

func.func @attn_scale(%q: tensor<2x16x8x64xf32>, %k: tensor<2x48x2x64xf32>, %v: tensor<2x48x2x32xf32>) {
  // expected-error @+1 {{'seq.attention' op scale must be finite}}
  %o = seq.attention %q, %k, %v {scale = 0x7F800000 : f32}
    : (tensor<2x16x8x64xf32>, tensor<2x48x2x64xf32>, tensor<2x48x2x32xf32>) -> (tensor<2x16x8x32xf32>)
  return
}

// -----

func.func @conv_state_width(%x: tensor<2x32x64xf32>, %w: tensor<64x4xf32>, %s0: tensor<2x64x4xf32>) {
  // expected-error @+1 {{'seq.causal_conv1d' op dimension 2 (W-1) of init is 4 but w has W = 4, so it must be 3}}
  %y, %l = seq.causal_conv1d %x, %w init(%s0)
    : (tensor<2x32x64xf32>, tensor<64x4xf32>, tensor<2x64x4xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x3xf32>)
  return
}

// -----

func.func @conv_zero_width(%x: tensor<2x32x64xf32>, %w: tensor<64x0xf32>) {
  // expected-error @+1 {{'seq.causal_conv1d' op W must be at least 1, but dimension 1 (W) of w gives W = 0}}
  %y, %l = seq.causal_conv1d %x, %w : (tensor<2x32x64xf32>, tensor<64x0xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x0xf32>)
  return
}

// -----

func.func @conv_activation(%x: tensor<2x32x64xf32>, %w: tensor<64x4xf32>) {
  // expected-error @+1 {{'seq.causal_conv1d' op activation must be none or silu, but is gelu}}
  %y, %l = seq.causal_conv1d %x, %w {activation = #seq.activation<gelu>}
    : (tensor<2x32x64xf32>, tensor<64x4xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x3xf32>)
  return
}

// -----

func.func @conv_bias(%x: tensor<2x32x64xf32>, %w: tensor<64x4xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'seq.causal_conv1d' op dimension 0 (D) of bias is 32 but x has 64}}
  %y, %l = seq.causal_conv1d %x, %w bias(%b)
    : (tensor<2x32x64xf32>, tensor<64x4xf32>, tensor<32xf32>) -> (tensor<2x32x64xf32>, tensor<2x64x3xf32>)
  return
}

//===----------------------------------------------------------------------===//
// route, moe_ffn
//===----------------------------------------------------------------------===//

// -----

func.func @route_k_zero(%logits: tensor<32x8xf32>) {
  // expected-error @+1 {{'seq.route' op k must be >= 1, but is 0}}
  %w, %i, %a = seq.route %logits {k = 0 : i64}
    : (tensor<32x8xf32>) -> (tensor<32x0xf32>, tensor<32x0xi32>, tensor<f32>)
  return
}

// -----

func.func @route_k_too_large(%logits: tensor<32x8xf32>) {
  // expected-error @+1 {{'seq.route' op k = 9 exceeds the number of experts E = 8}}
  %w, %i, %a = seq.route %logits {k = 9 : i64}
    : (tensor<32x8xf32>) -> (tensor<32x9xf32>, tensor<32x9xi32>, tensor<f32>)
  return
}

// -----

func.func @route_k_result(%logits: tensor<32x8xf32>) {
  // expected-error @+1 {{'seq.route' op dimension 1 (k) of weights is 3 but attribute k is 2}}
  %w, %i, %a = seq.route %logits {k = 2 : i64}
    : (tensor<32x8xf32>) -> (tensor<32x3xf32>, tensor<32x3xi32>, tensor<f32>)
  return
}

// -----

func.func @route_index_type(%logits: tensor<32x8xf32>) {
  // expected-error @+1 {{'seq.route' op indices must have element type i32, but has 'i64'}}
  %w, %i, %a = seq.route %logits {k = 2 : i64}
    : (tensor<32x8xf32>) -> (tensor<32x2xf32>, tensor<32x2xi64>, tensor<f32>)
  return
}

// -----

func.func @route_aux_rank(%logits: tensor<32x8xf32>) {
  // expected-error @+1 {{'seq.route' op aux must have rank 0 but has rank 1}}
  %w, %i, %a = seq.route %logits {k = 2 : i64}
    : (tensor<32x8xf32>) -> (tensor<32x2xf32>, tensor<32x2xi32>, tensor<1xf32>)
  return
}

// -----

func.func @route_bias(%logits: tensor<32x8xf32>, %eb: tensor<4xf32>) {
  // expected-error @+1 {{'seq.route' op dimension 0 (E) of bias is 4 but logits has 8}}
  %w, %i, %a = seq.route %logits bias(%eb) {k = 2 : i64}
    : (tensor<32x8xf32>, tensor<4xf32>) -> (tensor<32x2xf32>, tensor<32x2xi32>, tensor<f32>)
  return
}

// -----

func.func @route_half_noise(%logits: tensor<32x8xf32>, %eps: tensor<32x8xf32>) {
  // expected-error @+1 {{'seq.route' op noise needs both eps and noise_logits}}
  %w, %i, %a = "seq.route"(%logits, %eps) <{k = 2 : i64, operandSegmentSizes = array<i32: 1, 0, 1, 0>}>
    : (tensor<32x8xf32>, tensor<32x8xf32>) -> (tensor<32x2xf32>, tensor<32x2xi32>, tensor<f32>)
  return
}

// -----

func.func @route_missing_k(%logits: tensor<32x8xf32>) {
  // expected-error @+1 {{'seq.route' op requires attribute 'k'}}
  %w, %i, %a = seq.route %logits : (tensor<32x8xf32>) -> (tensor<32x2xf32>, tensor<32x2xi32>, tensor<f32>)
  return
}

// -----

func.func @moe_capacity(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %idx: tensor<32x2xi32>,
                        %wu: tensor<8x16x24xf32>, %wd: tensor<8x24x16xf32>) {
  // expected-error @+1 {{'seq.moe_ffn' op capacity_factor must be a finite value >= 0 (0: no capacity limit), but is -1}}
  %y, %load = seq.moe_ffn %x, %w, %idx, %wu, %wd {capacity_factor = -1.0 : f32}
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x16x24xf32>, tensor<8x24x16xf32>)
      -> (tensor<32x16xf32>, tensor<8xi64>)
  return
}

// -----

func.func @moe_activation(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %idx: tensor<32x2xi32>,
                          %wu: tensor<8x16x24xf32>, %wd: tensor<8x24x16xf32>) {
  // expected-error @+1 {{'seq.moe_ffn' op activation must be silu, gelu or relu}}
  %y, %load = seq.moe_ffn %x, %w, %idx, %wu, %wd {activation = #seq.activation<none>}
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x16x24xf32>, tensor<8x24x16xf32>)
      -> (tensor<32x16xf32>, tensor<8xi64>)
  return
}

// -----

func.func @moe_down_hidden(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %idx: tensor<32x2xi32>,
                           %wu: tensor<8x16x24xf32>, %wd: tensor<8x20x16xf32>) {
  // expected-error @+1 {{'seq.moe_ffn' op dimension 1 (F) of w_down is 20 but w_up has 24}}
  %y, %load = seq.moe_ffn %x, %w, %idx, %wu, %wd
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x16x24xf32>, tensor<8x20x16xf32>)
      -> (tensor<32x16xf32>, tensor<8xi64>)
  return
}

// -----

func.func @moe_model_dim(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %idx: tensor<32x2xi32>,
                         %wu: tensor<8x12x24xf32>, %wd: tensor<8x24x16xf32>) {
  // expected-error @+1 {{'seq.moe_ffn' op dimension 1 (D) of w_up is 12 but x has 16}}
  %y, %load = seq.moe_ffn %x, %w, %idx, %wu, %wd
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x12x24xf32>, tensor<8x24x16xf32>)
      -> (tensor<32x16xf32>, tensor<8xi64>)
  return
}

// -----

func.func @moe_gate_experts(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %idx: tensor<32x2xi32>,
                            %wu: tensor<8x16x24xf32>, %wd: tensor<8x24x16xf32>, %wg: tensor<4x16x24xf32>) {
  // expected-error @+1 {{'seq.moe_ffn' op dimension 0 (E) of w_gate is 4 but w_up has 8}}
  %y, %load = seq.moe_ffn %x, %w, %idx, %wu, %wd gate_proj(%wg)
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x16x24xf32>, tensor<8x24x16xf32>, tensor<4x16x24xf32>)
      -> (tensor<32x16xf32>, tensor<8xi64>)
  return
}

// -----

func.func @moe_choices(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %idx: tensor<32x3xi32>,
                       %wu: tensor<8x16x24xf32>, %wd: tensor<8x24x16xf32>) {
  // expected-error @+1 {{'seq.moe_ffn' op dimension 1 (k) of indices is 3 but weights has 2}}
  %y, %load = seq.moe_ffn %x, %w, %idx, %wu, %wd
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x3xi32>, tensor<8x16x24xf32>, tensor<8x24x16xf32>)
      -> (tensor<32x16xf32>, tensor<8xi64>)
  return
}

// -----

func.func @moe_load_type(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %idx: tensor<32x2xi32>,
                         %wu: tensor<8x16x24xf32>, %wd: tensor<8x24x16xf32>) {
  // expected-error @+1 {{'seq.moe_ffn' op load must have element type i64, but has 'i32'}}
  %y, %load = seq.moe_ffn %x, %w, %idx, %wu, %wd
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<8x16x24xf32>, tensor<8x24x16xf32>)
      -> (tensor<32x16xf32>, tensor<8xi32>)
  return
}

//===----------------------------------------------------------------------===//
// associative_scan
//===----------------------------------------------------------------------===//

// -----

func.func @scan_no_inputs() {
  // expected-error @+1 {{'seq.associative_scan' op needs at least one input}}
  seq.associative_scan : () -> () {
  ^bb0:
    seq.yield
  }
  return
}

// -----

func.func @scan_result_count(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'seq.associative_scan' op has 1 inputs but 2 results}}
  %a, %b = seq.associative_scan %x : (tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  ^bb0(%p: f32, %n: f32):
    seq.yield %p : f32
  }
  return
}

// -----

func.func @scan_dim(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'seq.associative_scan' op dim = 2 is out of range for inputs of rank 2}}
  %a = seq.associative_scan %x {dim = 2 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf32>) {
  ^bb0(%p: f32, %n: f32):
    seq.yield %p : f32
  }
  return
}

// -----

func.func @scan_shapes(%x: tensor<4x64xf32>, %y: tensor<4x32xf32>) {
  // expected-error @+1 {{'seq.associative_scan' op dimension 1 (d1) of input #1 is 32 but input #0 has 64}}
  %a, %b = seq.associative_scan %x, %y : (tensor<4x64xf32>, tensor<4x32xf32>) -> (tensor<4x64xf32>, tensor<4x32xf32>) {
  ^bb0(%p0: f32, %p1: f32, %n0: f32, %n1: f32):
    seq.yield %p0, %n1 : f32, f32
  }
  return
}

// -----

func.func @scan_result_type(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'seq.associative_scan' op result #0 has element type 'f16' but input #0 has 'f32'}}
  %a = seq.associative_scan %x : (tensor<4x64xf32>) -> (tensor<4x64xf16>) {
  ^bb0(%p: f32, %n: f32):
    seq.yield %p : f32
  }
  return
}

// -----

func.func @scan_element_type(%x: tensor<4x64xindex>) {
  // expected-error @+1 {{'seq.associative_scan' op input #0 must have an integer or float element type, but has 'index'}}
  %a = seq.associative_scan %x : (tensor<4x64xindex>) -> (tensor<4x64xindex>) {
  ^bb0(%p: index, %n: index):
    seq.yield %p : index
  }
  return
}

// -----

func.func @scan_block_arity(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'seq.associative_scan' op combiner must take 2 scalars (the prefix, then the next element), but takes 1}}
  %a = seq.associative_scan %x : (tensor<4x64xf32>) -> (tensor<4x64xf32>) {
  ^bb0(%p: f32):
    seq.yield %p : f32
  }
  return
}

// -----

func.func @scan_block_type(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'seq.associative_scan' op combiner argument #1 has type 'f64' but input #0 has element type 'f32'}}
  %a = seq.associative_scan %x : (tensor<4x64xf32>) -> (tensor<4x64xf32>) {
  ^bb0(%p: f32, %n: f64):
    seq.yield %p : f32
  }
  return
}

// -----

func.func @scan_yield_count(%x: tensor<4x64xf32>) {
  %a = seq.associative_scan %x : (tensor<4x64xf32>) -> (tensor<4x64xf32>) {
  ^bb0(%p: f32, %n: f32):
    // expected-error @+1 {{'seq.yield' op yields 2 values but the scan has 1 inputs}}
    seq.yield %p, %n : f32, f32
  }
  return
}

// -----

func.func @scan_yield_type(%x: tensor<4x64xf32>) {
  %a = seq.associative_scan %x : (tensor<4x64xf32>) -> (tensor<4x64xf32>) {
  ^bb0(%p: f32, %n: f32):
    %c = arith.constant 1 : i32
    // expected-error @+1 {{'seq.yield' op value #0 has type 'i32' but input #0 has element type 'f32'}}
    seq.yield %c : i32
  }
  return
}

// -----

func.func @yield_outside_scan(%x: f32) {
  // expected-error @+1 {{'seq.yield' op expects parent op 'seq.associative_scan'}}
  seq.yield %x : f32
}

//===----------------------------------------------------------------------===//
// Misspellings: attributes, op names, missing operands, invalid values
//===----------------------------------------------------------------------===//

// -----

func.func @misspelled_attribute(%q: tensor<1x8x2x4xf32>) {
  // expected-error @+1 {{'seq.attention' op has no attribute 'casual' (did you mean 'causal'?)}}
  %o = seq.attention %q, %q, %q {casual = false}
    : (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>) -> (tensor<1x8x2x4xf32>)
  return
}

// -----

func.func @misspelled_attribute_on_ssd(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>, %A: tensor<2xf32>,
                                       %B: tensor<1x8x1x3xf32>) {
  // expected-error @+1 {{'seq.ssd' op has no attribute 'dt_softpuls' (did you mean 'dt_softplus'?)}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %B {dt_softpuls = true}
    : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>, tensor<1x8x1x3xf32>, tensor<1x8x1x3xf32>)
      -> (tensor<1x8x2x4xf32>, tensor<1x2x4x3xf32>)
  return
}

// -----

func.func @unknown_attribute(%a: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op has no attribute 'frobnicate' (its attributes: checkpoint_every, reverse)}}
  %h, %l = seq.linear_scan %a, %a {frobnicate = 1 : i64}
    : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @misspelled_op(%a: tensor<2x16x8xf32>) {
  // expected-error @+1 {{custom op 'seq.linear_scn' is not an op of the seq dialect (did you mean 'seq.linear_scan'?)}}
  %h, %l = seq.linear_scn %a, %a : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @missing_operand(%a: tensor<2x16x8xf32>) {
  // expected-error @+1 {{custom op 'seq.linear_scan' takes 2 operands (a, b) before its optional groups, but its 2nd operand, 'b', is missing}}
  %h, %l = seq.linear_scan %a : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @missing_operand_before_group(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>, %A: tensor<2xf32>,
                                        %B: tensor<1x8x1x3xf32>) {
  // expected-error @+1 {{custom op 'seq.ssd' takes 5 operands (x, dt, A, B, C) before its optional groups, but its 5th operand, 'C', is missing}}
  %y, %l = seq.ssd %x, %dt, %A, %B skip(%A)
    : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>, tensor<1x8x1x3xf32>, tensor<2xf32>)
      -> (tensor<1x8x2x4xf32>, tensor<1x2x4x3xf32>)
  return
}

// -----

func.func @invalid_attribute_value(%a: tensor<2x16x8xf32>) {
  // The op is named once (the parser and ODS used to say it twice).
  // expected-error @+1 {{'seq.linear_scan' op attribute 'reverse' failed to satisfy constraint: bool attribute}}
  %h, %l = seq.linear_scan %a, %a {reverse = 3 : i64}
    : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

//===----------------------------------------------------------------------===//
// seq.plan (seq-select-strategy)
//===----------------------------------------------------------------------===//

// -----

func.func @plan_chunk_zero(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>,
                           %A: tensor<2xf32>, %B: tensor<1x8x1x4xf32>) {
  // expected-error @+1 {{a chunked plan needs a chunk size above 0, got 0}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %B {seq.plan = #seq.plan<chunked, 0>}
    : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>,
       tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
      -> (tensor<1x8x2x4xf32>, tensor<1x2x4x4xf32>)
  return
}

// -----

func.func @plan_global_ssd(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>,
                           %A: tensor<2xf32>, %B: tensor<1x8x1x4xf32>) {
  // expected-error @+1 {{seq.ssd has no global plan}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %B {seq.plan = #seq.plan<global>}
    : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>,
       tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
      -> (tensor<1x8x2x4xf32>, tensor<1x2x4x4xf32>)
  return
}

// -----

func.func @plan_causal_global(%q: tensor<1x8x2x4xf32>) {
  // expected-error @+1 {{non-causal linear attention has the global plan only, causal linear attention never (got #seq.plan<global>)}}
  %o, %s = seq.linear_attention %q, %q, %q {seq.plan = #seq.plan<global>}
    : (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>)
      -> (tensor<1x8x2x4xf32>, tensor<1x2x4x4xf32>)
  return
}

// -----

func.func @plan_not_a_plan(%a: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'seq.plan' is for seq.ssd, seq.linear_attention and seq.delta_rule, not seq.linear_scan}}
  %h, %l = seq.linear_scan %a, %a {seq.plan = #seq.plan<recurrent>}
    : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @plan_wrong_type(%a: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'seq.plan' must be a #seq.plan, got 3 : i64}}
  %h, %l = seq.linear_scan %a, %a {seq.plan = 3 : i64}
    : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x4xf32>)
  return
}

//===----------------------------------------------------------------------===//
// delta_rule, generalized_delta_rule
//===----------------------------------------------------------------------===//

// -----

func.func @delta_value_heads(%q: tensor<1x8x4x16xf32>, %v: tensor<1x8x6x8xf32>, %beta: tensor<1x8x6xf32>) {
  // expected-error @+1 {{'seq.delta_rule' op HV = 6 is not a multiple of H = 4 (HV from dimension 2 of v, H from dimension 2 of q)}}
  %o, %l = seq.delta_rule %q, %q, %v, %beta
    : (tensor<1x8x4x16xf32>, tensor<1x8x4x16xf32>, tensor<1x8x6x8xf32>, tensor<1x8x6xf32>)
      -> (tensor<1x8x6x8xf32>, tensor<1x6x16x8xf32>)
  return
}

// -----

func.func @delta_beta_heads(%q: tensor<1x8x2x16xf32>, %v: tensor<1x8x4x8xf32>, %beta: tensor<1x8x2xf32>) {
  // expected-error @+1 {{'seq.delta_rule' op dimension 2 (HV) of beta is 2 but v has 4}}
  %o, %l = seq.delta_rule %q, %q, %v, %beta
    : (tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x4x8xf32>, tensor<1x8x2xf32>)
      -> (tensor<1x8x4x8xf32>, tensor<1x4x16x8xf32>)
  return
}

// -----

func.func @delta_decay_rank(%q: tensor<1x8x2x16xf32>, %v: tensor<1x8x4x8xf32>, %beta: tensor<1x8x4xf32>, %g: tensor<1x8xf32>) {
  // expected-error @+1 {{'seq.delta_rule' op decay must have rank 1 (HV), 3 (B x T x HV) or 4 (B x T x HV x K), but has rank 2}}
  %o, %l = seq.delta_rule %q, %q, %v, %beta decay(%g)
    : (tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x4x8xf32>, tensor<1x8x4xf32>, tensor<1x8xf32>)
      -> (tensor<1x8x4x8xf32>, tensor<1x4x16x8xf32>)
  return
}

// -----

func.func @delta_decay_keys(%q: tensor<1x8x2x16xf32>, %v: tensor<1x8x4x8xf32>, %beta: tensor<1x8x4xf32>, %g: tensor<1x8x4x8xf32>) {
  // expected-error @+1 {{'seq.delta_rule' op dimension 3 (K) of decay is 8 but q has 16}}
  %o, %l = seq.delta_rule %q, %q, %v, %beta decay(%g)
    : (tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x4x8xf32>, tensor<1x8x4xf32>, tensor<1x8x4x8xf32>)
      -> (tensor<1x8x4x8xf32>, tensor<1x4x16x8xf32>)
  return
}

// -----

func.func @delta_state_type(%q: tensor<1x8x2x16xbf16>, %v: tensor<1x8x4x8xbf16>, %beta: tensor<1x8x4xbf16>) {
  // expected-error @+1 {{'seq.delta_rule' op last must have element type f32}}
  %o, %l = seq.delta_rule %q, %q, %v, %beta
    : (tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x4x8xbf16>, tensor<1x8x4xbf16>)
      -> (tensor<1x8x4x8xbf16>, tensor<1x4x16x8xbf16>)
  return
}

// -----

func.func @delta_misspelled(%q: tensor<1x8x2x16xf32>, %v: tensor<1x8x4x8xf32>, %beta: tensor<1x8x4xf32>) {
  // expected-error @+1 {{'seq.delta_rule' op has no attribute 'qk_l2_norm' (did you mean 'qk_l2norm'?)}}
  %o, %l = seq.delta_rule %q, %q, %v, %beta {qk_l2_norm = true}
    : (tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x4x8xf32>, tensor<1x8x4xf32>)
      -> (tensor<1x8x4x8xf32>, tensor<1x4x16x8xf32>)
  return
}

// -----

func.func @gdr_decay_shape(%q: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x8xf32>, %g: tensor<1x8x2xf32>) {
  // expected-error @+1 {{'seq.generalized_delta_rule' op decay must have rank 4 (B x T x H x K) but has rank 3}}
  %o, %l = seq.generalized_delta_rule %q, %q, %v, %q, %q decay(%g)
    : (tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x8xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2xf32>)
      -> (tensor<1x8x2x8xf32>, tensor<1x2x16x8xf32>)
  return
}

// -----

func.func @gdr_low_rank_keys(%q: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x8xf32>, %a: tensor<1x8x2x8xf32>) {
  // expected-error @+1 {{'seq.generalized_delta_rule' op dimension 3 (K) of a is 8 but q has 16}}
  %o, %l = seq.generalized_delta_rule %q, %q, %v, %a, %q
    : (tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x8xf32>, tensor<1x8x2x8xf32>, tensor<1x8x2x16xf32>)
      -> (tensor<1x8x2x8xf32>, tensor<1x2x16x8xf32>)
  return
}

// -----

// Packed batches (SPEC section 1): one batch row, S + 1 offsets for S
// sequences of init, and checkpoints that match checkpoint_every.
func.func @segments_batch(%x: tensor<2x8x4xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{'seq.linear_scan' op segments requires B = 1 (the sequences are packed along T), but B = 2}}
  %h, %l = seq.linear_scan %x, %x segments(%cu)
    : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<3xi32>) -> (tensor<2x8x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @segments_init_rows(%x: tensor<1x8x4xf32>, %s0: tensor<3x4xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{'seq.linear_scan' op dimension 0 (S+1) of segments is 3 but init has S = 3}}
  %h, %l = seq.linear_scan %x, %x init(%s0) segments(%cu)
    : (tensor<1x8x4xf32>, tensor<1x8x4xf32>, tensor<3x4xf32>, tensor<3xi32>) -> (tensor<1x8x4xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @segments_type(%x: tensor<1x8x4xf32>, %cu: tensor<3xi64>) {
  // expected-error @+1 {{'seq.linear_scan' op segments must have element type i32, but has 'i64'}}
  %h, %l = seq.linear_scan %x, %x segments(%cu)
    : (tensor<1x8x4xf32>, tensor<1x8x4xf32>, tensor<3xi64>) -> (tensor<1x8x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @checkpoints_missing(%x: tensor<1x8x4xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op checkpoint_every = 4 needs a checkpoints result after last}}
  %h, %l = seq.linear_scan %x, %x {checkpoint_every = 4 : i64}
    : (tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> (tensor<1x8x4xf32>, tensor<1x4xf32>)
  return
}

// -----

func.func @checkpoints_count(%x: tensor<2x10x4xf32>) {
  // expected-error @+1 {{'seq.linear_scan' op checkpoints must have shape 2x3x4 (last's shape with ceil(T / checkpoint_every) = ceil(10 / 4) checkpoints after its first dimension), but has shape 2x2x4}}
  %h, %l, %c = seq.linear_scan %x, %x {checkpoint_every = 4 : i64}
    : (tensor<2x10x4xf32>, tensor<2x10x4xf32>) -> (tensor<2x10x4xf32>, tensor<2x4xf32>, tensor<2x2x4xf32>)
  return
}

// -----

func.func @checkpoints_negative(%x: tensor<1x8x4xf32>) {
  // expected-error @+1 {{'seq.causal_conv1d' op checkpoint_every must be >= 0 (0: no checkpoints), but is -2}}
  %y, %l = seq.causal_conv1d %x, %x {checkpoint_every = -2 : i64}
    : (tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> (tensor<1x8x4xf32>, tensor<1x4x7xf32>)
  return
}

// -----

func.func @checkpoints_normalize(%q: tensor<1x8x2x4xf32>) {
  // expected-error @+1 {{'seq.linear_attention' op checkpoint_every needs causal = true without normalize (only the state S is carried)}}
  %o, %l, %c = seq.linear_attention %q, %q, %q {normalize = true, checkpoint_every = 4 : i64}
    : (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>)
      -> (tensor<1x8x2x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x2x4x4xf32>)
  return
}

// -----

func.func @kv_segments_alone(%q: tensor<1x8x2x4xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{'seq.attention' op kv_segments needs segments (the queries' offsets)}}
  %o = seq.attention %q, %q, %q kv_segments(%cu)
    : (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<3xi32>) -> tensor<1x8x2x4xf32>
  return
}

// -----

func.func @kv_segments_count(%q: tensor<1x8x2x4xf32>, %cu: tensor<3xi32>, %cuk: tensor<4xi32>) {
  // expected-error @+1 {{'seq.attention' op dimension 0 (Nseq+1) of kv_segments is 4 but segments has Nseq = 2, so it must be 3}}
  %o = seq.attention %q, %q, %q segments(%cu) kv_segments(%cuk)
    : (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<3xi32>, tensor<4xi32>) -> tensor<1x8x2x4xf32>
  return
}

// -----

func.func @assoc_segments_dim(%x: tensor<1x8xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{'seq.associative_scan' op segments requires dim = 1 of inputs of rank >= 2 (1 x T x ...), but dim = 0 and rank = 2}}
  %r = seq.associative_scan %x segments(%cu) {dim = 0 : i64} : (tensor<1x8xf32>, tensor<3xi32>) -> tensor<1x8xf32> {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    seq.yield %s : f32
  }
  return
}

// -----

func.func @ssd_dt_range(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>, %A: tensor<2xf32>, %B: tensor<1x8x1x4xf32>) {
  // expected-error @+1 {{'seq.ssd' op dt_min = 5.000000e-01 and dt_max = 1.000000e-01 are not a range (dt_min <= dt_max)}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %B {dt_min = 0.5 : f32, dt_max = 0.1 : f32}
    : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
      -> (tensor<1x8x2x4xf32>, tensor<1x2x4x4xf32>)
  return
}

// -----

func.func @ssd_skip_channels(%x: tensor<1x8x2x4xf32>, %dt: tensor<1x8x2xf32>, %A: tensor<2xf32>, %B: tensor<1x8x1x4xf32>, %D: tensor<2x5xf32>) {
  // expected-error @+1 {{'seq.ssd' op dimension 1 (P) of skip is 5 but x has 4}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %B skip(%D)
    : (tensor<1x8x2x4xf32>, tensor<1x8x2xf32>, tensor<2xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<2x5xf32>)
      -> (tensor<1x8x2x4xf32>, tensor<1x2x4x4xf32>)
  return
}

// -----

func.func @segments_keys(%q: tensor<1x8x2x4xf32>, %k: tensor<1x6x2x4xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{'seq.attention' op segments without kv_segments packs the keys like the queries, but the keys have 6 steps and the queries 8}}
  %o = seq.attention %q, %k, %k segments(%cu)
    : (tensor<1x8x2x4xf32>, tensor<1x6x2x4xf32>, tensor<1x6x2x4xf32>, tensor<3xi32>) -> tensor<1x8x2x4xf32>
  return
}
