// seq-distribute-experts: each of R ranks holds E / R experts of every
// moe_ffn and routes T / R tokens. Every index is checked on every rank;
// the ranks all-gather their R x (E + 2) counts (choices per expert, bad
// indices, tokens); the accepted rows go to
// their experts' ranks pairwise (step s: rank r with r xor s, the lower
// one sends first) and come back the same way, around one moe_ffn over
// the rank's experts (k = 1, no capacity); the tokens' results are
// all-gathered. On MPI the sends and receives are mpi.send / mpi.recv on
// MPI_COMM_WORLD.
// RUN: seqc-opt %s --seq-distribute-experts=ranks=2 | FileCheck %s
// RUN: seqc-opt %s --seq-distribute-experts=ranks=2 --seq-collectives-to-mpi --convert-shard-to-mpi | FileCheck %s --check-prefix=MPI
// RUN: seqc-opt %s --seq-distribute-experts=ranks=1 | FileCheck %s --check-prefix=ONE
// RUN: not seqc-opt %s --seq-distribute-experts=ranks=3 2>&1 | FileCheck %s --check-prefix=ERR

// CHECK: shard.grid @seq_ranks(shape = 2)
// CHECK-LABEL: func.func @experts
// CHECK: %[[R:.*]] = shard.process_linear_index on @seq_ranks : index
// CHECK: seq_rt.check {{.*}}expert index {2} at indices[{0}, {1}] is outside [0, {3})
// CHECK: %[[IDX:.*]] = tensor.extract_slice %arg2[%{{.*}}, 0] [%{{.*}}, 2] [1, 1]
// CHECK: shard.all_gather {{.*}} on @seq_ranks grid_axes = [0] gather_axis = 0 : tensor<1x6xi64> -> tensor<2x6xi64>
// The rows of x, then the routing weights, to the experts' ranks.
// CHECK: %[[PEER:.*]] = arith.xori %[[R]], %{{.*}} : index
// CHECK: arith.cmpi slt, %[[PEER]], %c2
// CHECK: arith.cmpi slt, %[[R]], %[[PEER]]
// CHECK: shard.send {{.*}} destination = [%[[PEER]]] : (tensor<?x16xf32>, index) -> tensor<?x16xf32>
// CHECK: shard.recv {{.*}} source = [%[[PEER]]] : (tensor<?x16xf32>, index) -> tensor<?x16xf32>
// CHECK: } else {
// CHECK: shard.recv {{.*}} source = [%[[PEER]]]
// CHECK: shard.send {{.*}} destination = [%[[PEER]]]
// CHECK: shard.send {{.*}} : (tensor<?x1xf32>, index) -> tensor<?x1xf32>
// The rank's two experts.
// CHECK: %[[UP:.*]] = tensor.extract_slice %arg3[%{{.*}}, 0, 0] [2, 16, 24] [1, 1, 1]
// CHECK: %[[DOWN:.*]] = tensor.extract_slice %arg4[%{{.*}}, 0, 0] [2, 24, 16] [1, 1, 1]
// CHECK: %[[GATE:.*]] = tensor.extract_slice %arg5[%{{.*}}, 0, 0] [2, 16, 24] [1, 1, 1]
// CHECK: seq.moe_ffn %{{.*}}, %{{.*}}, %{{.*}}, %[[UP]], %[[DOWN]] gate_proj(%[[GATE]]) {activation = #seq.activation<gelu>} : (tensor<?x16xf32>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<2x16x24xf32>, tensor<2x24x16xf32>, tensor<2x16x24xf32>) -> (tensor<?x16xf32>, tensor<2xi64>)
// Back to the tokens' ranks, then every rank's tokens to all: 37 tokens
// split 18 + 19 travel in rows of 19 and are copied into place.
// CHECK: shard.send {{.*}} : (tensor<?x16xf32>, index) -> tensor<?x16xf32>
// CHECK: %[[ROWS:.*]] = shard.all_gather {{.*}} gather_axis = 0 : tensor<1x19x16xf32> -> tensor<2x19x16xf32>
// CHECK: scf.for %[[RANK:.*]] = %c0{{.*}} to %c2
// CHECK: tensor.extract_slice %[[ROWS]][%[[RANK]], 0, 0] [1, %{{.*}}, 16]
// CHECK-NOT: seq.moe_ffn
// CHECK: return

// MPI: %[[WORLD:.*]] = mpi.comm_world
// MPI: call @seqc_rt_mpi_all_gather
// MPI: mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<?xf32>, i32, i32
// MPI: mpi.recv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<?xf32>, i32, i32
// MPI: call @seqc_rt_mpi_all_gather(%{{.*}}, %{{.*}}, %{{.*}}, %c1216_i64)
// MPI-NOT: shard.send
// MPI-NOT: shard.recv
// MPI-NOT: shard.all_gather

// ONE-NOT: shard.
// ONE: seq.moe_ffn %arg0, %arg1, %arg2, %arg3, %arg4 gate_proj(%arg5)

// ERR: error: seq.moe_ffn: E = 4 experts do not split over 3 ranks under expert parallelism: E must be a multiple of the rank count (1, 2 or 4 ranks split it)
func.func @experts(%x: tensor<37x16xf32>, %w: tensor<37x2xf32>, %idx: tensor<37x2xi32>,
                   %up: tensor<4x16x24xf32>, %down: tensor<4x24x16xf32>, %gate: tensor<4x16x24xf32>)
    -> (tensor<37x16xf32>, tensor<4xi64>) {
  %y, %load = seq.moe_ffn %x, %w, %idx, %up, %down gate_proj(%gate)
    {activation = #seq.activation<gelu>, capacity_factor = 1.25 : f32}
    : (tensor<37x16xf32>, tensor<37x2xf32>, tensor<37x2xi32>, tensor<4x16x24xf32>, tensor<4x24x16xf32>, tensor<4x16x24xf32>)
      -> (tensor<37x16xf32>, tensor<4xi64>)
  return %y, %load : tensor<37x16xf32>, tensor<4xi64>
}

// bf16 rows travel as their bits (i16), the routing weights as f32.
// CHECK-LABEL: func.func @experts_bf16
// CHECK: shard.send {{.*}} : (tensor<?x16xi16>, index) -> tensor<?x16xi16>
// CHECK: shard.send {{.*}} : (tensor<?x1xf32>, index) -> tensor<?x1xf32>
// CHECK: seq.moe_ffn {{.*}} : (tensor<?x16xbf16>, tensor<?x1xbf16>, tensor<?x1xi32>, tensor<2x16x24xbf16>, tensor<2x24x16xbf16>) -> (tensor<?x16xbf16>, tensor<2xi64>)
// CHECK: shard.recv {{.*}} : (tensor<?x16xi16>, index) -> tensor<?x16xi16>
// y's rows are gathered in bf16: 19 x 16 x 2 bytes a rank.
// CHECK: shard.all_gather {{.*}} : tensor<1x19x16xbf16> -> tensor<2x19x16xbf16>
// MPI-LABEL: func.func @experts_bf16
// MPI: mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<?xi16>, i32, i32
func.func @experts_bf16(%x: tensor<37x16xbf16>, %w: tensor<37x2xbf16>, %idx: tensor<37x2xi32>,
                        %up: tensor<4x16x24xbf16>, %down: tensor<4x24x16xbf16>)
    -> (tensor<37x16xbf16>, tensor<4xi64>) {
  %y, %load = seq.moe_ffn %x, %w, %idx, %up, %down
    : (tensor<37x16xbf16>, tensor<37x2xbf16>, tensor<37x2xi32>, tensor<4x16x24xbf16>, tensor<4x24x16xbf16>)
      -> (tensor<37x16xbf16>, tensor<4xi64>)
  return %y, %load : tensor<37x16xbf16>, tensor<4xi64>
}
