// seq-distribute-steps: each of R ranks computes its steps of every op. Ops
// with a state compute their own state and their transition (the op with
// its additive input zero: ssd's x of width 1 from ones, the delta rule's
// v of width K from the identity), all-gather both, fold the ranks before
// them into their incoming state and rerun their steps from it; the conv
// reads a halo, attention its queries' keys; results are all-gathered.
// RUN: seqc-opt %s --seq-distribute-steps=ranks=4 | FileCheck %s
// RUN: seqc-opt %s --seq-distribute-steps=ranks=2 --seq-collectives-to-mpi --convert-shard-to-mpi | FileCheck %s --check-prefix=MPI

// CHECK: shard.grid @seq_ranks(shape = 4)

// CHECK-LABEL: func.func @ssd
// CHECK: %[[R:.*]] = shard.process_linear_index on @seq_ranks : index
// CHECK: %[[X:.*]] = tensor.extract_slice %arg0[0, %{{.*}}, 0, 0] [1, 16, 2, 3]
// CHECK: seq.ssd %[[X]], {{.*}} skip(%arg5) : ({{.*}}) -> (tensor<1x16x2x3xf32>, tensor<1x2x3x4xf32>)
// CHECK: seq.ssd {{.*}} skip(%{{.*}}) init(%{{.*}}) : (tensor<1x16x2x1xf32>, {{.*}}, tensor<2x1xf32>, tensor<1x2x1x4xf32>) -> (tensor<1x16x2x1xf32>, tensor<1x2x1x4xf32>)
// CHECK: shard.all_gather {{.*}} gather_axis = 0 : tensor<1x1x2x1x4xf32> -> tensor<4x1x2x1x4xf32>
// CHECK: shard.all_gather {{.*}} gather_axis = 0 : tensor<1x1x2x3x4xf32> -> tensor<4x1x2x3x4xf32>
// CHECK: %[[IN:.*]] = scf.for %{{.*}} = %{{.*}} to %[[R]]
// CHECK: linalg.generic {indexing_maps = [#[[BCAST:.*]], #[[ID:.*]], #[[ID]]]
// CHECK: seq.ssd {{.*}} init(%[[IN]])
// CHECK: scf.for %{{.*}} = %[[R]] to %c4
// Equal slices one after another (B = 1): the gathered rows are y.
// CHECK: %[[ROWS:.*]] = shard.all_gather {{.*}} gather_axis = 0 : tensor<1x1x16x2x3xf32> -> tensor<4x1x16x2x3xf32>
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[ROWS]] {{\[}}[0, 1, 2], [3], [4]] : tensor<4x1x16x2x3xf32> into tensor<64x2x3xf32>
// CHECK: %[[Y:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0, 1], [2], [3]] output_shape [1, 64, 2, 3]
// CHECK: return %[[Y]]
func.func @ssd(%x: tensor<1x64x2x3xf32>, %dt: tensor<1x64x2xf32>, %A: tensor<2xf32>, %B: tensor<1x64x1x4xf32>, %C: tensor<1x64x1x4xf32>, %D: tensor<2x3xf32>) -> (tensor<1x64x2x3xf32>, tensor<1x2x3x4xf32>) {
  %y, %last = seq.ssd %x, %dt, %A, %B, %C skip(%D) : (tensor<1x64x2x3xf32>, tensor<1x64x2xf32>, tensor<2xf32>, tensor<1x64x1x4xf32>, tensor<1x64x1x4xf32>, tensor<2x3xf32>) -> (tensor<1x64x2x3xf32>, tensor<1x2x3x4xf32>)
  return %y, %last : tensor<1x64x2x3xf32>, tensor<1x2x3x4xf32>
}

// The delta rule's transition is K x K: from the identity, applied as a
// product over the rows. T is dynamic: the slices travel padded to
// ceil(T / R) steps and are copied into place.
// CHECK-LABEL: func.func @delta
// CHECK: seq.delta_rule {{.*}} : ({{.*}}) -> (tensor<1x?x1x5xf32>, tensor<1x1x4x5xf32>)
// CHECK: linalg.index 2
// CHECK: linalg.index 3
// CHECK: seq.delta_rule {{.*}} init(%{{.*}}) : (tensor<1x?x1x4xf32>, tensor<1x?x1x4xf32>, tensor<1x?x1x4xf32>, tensor<1x?x1xf32>, tensor<1x1x4x4xf32>) -> (tensor<1x?x1x4xf32>, tensor<1x1x4x4xf32>)
// CHECK: scf.for
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK: %[[PAD:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0, 0] [1, %{{.*}}, 1, 5]
// CHECK: %[[PADROW:.*]] = tensor.expand_shape %[[PAD]]
// CHECK: %[[ROWS:.*]] = shard.all_gather %[[PADROW]] {{.*}} : tensor<1x1x?x1x5xf32> -> tensor<4x1x?x1x5xf32>
// CHECK: %[[O:.*]] = scf.for %[[RANK:.*]] = %{{.*}} to %c4
// CHECK: %[[MINE:.*]] = tensor.extract_slice %[[ROWS]][%[[RANK]], 0, 0, 0, 0] [1, 1, %{{.*}}, 1, 5] {{.*}} to tensor<1x?x1x5xf32>
// CHECK: tensor.insert_slice %[[MINE]] into %{{.*}}[0, %{{.*}}, 0, 0]
// CHECK: return %[[O]]
func.func @delta(%q: tensor<1x?x1x4xf32>, %k: tensor<1x?x1x4xf32>, %v: tensor<1x?x1x5xf32>, %beta: tensor<1x?x1xf32>) -> (tensor<1x?x1x5xf32>, tensor<1x1x4x5xf32>) {
  %o, %last = seq.delta_rule %q, %k, %v, %beta : (tensor<1x?x1x4xf32>, tensor<1x?x1x4xf32>, tensor<1x?x1x5xf32>, tensor<1x?x1xf32>) -> (tensor<1x?x1x5xf32>, tensor<1x1x4x5xf32>)
  return %o, %last : tensor<1x?x1x5xf32>, tensor<1x1x4x5xf32>
}

// The conv reads min(start, W - 1) steps before its slice; every rank
// computes last itself, from the sequence's last min(T, W - 1) steps: no
// collective but the all-gather of y.
// CHECK-LABEL: func.func @conv
// CHECK: %[[HALO:.*]] = arith.minsi
// CHECK: %[[FROM:.*]] = arith.subi %{{.*}}, %[[HALO]]
// CHECK: tensor.extract_slice %arg0[0, %[[FROM]], 0]
// CHECK: seq.causal_conv1d
// CHECK-NOT: shard.all_reduce
// CHECK: shard.all_gather {{.*}} : tensor<1x1x8x3xf32> -> tensor<4x1x8x3xf32>
// CHECK: %[[TAIL:.*]] = arith.minsi %c32, %{{.*}} : index
// CHECK: %[[TAILFROM:.*]] = arith.subi %c32, %[[TAIL]]
// CHECK: tensor.extract_slice %arg0[0, %[[TAILFROM]], 0] [1, %[[TAIL]], 3]
// CHECK: %{{.*}}, %[[LAST:.*]] = seq.causal_conv1d
// CHECK-NOT: shard.all_reduce
// CHECK: return %{{.*}}, %[[LAST]] : tensor<1x32x3xf32>, tensor<1x3x3xf32>
func.func @conv(%x: tensor<1x32x3xf32>, %w: tensor<3x4xf32>) -> (tensor<1x32x3xf32>, tensor<1x3x3xf32>) {
  %y, %last = seq.causal_conv1d %x, %w : (tensor<1x32x3xf32>, tensor<3x4xf32>) -> (tensor<1x32x3xf32>, tensor<1x3x3xf32>)
  return %y, %last : tensor<1x32x3xf32>, tensor<1x3x3xf32>
}

// Causal attention: a slice's queries see the keys up to its end, aligned
// to the keys' end.
// CHECK-LABEL: func.func @attn
// CHECK: tensor.extract_slice %arg0[0, %{{.*}}, 0, 0] [1, 8, 2, 8]
// CHECK: tensor.extract_slice %arg1[0, %{{.*}}, 0, 0] [1, %{{.*}}, 1, 8]
// CHECK: seq.attention {{.*}} : (tensor<1x8x2x8xf32>, tensor<1x?x1x8xf32>, tensor<1x?x1x8xf32>) -> tensor<1x8x2x8xf32>
// CHECK: shard.all_gather {{.*}} : tensor<1x1x8x2x8xf32> -> tensor<4x1x8x2x8xf32>
func.func @attn(%q: tensor<1x32x2x8xf32>, %k: tensor<1x40x1x8xf32>, %v: tensor<1x40x1x8xf32>) -> tensor<1x32x2x8xf32> {
  %o = seq.attention %q, %k, %v {causal = true} : (tensor<1x32x2x8xf32>, tensor<1x40x1x8xf32>, tensor<1x40x1x8xf32>) -> tensor<1x32x2x8xf32>
  return %o : tensor<1x32x2x8xf32>
}

// Lowered for MPI, each all-gather is a call of the runtime's
// MPI_Allgather with the module's communicator, from the rank's buffer
// into one R times its size, by bytes; an all-reduce is MPI_Allreduce
// between flat buffers; the rank is MPI_Comm_rank. Nothing of shard's
// collectives is left.
// MPI: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">}
// MPI: func.func private @seqc_rt_mpi_all_gather(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64)
// MPI-LABEL: func.func @ssd
// MPI: mpi.comm_rank
// MPI: %[[SEND:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<1x1x2x1x4xf32> to memref<1x1x2x1x4xf32>
// MPI: %[[RECV:.*]] = memref.alloc() : memref<2x1x2x1x4xf32>
// MPI: %[[COMM:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// MPI: call @seqc_rt_mpi_all_gather(%[[COMM]], %{{.*}}, %{{.*}}, %c32_i64)
// MPI: bufferization.to_tensor %[[RECV]] restrict writable
// MPI-LABEL: func.func @conv
// MPI-NOT: mpi.allreduce
// MPI-NOT: shard.all_reduce
// MPI-NOT: shard.all_gather
// MPI-NOT: mpi.comm_split
