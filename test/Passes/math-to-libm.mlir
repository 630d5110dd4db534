// seq-math-to-libm: the transcendentals whose exactness matters (exact ZOH,
// softplus, exact GELU) become libm calls instead of LLVM's approximations.
// RUN: seqc-opt %s --seq-math-to-libm | FileCheck %s

// CHECK-DAG: func.func private @expm1f(f32) -> f32
// CHECK-DAG: func.func private @log1pf(f32) -> f32
// CHECK-DAG: func.func private @erff(f32) -> f32
// CHECK-LABEL: func.func @exact
// CHECK-NOT: math.
// CHECK: call @expm1f
// CHECK: call @log1pf
// CHECK: call @erff
func.func @exact(%x: f32) -> (f32, f32, f32) {
  %a = math.expm1 %x : f32
  %b = math.log1p %x : f32
  %c = math.erf %x : f32
  return %a, %b, %c : f32, f32, f32
}
