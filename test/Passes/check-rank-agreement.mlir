// seq-check-rank-agreement: after the distribution passes, each public
// function with dynamic sizes the ranks must share starts with one
// all-gather of those sizes (i64, a row per rank) and checks every column
// against rank 0's, naming the dimension, the argument, the first rank that
// differs and both sizes. Under rank-local steps a step dimension is the
// rank's own and is not compared.
// RUN: seqc-opt %s --seq-distribute-steps="ranks=2 local=1" --seq-check-rank-agreement | FileCheck %s
// Whole arguments: the steps are compared too.
// RUN: seqc-opt %s --seq-distribute-steps=ranks=2 --seq-check-rank-agreement | FileCheck %s --check-prefix=WHOLE
// Nothing exchanged (no grid), nothing checked.
// RUN: seqc-opt %s --seq-check-rank-agreement | FileCheck %s --check-prefix=ALONE

// CHECK-LABEL: func.func @scan
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x?xf32> {seq.name = "x", seq.steps = 1 : i64}, %[[A:.*]]: tensor<1x?x?xf32> {seq.steps = 1 : i64}, %[[W:.*]]: tensor<?xf32> {seq.name = "w"})
// CHECK: %[[CX:.*]] = tensor.dim %[[X]], %c2
// CHECK: arith.index_cast %[[CX]] : index to i64
// CHECK: %[[CA:.*]] = tensor.dim %[[A]], %c2
// CHECK: %[[CW:.*]] = tensor.dim %[[W]], %c0
// CHECK: tensor.from_elements {{.*}} : tensor<3xi64>
// CHECK: shard.all_gather %{{.*}} on @seq_ranks grid_axes = [0] gather_axis = 0 : tensor<1x3xi64> -> tensor<2x3xi64>
// CHECK: scf.for
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on dimension 2 of argument 0 (x): {1} on rank {0}, {2} on rank 0 (every rank passes the same shapes, but for its own number of steps)"
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on dimension 2 of argument 1: {1} on rank {0}, {2} on rank 0 (every rank passes the same shapes, but for its own number of steps)"
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on dimension 0 of argument 2 (w): {1} on rank {0}, {2} on rank 0 (every rank passes the same shapes)"
// CHECK: seq.linear_scan

// Only the steps are dynamic: each rank's own, nothing to compare.
// CHECK-LABEL: func.func @steps_only
// CHECK-NOT: shard.all_gather {{.*}} : tensor<1x
// CHECK-NOT: the ranks disagree
// CHECK: seq.linear_scan

// WHOLE-LABEL: func.func @scan
// WHOLE: shard.all_gather {{.*}} : tensor<1x5xi64> -> tensor<2x5xi64>
// WHOLE: "the ranks disagree on dimension 1 of argument 0 (x): {1} on rank {0}, {2} on rank 0 (every rank passes the same shapes)"
// WHOLE-LABEL: func.func @steps_only
// WHOLE: shard.all_gather {{.*}} : tensor<1x2xi64> -> tensor<2x2xi64>

// ALONE-NOT: shard.all_gather
// ALONE-NOT: the ranks disagree
func.func @scan(%x: tensor<1x?x?xf32> {seq.name = "x"}, %a: tensor<1x?x?xf32>, %w: tensor<?xf32> {seq.name = "w"}) -> (tensor<1x?x?xf32>, tensor<1x?xf32>) {
  %y, %last = seq.linear_scan %a, %x : (tensor<1x?x?xf32>, tensor<1x?x?xf32>) -> (tensor<1x?x?xf32>, tensor<1x?xf32>)
  return %y, %last : tensor<1x?x?xf32>, tensor<1x?xf32>
}

func.func @steps_only(%x: tensor<1x?x4xf32>, %a: tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>) {
  %y, %last = seq.linear_scan %a, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  return %y, %last : tensor<1x?x4xf32>, tensor<1x4xf32>
}
