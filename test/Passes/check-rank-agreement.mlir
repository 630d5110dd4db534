// seq-check-rank-agreement: after the distribution passes, each public
// function with dynamic sizes the ranks must share starts with one
// all-gather of those sizes (i64, a row per rank) and checks every column
// against rank 0's, naming the dimension, the argument, the first rank that
// differs and both sizes. Under rank-local steps a step dimension is the
// rank's own and is not compared with other ranks', but the arguments whose
// steps the graph relates (seq.step_group) must count as many on each rank:
// their sizes join the row, and every rank checks every rank's.
// RUN: seqc-opt %s --seq-distribute-steps="ranks=2 local=1" --seq-check-rank-agreement | FileCheck %s
// Whole arguments: the steps are compared too.
// RUN: seqc-opt %s --seq-distribute-steps=ranks=2 --seq-check-rank-agreement | FileCheck %s --check-prefix=WHOLE
// Nothing exchanged (no grid), nothing checked.
// RUN: seqc-opt %s --seq-check-rank-agreement | FileCheck %s --check-prefix=ALONE

// CHECK-LABEL: func.func @scan
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x?xf32> {seq.name = "x", seq.step_group = 0 : i64, seq.steps = 1 : i64}, %[[A:.*]]: tensor<1x?x?xf32> {seq.step_group = 0 : i64, seq.steps = 1 : i64}, %[[W:.*]]: tensor<?xf32> {seq.name = "w"})
// CHECK: %[[CX:.*]] = tensor.dim %[[X]], %c2
// CHECK: arith.index_cast %[[CX]] : index to i64
// CHECK: %[[CA:.*]] = tensor.dim %[[A]], %c2
// CHECK: %[[CW:.*]] = tensor.dim %[[W]], %c0
// CHECK: %[[TX:.*]] = tensor.dim %[[X]], %c1
// CHECK: %[[TA:.*]] = tensor.dim %[[A]], %c1
// CHECK: tensor.from_elements {{.*}} : tensor<5xi64>
// CHECK: shard.all_gather %{{.*}} on @seq_ranks grid_axes = [0] gather_axis = 0 : tensor<1x5xi64> -> tensor<2x5xi64>
// CHECK: scf.for
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on dimension 2 of argument 0 (x): {1} on rank {0}, {2} on rank 0 (every rank passes the same shapes, but for its own number of steps)"
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on dimension 2 of argument 1: {1} on rank {0}, {2} on rank 0 (every rank passes the same shapes, but for its own number of steps)"
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on dimension 0 of argument 2 (w): {1} on rank {0}, {2} on rank 0 (every rank passes the same shapes)"
// CHECK: seq_rt.check %{{.*}}, "rank {0}'s arguments count different numbers of steps: {1} in dimension 1 of argument 1, {2} in dimension 1 of argument 0 (x) (the graph relates them: each rank passes as many of its own steps in both)"
// CHECK: seq.linear_scan

// Only the steps are dynamic: each rank's own, compared among its arguments
// only.
// CHECK-LABEL: func.func @steps_only
// CHECK: shard.all_gather {{.*}} : tensor<1x2xi64> -> tensor<2x2xi64>
// CHECK-NOT: the ranks disagree
// CHECK: "rank {0}'s arguments count different numbers of steps: {1} in dimension 1 of argument 1, {2} in dimension 1 of argument 0 (the graph
// CHECK: seq.linear_scan

// Queries and keys may count different steps (another sequence): only the
// keys and values are compared, and their steps alone are dynamic.
// CHECK-LABEL: func.func @cross_attention
// CHECK: shard.all_gather {{.*}} : tensor<1x2xi64> -> tensor<2x2xi64>
// CHECK-NOT: the ranks disagree
// CHECK: "rank {0}'s arguments count different numbers of steps: {1} in dimension 1 of argument 2 (v), {2} in dimension 1 of argument 1 (k) (the graph
// CHECK-NOT: different numbers of steps
// CHECK: seq.attention

// Steps alone in their group: nothing to compare, no exchange.
// CHECK-LABEL: func.func @one_stepped
// CHECK-NOT: : tensor<1x{{[0-9]+}}xi64> -> tensor<2x
// CHECK: seq.linear_scan

// WHOLE-LABEL: func.func @scan
// WHOLE: shard.all_gather {{.*}} : tensor<1x5xi64> -> tensor<2x5xi64>
// WHOLE: "the ranks disagree on dimension 1 of argument 0 (x): {1} on rank {0}, {2} on rank 0 (every rank passes the same shapes)"
// WHOLE-LABEL: func.func @steps_only
// WHOLE: shard.all_gather {{.*}} : tensor<1x2xi64> -> tensor<2x2xi64>
// WHOLE-NOT: different numbers of steps

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

func.func @cross_attention(%q: tensor<1x?x2x8xf32> {seq.name = "q"}, %k: tensor<1x?x1x8xf32> {seq.name = "k"}, %v: tensor<1x?x1x8xf32> {seq.name = "v"}) -> tensor<1x?x2x8xf32> {
  %o = seq.attention %q, %k, %v {causal = false} : (tensor<1x?x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x?x2x8xf32>
  return %o : tensor<1x?x2x8xf32>
}

func.func @one_stepped(%x: tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>) {
  %y, %last = seq.linear_scan %x, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  return %y, %last : tensor<1x?x4xf32>, tensor<1x4xf32>
}
