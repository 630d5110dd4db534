// seq-vector-math: exp and log on vectors become polynomial arithmetic (the
// fast kernels' transcendentals, accurate to a few ulp); sin stays a math op
// for libm.
// RUN: seqc-opt %s --seq-vector-math | FileCheck %s

// CHECK-LABEL: func.func @vexp
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK: arith.mulf {{.*}} : vector<8xf32>
// CHECK: math.sin
func.func @vexp(%v: vector<8xf32>) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>) {
  %e = math.exp %v : vector<8xf32>
  %l = math.log %v : vector<8xf32>
  %s = math.sin %v : vector<8xf32>
  return %e, %l, %s : vector<8xf32>, vector<8xf32>, vector<8xf32>
}
