// The CPU kernels' inline exp scales by 2^n with AVX-512's scalef on
// 16-lane vectors (n stays a float; scalef overflows to +inf and keeps NaN
// itself, and the lanes where n <= -126 are zeroed, so x is clamped from
// above only), and through the exponent bits of a float on narrower
// vectors: x clamped on both sides, the polynomial's coefficients doubled
// (2 e^r) and scaled by 2^(n-1) made from the shifter's sum itself, whose
// bits shifted left by 23 are n's (no float-to-int conversion, no select
// for 2^128, for underflow or for NaN). The clamps are compares and
// selects that keep x when unordered (x86's min and max). n is rounded by
// the shifter 1.5 x 2^23 (0x4B400000): an FMA and a subtraction. Its
// polynomial has degree 5 (KernelBuilder::expPolynomial). The exps of a
// group of states are emitted stage by stage, interleaved: here the
// selective scan's 4 states.
// Values at the ends of the range: Integration/fast_exp.py.
// RUN: seqc-opt %s --seq-lower-to-cpu=vector-width=16 | FileCheck %s --check-prefix=W16
// RUN: seqc-opt %s --seq-lower-to-cpu=vector-width=8 | FileCheck %s --check-prefix=W8

// W16-LABEL: func.func private @__seqc_selective_scan
// W16-NOT: arith.minimumf
// W16-COUNT-4: arith.cmpf olt, %{{.*}}, %{{.*}} : vector<16xf32>
// W16-NOT: arith.cmpf ogt
// W16-NOT: math.roundeven
// W16: %[[SHIFTER:.*]] = arith.constant dense<0x4B400000> : vector<16xf32>
// W16: math.fma %{{.*}}, %{{.*}}, %[[SHIFTER]] : vector<16xf32>
// W16: %[[N:.*]] = arith.subf
// Two FMAs per exp reduce x to r, five evaluate e^r = 1 + r + r^2 q(r),
// q's leading coefficient first: 4 at a time.
// W16-COUNT-8: math.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// W16: arith.constant dense<0.0083125{{[0-9]*}}> : vector<16xf32>
// W16-COUNT-20: math.fma
// W16-NOT: math.fma
// W16: %[[E:.*]] = x86vector.avx512.mask.scalef %{{.*}}, %[[N]], %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// W16-NOT: arith.bitcast
// W16: %[[FLOOR:.*]] = arith.constant dense<-1.255000e+02> : vector<16xf32>
// W16-NEXT: %[[UNDER:.*]] = arith.cmpf olt, %[[N]], %[[FLOOR]] : vector<16xf32>
// W16: arith.select %[[UNDER]], %{{.*}}, %[[E]] : vector<16xi1>, vector<16xf32>
// W16-COUNT-3: x86vector.avx512.mask.scalef

// W8-LABEL: func.func private @__seqc_selective_scan
// W8-NOT: arith.minimumf
// W8: %[[HIGH:.*]] = arith.cmpf olt, %[[TOP:.*]], %[[X:.*]] : vector<8xf32>
// W8-NEXT: %[[CAPPED:.*]] = arith.select %[[HIGH]], %[[TOP]], %[[X]]
// W8-NEXT: arith.constant dense<-8.730000e+01>
// W8-NEXT: %[[LOW:.*]] = arith.cmpf ogt, %[[BOTTOM:.*]], %[[CAPPED]] : vector<8xf32>
// W8-NEXT: arith.select %[[LOW]], %[[BOTTOM]], %[[CAPPED]]
// W8-NOT: x86vector.avx512.mask.scalef
// W8: %[[SUM:.*]] = math.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<8xf32>
// The polynomial's last two coefficients, doubled.
// W8: arith.constant dense<2.000000e+00> : vector<8xf32>
// W8-NOT: arith.fptosi
// W8-NOT: arith.minsi
// W8: %[[BITS:.*]] = arith.bitcast %[[SUM]] : vector<8xf32> to vector<8xi32>
// W8-NEXT: arith.constant dense<23> : vector<8xi32>
// W8-NEXT: %[[SHIFTED:.*]] = arith.shli %[[BITS]], %{{.*}} : vector<8xi32>
// 126 << 23
// W8-NEXT: arith.constant dense<1056964608> : vector<8xi32>
// W8-NEXT: %[[BIASED:.*]] = arith.addi %[[SHIFTED]], %{{.*}} : vector<8xi32>
// W8-NEXT: %[[SCALE:.*]] = arith.bitcast %[[BIASED]] : vector<8xi32> to vector<8xf32>
// W8-NEXT: arith.mulf %{{.*}}, %[[SCALE]] : vector<8xf32>
// W8-NOT: arith.cmpf uno
// W8-NOT: arith.select {{.*}} vector<8xf32>
// W8: return
func.func @exp_carrier(%u: tensor<1x8x64xf32>, %delta: tensor<1x8x64xf32>, %A: tensor<64x4xf32>,
                       %B: tensor<1x8x1x4xf32>, %C: tensor<1x8x1x4xf32>) -> tensor<1x8x64xf32> {
  %y, %last = seq.selective_scan %u, %delta, %A, %B, %C : (tensor<1x8x64xf32>, tensor<1x8x64xf32>, tensor<64x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>) -> (tensor<1x8x64xf32>, tensor<1x64x4xf32>)
  return %y : tensor<1x8x64xf32>
}
