// The CPU's products of bf16 operands: with bf16-products=dot, matmuls and
// experts multiply bf16 pairs with AVX-512 BF16 (x86vector.avx512.dot) from
// bf16 panels whose pairs of steps are interleaved; with amx, they multiply
// AMX tiles (amx.tile_mulf) loaded from the same panels and from A's packed
// rows, with 2 x 2 accumulator tiles carried by the reduction loop, and
// attention keeps the dot product; amx-emulated is the same kernels with
// every tile op turned into vector code (seq-emulate-amx); with widen, f32
// FMAs on widened operands. f32 or mixed operands never take the dot
// product or the tiles.
// RUN: seqc-opt %s --seq-lower-to-cpu="vector-width=16 bf16-products=dot" --split-input-file | FileCheck %s --check-prefix=DOT
// RUN: seqc-opt %s --seq-lower-to-cpu="vector-width=16 bf16-products=widen" --split-input-file | FileCheck %s --check-prefix=WIDEN
// RUN: seqc-opt %s --seq-lower-to-cpu="vector-width=16 bf16-products=amx" --split-input-file | FileCheck %s --check-prefix=AMX
// RUN: seqc-opt %s --seq-lower-to-cpu="vector-width=16 bf16-products=amx-emulated" --seq-emulate-amx --split-input-file | FileCheck %s --check-prefix=EMU
// The pipelines name their vector width: the host's (8 lanes on an AVX2
// host) would give the 256-bit dot product, checked by LLVM8.
// RUN: seqc-opt %s --seqc-cpu-pipeline="vector-width=16 bf16-products=dot" --split-input-file | FileCheck %s --check-prefix=LLVM
// RUN: seqc-opt %s --seqc-cpu-pipeline="vector-width=8 bf16-products=dot" --split-input-file | FileCheck %s --check-prefix=LLVM8
// RUN: seqc-opt %s --seqc-cpu-pipeline="vector-width=16 bf16-products=amx" --split-input-file | FileCheck %s --check-prefix=AMXLLVM
// RUN: not seqc-opt %s --seq-lower-to-cpu="bf16-products=tiles" --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not seqc-opt %s --seq-lower-to-cpu="vector-width=6" --split-input-file 2>&1 | FileCheck %s --check-prefix=BADWIDTH
// RUN: not seqc-opt %s --seqc-cpu-pipeline="vector-width=32" --split-input-file 2>&1 | FileCheck %s --check-prefix=BADWIDTH32

// B packed once into bf16 pair panels, A's rows into bf16 blocks, the
// product from both. (The NOT lines name the dot product: the exp of every
// kernel scales with x86vector.avx512.mask.scalef at 16 lanes.)
// DOT-LABEL: func.func @matmul_bf16
// DOT: memref.alloc({{.*}}) {alignment = 64 : i64} : memref<?x?x?x{{[0-9]+}}x64xbf16>
// DOT: func.func private @__seqc_matmul_pack_b(
// DOT: vector.interleave %{{.*}}, %{{.*}} : vector<16xbf16> -> vector<32xbf16>
// DOT: func.func private @__seqc_matmul_pack_a(
// DOT: func.func private @__seqc_matmul(
// DOT: vector.bitcast %{{.*}} : vector<16xi32> to vector<32xbf16>
// DOT: x86vector.avx512.dot %{{.*}}, %{{.*}}, %{{.*}} : vector<32xbf16> -> vector<16xf32>
// WIDEN-LABEL: func.func @matmul_bf16
// WIDEN-NOT: x86vector.avx512.dot
// WIDEN: memref<?x?x?x{{[0-9]+}}x32xf32>
// WIDEN-NOT: x86vector.avx512.dot
// LLVM: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// LLVM8-LABEL: llvm.func @matmul_bf16
// LLVM8-NOT: dpbf16ps.512
// LLVM8: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.256"
// AMX-LABEL: func.func @matmul_bf16
// AMX: func.func private @__seqc_matmul(
// AMX-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// AMX: scf.for {{.*}} iter_args({{.*}}) -> (!amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>)
// AMX-COUNT-4: amx.tile_load {{.*}} into !amx.tile<16x32xbf16>
// AMX-COUNT-4: amx.tile_mulf
// AMX-COUNT-4: amx.tile_store
// EMU-LABEL: func.func @matmul_bf16
// EMU-NOT: amx.
// EMU: vector.deinterleave
// EMU-NOT: amx.
// AMXLLVM: llvm.call_intrinsic "llvm.x86.tilezero.internal"
// AMXLLVM: llvm.call_intrinsic "llvm.x86.tileloadd64.internal"
// AMXLLVM: llvm.call_intrinsic "llvm.x86.tdpbf16ps.internal"
// AMXLLVM: llvm.call_intrinsic "llvm.x86.tilestored64.internal"
// BAD: unknown bf16-products 'tiles' (amx, amx-emulated, dot, widen or auto)
// BADWIDTH: error: seq-lower-to-cpu: vector-width 6 is not 4, 8 or 16 (the f32 lanes of SSE, AVX or AVX-512 vectors; 0: the host's)
// BADWIDTH32: error: seq-select-strategy: vector-width 32 is not 4, 8 or 16
func.func @matmul_bf16(%a: tensor<300x333xbf16>, %b: tensor<333x70xbf16>) -> tensor<300x70xf32> {
  %e = tensor.empty() : tensor<300x70xf32>
  %z = arith.constant 0.0 : f32
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<300x70xf32>) -> tensor<300x70xf32>
  %r = linalg.matmul ins(%a, %b : tensor<300x333xbf16>, tensor<333x70xbf16>) outs(%c : tensor<300x70xf32>) -> tensor<300x70xf32>
  return %r : tensor<300x70xf32>
}

// -----

// An f32 A with a bf16 B keeps f32 products (rounding A would change the
// op's answer).
// DOT-LABEL: func.func @matmul_mixed
// DOT-NOT: x86vector.avx512.dot
// DOT: func.func private @__seqc_matmul(
// DOT-NOT: x86vector.avx512.dot
// DOT-LABEL: func.func @experts_bf16
// AMX-LABEL: func.func @matmul_mixed
// AMX-NOT: amx.
// AMX-LABEL: func.func @experts_bf16
func.func @matmul_mixed(%a: tensor<64x64xf32>, %b: tensor<64x64xbf16>) -> tensor<64x64xf32> {
  %e = tensor.empty() : tensor<64x64xf32>
  %z = arith.constant 0.0 : f32
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xbf16>) outs(%c : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}

// -----

// Experts: both projections in pairs, the hidden activations kept in bf16.
// DOT: memref.alloc({{.*}}) {alignment = 64 : i64} : memref<?x?xbf16>
// DOT: func.func private @__seqc_moe_up(
// DOT: x86vector.avx512.dot
// DOT: func.func private @__seqc_moe_down(
// DOT: x86vector.avx512.dot
// AMX: func.func private @__seqc_moe_up(
// AMX: amx.tile_mulf
// AMX: func.func private @__seqc_moe_down(
// AMX: amx.tile_mulf
func.func @experts_bf16(%x: tensor<64x48xbf16>, %w: tensor<64x2xbf16>, %i: tensor<64x2xi32>,
                        %wu: tensor<4x48x80xbf16>, %wd: tensor<4x80x48xbf16>) -> tensor<64x48xbf16> {
  %y, %load = seq.moe_ffn %x, %w, %i, %wu, %wd
    : (tensor<64x48xbf16>, tensor<64x2xbf16>, tensor<64x2xi32>, tensor<4x48x80xbf16>, tensor<4x80x48xbf16>)
      -> (tensor<64x48xbf16>, tensor<4xi64>)
  return %y : tensor<64x48xbf16>
}

// -----

// Attention: K and V packed per key tile into pair panels, both products
// (scores, P V) in pairs; the f32 form's kernels are not emitted.
// DOT-LABEL: func.func @attention_bf16
// DOT: seq_rt.parallel_for %{{.*}}, @__seqc_attention_pack_pairs(
// DOT: seq_rt.parallel_for %{{.*}}, @__seqc_attention_pairs(
// DOT: func.func private @__seqc_attention_pack_pairs(
// DOT: vector.interleave
// DOT: func.func private @__seqc_attention_pairs(
// DOT-COUNT-2: x86vector.avx512.dot
// WIDEN-LABEL: func.func @attention_bf16
// WIDEN: @__seqc_attention_pack(
// WIDEN-NOT: x86vector.avx512.dot
// AMX-LABEL: func.func @attention_bf16
// AMX-NOT: amx.
// AMX: func.func private @__seqc_attention_pairs(
// AMX-NOT: amx.
// AMX-COUNT-2: x86vector.avx512.dot
func.func @attention_bf16(%q: tensor<1x100x4x40xbf16>, %k: tensor<1x150x2x40xbf16>,
                          %v: tensor<1x150x2x70xbf16>) -> tensor<1x100x4x70xbf16> {
  %o = seq.attention %q, %k, %v {causal = true}
    : (tensor<1x100x4x40xbf16>, tensor<1x150x2x40xbf16>, tensor<1x150x2x70xbf16>) -> tensor<1x100x4x70xbf16>
  return %o : tensor<1x100x4x70xbf16>
}
