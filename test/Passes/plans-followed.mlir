// Both targets follow one plan: a decode step is the recurrence on the CPU
// and on the GPU, a long sequence the chunked kernels, and a forced plan is
// taken by both (seq-select-strategy keeps it).
// RUN: seqc-opt %s --seqc-cpu-pipeline=strict=1 | FileCheck %s --check-prefix=CPU
// RUN: seqc-opt %s --seqc-cuda-pipeline="emulate=1 strict=1" | FileCheck %s --check-prefix=GPU

// CPU-DAG: @__seqc_ssd_recurrent(
// CPU-DAG: @__seqc_ssd_scores(
// CPU-DAG: @__seqc_linear_attention_recurrent(
// GPU-DAG: @__seqc_gpu_ssd_recurrent(
// GPU-DAG: @__seqc_gpu_ssd_chunk_states(
// GPU-DAG: @__seqc_gpu_linear_attention_recurrent(

func.func @decode(%x: tensor<2x1x4x8xf32>, %dt: tensor<2x1x4xf32>,
                  %A: tensor<4xf32>, %B: tensor<2x1x2x16xf32>)
    -> tensor<2x1x4x8xf32> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B
    : (tensor<2x1x4x8xf32>, tensor<2x1x4xf32>, tensor<4xf32>,
       tensor<2x1x2x16xf32>, tensor<2x1x2x16xf32>)
      -> (tensor<2x1x4x8xf32>, tensor<2x4x8x16xf32>)
  return %y : tensor<2x1x4x8xf32>
}

func.func @long(%x: tensor<1x200x4x8xf32>, %dt: tensor<1x200x4xf32>,
                %A: tensor<4xf32>, %B: tensor<1x200x2x16xf32>)
    -> tensor<1x200x4x8xf32> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B
    : (tensor<1x200x4x8xf32>, tensor<1x200x4xf32>, tensor<4xf32>,
       tensor<1x200x2x16xf32>, tensor<1x200x2x16xf32>)
      -> (tensor<1x200x4x8xf32>, tensor<1x4x8x16xf32>)
  return %y : tensor<1x200x4x8xf32>
}

func.func @forced(%q: tensor<1x64x2x8xf32>) -> tensor<1x64x2x8xf32> {
  %o, %s = seq.linear_attention %q, %q, %q {seq.plan = #seq.plan<recurrent>}
    : (tensor<1x64x2x8xf32>, tensor<1x64x2x8xf32>, tensor<1x64x2x8xf32>)
      -> (tensor<1x64x2x8xf32>, tensor<1x2x8x8xf32>)
  return %o : tensor<1x64x2x8xf32>
}

// Normalized causal attention is the chunked form on both targets.
// CPU-DAG: @__seqc_linear_attention_chunks(
// GPU-DAG: @__seqc_gpu_linear_attention_chunk_outputs(
func.func @normalized(%q: tensor<1x64x2x8xf32>) -> tensor<1x64x2x8xf32> {
  %o, %s = seq.linear_attention %q, %q, %q {normalize = true,
                                            seq.plan = #seq.plan<chunked, 32>}
    : (tensor<1x64x2x8xf32>, tensor<1x64x2x8xf32>, tensor<1x64x2x8xf32>)
      -> (tensor<1x64x2x8xf32>, tensor<1x2x8x8xf32>)
  return %o : tensor<1x64x2x8xf32>
}
