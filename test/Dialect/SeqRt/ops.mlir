// Round trip of the internal seq_rt ops (emitted by lowerings, lowered by
// seq-lower-checks and seq-lower-parallel).
// RUN: seqc-opt %s | FileCheck %s
// RUN: seqc-opt %s | seqc-opt | FileCheck %s

// CHECK-LABEL: func @check
func.func @check(%c: i1, %a: index, %b: index) {
  // CHECK: seq_rt.check %{{.*}}, "dimension 1 (T) of dt is {0} but x has {1}"(%{{.*}}, %{{.*}} : index, index)
  seq_rt.check %c, "dimension 1 (T) of dt is {0} but x has {1}" (%a, %b : index, index)
  // CHECK: seq_rt.check %{{.*}}, "always"
  seq_rt.check %c, "always"
  return
}

func.func private @kernel(%begin: index, %end: index, %a: memref<?xf32>)

// CHECK-LABEL: func @dispatch
func.func @dispatch(%n: index, %a: memref<?xf32>) {
  // CHECK: seq_rt.parallel_for %{{.*}}, @kernel(%{{.*}}) : memref<?xf32>
  seq_rt.parallel_for %n, @kernel(%a) : memref<?xf32>
  return
}
