// Rank-local steps take every argument with steps as it is: after the
// experts' split (which slices whole tokens) they are an error, as the
// engine, the C API, Python and seqc-run refuse the pairing before.
// RUN: not seqc-opt %s --seq-distribute-experts=ranks=2 --seq-distribute-steps="ranks=2 local=1" 2>&1 | FileCheck %s
// The other way round (the pipelines' order under local steps with
// parallel=sequence+experts), the experts split each rank's own tokens:
// the counts' all-gather carries each rank's choices per expert, its bad
// indices and its tokens (E + 2 = 6 columns), the rows go to their
// experts' ranks and back, and y is the rank's own: nothing is gathered.
// RUN: seqc-opt %s --seq-distribute-steps="ranks=2 local=1 leave-experts=1" --seq-distribute-experts="ranks=2 local=1" | FileCheck %s --check-prefix=LOCAL

// CHECK: error: rank-local steps go with sequence parallelism only: another split of this module ran before

// LOCAL-LABEL: func.func @experts
// LOCAL-SAME: (%{{.*}}: tensor<?x4xf32> {seq.step_group = 0 : i64, seq.steps = 0 : i64}
// LOCAL: shard.all_gather {{.*}} : tensor<1x6xi64> -> tensor<2x6xi64>
// LOCAL: seq_rt.check {{.*}}expert indices of the ranks' tokens are outside
// LOCAL: shard.send
// LOCAL: shard.recv
// LOCAL: seq.moe_ffn
// LOCAL-NOT: shard.all_gather
// LOCAL: return
func.func @experts(%x: tensor<?x4xf32>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>, %up: tensor<4x4x8xf32>, %down: tensor<4x8x4xf32>) -> tensor<?x4xf32> {
  %y, %load = seq.moe_ffn %x, %w, %i, %up, %down : (tensor<?x4xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x4x8xf32>, tensor<4x8x4xf32>) -> (tensor<?x4xf32>, tensor<4xi64>)
  return %y : tensor<?x4xf32>
}

// The experts' local split takes only the tokens the steps' pass found.
// RUN: not seqc-opt %s --seq-distribute-experts="ranks=2 local=1" 2>&1 | FileCheck %s --check-prefix=ALONE
// ALONE: error: seq-distribute-experts local=1 splits the moe_ffn whose tokens seq-distribute-steps local=1 leave-experts=1 found to be each rank's own; run it first
// RUN: not seqc-opt %s --seq-distribute-steps="ranks=2 local=1 leave-experts=1" --seq-distribute-experts=ranks=2 2>&1 | FileCheck %s --check-prefix=WHOLE
// WHOLE: error: this moe_ffn's tokens are each rank's own (seq-distribute-steps local=1 leave-experts=1): seq-distribute-experts needs local=1

// Left to the experts' pass, no lowering takes the moe_ffn as it is: its
// load and capacity would count the rank's own tokens only.
// RUN: not seqc-opt %s --seq-distribute-steps="ranks=2 local=1 leave-experts=1" --seq-lower-to-cpu 2>&1 | FileCheck %s --check-prefix=UNSPLIT -DPASS=seq-lower-to-cpu
// RUN: not seqc-opt %s --seq-distribute-steps="ranks=2 local=1 leave-experts=1" --seq-lower-to-gpu 2>&1 | FileCheck %s --check-prefix=UNSPLIT -DPASS=seq-lower-to-gpu
// RUN: not seqc-opt %s --seq-distribute-steps="ranks=2 local=1 leave-experts=1" --seq-lower-to-reference 2>&1 | FileCheck %s --check-prefix=UNSPLIT -DPASS=seq-lower-to-reference
// UNSPLIT: error: this moe_ffn's tokens are each rank's own (seq-distribute-steps local=1 leave-experts=1) and it reaches [[PASS]] unsplit: run seq-distribute-experts local=1 first
