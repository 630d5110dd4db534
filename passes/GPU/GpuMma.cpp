//===- GpuMma.cpp - warp-level tensor-core tiles --------------------------===//

#include "GPU/GpuMma.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace seqc;

namespace {
/// Value `value`'s offset from its lane's base position. The base is
/// (lane / 4, lane % 4 * 2) for A and C — four lanes share a row, each
/// holding two adjacent columns — and the same two numbers as (k, n) for B,
/// whose fragment is stored by columns.
std::pair<int64_t, int64_t> valueOffset(MmaOperand operand, int64_t value) {
  switch (operand) {
  case MmaOperand::A: // registers: rows 0-7 / 8-15, then k 8-15
    return {8 * ((value / 2) % 2), value % 2 + 8 * (value / 4)};
  case MmaOperand::B: // registers: k 0-7, then k 8-15
    return {value % 2 + 8 * (value / 2), 0};
  case MmaOperand::C: // registers: rows 0-7, then rows 8-15
    return {8 * (value / 2), value % 2};
  }
  llvm_unreachable("unknown mma operand");
}
} // namespace

int64_t seqc::mmaFragmentValues(MmaOperand operand) {
  return operand == MmaOperand::A ? 8 : 4;
}

std::pair<int64_t, int64_t>
seqc::mmaFragmentCoord(MmaOperand operand, int64_t lane, int64_t value) {
  int64_t group = lane / 4, pair = lane % 4 * 2;
  auto [dr, dc] = valueOffset(operand, value);
  if (operand == MmaOperand::B)
    return {pair + dr, group + dc};
  return {group + dr, pair + dc};
}

std::pair<Value, Value> Warp::coord(MmaOperand operand, Value ofLane,
                                    int64_t value) {
  Value group = kb.divs(ofLane, kb.idx(4));
  Value pair = kb.mul(kb.rems(ofLane, kb.idx(4)), kb.idx(2));
  auto [dr, dc] = valueOffset(operand, value);
  if (operand == MmaOperand::B)
    std::swap(group, pair);
  return {kb.add(group, kb.idx(dr)), kb.add(pair, kb.idx(dc))};
}

void Warp::lanes(const std::function<void(Value)> &body) {
  if (emulate)
    kb.forEach(kb.idx(0), kb.idx(32), kb.idx(1), body);
  else
    body(lane);
}

Value Warp::get(const WarpRegisters &regs, Value ofLane, int64_t i) {
  if (emulate)
    return kb.mload(regs.buffer, {warp, ofLane, kb.idx(i)});
  return kb.mload(regs.buffer, {kb.idx(i)});
}

void Warp::set(const WarpRegisters &regs, Value ofLane, int64_t i, Value v) {
  if (emulate)
    kb.mstore(v, regs.buffer, {warp, ofLane, kb.idx(i)});
  else
    kb.mstore(v, regs.buffer, {kb.idx(i)});
}

void Warp::loadFragment(MmaOperand operand, const WarpRegisters &regs,
                        int64_t offset,
                        const std::function<Value(Value, Value)> &element) {
  assert(offset + mmaFragmentValues(operand) <= regs.size);
  lanes([&](Value l) {
    for (int64_t v = 0; v < mmaFragmentValues(operand); ++v) {
      auto [row, col] = coord(operand, l, v);
      set(regs, l, offset + v, element(row, col));
    }
  });
}

void Warp::storeFragments(
    ArrayRef<WarpRegisters> regs, int64_t offset,
    const std::function<void(Value, Value, ArrayRef<Value>)> &store) {
  lanes([&](Value l) {
    for (int64_t v = 0; v < mmaFragmentValues(MmaOperand::C); ++v) {
      auto [row, col] = coord(MmaOperand::C, l, v);
      SmallVector<Value> values;
      for (const WarpRegisters &r : regs)
        values.push_back(get(r, l, offset + v));
      store(row, col, values);
    }
  });
}

void Warp::mma(Type multiplicand, const WarpRegisters &a, int64_t aOffset,
               const WarpRegisters &b, int64_t bOffset, const WarpRegisters &c,
               int64_t cOffset) {
  ImplicitLocOpBuilder &bld = kb.builder();
  if (emulate) {
    // What the instruction computes, from the lanes' fragments: operands
    // rounded to the multiplicand type, products summed in f32.
    auto rounded = [&](Value x) {
      Value narrow = arith::TruncFOp::create(bld, multiplicand, x);
      return arith::ExtFOp::create(bld, kb.f32Type(), narrow).getResult();
    };
    lanes([&](Value l) {
      for (int64_t v = 0; v < mmaFragmentValues(MmaOperand::A); ++v) {
        auto [row, k] = coord(MmaOperand::A, l, v);
        kb.mstore(rounded(get(a, l, aOffset + v)), tileA, {row, k});
      }
      for (int64_t v = 0; v < mmaFragmentValues(MmaOperand::B); ++v) {
        auto [k, col] = coord(MmaOperand::B, l, v);
        kb.mstore(rounded(get(b, l, bOffset + v)), tileB, {k, col});
      }
    });
    lanes([&](Value l) {
      for (int64_t v = 0; v < mmaFragmentValues(MmaOperand::C); ++v) {
        auto [row, col] = coord(MmaOperand::C, l, v);
        auto sum = kb.loop(
            kb.idx(16), {get(c, l, cOffset + v)}, [&](Value k, ValueRange it) {
              return SmallVector<Value>{
                  kb.fadd(it[0], kb.fmul(kb.mload(tileA, {row, k}),
                                         kb.mload(tileB, {k, col})))};
            });
        set(c, l, cOffset + v, sum[0]);
      }
    });
    return;
  }
  // Two 16-bit values per 32-bit register, the lower-numbered in the low
  // half (element 0 of a vector<2 x bf16/f16>, as PTX packs .bf16x2 and
  // .f16x2): one vector conversion per pair (cvt.rn.bf16x2.f32). nvvm.mma.sync
  // takes bf16 pairs as i32 and f16 pairs as vector<2xf16>.
  NVVM::MMATypes type =
      multiplicand.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  Type f32 = kb.f32Type(), i64 = bld.getI64Type();
  Type pair32 = VectorType::get({2}, f32);
  Type pair16 = VectorType::get({2}, multiplicand);
  auto packed = [&](const WarpRegisters &regs, int64_t offset, int64_t count) {
    SmallVector<Value> out;
    for (int64_t v = 0; v < count; v += 2) {
      Value pair = LLVM::PoisonOp::create(bld, pair32);
      for (int64_t e = 0; e < 2; ++e)
        pair = LLVM::InsertElementOp::create(
            bld, pair, get(regs, lane, offset + v + e),
            LLVM::ConstantOp::create(bld, i64, e));
      Value narrow = arith::TruncFOp::create(bld, pair16, pair);
      if (type == NVVM::MMATypes::bf16)
        narrow = LLVM::BitcastOp::create(bld, bld.getI32Type(), narrow);
      out.push_back(narrow);
    }
    return out;
  };
  SmallVector<Value> aRegs = packed(a, aOffset, 8);
  SmallVector<Value> bRegs = packed(b, bOffset, 4);
  SmallVector<Value> cRegs;
  for (int64_t v = 0; v < 4; ++v)
    cRegs.push_back(get(c, lane, cOffset + v));
  auto result =
      LLVM::LLVMStructType::getLiteral(bld.getContext(), {f32, f32, f32, f32});
  Value d = NVVM::MmaOp::create(
      bld, result, aRegs, bRegs, cRegs, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt, std::array<NVVM::MMATypes, 2>{type, type},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  for (int64_t v = 0; v < 4; ++v)
    set(c, lane, cOffset + v,
        LLVM::ExtractValueOp::create(bld, d, ArrayRef<int64_t>{v}));
}
