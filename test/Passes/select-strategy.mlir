// seq-select-strategy: one plan per op, from one cost model, for a CPU or a
// GPU description; the plan is an attribute the lowerings read.
// RUN: seqc-opt %s -split-input-file -seq-select-strategy="target=cpu vector-width=16 l1-bytes=49152 l2-bytes=2097152" | FileCheck %s --check-prefix=CPU
// RUN: seqc-opt %s -split-input-file -seq-select-strategy="target=gpu chip=sm_90a" 2>/dev/null | FileCheck %s --check-prefix=GPU
// RUN: seqc-opt %s -split-input-file -seq-select-strategy="target=gpu chip=sm_90a" 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: seqc-opt %s -split-input-file -seq-select-strategy="target=cpu" 2>&1 >/dev/null | FileCheck %s --check-prefix=NOREMARK --allow-empty
// NOREMARK-NOT: remark
// RUN: not seqc-opt %s -split-input-file -seq-select-strategy="target=tpu" 2>&1 | FileCheck %s --check-prefix=BADTARGET
// RUN: not seqc-opt %s -split-input-file -seq-select-strategy="target=gpu chip=volta" 2>&1 | FileCheck %s --check-prefix=BADCHIP
// BADTARGET: error: seq-select-strategy: target 'tpu' is neither cpu nor gpu
// BADCHIP: error: unknown chip 'volta' (expected sm_<version>, such as sm_80 or sm_90a)

// Long SSD, no hint: the cost model's chunk, sqrt(8 N) on the CPU (N = 128:
// 32), as large as shared memory allows on the GPU (64).
// CPU-LABEL: func @ssd_long
// CPU: seq.ssd {{.*}}seq.plan = #seq.plan<chunked, 32>
// GPU-LABEL: func @ssd_long
// GPU: seq.ssd {{.*}}seq.plan = #seq.plan<chunked, 64>
func.func @ssd_long(%x: tensor<2x512x4x64xf32>, %dt: tensor<2x512x4xf32>,
                    %A: tensor<4xf32>, %B: tensor<2x512x1x128xf32>)
    -> tensor<2x512x4x64xf32> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B
    : (tensor<2x512x4x64xf32>, tensor<2x512x4xf32>, tensor<4xf32>,
       tensor<2x512x1x128xf32>, tensor<2x512x1x128xf32>)
      -> (tensor<2x512x4x64xf32>, tensor<2x4x64x128xf32>)
  return %y : tensor<2x512x4x64xf32>
}

// -----

// A decode step (T = 1) is the recurrence on both targets.
// CPU-LABEL: func @ssd_decode
// CPU: seq.ssd {{.*}}seq.plan = #seq.plan<recurrent>
// GPU-LABEL: func @ssd_decode
// GPU: seq.ssd {{.*}}seq.plan = #seq.plan<recurrent>
func.func @ssd_decode(%x: tensor<2x1x4x64xf32>, %dt: tensor<2x1x4xf32>,
                      %A: tensor<4xf32>, %B: tensor<2x1x1x128xf32>)
    -> tensor<2x1x4x64xf32> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B
    : (tensor<2x1x4x64xf32>, tensor<2x1x4xf32>, tensor<4xf32>,
       tensor<2x1x1x128xf32>, tensor<2x1x1x128xf32>)
      -> (tensor<2x1x4x64xf32>, tensor<2x4x64x128xf32>)
  return %y : tensor<2x1x4x64xf32>
}

// -----

// A hint is honoured where the kernels allow it: 48 on both; 100 on the CPU
// but the GPU's SSD chunks are multiples of 16 up to 64 (a remark says so).
// CPU-LABEL: func @ssd_hints
// CPU: seq.ssd {{.*}}seq.plan = #seq.plan<chunked, 48>
// CPU: seq.ssd {{.*}}seq.plan = #seq.plan<chunked, 100>
// REMARK: :[[@LINE+11]]:{{[0-9]+}}: remark: chunk_size 100 taken as 64: the GPU kernels' chunks are 16 to 64 steps, multiples of 16
// GPU-LABEL: func @ssd_hints
// GPU: seq.ssd {{.*}}seq.plan = #seq.plan<chunked, 48>
// GPU: seq.ssd {{.*}}seq.plan = #seq.plan<chunked, 64>
func.func @ssd_hints(%x: tensor<1x256x2x32xf32>, %dt: tensor<1x256x2xf32>,
                     %A: tensor<2xf32>, %B: tensor<1x256x1x16xf32>)
    -> (tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>) {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B {chunk_size = 48 : i64}
    : (tensor<1x256x2x32xf32>, tensor<1x256x2xf32>, tensor<2xf32>,
       tensor<1x256x1x16xf32>, tensor<1x256x1x16xf32>)
      -> (tensor<1x256x2x32xf32>, tensor<1x2x32x16xf32>)
  %y2, %l2 = seq.ssd %x, %dt, %A, %B, %B {chunk_size = 100 : i64}
    : (tensor<1x256x2x32xf32>, tensor<1x256x2xf32>, tensor<2xf32>,
       tensor<1x256x1x16xf32>, tensor<1x256x1x16xf32>)
      -> (tensor<1x256x2x32xf32>, tensor<1x2x32x16xf32>)
  return %y, %y2 : tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>
}

// -----

// Linear attention: non-causal is global; a scalar decay is chunked on the
// GPU and recurrent on the CPU, whose state of 64 x 32 f32 (8 KiB) fits in
// half of its L1 (unless chunk_size asks for chunks); a per-key decay is
// chunked on the GPU, recurrent on the CPU (whose chunked phases take a
// scalar decay); normalize is chunked on both; a plan in the input is kept.
// CPU-LABEL: func @linear_attention
// CPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<global>
// CPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<recurrent>
// CPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<recurrent>
// CPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 32>
// CPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 16>
// CPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 32>
// GPU-LABEL: func @linear_attention
// GPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<global>
// GPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 32>
// GPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 32>
// GPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 32>
// GPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 16>
// GPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 32>
func.func @linear_attention(%q: tensor<1x256x2x64xf32>, %v: tensor<1x256x2x32xf32>,
                            %g: tensor<1x256x2xf32>, %gk: tensor<1x256x2x64xf32>)
    -> (tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>,
        tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>) {
  %o1, %s1 = seq.linear_attention %q, %q, %v {causal = false}
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x32xf32>)
      -> (tensor<1x256x2x32xf32>, tensor<1x2x64x32xf32>)
  %o2, %s2 = seq.linear_attention %q, %q, %v decay(%g)
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x32xf32>,
       tensor<1x256x2xf32>) -> (tensor<1x256x2x32xf32>, tensor<1x2x64x32xf32>)
  %o3, %s3 = seq.linear_attention %q, %q, %v decay(%gk)
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x32xf32>,
       tensor<1x256x2x64xf32>) -> (tensor<1x256x2x32xf32>, tensor<1x2x64x32xf32>)
  %o4, %s4 = seq.linear_attention %q, %q, %v {normalize = true}
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x32xf32>)
      -> (tensor<1x256x2x32xf32>, tensor<1x2x64x32xf32>)
  %o5, %s5 = seq.linear_attention %q, %q, %v {seq.plan = #seq.plan<chunked, 16>}
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x32xf32>)
      -> (tensor<1x256x2x32xf32>, tensor<1x2x64x32xf32>)
  %o6, %s6 = seq.linear_attention %q, %q, %v decay(%g) {chunk_size = 32 : i64}
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x32xf32>,
       tensor<1x256x2xf32>) -> (tensor<1x256x2x32xf32>, tensor<1x2x64x32xf32>)
  return %o1, %o2, %o3, %o4, %o5, %o6 : tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>,
      tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>, tensor<1x256x2x32xf32>,
      tensor<1x256x2x32xf32>
}

// -----

// The CPU's recurrence takes a state that fits in half of L1: K = V = 128
// (64 KiB) is chunked on both targets, as is a delta rule's; the delta
// rule's 64 x 64 (16 KiB) state is recurrent on the CPU.
// CPU-LABEL: func @state_sizes
// CPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 32>
// CPU: seq.delta_rule {{.*}}seq.plan = #seq.plan<chunked, 16>
// CPU: seq.delta_rule {{.*}}seq.plan = #seq.plan<recurrent>
// GPU-LABEL: func @state_sizes
// GPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked, 32>
// GPU: seq.delta_rule {{.*}}seq.plan = #seq.plan<chunked,
// GPU: seq.delta_rule {{.*}}seq.plan = #seq.plan<chunked,
func.func @state_sizes(%q: tensor<1x256x2x128xf32>, %v: tensor<1x256x2x128xf32>,
                       %q64: tensor<1x256x2x64xf32>, %v64: tensor<1x256x2x64xf32>,
                       %beta: tensor<1x256x2xf32>)
    -> (tensor<1x256x2x128xf32>, tensor<1x256x2x128xf32>, tensor<1x256x2x64xf32>) {
  %o1, %s1 = seq.linear_attention %q, %q, %v
    : (tensor<1x256x2x128xf32>, tensor<1x256x2x128xf32>, tensor<1x256x2x128xf32>)
      -> (tensor<1x256x2x128xf32>, tensor<1x2x128x128xf32>)
  %o2, %s2 = seq.delta_rule %q, %q, %v, %beta
    : (tensor<1x256x2x128xf32>, tensor<1x256x2x128xf32>, tensor<1x256x2x128xf32>,
       tensor<1x256x2xf32>) -> (tensor<1x256x2x128xf32>, tensor<1x2x128x128xf32>)
  %o3, %s3 = seq.delta_rule %q64, %q64, %v64, %beta
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>,
       tensor<1x256x2xf32>) -> (tensor<1x256x2x64xf32>, tensor<1x2x64x64xf32>)
  return %o1, %o2, %o3 : tensor<1x256x2x128xf32>, tensor<1x256x2x128xf32>,
      tensor<1x256x2x64xf32>
}

// -----

// A state-only op (nothing reads o: sequence parallelism's runs for a
// rank's own state and transition). Linear attention's state alone is one
// product per chunk, cheaper than the recurrence's pass over the state per
// step: chunked on the CPU too. The delta rule's chunks still solve each
// chunk's corrections: its small state stays recurrent.
// CPU-LABEL: func @state_only
// CPU: seq.linear_attention {{.*}}seq.plan = #seq.plan<chunked,
// CPU: seq.delta_rule {{.*}}seq.plan = #seq.plan<recurrent>
func.func @state_only(%q: tensor<1x256x2x64xf32>, %v: tensor<1x256x2x32xf32>,
                      %g: tensor<1x256x2xf32>, %beta: tensor<1x256x2xf32>)
    -> (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>) {
  %o1, %s1 = seq.linear_attention %q, %q, %v decay(%g)
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x32xf32>,
       tensor<1x256x2xf32>) -> (tensor<1x256x2x32xf32>, tensor<1x2x64x32xf32>)
  %o2, %s2 = seq.delta_rule %q, %q, %v, %beta
    : (tensor<1x256x2x64xf32>, tensor<1x256x2x64xf32>, tensor<1x256x2x32xf32>,
       tensor<1x256x2xf32>) -> (tensor<1x256x2x32xf32>, tensor<1x2x64x32xf32>)
  return %s1, %s2 : tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>
}
