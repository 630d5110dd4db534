// seq-outline-ops: every compute op at the top level of a function becomes a
// call of a private function holding only it, named "<function>:<n> <op>".
// RUN: seqc-opt %s --seq-outline-ops | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK: call @layer(
// CHECK: call @[[SCAN:__seqc_op_[0-9]+]](%{{.*}}) {seq.name = "main:0 seq.linear_scan"}
// CHECK: call @[[MUL:__seqc_op_[0-9]+]](%{{.*}}) {seq.name = "main:{{[0-9]+}} arith.mulf"}
// CHECK: func.func private @[[SCAN]](
// CHECK-NEXT: seq.linear_scan
// CHECK: func.func private @[[MUL]](
// CHECK-NEXT: arith.mulf
func.func private @layer(%x: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
  %y = arith.addf %x, %x : tensor<2x4x3xf32>
  return %y : tensor<2x4x3xf32>
}
func.func @main(%x: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
  %a = call @layer(%x) : (tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %h, %l = seq.linear_scan %a, %a : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> (tensor<2x4x3xf32>, tensor<2x3xf32>)
  %c = arith.mulf %h, %h : tensor<2x4x3xf32>
  return %c : tensor<2x4x3xf32>
}
