// seq_rt.check and upstream cf.assert become a conditional call into seqc's
// runtime with a one-line message.
// RUN: seqc-opt %s --seq-lower-checks | FileCheck %s

// CHECK-DAG: llvm.func @seqc_rt_check_failed(!llvm.ptr, i64, i64, i64, i64, i64)
// CHECK-DAG: llvm.mlir.global internal constant @__seqc_check_msg_{{[0-9]+}}("dimension 1 (T) of dt is {0} but x has {1}\00")
// CHECK-DAG: llvm.mlir.global internal constant @__seqc_check_msg_{{[0-9]+}}("tensor.cast at graph.mlir:2:8: size mismatch of dim 0\00")

// CHECK-LABEL: func @checks
func.func @checks(%ok: i1, %a: index, %b: index) {
  // CHECK: %[[BAD:.*]] = arith.xori %{{.*}}, %true
  // CHECK: scf.if %[[BAD]] {
  // CHECK:   %[[MSG:.*]] = llvm.mlir.addressof @__seqc_check_msg_
  // CHECK:   %[[N:.*]] = arith.constant 2 : i64
  // CHECK:   %[[A:.*]] = arith.index_cast %{{.*}} : index to i64
  // CHECK:   %[[B:.*]] = arith.index_cast %{{.*}} : index to i64
  // CHECK:   llvm.call @seqc_rt_check_failed(%[[MSG]], %[[N]], %[[A]], %[[B]], %{{.*}}, %{{.*}})
  seq_rt.check %ok, "dimension 1 (T) of dt is {0} but x has {1}" (%a, %b : index, index)
  // CHECK-NOT: cf.assert
  cf.assert %ok, "ERROR: Runtime op verification failed\0A%c = tensor.cast %arg0 : tensor<?x4xf32> to tensor<3x4xf32>\0A^ size mismatch of dim 0\0ALocation: loc(\22graph.mlir\22:2:8)"
  return
}
