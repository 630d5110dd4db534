// seq-expand-bf16: f32 <-> bf16 conversions become integer code (round to
// nearest even, NaN kept), so no compiler-rt __truncsfbf2 is needed.
// RUN: seqc-opt %s --seq-expand-bf16 | FileCheck %s

// CHECK-LABEL: func.func @round
// CHECK-NOT: arith.truncf
// CHECK-NOT: arith.extf
// CHECK-DAG: arith.constant 32767 : i32
// CHECK-DAG: arith.constant 32704 : i16
// CHECK: arith.cmpf une, %[[X:[a-z0-9_]+]], %[[X]] : f32
// CHECK: arith.bitcast %[[X]] : f32 to i32
// CHECK: arith.shrui
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : i16
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// CHECK: arith.shli %{{.*}}, %{{.*}} : i32
// CHECK: arith.bitcast %{{.*}} : i32 to f32
func.func @round(%x: f32, %h: bf16) -> (bf16, f32) {
  %t = arith.truncf %x : f32 to bf16
  %e = arith.extf %h : bf16 to f32
  return %t, %e : bf16, f32
}
