// The fast CPU lowering: each seq op becomes kernels on memrefs dispatched
// over a task space with seq_rt.parallel_for, vectorized at the requested width.
// RUN: seqc-opt %s --seq-lower-to-cpu=vector-width=8 > %t
// RUN: FileCheck %s < %t
// RUN: FileCheck %s --check-prefix=SCAN < %t
// RUN: FileCheck %s --check-prefix=CHUNKS < %t
// RUN: FileCheck %s --check-prefix=NORM < %t

// linear_scan: a task per (batch, block of columns), streaming stores of h.
// CHECK-LABEL: func.func @scan
// CHECK: memref.alloc(%{{.*}}) {alignment = 64 : i64}
// CHECK: bufferization.to_buffer %{{.*}} read_only
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_linear_scan(
// CHECK: bufferization.to_tensor %{{.*}} restrict writable
func.func @scan(%a: tensor<2x100x300xf32>) -> tensor<2x100x300xf32> {
  %h, %l = seq.linear_scan %a, %a : (tensor<2x100x300xf32>, tensor<2x100x300xf32>) -> (tensor<2x100x300xf32>, tensor<2x300xf32>)
  return %h : tensor<2x100x300xf32>
}

// SSD by chunks: the heads of a group share C B^T, computed per (batch,
// chunk, group) in its own kernel, then one task per (batch, head) loops
// over chunks of the hinted size.
// CHECK-LABEL: func.func @ssd_chunked
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_ssd_scores(
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_ssd_chunks(
func.func @ssd_chunked(%x: tensor<1x256x4x16xf32>, %dt: tensor<1x256x4xf32>, %A: tensor<4xf32>,
                       %B: tensor<1x256x1x32xf32>) -> tensor<1x256x4x16xf32> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B {chunk_size = 64 : i64}
    : (tensor<1x256x4x16xf32>, tensor<1x256x4xf32>, tensor<4xf32>, tensor<1x256x1x32xf32>, tensor<1x256x1x32xf32>)
      -> (tensor<1x256x4x16xf32>, tensor<1x4x16x32xf32>)
  return %y : tensor<1x256x4x16xf32>
}

// Decode (T = 1) takes the recurrence directly: no chunk machinery.
// CHECK-LABEL: func.func @ssd_decode
// CHECK-NOT: @__seqc_ssd_scores
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_ssd_recurrent(
func.func @ssd_decode(%x: tensor<1x1x4x16xf32>, %dt: tensor<1x1x4xf32>, %A: tensor<4xf32>,
                      %B: tensor<1x1x1x32xf32>, %h0: tensor<1x4x16x32xf32>) -> tensor<1x4x16x32xf32> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B init(%h0)
    : (tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<4xf32>, tensor<1x1x1x32xf32>, tensor<1x1x1x32xf32>, tensor<1x4x16x32xf32>)
      -> (tensor<1x1x4x16xf32>, tensor<1x4x16x32xf32>)
  return %l : tensor<1x4x16x32xf32>
}

// Normalized causal linear attention by chunks: the normalizer is one more
// value column, so the task's state is K x (V + 1).
// CHECK-LABEL: func.func @normalized
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_linear_attention_chunks(
// NORM-LABEL: func.func private @__seqc_linear_attention_chunks(
// NORM: memref.alloca() {alignment = 64 : i64} : memref<8x9xf32>
func.func @normalized(%q: tensor<1x64x2x8xf32>) -> tensor<1x64x2x8xf32> {
  %o, %s = seq.linear_attention %q, %q, %q {normalize = true, chunk_size = 32 : i64}
    : (tensor<1x64x2x8xf32>, tensor<1x64x2x8xf32>, tensor<1x64x2x8xf32>)
      -> (tensor<1x64x2x8xf32>, tensor<1x2x8x8xf32>)
  return %o : tensor<1x64x2x8xf32>
}

// Exact attention: K and V packed per kv head once, then the tiled kernel.
// CHECK-LABEL: func.func @attention
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_attention_pack(
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_attention(
func.func @attention(%q: tensor<1x128x4x16xf32>, %k: tensor<1x128x2x16xf32>) -> tensor<1x128x4x16xf32> {
  %o = seq.attention %q, %k, %k : (tensor<1x128x4x16xf32>, tensor<1x128x2x16xf32>, tensor<1x128x2x16xf32>) -> (tensor<1x128x4x16xf32>)
  return %o : tensor<1x128x4x16xf32>
}

// MoE: plan (sequential), up and down projections (grouped GEMMs), combine.
// CHECK-LABEL: func.func @moe
// CHECK: seq_rt.check
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_moe_plan(
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_moe_up(
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_moe_down(
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_moe_combine(
func.func @moe(%x: tensor<32x16xf32>, %w: tensor<32x2xf32>, %i: tensor<32x2xi32>,
               %wu: tensor<4x16x24xf32>, %wd: tensor<4x24x16xf32>) -> tensor<32x16xf32> {
  %y, %load = seq.moe_ffn %x, %w, %i, %wu, %wd {capacity_factor = 1.0 : f32}
    : (tensor<32x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>, tensor<4x16x24xf32>, tensor<4x24x16xf32>)
      -> (tensor<32x16xf32>, tensor<4xi64>)
  return %y : tensor<32x16xf32>
}

// The kernels (emitted at the end of the module): the scan keeps a block
// state in a stack buffer and streams h out.
// SCAN-LABEL: func.func private @__seqc_linear_scan(%{{.*}}: index, %{{.*}}: index
// SCAN: memref.alloca() {alignment = 64 : i64} : memref<2048xf32>
// SCAN: scf.for
// SCAN: vector.fma %{{.*}} : vector<8xf32>
// SCAN: vector.store %{{.*}} {nontemporal = true} : memref<?x?x?xf32>, vector<8xf32>

// SSD chunks: the causal mask from lane indices, then register-blocked
// products (6 rows x 2 vectors of accumulators at width 8).
// CHUNKS-LABEL: func.func private @__seqc_ssd_chunks(
// CHUNKS: vector.step : vector<8xindex>
// CHUNKS: arith.cmpi ule, %{{.*}} : vector<8xindex>
// CHUNKS: scf.for %{{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHUNKS-COUNT-12: vector.fma

// The selective scan's tasks take 1, 2 or 4 blocks of channels, chosen when
// the call runs from the threads of the pool (at least four tasks per
// thread and batch row), so AOT code splits for the machine it runs on:
// 25 blocks of 8 lanes give 4 per task on one thread, 2 on up to three.
// CHECK-LABEL: func.func @selective_scan_split
// CHECK: %[[W:.*]] = seq_rt.parallel_width : index
// CHECK: %[[MIN:.*]] = arith.muli %[[W]], %c4
// CHECK: %[[TWO:.*]] = arith.cmpi sge, %c12, %[[MIN]]
// CHECK: %[[P2:.*]] = arith.select %[[TWO]], %c2, %c1
// CHECK: %[[FOUR:.*]] = arith.cmpi sge, %c6, %[[MIN]]
// CHECK: %[[P:.*]] = arith.select %[[FOUR]], %c4{{.*}}, %[[P2]]
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_selective_scan({{.*}}, %[[P]]) : {{.*}}, index
func.func @selective_scan_split(%u: tensor<1x64x200xf32>, %dt: tensor<1x64x200xf32>, %A: tensor<200x16xf32>,
                                %B: tensor<1x64x1x16xf32>) -> tensor<1x64x200xf32> {
  %y, %l = seq.selective_scan %u, %dt, %A, %B, %B
    : (tensor<1x64x200xf32>, tensor<1x64x200xf32>, tensor<200x16xf32>, tensor<1x64x1x16xf32>, tensor<1x64x1x16xf32>)
      -> (tensor<1x64x200xf32>, tensor<1x200x16xf32>)
  return %y : tensor<1x64x200xf32>
}
