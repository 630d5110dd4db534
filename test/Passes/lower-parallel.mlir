// seq-lower-parallel: a kernel's task space becomes one call of the
// runtime's thread pool, seqc_rt_parallel_for(count, trampoline, args),
// with the arguments packed in a struct and a trampoline that unpacks them
// and calls the kernel on its [begin, end) range.
// RUN: seqc-opt %s --seq-lower-parallel | FileCheck %s

// CHECK: llvm.func @seqc_rt_parallel_for(i64, !llvm.ptr, !llvm.ptr)
// CHECK-LABEL: func.func @run
// CHECK-NOT: seq_rt.parallel_for
// CHECK: llvm.alloca
// CHECK: llvm.store
// CHECK: %[[F:.*]] = constant @task$task
// CHECK: llvm.call @seqc_rt_parallel_for(
// CHECK: func.func private @task$task(%{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// CHECK: llvm.load
// CHECK: call @task(
func.func private @task(%b: index, %e: index, %m: memref<?xf32>)
func.func @run(%n: index, %m: memref<?xf32>) {
  seq_rt.parallel_for %n, @task(%m) : memref<?xf32>
  return
}
