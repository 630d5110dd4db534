// Rank-local steps take every argument with steps as it is: after the
// experts' split (which slices whole tokens) they are an error, as the
// engine, the C API, Python and seqc-run refuse the pairing before.
// RUN: not seqc-opt %s --seq-distribute-experts=ranks=2 --seq-distribute-steps="ranks=2 local=1" 2>&1 | FileCheck %s

// CHECK: error: rank-local steps go with sequence parallelism only: another split of this module ran before
func.func @experts(%x: tensor<?x4xf32>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>, %up: tensor<4x4x8xf32>, %down: tensor<4x8x4xf32>) -> tensor<?x4xf32> {
  %y, %load = seq.moe_ffn %x, %w, %i, %up, %down : (tensor<?x4xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x4x8xf32>, tensor<4x8x4xf32>) -> (tensor<?x4xf32>, tensor<4xi64>)
  return %y : tensor<?x4xf32>
}
