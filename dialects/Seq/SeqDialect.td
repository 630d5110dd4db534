//===- SeqDialect.td - the seq dialect ---------------------*- tablegen -*-===//
//
// The dialect of sequence-model operators: scans, selective state spaces,
// SSD, linear and exact attention, causal convolution and routed experts.
//
//===----------------------------------------------------------------------===//

#ifndef SEQ_DIALECT_TD
#define SEQ_DIALECT_TD

include "mlir/IR/OpBase.td"

def Seq_Dialect : Dialect {
  let name = "seq";
  let cppNamespace = "::seqc::seq";
  let summary = "Operators of modern sequence models";
  let description = [{
    The `seq` dialect describes the operators of state-space models, linear
    attention and mixture-of-experts layers on ranked tensors: linear and
    associative scans, the Mamba-1 selective scan, Mamba-2 SSD and its
    semiseparable mask, kernelized / gated linear attention, Performer random
    features, exact IO-aware attention, depthwise causal convolution, the
    top-k router and capacity-limited expert FFNs.

    Tensors are row-major with time as dimension 1 (`B x T x ...`). Every op
    that carries a state takes it as an optional `init(...)` operand and
    returns its final state as its last result, so a decode step is the same
    op with `T = 1`.
  }];
  let useDefaultAttributePrinterParser = 1;
  // `seq.plan` (seq-select-strategy) is checked wherever it appears.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Called for `seq.NAME` ops that do not exist: an error that suggests
    /// the nearest op name.
    std::optional<ParseOpHook>
    getParseOperationHook(::llvm::StringRef opName) const override;
  }];
}

#endif // SEQ_DIALECT_TD
