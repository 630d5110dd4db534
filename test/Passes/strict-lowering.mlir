// No silent fallbacks: an op a fast kernel declines takes the reference
// lowering with a remark naming the op, its types and why; with strict=1 it
// is an error. Ops that take their fast kernel say nothing.
// RUN: seqc-opt %s --split-input-file --seq-lower-to-cpu -verify-diagnostics -o /dev/null
// RUN: not seqc-opt %s --split-input-file --seq-lower-to-cpu=strict=1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=STRICT
// RUN: not seqc-opt %s --split-input-file --seq-lower-to-gpu=strict=1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=GPU
// RUN: not seqc-opt %s --split-input-file --seqc-cpu-pipeline=strict=1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=STRICT
// RUN: not seqc-opt %s --split-input-file --seqc-cuda-pipeline="strict=1 emulate=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GPU

// STRICT: error: seq.ssd (tensor<1x16x?x4xf32>, {{.*}}) takes the reference lowering instead of a fast CPU kernel: needs static H, P, G and N
// STRICT: error: linalg.matmul (tensor<8x8xi32>, tensor<8x8xi32>, tensor<8x8xi32>) -> (tensor<8x8xi32>) is left to generic loops instead of a fast CPU kernel: takes f32, bf16 or f16 operands
// STRICT-NOT: seq.route
// STRICT-NOT: seq.linear_scan
// GPU-NOT: seq.ssd
// GPU: error: seq.attention (tensor<1x5x1x4xf32>, tensor<1x5x1x4xf32>, tensor<1x5x1x130xf32>) -> (tensor<1x5x1x130xf32>) takes the reference lowering instead of a fast GPU kernel: needs float operands and a static V of at most 128
// GPU-NOT: seq.linear_scan

func.func @dynamic_heads_ssd(%x: tensor<1x16x?x4xf32>, %dt: tensor<1x16x?xf32>, %A: tensor<?xf32>,
                             %B: tensor<1x16x1x3xf32>) -> tensor<1x16x?x4xf32> {
  // expected-remark @+1 {{seq.ssd (tensor<1x16x?x4xf32>, tensor<1x16x?xf32>, tensor<?xf32>, tensor<1x16x1x3xf32>, tensor<1x16x1x3xf32>) -> (tensor<1x16x?x4xf32>, tensor<1x?x4x3xf32>) takes the reference lowering instead of a fast CPU kernel: needs static H, P, G and N}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %B
    : (tensor<1x16x?x4xf32>, tensor<1x16x?xf32>, tensor<?xf32>, tensor<1x16x1x3xf32>, tensor<1x16x1x3xf32>)
      -> (tensor<1x16x?x4xf32>, tensor<1x?x4x3xf32>)
  return %y : tensor<1x16x?x4xf32>
}

// -----

func.func @i32_matmul(%a: tensor<8x8xi32>, %b: tensor<8x8xi32>) -> tensor<8x8xi32> {
  %z = arith.constant 0 : i32
  %e = tensor.empty() : tensor<8x8xi32>
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<8x8xi32>) -> tensor<8x8xi32>
  // expected-remark @+1 {{linalg.matmul (tensor<8x8xi32>, tensor<8x8xi32>, tensor<8x8xi32>) -> (tensor<8x8xi32>) is left to generic loops instead of a fast CPU kernel: takes f32, bf16 or f16 operands}}
  %r = linalg.matmul ins(%a, %b : tensor<8x8xi32>, tensor<8x8xi32>) outs(%f : tensor<8x8xi32>) -> tensor<8x8xi32>
  return %r : tensor<8x8xi32>
}

// -----

// bf16 ops take their fast kernels (f32 sums and states): no remark.
func.func @bf16_ssd(%x: tensor<1x16x2x4xbf16>, %dt: tensor<1x16x2xbf16>, %A: tensor<2xf32>,
                    %B: tensor<1x16x1x3xbf16>) -> tensor<1x16x2x4xbf16> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %B
    : (tensor<1x16x2x4xbf16>, tensor<1x16x2xbf16>, tensor<2xf32>, tensor<1x16x1x3xbf16>, tensor<1x16x1x3xbf16>)
      -> (tensor<1x16x2x4xbf16>, tensor<1x2x4x3xf32>)
  return %y : tensor<1x16x2x4xbf16>
}

// -----

func.func @bf16_route(%l: tensor<9x4xbf16>) -> tensor<9x2xi32> {
  %w, %i, %aux = seq.route %l {k = 2 : i64}
    : (tensor<9x4xbf16>) -> (tensor<9x2xbf16>, tensor<9x2xi32>, tensor<f32>)
  return %i : tensor<9x2xi32>
}

// -----

func.func @wide_attention(%q: tensor<1x5x1x4xf32>, %v: tensor<1x5x1x130xf32>) -> tensor<1x5x1x130xf32> {
  %o = seq.attention %q, %q, %v
    : (tensor<1x5x1x4xf32>, tensor<1x5x1x4xf32>, tensor<1x5x1x130xf32>) -> (tensor<1x5x1x130xf32>)
  return %o : tensor<1x5x1x130xf32>
}

// -----

func.func @fast_scan(%a: tensor<2x16x8xf32>) -> tensor<2x8xf32> {
  %h, %l = seq.linear_scan %a, %a : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return %l : tensor<2x8xf32>
}

// -----

// A forced plan the target's kernels cannot run is a reported fallback (an
// error when strict), naming the target's chunk sizes.
// STRICT: error: seq.ssd {{.*}} takes the reference lowering instead of a fast CPU kernel: plan chunked 1000 is outside the CPU kernels' chunk sizes (1 to 256 steps)
// GPU: error: seq.ssd {{.*}} takes the reference lowering instead of a fast GPU kernel: plan chunked 1000 is outside the GPU kernels' chunk sizes (16 to 64 steps, multiples of 16)
func.func @forced_plan(%x: tensor<1x64x2x8xf32>, %dt: tensor<1x64x2xf32>, %A: tensor<2xf32>,
                       %B: tensor<1x64x1x16xf32>) -> tensor<1x64x2x8xf32> {
  // expected-remark @+1 {{plan chunked 1000 is outside the CPU kernels' chunk sizes (1 to 256 steps)}}
  %y, %l = seq.ssd %x, %dt, %A, %B, %B {seq.plan = #seq.plan<chunked, 1000>}
    : (tensor<1x64x2x8xf32>, tensor<1x64x2xf32>, tensor<2xf32>, tensor<1x64x1x16xf32>, tensor<1x64x1x16xf32>)
      -> (tensor<1x64x2x8xf32>, tensor<1x2x8x16xf32>)
  return %y : tensor<1x64x2x8xf32>
}
