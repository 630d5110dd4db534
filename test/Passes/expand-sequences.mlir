// seq-expand-sequences: a packed batch runs as a loop over its sequences,
// each the plain op on its slice with its init row (offsets checked first);
// checkpoint_every runs each sequence in pieces that carry the state. The
// lowerings refuse ops that were not expanded.
// RUN: seqc-opt %s -split-input-file -seq-expand-sequences | FileCheck %s
// RUN: not seqc-opt %s -split-input-file -seq-lower-to-cpu 2>&1 | FileCheck %s --check-prefix=UNEXPANDED

// CHECK-LABEL: func @packed
// CHECK: "{{.*}}segments must start at 0, but segments[0] = {0}"
// CHECK: scf.for
// CHECK: "{{.*}}segments must not decrease, but segments[{0}] = {1} < segments[{2}] = {3}"
// CHECK: "{{.*}}segments must end at the packed length {0}, but segments[{1}] = {2}"
// CHECK: scf.for {{.*}} iter_args
// CHECK: scf.if
// CHECK: tensor.extract_slice %arg4[%{{.*}}, 0, 0, 0] [1, 4, 16, 32]
// CHECK: tensor.extract_slice %arg0[0, %{{.*}}, 0, 0] [1, %{{.*}}, 4, 16]
// CHECK: seq.ssd {{.*}} init(%{{.*}}) {dt_softplus = true} : {{.*}} -> (tensor<1x?x4x16xf32>, tensor<1x4x16x32xf32>)
// CHECK-NOT: segments(
// CHECK: tensor.insert_slice
// UNEXPANDED: error: seq.ssd with segments or checkpoint_every reaches seq-lower-to-cpu unexpanded: run seq-expand-sequences first
func.func @packed(%x: tensor<1x?x4x16xf32>, %dt: tensor<1x?x4xf32>, %A: tensor<4xf32>,
                  %B: tensor<1x?x1x32xf32>, %h0: tensor<?x4x16x32xf32>, %cu: tensor<?xi32>)
    -> (tensor<1x?x4x16xf32>, tensor<?x4x16x32xf32>) {
  %y, %last = seq.ssd %x, %dt, %A, %B, %B init(%h0) segments(%cu) {dt_softplus = true}
    : (tensor<1x?x4x16xf32>, tensor<1x?x4xf32>, tensor<4xf32>, tensor<1x?x1x32xf32>, tensor<1x?x1x32xf32>,
       tensor<?x4x16x32xf32>, tensor<?xi32>) -> (tensor<1x?x4x16xf32>, tensor<?x4x16x32xf32>)
  return %y, %last : tensor<1x?x4x16xf32>, tensor<?x4x16x32xf32>
}

// -----

// Checkpoints of an unpacked batch: pieces of 64 steps (static: T is a
// multiple), each piece's last state inserted into its slot.
// CHECK-LABEL: func @checkpoints
// CHECK: scf.for {{.*}} iter_args
// CHECK: seq.linear_attention {{.*}} init(%{{.*}}) : {{.*}} -> (tensor<2x64x4x8xf32>, tensor<2x4x16x8xf32>)
// CHECK: tensor.insert_slice %last into %{{.*}}[%{{.*}}, %{{.*}}, 0, 0, 0] [2, 1, 4, 16, 8]
// UNEXPANDED: error: seq.linear_attention with segments or checkpoint_every reaches seq-lower-to-cpu unexpanded
func.func @checkpoints(%q: tensor<2x256x4x16xf32>, %v: tensor<2x256x4x8xf32>)
    -> (tensor<2x256x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x4x16x8xf32>) {
  %o, %last, %ck = seq.linear_attention %q, %q, %v {checkpoint_every = 64 : i64}
    : (tensor<2x256x4x16xf32>, tensor<2x256x4x16xf32>, tensor<2x256x4x8xf32>)
      -> (tensor<2x256x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x4x16x8xf32>)
  return %o, %last, %ck : tensor<2x256x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x4x16x8xf32>
}
