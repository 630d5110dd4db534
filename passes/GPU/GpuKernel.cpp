//===- GpuKernel.cpp - GPU kernels in barrier-separated phases ------------===//

#include "GPU/GpuKernel.h"
#include "Common/Kernels.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace seqc;

void GpuBlock::phase(Value n, const std::function<void(Value)> &body,
                     bool barrier) {
  if (emulate) {
    kb.forEach(kb.idx(0), n, kb.idx(1), body);
    return;
  }
  kb.forEach(threadId, n, kb.idx(threads), body);
  if (barrier)
    gpu::BarrierOp::create(kb.builder());
}

void GpuBlock::phase2(Value rows, Value cols,
                      const std::function<void(Value, Value)> &body,
                      bool barrier) {
  phase(
      kb.mul(rows, cols),
      [&](Value i) { body(kb.divs(i, cols), kb.rems(i, cols)); }, barrier);
}

Type GpuTarget::tensorCoreType(ValueRange operands, bool allowF16) const {
  if (!tensorCores())
    return {};
  Type common;
  for (Value v : operands) {
    if (!v)
      continue;
    Type t = getElementTypeOrSelf(v.getType());
    if (common && t != common)
      return {};
    common = t;
  }
  if (common && (common.isBF16() || (allowF16 && common.isF16())))
    return common;
  return {};
}

WarpRegisters GpuBlock::warpRegisters(int64_t size) {
  // On the GPU a thread's private array, which LLVM promotes to registers
  // when every access has a constant index (kernels keep it that way).
  if (!emulate)
    return {kb.stackBuffer({size}), size};
  return {kb.stackBuffer({numWarps(), 32, size}), size};
}

void GpuBlock::warps(Value n, const std::function<void(Warp &)> &body,
                     bool barrier) {
  Value nw = kb.idx(numWarps());
  if (emulate) {
    if (!mmaTileA) {
      mmaTileA = kb.stackBuffer({16, 16});
      mmaTileB = kb.stackBuffer({16, 8});
    }
    // Warp p runs items p, p + numWarps, ... as on the GPU, so each item
    // finds the registers its warp left in an earlier warp phase.
    kb.forEach(kb.idx(0), nw, kb.idx(1), [&](Value p) {
      kb.forEach(p, n, nw, [&](Value item) {
        Warp warp(kb, item, p, Value(), /*emulate=*/true, mmaTileA, mmaTileB);
        body(warp);
      });
    });
    return;
  }
  Value w = kb.divs(threadId, kb.idx(32));
  Value lane = kb.rems(threadId, kb.idx(32));
  kb.forEach(w, n, nw, [&](Value item) {
    Warp warp(kb, item, w, lane, /*emulate=*/false, Value(), Value());
    body(warp);
  });
  if (barrier)
    gpu::BarrierOp::create(kb.builder());
}

void seqc::emitGpuKernel(ImplicitLocOpBuilder &b, const GpuTarget &target,
                         StringRef name, Value blocks, ValueRange args,
                         ArrayRef<SmallVector<int64_t>> shared,
                         const GpuBlockBody &body) {
  if (target.emulate) {
    emitParallelKernel(b, ("gpu_" + name).str(), blocks, args,
                       [&](KernelBuilder &kb, Value task, ValueRange in) {
                         kb.setContract(true);
                         SmallVector<Value> buffers;
                         for (const auto &shape : shared)
                           buffers.push_back(kb.stackBuffer(shape));
                         GpuBlock block(kb, task, Value(), target.blockThreads,
                                        /*emulate=*/true);
                         body(block, in, buffers);
                       });
    return;
  }
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value threads = arith::ConstantIndexOp::create(b, target.blockThreads);
  auto workgroup =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  SmallVector<Type> sharedTypes;
  for (const auto &shape : shared)
    sharedTypes.push_back(MemRefType::get(
        shape, b.getF32Type(), MemRefLayoutAttrInterface(), workgroup));
  // The kernel is named after what it computes (seqc_ssd_states, ...), in a
  // module of the same name, so PTX, profiles and ptxas reports say which.
  auto symbol = FlatSymbolRefAttr::get(b.getContext(), ("seqc_" + name).str());
  auto launch = gpu::LaunchOp::create(
      b, blocks, one, one, threads, one, one, /*dynamicSharedMemorySize=*/{},
      /*asyncTokenType=*/{}, /*asyncDependencies=*/{}, sharedTypes,
      /*privateAttributions=*/{}, /*clusterSizeX=*/{}, /*clusterSizeY=*/{},
      /*clusterSizeZ=*/{}, symbol, symbol);
  SmallVector<Value> buffers(launch.getWorkgroupAttributions());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  KernelBuilder kb(b);
  kb.setAllocaBlock(&launch.getBody().front());
  kb.setContract(true);
  GpuBlock block(kb, launch.getBlockIds().x, launch.getThreadIds().x,
                 target.blockThreads, /*emulate=*/false);
  body(block, args, buffers);
  gpu::TerminatorOp::create(b);
}

void seqc::emitItemKernel(
    ImplicitLocOpBuilder &b, const GpuTarget &target, StringRef name,
    KernelBuilder &kb, Value count, ValueRange args,
    const std::function<void(KernelBuilder &, Value, ValueRange)> &body) {
  int64_t threads = target.blockThreads;
  Value blocks = kb.divs(kb.add(count, kb.idx(threads - 1)), kb.idx(threads));
  SmallVector<Value> all(args);
  all.push_back(count);
  emitGpuKernel(b, target, name, blocks, all, {},
                [&](GpuBlock &block, ValueRange in, ValueRange) {
                  KernelBuilder &k = block.kb;
                  Value n = in.back();
                  block.phase(
                      k.idx(threads),
                      [&](Value i) {
                        Value item =
                            k.add(k.mul(block.blockId, k.idx(threads)), i);
                        k.ifThen(k.cmp(arith::CmpIPredicate::slt, item, n),
                                 [&] { body(k, item, in.drop_back()); });
                      },
                      /*barrier=*/false);
                });
}

bool seqc::allFloat(Operation *op) {
  auto isFloat = [](Type t) {
    auto shaped = dyn_cast<ShapedType>(t);
    return shaped &&
           isa<Float32Type, Float16Type, BFloat16Type>(shaped.getElementType());
  };
  return llvm::all_of(op->getOperandTypes(), isFloat) &&
         llvm::all_of(op->getResultTypes(), isFloat);
}

void GpuItemDispatch::emit(ImplicitLocOpBuilder &b, StringRef name,
                           KernelBuilder &kb, Value count, ValueRange args,
                           const ItemBody &body) const {
  emitItemKernel(b, target, name, kb, count, args, body);
}

std::string GpuItemDispatch::unsupportedTypes(Operation *op) const {
  if (isa<seq::AssociativeScanOp>(op))
    return "";
  if (auto route = dyn_cast<seq::RouteOp>(op))
    return isa<FloatType>(
               cast<ShapedType>(route.getLogits().getType()).getElementType())
               ? ""
               : "needs float logits";
  return allFloat(op) ? "" : "needs float (f32, f16, bf16) operands";
}
