// seq-lower-parallel: a kernel's task space becomes one call of the
// runtime's thread pool, seqc_rt_parallel_for(count, trampoline, args),
// with the arguments packed in a struct and a trampoline that unpacks them
// and calls the kernel on its [begin, end) range.
// RUN: seqc-opt %s --seq-lower-parallel | FileCheck %s

// seq_rt.parallel_width, the threads such a call would run on (kernels
// size their tasks from it), becomes a call of seqc_rt_parallel_width.
// CHECK-DAG: llvm.func @seqc_rt_parallel_for(i64, !llvm.ptr, !llvm.ptr)
// CHECK-DAG: llvm.func @seqc_rt_parallel_width() -> i64
// CHECK-LABEL: func.func @run
// CHECK-NOT: seq_rt.parallel
// CHECK: llvm.alloca
// CHECK: %[[W:.*]] = llvm.call @seqc_rt_parallel_width() : () -> i64
// CHECK: %[[N:.*]] = arith.index_cast %[[W]] : i64 to index
// CHECK: llvm.store
// CHECK: %[[F:.*]] = constant @task$task
// CHECK: %[[COUNT:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK: llvm.call @seqc_rt_parallel_for(%[[COUNT]],
// CHECK: func.func private @task$task(%{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// CHECK: llvm.load
// CHECK: call @task(
func.func private @task(%b: index, %e: index, %m: memref<?xf32>)
func.func @run(%m: memref<?xf32>) {
  %n = seq_rt.parallel_width : index
  seq_rt.parallel_for %n, @task(%m) : memref<?xf32>
  return
}
