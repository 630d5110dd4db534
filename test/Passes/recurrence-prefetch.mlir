// The CPU's recurrences read one row of q, k, v (and the decay per key)
// per step and write one row of o; a head's consecutive rows lie H rows
// apart (a page or more at real sizes), where the hardware prefetchers
// stop. Each step prefetches the rows of the step 32 ahead (clamped to the
// last step): every line of the rows it reads, and the output's lines for
// writing. Rows of 32 f32 are two lines, of 16 one.
// RUN: seqc-opt %s --seq-lower-to-cpu=vector-width=8 --split-input-file | FileCheck %s

// Linear attention, scalar decay: the deferred-decay recurrence, two steps
// per pass, prefetches for both.
// CHECK-LABEL: func.func private @__seqc_linear_attention_recurrent(
// CHECK-SAME: %[[Q:arg[0-9]+]]: memref<1x64x2x32xf32, {{[^%]*}}>, %[[K:arg[0-9]+]]: memref<1x64x2x32xf32, {{[^%]*}}>, %[[V:arg[0-9]+]]: memref<1x64x2x16xf32, {{[^%]*}}>, %[[O:arg[0-9]+]]: memref<1x64x2x16xf32
// CHECK: arith.constant 32 : index
// CHECK: arith.minsi
// CHECK-COUNT-2: memref.prefetch %[[K]][%{{.*}}], read, locality<3>, data
// CHECK: memref.prefetch %[[V]][%{{.*}}], read, locality<3>, data
// CHECK-COUNT-2: memref.prefetch %[[Q]][%{{.*}}], read, locality<3>, data
// CHECK: memref.prefetch %[[O]][%{{.*}}], write, locality<3>, data
// CHECK: arith.minsi
// CHECK-COUNT-2: memref.prefetch %[[K]][
// CHECK: memref.prefetch %[[V]][
// CHECK-COUNT-2: memref.prefetch %[[Q]][
// CHECK: memref.prefetch %[[O]][{{.*}}], write
func.func @la(%q: tensor<1x64x2x32xf32>, %k: tensor<1x64x2x32xf32>, %v: tensor<1x64x2x16xf32>,
              %g: tensor<1x64x2xf32>) -> (tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>) {
  %o, %l = seq.linear_attention %q, %k, %v decay(%g) {seq.plan = #seq.plan<recurrent>}
    : (tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2xf32>)
      -> (tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>)
  return %o, %l : tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>
}

// -----

// A decay per key (GLA): the general recurrence prefetches the decay's
// row too.
// CHECK-LABEL: func.func private @__seqc_linear_attention_recurrent(
// CHECK-SAME: %[[Q:arg[0-9]+]]: memref<1x64x2x32xf32, {{[^%]*}}>, %[[K:arg[0-9]+]]: memref<1x64x2x32xf32, {{[^%]*}}>, %[[V:arg[0-9]+]]: memref<1x64x2x16xf32, {{[^%]*}}>, %[[O:arg[0-9]+]]: memref<1x64x2x16xf32, {{[^%]*}}>, %{{arg[0-9]+}}: memref<1x2x32x16xf32, {{[^%]*}}>, %[[G:arg[0-9]+]]: memref<1x64x2x32xf32
// CHECK: scf.for
// CHECK: arith.minsi
// CHECK-COUNT-2: memref.prefetch %[[K]][
// CHECK: memref.prefetch %[[V]][
// CHECK-COUNT-2: memref.prefetch %[[G]][
// CHECK-COUNT-2: memref.prefetch %[[Q]][
// CHECK: memref.prefetch %[[O]][{{.*}}], write
func.func @gla(%q: tensor<1x64x2x32xf32>, %k: tensor<1x64x2x32xf32>, %v: tensor<1x64x2x16xf32>,
               %g: tensor<1x64x2x32xf32>) -> (tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>) {
  %o, %l = seq.linear_attention %q, %k, %v decay(%g) {seq.plan = #seq.plan<recurrent>}
    : (tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2x32xf32>)
      -> (tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>)
  return %o, %l : tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>
}

// -----

// The delta rule's recurrence (a task per value head).
// CHECK-LABEL: func.func private @__seqc_delta_rule_recurrent(
// CHECK-SAME: %[[Q:arg[0-9]+]]: memref<1x64x2x32xf32, {{[^%]*}}>, %[[K:arg[0-9]+]]: memref<1x64x2x32xf32, {{[^%]*}}>, %[[V:arg[0-9]+]]: memref<1x64x2x16xf32, {{[^%]*}}>, %[[O:arg[0-9]+]]: memref<1x64x2x16xf32
// CHECK: scf.for
// CHECK: arith.minsi
// CHECK-COUNT-2: memref.prefetch %[[K]][
// CHECK: memref.prefetch %[[V]][
// CHECK-COUNT-2: memref.prefetch %[[Q]][
// CHECK: memref.prefetch %[[O]][{{.*}}], write
func.func @delta(%q: tensor<1x64x2x32xf32>, %k: tensor<1x64x2x32xf32>, %v: tensor<1x64x2x16xf32>,
                 %beta: tensor<1x64x2xf32>) -> (tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>) {
  %o, %l = seq.delta_rule %q, %k, %v, %beta {seq.plan = #seq.plan<recurrent>}
    : (tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2xf32>)
      -> (tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>)
  return %o, %l : tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>
}
