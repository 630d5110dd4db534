// A user's test of a pipeline step: the scan becomes seqc's CPU kernel,
// dispatched over the thread pool, with a run-time check of the dynamic T.
// RUN: seqc-opt %s --seq-lower-to-cpu | FileCheck %s

// CHECK-LABEL: func.func @decay
// CHECK: seq_rt.check {{.*}} "seq.linear_scan at {{.*}}decay.mlir:{{[0-9]+}}:{{[0-9]+}}: dimension 1 (T) of b is {0} but a has {1}"
// CHECK: seq_rt.parallel_for {{.*}} @__seqc_linear_scan(
// CHECK: func.func private @__seqc_linear_scan(
func.func @decay(%a: tensor<1x?x64xf32>, %b: tensor<1x?x64xf32>) -> (tensor<1x?x64xf32>, tensor<1x64xf32>) {
  %h, %last = seq.linear_scan %a, %b : (tensor<1x?x64xf32>, tensor<1x?x64xf32>) -> (tensor<1x?x64xf32>, tensor<1x64xf32>)
  return %h, %last : tensor<1x?x64xf32>, tensor<1x64xf32>
}
