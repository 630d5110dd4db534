// seq-profile-calls: each call a public function makes is bracketed by the
// runtime's profile entry and exit, and the function lists the regions'
// names (seq.name, else the callee) in id order.
// RUN: seqc-opt %s --seq-profile-calls | FileCheck %s
// With all-functions, the calls of private functions are regions too.
// RUN: seqc-opt %s --seq-outline-ops --seq-profile-calls=all-functions=1 | FileCheck %s --check-prefix=ALL

// CHECK-DAG: func.func private @seqc_rt_profile_enter(i64)
// CHECK-DAG: func.func private @seqc_rt_profile_exit(i64)
// CHECK-LABEL: func.func @main
// CHECK-SAME: seq.profile_regions = ["layers.0", "layer"]
// CHECK: call @seqc_rt_profile_enter(%[[R0:.*]]) : (i64) -> ()
// CHECK-NEXT: call @layer({{.*}}) {seq.name = "layers.0"}
// CHECK-NEXT: call @seqc_rt_profile_exit(%[[R0]])
// CHECK: call @seqc_rt_profile_enter(%[[R1:.*]]) : (i64) -> ()
// CHECK-NEXT: call @layer(
// CHECK-NEXT: call @seqc_rt_profile_exit(%[[R1]])

// ALL-LABEL: func.func @main
// ALL-SAME: seq.profile_regions = [
// ALL-SAME: "layer:0 arith.addf"
// ALL-SAME: "main:0 arith.mulf"
func.func private @layer(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @layer(%x) {seq.name = "layers.0"} : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @layer(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %c = arith.mulf %a, %b : tensor<4xf32>
  return %c : tensor<4xf32>
}
