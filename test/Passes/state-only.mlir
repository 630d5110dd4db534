// A chunked op whose output nothing reads (sequence parallelism's runs for
// a rank's own state and transition) runs only the state's phases. On the
// CPU: no shared C B^T kernel, no causal mask or product of the chunk's own
// steps, no output stores; the state's products and its store remain. The
// GPU target runs the chunk states and the state passing (which writes
// `last`), and no output kernel. The CPU's recurrences (the delta rule's
// plan for a small state; linear attention's when asked, since its state
// alone is cheaper in chunks) update the state alone and never store into
// the output (their fifth argument).
// RUN: seqc-opt %s --seq-lower-to-cpu=vector-width=8 --split-input-file | FileCheck %s
// RUN: seqc-opt %s --seqc-cuda-pipeline="emulate=1" --split-input-file | FileCheck %s --check-prefix=GPU

// GPU: llvm.mlir.addressof @__seqc_gpu_ssd_chunk_states$task
// GPU-NEXT: llvm.mlir.addressof @__seqc_gpu_ssd_state_passing$task
// GPU-NOT: chunk_outputs

// CHECK-LABEL: func.func @state_only
// CHECK-NOT: @__seqc_ssd_scores
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_ssd_chunks(
// CHECK-LABEL: func.func private @__seqc_ssd_chunks(
// The intra-chunk mask compares lane indices: gone.
// CHECK-NOT: arith.cmpi ule, %{{.*}} : vector<8xindex>
// CHECK: vector.fma
// CHECK-NOT: arith.cmpi ule, %{{.*}} : vector<8xindex>
// CHECK: return
func.func @state_only(%x: tensor<1x256x4x16xf32>, %dt: tensor<1x256x4xf32>, %A: tensor<4xf32>,
                      %B: tensor<1x256x1x32xf32>) -> tensor<1x4x16x32xf32> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B {chunk_size = 64 : i64}
    : (tensor<1x256x4x16xf32>, tensor<1x256x4xf32>, tensor<4xf32>, tensor<1x256x1x32xf32>, tensor<1x256x1x32xf32>)
      -> (tensor<1x256x4x16xf32>, tensor<1x4x16x32xf32>)
  return %l : tensor<1x4x16x32xf32>
}

// -----

// CHECK-LABEL: func.func @la_state_only
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_linear_attention_recurrent(
// CHECK-LABEL: func.func private @__seqc_linear_attention_recurrent(
// CHECK-SAME: %[[O:arg[0-9]+]]: memref<1x64x2x16xf32, {{[^%]*}}>, %[[LAST:arg[0-9]+]]: memref<1x2x16x16xf32
// CHECK-NOT: %[[O]][
// CHECK: vector.store %{{.*}}, %[[LAST]][
// CHECK-NOT: %[[O]][
// CHECK: return
func.func @la_state_only(%q: tensor<1x64x2x16xf32>, %k: tensor<1x64x2x16xf32>, %v: tensor<1x64x2x16xf32>,
                         %g: tensor<1x64x2xf32>) -> tensor<1x2x16x16xf32> {
  %o, %l = seq.linear_attention %q, %k, %v decay(%g) {seq.plan = #seq.plan<recurrent>}
    : (tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2xf32>)
      -> (tensor<1x64x2x16xf32>, tensor<1x2x16x16xf32>)
  return %l : tensor<1x2x16x16xf32>
}

// -----

// CHECK-LABEL: func.func @delta_state_only
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_delta_rule_recurrent(
// CHECK-LABEL: func.func private @__seqc_delta_rule_recurrent(
// CHECK-SAME: %[[O:arg[0-9]+]]: memref<1x64x2x16xf32, {{[^%]*}}>, %[[LAST:arg[0-9]+]]: memref<1x2x16x16xf32
// CHECK-NOT: %[[O]][
// CHECK: vector.store %{{.*}}, %[[LAST]][
// CHECK-NOT: %[[O]][
// CHECK: return
func.func @delta_state_only(%q: tensor<1x64x2x16xf32>, %k: tensor<1x64x2x16xf32>, %v: tensor<1x64x2x16xf32>,
                            %beta: tensor<1x64x2xf32>) -> tensor<1x2x16x16xf32> {
  %o, %l = seq.delta_rule %q, %k, %v, %beta
    : (tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2xf32>)
      -> (tensor<1x64x2x16xf32>, tensor<1x2x16x16xf32>)
  return %l : tensor<1x2x16x16xf32>
}
