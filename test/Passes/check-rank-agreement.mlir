// seq-check-rank-agreement: after the distribution passes, each public
// function starts with one all-gather of a row of i64 digests per rank (the
// module's, then each argument's shape) and checks every column against
// rank 0's. Under rank-local steps a step dimension enters as the first
// argument with as many steps (which arguments' steps agree), not its size.
// RUN: seqc-opt %s --seq-distribute-steps="ranks=2 local=1" --seq-check-rank-agreement | FileCheck %s
// Whole arguments: every dimension's size enters.
// RUN: seqc-opt %s --seq-distribute-steps=ranks=2 --seq-check-rank-agreement | FileCheck %s --check-prefix=WHOLE
// Nothing exchanged (no grid), nothing checked.
// RUN: seqc-opt %s --seq-check-rank-agreement | FileCheck %s --check-prefix=ALONE

// CHECK-LABEL: func.func @scan
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x4xf32> {seq.name = "x", seq.steps = 1 : i64}, %[[A:.*]]: tensor<1x?x4xf32> {seq.steps = 1 : i64}, %[[W:.*]]: tensor<4xf32> {seq.name = "w"})
// The second argument's steps enter as "as many as argument 0's" (0) or
// its own position (1).
// CHECK: %[[TX:.*]] = tensor.dim %[[X]], %c1
// CHECK: %[[TA:.*]] = tensor.dim %[[A]], %c1
// CHECK: %[[EQ:.*]] = arith.cmpi eq, %[[TX]], %[[TA]] : index
// CHECK: arith.select %[[EQ]], %c0_i64{{.*}}, %c1_i64 : i64
// CHECK: %[[ROW:.*]] = tensor.from_elements {{.*}} : tensor<4xi64>
// CHECK: %[[ROWS:.*]] = shard.all_gather %{{.*}} on @seq_ranks grid_axes = [0] gather_axis = 0 : tensor<1x4xi64> -> tensor<2x4xi64>
// CHECK: seq_rt.check %{{.*}}, "the ranks run different modules: rank {0}'s differs from rank 0's (every rank must compile the same source with the same options)"
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on the shape of argument 0 (x): rank {0}'s (but for its own number of steps) differs from rank 0's"
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on the shape of argument 1: rank {0}'s (but for its own number of steps) differs from rank 0's"
// CHECK: seq_rt.check %{{.*}}, "the ranks disagree on the shape of argument 2 (w): rank {0}'s differs from rank 0's"
// CHECK: seq.linear_scan

// WHOLE-LABEL: func.func @scan
// WHOLE-NOT: arith.cmpi eq, {{.*}} : index
// WHOLE: shard.all_gather {{.*}} : tensor<1x4xi64> -> tensor<2x4xi64>
// WHOLE: "the ranks disagree on the shape of argument 0 (x): rank {0}'s differs from rank 0's"

// ALONE-NOT: shard.all_gather
// ALONE-NOT: seq_rt.check
func.func @scan(%x: tensor<1x?x4xf32> {seq.name = "x"}, %a: tensor<1x?x4xf32>, %w: tensor<4xf32> {seq.name = "w"}) -> (tensor<1x?x4xf32>, tensor<1x4xf32>) {
  %y, %last = seq.linear_scan %a, %x : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
  return %y, %last : tensor<1x?x4xf32>, tensor<1x4xf32>
}
