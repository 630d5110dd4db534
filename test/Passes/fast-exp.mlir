// The CPU kernels' inline exp scales by 2^n with AVX-512's scalef on
// 16-lane vectors (n stays a float; scalef overflows to +inf and keeps NaN
// itself, so only the underflow select follows), and through the exponent
// bits of a float on narrower vectors (2^128 as 2 x 2^127, NaN selected
// at the end). Its polynomial has degree 5 (KernelBuilder::expPolynomial).
// Values at the ends of the range: Integration/fast_exp.py.
// RUN: seqc-opt %s --seq-lower-to-cpu=vector-width=16 | FileCheck %s --check-prefix=W16
// RUN: seqc-opt %s --seq-lower-to-cpu=vector-width=8 | FileCheck %s --check-prefix=W8

// W16-LABEL: func.func private @__seqc_selective_scan
// W16: %[[N:.*]] = math.roundeven %{{.*}} : vector<16xf32>
// Two FMAs reduce x to r, five evaluate e^r = 1 + r + r^2 q(r), q's
// leading coefficient first.
// W16-COUNT-2: math.fma
// W16: arith.constant dense<0.0083125{{[0-9]*}}> : vector<16xf32>
// W16-COUNT-5: math.fma
// W16-NOT: math.fma
// W16: %[[E:.*]] = x86vector.avx512.mask.scalef %{{.*}}, %[[N]], %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// W16-NOT: arith.bitcast
// W16: arith.select %{{.*}}, %{{.*}}, %[[E]] : vector<16xi1>, vector<16xf32>

// W8-LABEL: func.func private @__seqc_selective_scan
// W8-NOT: x86vector.avx512.mask.scalef
// W8: arith.fptosi %{{.*}} : vector<8xf32> to vector<8xi32>
// W8: arith.minsi
// W8: arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// W8: arith.cmpf uno
func.func @exp_carrier(%u: tensor<1x8x64xf32>, %delta: tensor<1x8x64xf32>, %A: tensor<64x4xf32>,
                       %B: tensor<1x8x1x4xf32>, %C: tensor<1x8x1x4xf32>) -> tensor<1x8x64xf32> {
  %y, %last = seq.selective_scan %u, %delta, %A, %B, %C : (tensor<1x8x64xf32>, tensor<1x8x64xf32>, tensor<64x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>) -> (tensor<1x8x64xf32>, tensor<1x64x4xf32>)
  return %y : tensor<1x8x64xf32>
}
