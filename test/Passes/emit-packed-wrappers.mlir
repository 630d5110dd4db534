// seq-emit-packed-wrappers: every public LLVM function @f gets
// _seqc_packed_f(void **args): args[i] points at argument i, the last at
// room for the result; private functions become internal.
// RUN: seqc-opt %s --seq-emit-packed-wrappers | FileCheck %s

// CHECK: llvm.func internal @g()
// CHECK-NOT: @_seqc_packed_g
// CHECK-LABEL: llvm.func @_seqc_packed_f(
// CHECK-SAME: %[[ARGS:[a-z0-9]+]]: !llvm.ptr)
// CHECK: llvm.getelementptr %[[ARGS]][0]
// CHECK: %[[A:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK: llvm.getelementptr %[[ARGS]][1]
// CHECK: %[[B:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[R:.*]] = llvm.call @f(%[[A]], %[[B]])
// CHECK: llvm.getelementptr %[[ARGS]][2]
// CHECK: llvm.store %[[R]], %{{.*}} : f32, !llvm.ptr
llvm.func @f(%a: i64, %b: f32) -> f32 {
  llvm.return %b : f32
}
llvm.func @g() attributes {sym_visibility = "private"} {
  llvm.return
}
